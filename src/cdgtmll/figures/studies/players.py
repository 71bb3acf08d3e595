"""Multi-player study figures of Sec. 5.4: ``specialization`` (:func:`specialization_figure`),
``ranks`` (:func:`ranks_figures`) and ``potential`` (:func:`potential_figure`), with the
pure computations on per-(player, label) validation accuracies (:func:`best_credit`,
:func:`specialization_shares`, :func:`pair_ranks`, :func:`mean_ranks`, :func:`n_all_tied`),
the tail of the training counts (:func:`tail_from_counts`) and the monotonicity of the
potential (:func:`phi_monotonicity`). The subcommands are documented in
:mod:`cdgtmll.figures.studies.build`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cdgtmll.figures.studies.runs import (
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
from cdgtmll.figures.style import (
    NOTE_PT,
    ONE_COLUMN,
    FigureStyle,
    bands_below_lines,
    bar_handles,
    chars_per_line,
    figure_style,
    group_bars,
    honest_ylim,
    legend_below,
    titles,
    wrap,
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


def specialization_long(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
                        contested_only: bool) -> list[dict[str, Any]]:
    """Per run, epoch and player: ``{"group", "seed", "epoch", "player", "share", "n_labels"}``."""
    out = []
    for g, lst in by_group.items():
        N = int(lst[0][1]["player"].max()) + 1
        for r, a in lst:
            for e, acc in zip(a["epoch"], a["accuracy"]):
                sh, n = specialization_shares(acc, a["player"], a["label"], contested_only=contested_only, n_players=N)
                out += [{"group": g, "seed": r.seed, "epoch": int(e), "player": i + 1, "share": float(sh[i]),
                         "n_labels": n} for i in range(N)]
    return out


def specialization_rows(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
                        contested_only: bool, long: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Mean ± std over the runs of :func:`specialization_long` per (group, epoch, player)."""
    long = specialization_long(by_group, contested_only) if long is None else long
    cells: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for x in long:
        cells.setdefault((x["group"], x["epoch"], x["player"]), []).append(x)
    rows = []
    for g in by_group:
        ds, var, meth = g.split("/", 2)
        for (_, e, i), xs in sorted((k, v) for k, v in cells.items() if k[0] == g):
            mu, sd, n = mean_std([x["share"] for x in xs])
            rows.append({"dataset": ds, "variant": var, "method": meth, "epoch": e, "player": i,
                         "share_mean": mu, "share_std": sd, "n_seeds": n,
                         "n_labels": float(np.mean([x["n_labels"] for x in xs])),
                         "labels": "contested" if contested_only else "all"})
    return rows


def ranks_rows(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
               tails: dict[tuple[str, int], np.ndarray], contested_only: bool,
               seed_shares: list[dict[str, Any]] | None = None) -> tuple[list[dict], list[dict]]:
    """Final-epoch mean ranks and shares per (group, player, label group). With
    ``seed_shares``, also appends each run's shares there (``group, seed, player,
    label_group, share``)."""
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
                if seed_shares is not None:
                    seed_shares += [{"group": g, "seed": r.seed, "player": i + 1, "label_group": lg,
                                     "share": float(sh[i])} for i in range(N)]
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


def _group_title(g: str, style: FigureStyle) -> str:
    ds, var, meth = g.split("/", 2)
    return f"{style.setting(ds, var)} — {meth}"


def _n_seeds_text(by_group: dict[str, list]) -> str:
    ns = sorted({len(v) for v in by_group.values()})
    return f"{ns[0]} seeds" if len(ns) == 1 else f"{ns[0]}-{ns[-1]} seeds"


#: players 1..N: ``colorblind`` orange, green, purple, sky blue, vermillion, grey, tan, pink,
#: yellow (blue is the proposed method's colour in the comparison figures; orange and
#: vermillion, the closest pair, are players 1 and 5), each with its own dash pattern
PLAYER_COLOR_INDEX = (1, 2, 4, 9, 3, 7, 5, 6, 8)
PLAYER_DASHES = ((), (4, 1.5), (1, 1.2), (5, 1.5, 1, 1.5), (2, 1), (6, 2, 1, 2, 1, 2))


