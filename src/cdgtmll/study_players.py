"""Multi-player study figures of Sec. 5.4: ``specialization`` (:func:`specialization_figure`),
``ranks`` (:func:`ranks_figures`) and ``potential`` (:func:`potential_figure`), with the
pure computations on per-(player, label) validation accuracies (:func:`best_credit`,
:func:`specialization_shares`, :func:`pair_ranks`, :func:`mean_ranks`, :func:`n_all_tied`),
the tail of the training counts (:func:`tail_from_counts`) and the monotonicity of the
potential (:func:`phi_monotonicity`). The subcommands are documented in
:mod:`cdgtmll.study_figures`, which re-exports every public name of this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cdgtmll.study_runs import (
    METRICS_FILE,
    TRAIN_LOG,
    RunDir,
    SourceLog,
    _grid,
    _pct,
    _stem,
    _write_rows,
    mean_std,
    parse_runs,
    read_metrics,
    read_player_acc,
    read_train_log,
    save_figure,
)

LABEL_GROUPS = ("rare", "frequent")


def best_credit(acc: np.ndarray, pair_label: np.ndarray) -> np.ndarray:
    """Credit per (player, label) pair ``[P]``: 1/|B_l| if the pair's player is among the
    best covering players B_l of its label (highest accuracy; exact ties share), else 0.
    The credits of each label sum to 1."""
    acc = np.asarray(acc, dtype=np.float64)
    lab = np.asarray(pair_label, dtype=np.int64)
    L = int(lab.max()) + 1 if lab.size else 0
    best = np.full(L, -np.inf)
    np.maximum.at(best, lab, acc)
    is_best = acc == best[lab]
    n_best = np.bincount(lab, weights=is_best.astype(np.float64), minlength=L)
    return np.where(is_best, 1.0 / n_best[lab], 0.0)


def specialization_shares(acc: np.ndarray, pair_player: np.ndarray, pair_label: np.ndarray,
                          labels: np.ndarray | None = None, contested_only: bool = False,
                          n_players: int | None = None) -> tuple[np.ndarray, int]:
    """Shares ``[N]`` of one epoch (``acc [P]``) and the number of labels in scope.

    Scope: the covered labels, restricted to ``labels`` when given, and to labels covered
    by >= 2 players when ``contested_only``. Shares sum to 1 (all NaN if the scope is empty).
    """
    player = np.asarray(pair_player, dtype=np.int64)
    lab = np.asarray(pair_label, dtype=np.int64)
    N = int(player.max()) + 1 if n_players is None else int(n_players)
    cov = np.bincount(lab)
    scope = cov > 0
    if contested_only:
        scope &= cov >= 2
    if labels is not None:
        sel = np.zeros_like(scope)
        sel[np.asarray(labels, dtype=np.int64)[np.asarray(labels) < scope.size]] = True
        scope &= sel
    n_scope = int(scope.sum())
    if n_scope == 0:
        return np.full(N, np.nan), 0
    credit = best_credit(acc, lab) * scope[lab]
    return np.bincount(player, weights=credit, minlength=N) / n_scope, n_scope


def pair_ranks(acc: np.ndarray, pair_label: np.ndarray) -> np.ndarray:
    """Rank of each pair among the pairs of its label (1 = highest accuracy; ties get the
    average rank: ``1 + #better + #tied_others / 2``)."""
    acc = np.asarray(acc, dtype=np.float64)
    lab = np.asarray(pair_label, dtype=np.int64)
    ranks = np.empty(acc.shape, dtype=np.float64)
    order = np.argsort(lab, kind="stable")
    bounds = np.flatnonzero(np.diff(lab[order])) + 1
    for idx in np.split(order, bounds):
        a = acc[idx]
        better = (a[None, :] > a[:, None]).sum(1)
        tied = (a[None, :] == a[:, None]).sum(1) - 1
        ranks[idx] = 1.0 + better + 0.5 * tied
    return ranks


def mean_ranks(acc: np.ndarray, pair_player: np.ndarray, pair_label: np.ndarray, labels: np.ndarray,
               n_players: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean rank ``[N]`` of each player over the **contested** labels in ``labels`` that it
    covers (NaN where none), and the number of such labels per player ``[N]``."""
    player = np.asarray(pair_player, dtype=np.int64)
    lab = np.asarray(pair_label, dtype=np.int64)
    N = int(player.max()) + 1 if n_players is None else int(n_players)
    cov = np.bincount(lab)
    in_group = np.isin(lab, np.asarray(labels, dtype=np.int64)) & (cov[lab] >= 2)
    r = pair_ranks(acc, lab)
    n = np.bincount(player[in_group], minlength=N)
    s = np.bincount(player[in_group], weights=r[in_group], minlength=N)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan), n


def n_all_tied(acc: np.ndarray, pair_label: np.ndarray, labels: np.ndarray) -> int:
    """Number of contested labels in ``labels`` on which all covering players have the same
    accuracy (e.g. all predict every validation row negative): ranks are then all tied."""
    acc = np.asarray(acc, dtype=np.float64)
    lab = np.asarray(pair_label, dtype=np.int64)
    L = int(lab.max()) + 1
    hi, lo = np.full(L, -np.inf), np.full(L, np.inf)
    np.maximum.at(hi, lab, acc)
    np.minimum.at(lo, lab, acc)
    cov = np.bincount(lab, minlength=L)
    sel = np.zeros(L, dtype=bool)
    labels = np.asarray(labels, dtype=np.int64)
    sel[labels[labels < L]] = True
    return int(np.sum(sel & (cov >= 2) & (hi == lo)))


def tail_from_counts(counts: Sequence[int], q: float, tie_seed: int = 0) -> np.ndarray:
    """:func:`cdgtmll.labels.tail_labels` from per-label training counts: bottom
    ``floor(q L)`` labels by count, ties by ``default_rng(tie_seed).permutation(L)``."""
    from cdgtmll.labels import tail_labels

    counts = np.asarray(counts, dtype=np.int64)
    # a one-row "matrix" whose column sums are the counts reproduces label_counts exactly
    return tail_labels(counts[None, :], q, tie_seed)


def phi_monotonicity(epochs: Sequence[int], phi: Sequence[float], tol: float = 0.0,
                     beta: Sequence[float] | None = None) -> dict[str, Any]:
    """Where a per-epoch potential decreases: epochs e with ``phi[e] < phi[e-1] - tol``.

    With ``beta``, also the decreases at epochs where beta is at its final value at both
    e-1 and e (after the warm-up, i.e. a fixed objective)."""
    ep = np.asarray(epochs)
    f = np.asarray(phi, dtype=np.float64)
    d = np.diff(f)
    dec = np.flatnonzero(d < -tol) + 1
    out: dict[str, Any] = {
        "n_epochs": int(f.size),
        "monotone": bool(dec.size == 0),
        "n_decreases": int(dec.size),
        "decrease_epochs": [int(e) for e in ep[dec]],
        "largest_drop": float(-d.min()) if d.size and d.min() < 0 else 0.0,
        "phi_first": float(f[0]) if f.size else float("nan"),
        "phi_last": float(f[-1]) if f.size else float("nan"),
    }
    if beta is not None:
        b = np.asarray(beta, dtype=np.float64)
        final = b[-1] if b.size else np.nan
        const = np.isclose(b, final, rtol=0, atol=1e-12)
        after = [i for i in dec if const[i] and const[i - 1]]
        out["n_decreases_after_warmup"] = len(after)
        out["decrease_epochs_after_warmup"] = [int(ep[i]) for i in after]
    return out


def collect_player_acc(runs: list[RunDir], log: SourceLog) -> dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]]:
    by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]] = {}
    for r in sorted(runs, key=lambda r: (r.group, r.seed)):
        by_group.setdefault(r.group, []).append((r, read_player_acc(r, log)))
    for g, lst in by_group.items():
        ns = {int(a["player"].max()) + 1 for _, a in lst}
        if len(ns) != 1:
            raise ValueError(f"{g}: runs with different numbers of players {sorted(ns)}")
    return by_group


def specialization_rows(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
                        contested_only: bool) -> list[dict[str, Any]]:
    rows = []
    for g, lst in by_group.items():
        N = int(lst[0][1]["player"].max()) + 1
        per_epoch: dict[int, list[np.ndarray]] = {}
        n_scope: dict[int, list[int]] = {}
        for _, a in lst:
            for e, acc in zip(a["epoch"], a["accuracy"]):
                sh, n = specialization_shares(acc, a["player"], a["label"], contested_only=contested_only, n_players=N)
                per_epoch.setdefault(int(e), []).append(sh)
                n_scope.setdefault(int(e), []).append(n)
        ds, var, meth = g.split("/", 2)
        for e in sorted(per_epoch):
            S = np.vstack(per_epoch[e])
            for i in range(N):
                mu, sd, n = mean_std(S[:, i].tolist())
                rows.append({"dataset": ds, "variant": var, "method": meth, "epoch": e, "player": i + 1,
                             "share_mean": mu, "share_std": sd, "n_seeds": n,
                             "n_labels": float(np.mean(n_scope[e])),
                             "labels": "contested" if contested_only else "all"})
    return rows


def ranks_rows(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
               tails: dict[tuple[str, int], np.ndarray], contested_only: bool) -> tuple[list[dict], list[dict]]:
    """Final-epoch mean ranks and shares per (group, player, label group)."""
    rank_rows, share_rows = [], []
    for g, lst in by_group.items():
        N = int(lst[0][1]["player"].max()) + 1
        ds, var, meth = g.split("/", 2)
        per: dict[str, dict[str, list]] = {lg: {"rank": [], "n_rank": [], "share": [], "n_share": [], "tied": []}
                                      for lg in LABEL_GROUPS}
        for r, a in lst:
            acc = a["accuracy"][int(np.argmax(a["epoch"]))]
            tail = tails[(g, r.seed)]
            all_labels = np.unique(a["label"])
            groups = {"rare": np.intersect1d(all_labels, tail), "frequent": np.setdiff1d(all_labels, tail)}
            for lg, labs in groups.items():
                mr, n = mean_ranks(acc, a["player"], a["label"], labs, n_players=N)
                per[lg]["tied"].append(n_all_tied(acc, a["label"], labs))
                sh, ns = specialization_shares(acc, a["player"], a["label"], labels=labs,
                                               contested_only=contested_only, n_players=N)
                per[lg]["rank"].append(mr)
                per[lg]["n_rank"].append(n)
                per[lg]["share"].append(sh)
                per[lg]["n_share"].append(ns)
        for lg in LABEL_GROUPS:
            R, S = np.vstack(per[lg]["rank"]), np.vstack(per[lg]["share"])
            NR = np.vstack(per[lg]["n_rank"])
            for i in range(N):
                mu, sd, n = mean_std(R[:, i].tolist())
                rank_rows.append({"dataset": ds, "variant": var, "method": meth, "player": i + 1, "label_group": lg,
                                  "mean_rank_mean": mu, "mean_rank_std": sd, "n_seeds": n,
                                  "n_contested_labels_mean": float(NR[:, i].mean()),
                                  "n_all_tied_labels_mean": float(np.mean(per[lg]["tied"]))})
                mu, sd, n = mean_std(S[:, i].tolist())
                share_rows.append({"dataset": ds, "variant": var, "method": meth, "player": i + 1, "label_group": lg,
                                   "share_mean": mu, "share_std": sd, "n_seeds": n,
                                   "n_labels_mean": float(np.mean(per[lg]["n_share"])),
                                   "labels": "contested" if contested_only else "all"})
    return rank_rows, share_rows


def specialization_figure(run_dirs: Sequence[str | Path], out: Path, labels: str = "all",
                          title: str = "") -> list[dict[str, Any]]:
    runs = parse_runs(run_dirs)
    log = SourceLog()
    by_group = collect_player_acc(runs, log)
    rows = specialization_rows(by_group, contested_only=labels == "contested")
    fig, axes = _grid(len(by_group), w=5.2)
    for ax, g in zip(axes, by_group):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        n_seeds = len(by_group[g])
        for p in sorted({r["player"] for r in rs}):
            b = [r for r in rs if r["player"] == p]
            e = np.array([r["epoch"] for r in b])
            mu = np.array([_pct(r["share_mean"]) for r in b])
            sd = np.array([_pct(r["share_std"]) for r in b])
            line, = ax.plot(e, mu, label=f"Player {p}")
            ax.fill_between(e, mu - sd, mu + sd, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set(xlabel="epoch", ylabel=f"specialization share (%, {labels} labels)",
               title=title or f"{g} (n={n_seeds} seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, rows, log, labels=labels,
                definition="share = fraction of labels (in scope) on which the player has the best "
                           "per-label validation accuracy among covering players; ties split credit equally")
    return rows


def ranks_figures(run_dirs: Sequence[str | Path], out: Path, tail_fraction: float = 0.2, tie_seed: int = 0,
                  labels: str = "all", title: str = "") -> tuple[list[dict], list[dict]]:
    runs = parse_runs(run_dirs)
    log = SourceLog()
    by_group = collect_player_acc(runs, log)
    tails = {}
    for g, lst in by_group.items():
        for r, a in lst:
            m = read_metrics(r, log)
            if "train_counts" not in m:
                raise ValueError(f"{r.path / METRICS_FILE}: field 'train_counts' missing (needed for the tail)")
            counts = m["train_counts"]
            if len(counts) <= int(a["label"].max()):
                raise ValueError(f"{r.path}: train_counts has {len(counts)} labels, player accuracies index "
                                 f"label {int(a['label'].max())}")
            tails[(g, r.seed)] = tail_from_counts(counts, tail_fraction, tie_seed)
    rank_rows, share_rows = ranks_rows(by_group, tails, contested_only=labels == "contested")
    extra = {"tail_fraction": tail_fraction, "tie_seed": tie_seed,
             "tail_labels": {f"{g} seed{s}": t.tolist() for (g, s), t in tails.items()}}
    groups = list(by_group)

    # heatmap
    fig, axes = _grid(len(groups), w=3.6, h=0.6 * max(int(r["player"]) for r in rank_rows) + 1.6)
    for ax, g in zip(axes, groups):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in rank_rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        N = max(r["player"] for r in rs)
        M = np.full((N, 2), np.nan)
        SD = np.full((N, 2), np.nan)
        for r in rs:
            M[r["player"] - 1, LABEL_GROUPS.index(r["label_group"])] = r["mean_rank_mean"]
            SD[r["player"] - 1, LABEL_GROUPS.index(r["label_group"])] = r["mean_rank_std"]
        im = ax.imshow(np.ma.masked_invalid(M), cmap="viridis_r", vmin=1, vmax=max(2.0, np.nanmax(M) if np.isfinite(M).any() else 2.0),
                       aspect="auto")
        for i in range(N):
            for j in range(2):
                txt = "n/a" if not np.isfinite(M[i, j]) else f"{M[i, j]:.2f}\n±{SD[i, j]:.2f}"
                ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                        color="black" if not np.isfinite(M[i, j]) else "white")
        ax.set_xticks([0, 1], list(LABEL_GROUPS))
        ax.set_yticks(range(N), [f"Player {i + 1}" for i in range(N)])
        tied = {lg: next(r["n_all_tied_labels_mean"] for r in rs if r["label_group"] == lg) for lg in LABEL_GROUPS}
        ax.set_title(title or f"{g}\nmean rank (1 = best; contested labels)", fontsize=8)
        ax.set_xlabel("all players tied on: " + ", ".join(f"{tied[lg]:g} {lg}" for lg in LABEL_GROUPS)
                      + " label(s) (seed mean)", fontsize=7)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    save_figure(fig, Path(f"{out}_heatmap"), rank_rows, log, **extra,
                definition="rank among the players covering a label (1 = best validation accuracy at the "
                           "final epoch, ties = average rank); labels covered by one player excluded")

    # shares
    fig, axes = _grid(len(groups), w=4.4)
    for ax, g in zip(axes, groups):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in share_rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        N = max(r["player"] for r in rs)
        for j, lg in enumerate(LABEL_GROUPS):
            b = sorted((r for r in rs if r["label_group"] == lg), key=lambda r: r["player"])
            xs = np.arange(N) + (j - 0.5) * 0.4
            nl = b[0]["n_labels_mean"] if b else 0
            ax.bar(xs, [_pct(r["share_mean"]) for r in b], 0.4, yerr=[_pct(r["share_std"]) for r in b], capsize=3,
                   label=f"{lg} ({nl:g} labels)", edgecolor="black", linewidth=0.5)
        ax.set_xticks(range(N), [f"Player {i + 1}" for i in range(N)])
        ax.set(ylabel=f"specialization share (%, {labels} labels)", title=title or g)
        ax.title.set_fontsize(8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, Path(f"{out}_shares"), share_rows, log, **extra, labels=labels)
    return rank_rows, share_rows


def potential_figure(run_dirs: Sequence[str | Path], out: Path, tol: float = 0.0,
                     title: str = "") -> tuple[list[dict], list[dict]]:
    runs = parse_runs(run_dirs)
    log = SourceLog()
    curves: dict[str, list[tuple[RunDir, np.ndarray, np.ndarray, np.ndarray | None]]] = {}
    for r in sorted(runs, key=lambda r: (r.group, r.seed)):
        rows_ = read_train_log(r, log)
        if not rows_ or "Phi" not in rows_[0] or "epoch" not in rows_[0]:
            raise ValueError(f"{r.path / TRAIN_LOG}: needs columns 'epoch' and 'Phi' "
                             f"(has {list(rows_[0]) if rows_ else 'no rows'})")
        ep = np.array([int(x["epoch"]) for x in rows_])
        phi = np.array([float(x["Phi"]) for x in rows_])
        beta = np.array([float(x["beta"]) for x in rows_]) if "beta" in rows_[0] else None
        curves.setdefault(r.group, []).append((r, ep, phi, beta))
    rows, summary = [], []
    for g, lst in curves.items():
        ds, var, meth = g.split("/", 2)
        for r, ep, phi, beta in lst:
            mono = phi_monotonicity(ep, phi, tol, beta)
            dec = set(mono["decrease_epochs"])
            for i, (e, f) in enumerate(zip(ep, phi)):
                rows.append({"dataset": ds, "variant": var, "method": meth, "seed": r.seed, "epoch": int(e),
                             "Phi": float(f), "dPhi": float(f - phi[i - 1]) if i else None,
                             "decreased": int(e) in dec})
            summary.append(_summary_row(ds, var, meth, str(r.seed), mono, tol))
        common = sorted(set.intersection(*(set(ep.tolist()) for _, ep, _, _ in lst)))
        mean = np.array([np.mean([phi[list(ep).index(e)] for _, ep, phi, _ in lst]) for e in common])
        r0, ep0, _, beta0 = lst[0]  # beta depends on the schedule only: the same for every seed
        beta_mean = None if beta0 is None else [beta0[list(ep0).index(e)] for e in common]
        summary.append(_summary_row(ds, var, meth, "mean", phi_monotonicity(common, mean, tol, beta_mean), tol))
    fig, axes = _grid(len(curves), w=5.2)
    for ax, (g, lst) in zip(axes, curves.items()):
        n_mono = 0
        for r, ep, phi, beta in lst:
            mono = phi_monotonicity(ep, phi, tol)
            n_mono += mono["monotone"]
            line, = ax.plot(ep, phi, linewidth=0.8, alpha=0.6,
                            label=f"seed {r.seed}: {mono['n_decreases']} decrease(s)")
            dec = np.isin(ep, mono["decrease_epochs"])
            ax.plot(ep[dec], phi[dec], "x", color=line.get_color(), markersize=4)
        common = sorted(set.intersection(*(set(ep.tolist()) for _, ep, _, _ in lst)))
        mean = [np.mean([phi[list(ep).index(e)] for _, ep, phi, _ in lst]) for e in common]
        ax.plot(common, mean, color="black", linewidth=1.6, label="mean")
        ax.set(xlabel="epoch", ylabel="Φ (training estimate, per epoch)",
               title=title or f"{g}: monotone in {n_mono}/{len(lst)} runs")
        ax.title.set_fontsize(8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, rows, log, tol=tol)
    _write_rows(_stem(out, "monotonicity.csv"), summary)
    return rows, summary


def _summary_row(ds: str, var: str, meth: str, seed: str, mono: dict[str, Any], tol: float) -> dict[str, Any]:
    return {
        "dataset": ds, "variant": var, "method": meth, "seed": seed, "n_epochs": mono["n_epochs"],
        "monotone": mono["monotone"], "n_decreases": mono["n_decreases"],
        "decrease_epochs": ";".join(map(str, mono["decrease_epochs"])),
        "largest_drop": mono["largest_drop"], "tol": tol,
        "n_decreases_after_warmup": mono.get("n_decreases_after_warmup"),
        "decrease_epochs_after_warmup": ";".join(map(str, mono.get("decrease_epochs_after_warmup", []))),
        "phi_first": mono["phi_first"], "phi_last": mono["phi_last"],
    }