def player_styles(n: int) -> list[tuple[Any, tuple[float, ...]]]:
    """(colour, dash pattern) of players 1..n."""
    from cdgtmll.figures.style import palette_colors

    pal = palette_colors()
    return [(pal[PLAYER_COLOR_INDEX[i % len(PLAYER_COLOR_INDEX)]], PLAYER_DASHES[i % len(PLAYER_DASHES)])
            for i in range(n)]


def specialization_figure(run_dirs: Sequence[str | Path], out: Path, labels: str = "all",
                          title: str = "", style: FigureStyle | None = None) -> list[dict[str, Any]]:
    import pandas as pd
    import seaborn as sns
    from matplotlib.lines import Line2D

    runs = parse_runs(run_dirs)
    style = style or FigureStyle()
    log = SourceLog()
    by_group = collect_player_acc(runs, log)
    long = specialization_long(by_group, contested_only=labels == "contested")
    rows = specialization_rows(by_group, contested_only=labels == "contested", long=long)
    with figure_style():
        fig, axes = _grid(len(by_group), w=ONE_COLUMN, h=3.0)
        for ax, g in zip(axes, by_group):
            df = pd.DataFrame([x for x in long if x["group"] == g])
            df["share"] *= 100.0
            players = sorted(df["player"].unique())
            names = [f"Player {p}" for p in players]
            df["who"] = df["player"].map(lambda p: f"Player {p}")
            sts = player_styles(len(players))
            sns.lineplot(data=df, x="epoch", y="share", hue="who", hue_order=names, palette=[c for c, _ in sts],
                         style="who", style_order=names, dashes=[d for _, d in sts], estimator="mean",
                         errorbar="sd", err_kws={"alpha": 0.15, "linewidth": 0}, linewidth=1.1, ax=ax, legend=False)
            bands_below_lines(ax)
            handles = [Line2D([], [], color=c, dashes=d, linewidth=1.4) for c, d in sts]
            ax.set(xlabel="epoch", ylabel="specialization share (%)")
            ax.set_xlim(df["epoch"].min(), df["epoch"].max())
            honest_ylim(ax)  # shares flat at 33% are not zoomed into a trend
        legend_below(fig, handles, names, ncol=min(4, len(handles)))
        titles(fig, axes, [_group_title(g, style) for g in by_group],
               f"share of {'contested ' if labels == 'contested' else ''}labels on which the player is the most "
               f"accurate (validation); mean ± std over {_n_seeds_text(by_group)} (band)", title, ONE_COLUMN)
        save_figure(fig, out, rows, log, labels=labels,
                    definition="share = fraction of labels (in scope) on which the player has the best "
                               "per-label validation accuracy among covering players; ties split credit equally")
    return rows


def ranks_figures(run_dirs: Sequence[str | Path], out: Path, tail_fraction: float = 0.2, tie_seed: int = 0,
                  labels: str = "all", title: str = "", style: FigureStyle | None = None) -> tuple[list[dict], list[dict]]:
    runs = parse_runs(run_dirs)
    style = style or FigureStyle()
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
    seed_shares: list[dict[str, Any]] = []
    rank_rows, share_rows = ranks_rows(by_group, tails, contested_only=labels == "contested",
                                       seed_shares=seed_shares)
    extra = {"tail_fraction": tail_fraction, "tie_seed": tie_seed,
             "tail_labels": {f"{g} seed{s}": t.tolist() for (g, s), t in tails.items()}}
    groups = list(by_group)
    with figure_style():
        fig = _ranks_heatmap(groups, rank_rows, style, title, _n_seeds_text(by_group))
        save_figure(fig, Path(f"{out}_heatmap"), rank_rows, log, **extra,
                    definition="rank among the players covering a label (1 = best validation accuracy at the "
                               "final epoch, ties = average rank); labels covered by one player excluded")
        fig = _shares_bars(groups, share_rows, seed_shares, style, title, labels, _n_seeds_text(by_group))
        save_figure(fig, Path(f"{out}_shares"), share_rows, log, **extra, labels=labels)
    return rank_rows, share_rows


def _ranks_heatmap(groups: list[str], rank_rows: list[dict], style: FigureStyle, title: str,
                   n_seeds: str) -> Any:
    """Players x {rare, frequent}: mean rank (± std over seeds) as a seaborn heatmap;
    cells without a contested label say ``n/a``."""
    import seaborn as sns

    n_max = max(int(r["player"]) for r in rank_rows)
    fig, axes = _grid(len(groups), w=ONE_COLUMN, h=0.42 * n_max + 1.3)
    for ax, g in zip(axes, groups):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in rank_rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        N = max(r["player"] for r in rs)
        M = np.full((N, 2), np.nan)
        SD = np.full((N, 2), np.nan)
        for r in rs:
            M[r["player"] - 1, LABEL_GROUPS.index(r["label_group"])] = r["mean_rank_mean"]
            SD[r["player"] - 1, LABEL_GROUPS.index(r["label_group"])] = r["mean_rank_std"]
        annot = np.array([[f"{M[i, j]:.2f}\n± {SD[i, j]:.2f}" if np.isfinite(M[i, j]) else ""
                           for j in range(2)] for i in range(N)], dtype=object)
        sns.heatmap(M, mask=~np.isfinite(M), annot=annot, fmt="", cmap="viridis_r", vmin=1, vmax=max(2, N),
                    linewidths=1.0, linecolor="white", cbar_kws={"label": "mean rank (1 = best)",
                                                                 "ticks": list(range(1, max(2, N) + 1))},
                    annot_kws={"fontsize": 8.5}, ax=ax)
        ax.grid(False)
        ax.set_facecolor("0.93")
        for i in range(N):
            for j in range(2):
                if not np.isfinite(M[i, j]):
                    ax.text(j + 0.5, i + 0.5, "n/a", ha="center", va="center", fontsize=8.5, color="0.35")
        ax.set_xticks([0.5, 1.5], [f"{lg} labels" for lg in LABEL_GROUPS])
        ax.set_yticks(np.arange(N) + 0.5, [f"Player {i + 1}" for i in range(N)], rotation=0)
        tied = {lg: next(r["n_all_tied_labels_mean"] for r in rs if r["label_group"] == lg) for lg in LABEL_GROUPS}
        ax.set_xlabel(wrap("all players tied on " + " and ".join(f"{tied[lg]:g} {lg}" for lg in LABEL_GROUPS)
                           + " label(s) (seed mean)", chars_per_line(ONE_COLUMN, NOTE_PT)), fontsize=NOTE_PT)
    titles(fig, axes, [_group_title(g, style) for g in groups],
           f"rank among the players covering a contested label, final epoch; mean ± std over {n_seeds}; "
           "n/a: no contested label", title, ONE_COLUMN)
    return fig


def _shares_bars(groups: list[str], share_rows: list[dict], seed_shares: list[dict], style: FigureStyle,
                 title: str, labels: str, n_seeds: str) -> Any:
    """Final-epoch specialization share of each player within rare and within frequent
    labels: seaborn bars (mean ± std over seeds, dots: seeds)."""
    colors = {"rare": "0.35", "frequent": "0.78"}
    hatches = {"rare": "///", "frequent": ""}
    fig, axes = _grid(len(groups), w=ONE_COLUMN, h=2.6)
    nls = {}
    for ax, g in zip(axes, groups):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in share_rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        N = max(r["player"] for r in rs)
        xs = [str(i + 1) for i in range(N)]
        long = [{"player": str(x["player"]), "hue": x["label_group"], "value": _pct(x["share"])}
                for x in seed_shares if x["group"] == g]
        group_bars(ax, long, "player", xs, list(LABEL_GROUPS), colors, hatches)
        for lg in LABEL_GROUPS:
            nls.setdefault(lg, set()).add(next((r["n_labels_mean"] for r in rs if r["label_group"] == lg), 0))
        ax.set(xlabel="player", ylabel="specialization share (%)")
        ax.grid(axis="x", visible=False)
    legend_below(fig, bar_handles(LABEL_GROUPS, colors, hatches),
                 [f"{lg} labels" + (f" ({next(iter(nls[lg])):g} in scope)" if len(nls[lg]) == 1 else "")
                  for lg in LABEL_GROUPS], ncol=2)
    titles(fig, axes, [_group_title(g, style) for g in groups],
           f"final epoch, {'contested' if labels == 'contested' else 'all'} labels; shares in a group sum to 100%; "
           f"mean ± std over {n_seeds} (dots: seeds)", title, ONE_COLUMN)
    return fig


def potential_figure(run_dirs: Sequence[str | Path], out: Path, tol: float = 0.0,
                     title: str = "", style: FigureStyle | None = None) -> tuple[list[dict], list[dict]]:
    runs = parse_runs(run_dirs)
    style = style or FigureStyle()
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
    with figure_style():
        fig = _potential_plot(curves, style, title, tol)
        save_figure(fig, out, rows, log, tol=tol)
    _write_rows(_stem(out, "monotonicity.csv"), summary)
    return rows, summary


def _potential_plot(curves: dict[str, list], style: FigureStyle, title: str, tol: float) -> Any:
    """Phi per epoch: the mean over seeds as a wide light-grey line underneath, each seed a
    thin line on top (the players' colours and dash patterns, so that no seed hides
    another or is hidden by the mean), decreases marked x, the beta warm-up shaded."""
    from matplotlib.lines import Line2D

    from cdgtmll.figures.style import palette_colors

    red = palette_colors()[3]  # vermillion
    fig, axes = _grid(len(curves), w=ONE_COLUMN, h=3.1)
    panel_titles = []
    for ax, (g, lst) in zip(axes, curves.items()):
        n_mono, n_dec = 0, 0
        common = sorted(set.intersection(*(set(ep.tolist()) for _, ep, _, _ in lst)))
        mean = [np.mean([phi[list(ep).index(e)] for _, ep, phi, _ in lst]) for e in common]
        handles = [ax.plot(common, mean, color="0.78", linewidth=4.0, solid_capstyle="butt", zorder=2)[0]]
        labels = [f"mean of {len(lst)} seeds"]
        for (r, ep, phi, _beta), (color, dashes) in zip(lst, player_styles(len(lst))):
            mono = phi_monotonicity(ep, phi, tol)
            n_mono += mono["monotone"]
            n_dec += mono["n_decreases"]
            line, = ax.plot(ep, phi, color=color, dashes=dashes, linewidth=1.0, zorder=3)
            dec = np.isin(ep, mono["decrease_epochs"])
            ax.plot(ep[dec], phi[dec], "x", color=red, markersize=4, markeredgewidth=1.0, zorder=5)
            handles.append(line)
            labels.append(f"seed {r.seed}: {mono['n_decreases']} decrease(s)")
        if n_dec:
            handles.append(Line2D([], [], color=red, marker="x", linestyle="none", markersize=5))
            labels.append("Φ below the previous epoch")
        beta0 = lst[0][3]
        if beta0 is not None and beta0.size and np.any(beta0 < beta0[-1]):
            ep0 = lst[0][1]
            last_warm = ep0[np.flatnonzero(~np.isclose(beta0, beta0[-1], rtol=0, atol=1e-12))].max()
            handles.append(ax.axvspan(ep0.min() - 0.5, last_warm + 0.5, color="0.92", zorder=0, linewidth=0))
            labels.append("β warm-up")
        ax.set(xlabel="epoch", ylabel="Φ (training estimate)")
        panel_titles.append(f"{_group_title(g, style)}: Φ rose monotonically in {n_mono}/{len(lst)} runs")
    legend_below(fig, handles, labels, ncol=2)
    titles(fig, axes, panel_titles, "Φ: the epoch's sample-weighted mean of the batch potential (Eq. 8)",
           title, ONE_COLUMN)
    return fig


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
