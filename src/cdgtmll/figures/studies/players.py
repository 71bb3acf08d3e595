"""Multi-player study figures of Sec. 5.4: ``specialization`` (:func:`specialization_figure`),
``ranks`` (:func:`ranks_figures`) and ``potential`` (:func:`potential_figure`), with the
pure computations on per-(player, label) validation scores (:func:`best_credit`,
:func:`specialization_shares`, :func:`pair_ranks`, :func:`mean_ranks`, :func:`n_all_tied`),
the tail of the training counts (:func:`tail_from_counts`) and the monotonicity of the
potential (:func:`phi_monotonicity`). The subcommands are documented in
:mod:`cdgtmll.figures.studies.build`.

Two per-pair scores (``player_val_acc.npz``): ``accuracy`` (threshold 0.5 of the player's own
probability) and ``ap`` (validation average precision of the player's own scores, NaN where the
label has no validation positive). Accuracy ties whenever every covering player
predicts every validation row negative (Enron: all 3 players tie on all 10 contested labels), so
it cannot say which player is better there; AP ranks the players anyway. Every share and rank is
computed under both (``*_ap`` columns); a label whose AP is NaN is out of the AP scope. Runs
whose file has no ``ap`` array give NaN AP columns.

Roles (:func:`pair_roles`, :func:`player_coverage`, :func:`role_outcomes`): the partition in
``method_outputs.json`` records each label's round-robin **owner** and, for each overlap
(contested) label, the **extra coverer** that E.1 step (iii) added. Which player index gets
which role changes with the seed (``partition_order: shuffled``), so "player 2 is the rare
specialist" is only meaningful together with what player 2 covers: per player, the number of
tail labels it owns and of extra labels it covers, and per contested label whether its owner or
its extra coverer scores better.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cdgtmll.figures.intervals import FRACTION, interval_text, seed_interval
from cdgtmll.figures.studies.runs import (
    METHOD_OUTPUTS,
    METRICS_FILE,
    PLAYER_ACC_FILE,
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
#: the per-pair scores of ``player_val_acc.npz`` the diagnostics use, and their display names
MEASURES = ("accuracy", "ap")
MEASURE_NAMES = {"accuracy": "accuracy@0.5", "ap": "AP"}
#: a pair's role (module docstring); "sole": its label has one covering player
ROLES = ("owner", "extra coverer")


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
    acc = np.asarray(acc, dtype=np.float64)
    bad = np.bincount(lab, weights=(~np.isfinite(acc)).astype(np.float64), minlength=scope.size)
    scope &= bad[: scope.size] == 0  # a label without a finite score for every covering player (AP: no positive)
    n_scope = int(scope.sum())
    if n_scope == 0:
        return np.full(N, np.nan), 0
    credit = best_credit(np.where(np.isfinite(acc), acc, -np.inf), lab) * scope[lab]
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
    acc = np.asarray(acc, dtype=np.float64)
    bad = np.bincount(lab, weights=(~np.isfinite(acc)).astype(np.float64), minlength=cov.size)
    in_group = np.isin(lab, np.asarray(labels, dtype=np.int64)) & (cov[lab] >= 2) & (bad[lab] == 0)
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
    return int(np.sum(sel & (cov >= 2) & (hi == lo) & np.isfinite(hi)))


def pair_roles(pair_player: np.ndarray, pair_label: np.ndarray, owner: Sequence[int],
               extra_of: dict[int, int]) -> np.ndarray:
    """Role of each (player, label) pair ``[P]`` (object array): ``"sole"`` (its label has one
    covering player), ``"owner"`` (the round-robin owner of a contested label), ``"extra coverer"``
    (the player E.1 step (iii) added to it), ``"other"`` (any further coverer; never under
    :func:`~cdgtmll.methods.cdgtmll.partition.make_partition`)."""
    player = np.asarray(pair_player, dtype=np.int64)
    lab = np.asarray(pair_label, dtype=np.int64)
    owner = np.asarray(owner, dtype=np.int64)
    cov = np.bincount(lab, minlength=owner.size)
    out = np.empty(player.size, dtype=object)
    for k, (i, lb) in enumerate(zip(player.tolist(), lab.tolist())):
        if cov[lb] < 2:
            out[k] = "sole"
        elif owner[lb] == i:
            out[k] = "owner"
        elif extra_of.get(lb) == i:
            out[k] = "extra coverer"
        else:
            out[k] = "other"
    return out


def player_coverage(owner: Sequence[int], extra_of: dict[int, int], tail: Sequence[int],
                    n_players: int) -> list[dict[str, int]]:
    """Per player (index from 0): ``n_owned`` labels dealt to it, ``n_tail_owned`` of them in the
    tail, ``n_extra`` labels it covers as extra coverer (``n_extra_tail`` of them in the tail)."""
    owner = np.asarray(owner, dtype=np.int64)
    in_tail = np.zeros(owner.size, dtype=bool)
    in_tail[np.asarray(tail, dtype=np.int64)] = True
    ex_players = np.array(list(extra_of.values()), dtype=np.int64)
    ex_labels = np.array(list(extra_of), dtype=np.int64)
    return [{"n_owned": int((owner == i).sum()), "n_tail_owned": int(((owner == i) & in_tail).sum()),
             "n_extra": int((ex_players == i).sum()),
             "n_extra_tail": int(((ex_players == i) & in_tail[ex_labels]).sum()) if ex_labels.size else 0}
            for i in range(int(n_players))]


def role_outcomes(score: np.ndarray, pair_label: np.ndarray, roles: np.ndarray) -> dict[str, int]:
    """Over the contested labels with an owner and an extra coverer and a finite score for both:
    on how many the owner scores higher (``owner_best``), the extra coverer (``extra_best``), or
    they tie (``tied``); ``n`` = those labels."""
    score = np.asarray(score, dtype=np.float64)
    lab = np.asarray(pair_label, dtype=np.int64)
    own = {int(lb): score[k] for k, lb in enumerate(lab) if roles[k] == "owner"}
    ext = {int(lb): score[k] for k, lb in enumerate(lab) if roles[k] == "extra coverer"}
    both = [lb for lb in own if lb in ext and np.isfinite(own[lb]) and np.isfinite(ext[lb])]
    ob = sum(own[lb] > ext[lb] for lb in both)
    eb = sum(own[lb] < ext[lb] for lb in both)
    return {"owner_best": int(ob), "extra_best": int(eb), "tied": len(both) - ob - eb, "n": len(both)}


def read_player_scores(run: RunDir, log: SourceLog) -> dict[str, Any]:
    """:func:`~cdgtmll.figures.studies.runs.read_player_acc` plus ``ap [E, P]`` (all NaN for a
    file without it, ``has_ap`` False) and the run's partition roles from ``method_outputs.json``
    (``owner``, ``extra_of``, ``tail``; None when the run did not record that file or those fields)."""
    out: dict[str, Any] = dict(read_player_acc(run, log))
    with np.load(io.BytesIO(log.read(run, PLAYER_ACC_FILE)), allow_pickle=False) as z:
        ap = np.asarray(z["ap"], dtype=np.float64) if "ap" in z.files else None
    out["has_ap"] = ap is not None and ap.shape == out["accuracy"].shape
    out["ap"] = ap if out["has_ap"] else np.full(out["accuracy"].shape, np.nan)
    out["roles"] = None
    if (run.path / METHOD_OUTPUTS).is_file():
        part = json.loads(log.read(run, METHOD_OUTPUTS).decode("utf-8")).get("partition") or {}
        if part.get("owner") is not None and "extra_of" in part:
            out["roles"] = {"owner": np.asarray(part["owner"], dtype=np.int64),
                            "extra_of": {int(k): int(v) for k, v in part["extra_of"].items()},
                            "tail": np.asarray(part.get("tail_labels", []), dtype=np.int64)}
    return out


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
        by_group.setdefault(r.group, []).append((r, read_player_scores(r, log)))
    for g, lst in by_group.items():
        ns = {int(a["player"].max()) + 1 for _, a in lst}
        if len(ns) != 1:
            raise ValueError(f"{g}: runs with different numbers of players {sorted(ns)}")
    return by_group


def specialization_long(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
                        contested_only: bool, measure: str = "accuracy") -> list[dict[str, Any]]:
    """Per run, epoch and player: ``{"group", "seed", "epoch", "player", "share", "n_labels"}``,
    the best player judged by ``measure`` (:data:`MEASURES`)."""
    out = []
    for g, lst in by_group.items():
        N = int(lst[0][1]["player"].max()) + 1
        for r, a in lst:
            for e, acc in zip(a["epoch"], a[measure]):
                sh, n = specialization_shares(acc, a["player"], a["label"], contested_only=contested_only, n_players=N)
                out += [{"group": g, "seed": r.seed, "epoch": int(e), "player": i + 1, "share": float(sh[i]),
                         "n_labels": n} for i in range(N)]
    return out


def specialization_rows(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
                        contested_only: bool, long: list[dict[str, Any]] | None = None,
                        long_ap: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Mean ± std over the runs of :func:`specialization_long` per (group, epoch, player), by
    accuracy (``share_*``) and by AP (``share_ap_*``, ``n_labels_ap``: labels with a validation
    positive in scope), with the band the figure draws (``share_ci_low``, ``share_ci_high``,
    ``share_ap_ci_*``: :func:`~cdgtmll.figures.intervals.seed_interval` cut to [0, 1])."""
    long = specialization_long(by_group, contested_only) if long is None else long
    long_ap = specialization_long(by_group, contested_only, "ap") if long_ap is None else long_ap
    cells: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for x in long:
        cells.setdefault((x["group"], x["epoch"], x["player"]), []).append(x)
    cells_ap: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for x in long_ap:
        cells_ap.setdefault((x["group"], x["epoch"], x["player"]), []).append(x)
    rows = []
    for g in by_group:
        ds, var, meth = g.split("/", 2)
        for (_, e, i), xs in sorted((k, v) for k, v in cells.items() if k[0] == g):
            mu, sd, n = mean_std([x["share"] for x in xs])
            xa = cells_ap.get((g, e, i), [])
            mua, sda, na = mean_std([x["share"] for x in xa])
            lo, hi = seed_interval([x["share"] for x in xs], FRACTION)
            alo, ahi = seed_interval([x["share"] for x in xa], FRACTION)
            rows.append({"dataset": ds, "variant": var, "method": meth, "epoch": e, "player": i,
                         "share_mean": mu, "share_std": sd, "n_seeds": n, "share_ci_low": lo, "share_ci_high": hi,
                         "share_ap_ci_low": alo, "share_ap_ci_high": ahi, "error_bars": interval_text(FRACTION, what="band"),
                         "n_labels": float(np.mean([x["n_labels"] for x in xs])),
                         "labels": "contested" if contested_only else "all",
                         "share_ap_mean": mua, "share_ap_std": sda, "n_seeds_ap": na,
                         "n_labels_ap": float(np.mean([x["n_labels"] for x in xa])) if xa else float("nan")})
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
        per: dict[tuple[str, str], dict[str, list]] = {
            (lg, ms): {"rank": [], "n_rank": [], "share": [], "n_share": [], "tied": []}
            for lg in LABEL_GROUPS for ms in MEASURES}
        for r, a in lst:
            last = int(np.argmax(a["epoch"]))
            tail = tails[(g, r.seed)]
            all_labels = np.unique(a["label"])
            groups = {"rare": np.intersect1d(all_labels, tail), "frequent": np.setdiff1d(all_labels, tail)}
            for ms in MEASURES:
                acc = a[ms][last]
                for lg, labs in groups.items():
                    cell = per[(lg, ms)]
                    mr, n = mean_ranks(acc, a["player"], a["label"], labs, n_players=N)
                    cell["tied"].append(n_all_tied(acc, a["label"], labs))
                    sh, ns = specialization_shares(acc, a["player"], a["label"], labels=labs,
                                                   contested_only=contested_only, n_players=N)
                    cell["rank"].append(mr)
                    cell["n_rank"].append(n)
                    cell["share"].append(sh)
                    cell["n_share"].append(ns)
                    if seed_shares is not None and ms == "accuracy":
                        seed_shares += [{"group": g, "seed": r.seed, "player": i + 1, "label_group": lg,
                                         "share": float(sh[i])} for i in range(N)]
        for lg in LABEL_GROUPS:
            stats = {}
            for ms, suffix in (("accuracy", ""), ("ap", "_ap")):
                cell = per[(lg, ms)]
                stats[suffix] = (np.vstack(cell["rank"]), np.vstack(cell["share"]), np.vstack(cell["n_rank"]),
                                 float(np.mean(cell["tied"])), float(np.mean(cell["n_share"])))
            for i in range(N):
                rrow = {"dataset": ds, "variant": var, "method": meth, "player": i + 1, "label_group": lg}
                srow = dict(rrow)
                for suffix, (R, S, NR, tied, nsh) in stats.items():
                    mu, sd, n = mean_std(R[:, i].tolist())
                    rrow.update({f"mean_rank{suffix}_mean": mu, f"mean_rank{suffix}_std": sd, f"n_seeds{suffix}": n,
                                 f"n_contested_labels{suffix}_mean": float(NR[:, i].mean()),
                                 f"n_all_tied_labels{suffix}_mean": tied})
                    mu, sd, n = mean_std(S[:, i].tolist())
                    lo, hi = seed_interval(S[:, i].tolist(), FRACTION)
                    srow.update({f"share{suffix}_mean": mu, f"share{suffix}_std": sd, f"n_seeds{suffix}": n,
                                 f"share{suffix}_ci_low": lo, f"share{suffix}_ci_high": hi,
                                 f"n_labels{suffix}_mean": nsh})
                    srow["error_bars"] = interval_text(FRACTION)
                    if not suffix:
                        srow["labels"] = "contested" if contested_only else "all"
                rank_rows.append(rrow)
                share_rows.append(srow)
    return rank_rows, share_rows


def role_rows(by_group: dict[str, list[tuple[RunDir, dict[str, Any]]]]) -> tuple[list[dict], list[dict]]:
    """Final epoch, per run: what each player covers (:func:`player_coverage`) and, per measure,
    who wins the contested labels, the owner or the extra coverer (:func:`role_outcomes`). Runs
    without recorded roles are left out."""
    coverage, outcomes = [], []
    for g, lst in by_group.items():
        ds, var, meth = g.split("/", 2)
        N = int(lst[0][1]["player"].max()) + 1
        for r, a in lst:
            roles = a.get("roles")
            if roles is None:
                continue
            cov = player_coverage(roles["owner"], roles["extra_of"], roles["tail"], N)
            coverage += [{"dataset": ds, "variant": var, "method": meth, "seed": r.seed, "player": i + 1, **c}
                         for i, c in enumerate(cov)]
            pr = pair_roles(a["player"], a["label"], roles["owner"], roles["extra_of"])
            last = int(np.argmax(a["epoch"]))
            for ms in MEASURES:
                if ms == "ap" and not a.get("has_ap", False):
                    continue
                outcomes.append({"dataset": ds, "variant": var, "method": meth, "seed": r.seed, "measure": ms,
                                 **role_outcomes(a[ms][last], a["label"], pr)})
    return coverage, outcomes


def coverage_text(coverage: list[dict], group: str, player: int) -> str:
    """``owns a tail, +b extra`` for a player of a group (means over its seeds), '' if unknown."""
    ds, var, meth = group.split("/", 2)
    xs = [c for c in coverage if (c["dataset"], c["variant"], c["method"], c["player"]) == (ds, var, meth, player)]
    if not xs:
        return ""
    return (f"owns {np.mean([c['n_tail_owned'] for c in xs]):.2g} tail, "
            f"+{np.mean([c['n_extra'] for c in xs]):.2g} extra")


def _group_title(g: str, style: FigureStyle) -> str:
    """``<setting>`` over ``<method>`` (two lines: side by side, one line each overran its panel);
    a setting run under a reading (``studies.diagnostics.under``: ``CD-GTMLL@player_backbones=separate``)
    reads ``CD-GTMLL under player_backbones=separate``."""
    ds, var, meth = g.split("/", 2)
    base, _, reading = meth.partition("@")
    return f"{style.setting(ds, var)}\n" + (f"{base} under {reading}" if reading else meth)


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
    contested = labels == "contested"
    longs = {ms: specialization_long(by_group, contested_only=contested, measure=ms) for ms in MEASURES}
    rows = specialization_rows(by_group, contested_only=contested, long=longs["accuracy"], long_ap=longs["ap"])
    coverage, _ = role_rows(by_group)
    panels = [(g, ms) for g in by_group for ms in MEASURES]
    with figure_style():
        fig, axes = _grid(len(panels), w=ONE_COLUMN, h=3.0, rows=len(by_group))
        for ax, (g, ms) in zip(axes, panels):
            df = pd.DataFrame([x for x in longs[ms] if x["group"] == g])
            df["share"] *= 100.0
            players = sorted(df["player"].unique())
            names = [f"Player {p}" for p in players]
            df["who"] = df["player"].map(lambda p: f"Player {p}")
            sts = player_styles(len(players))
            if df["share"].notna().any():
                sns.lineplot(data=df, x="epoch", y="share", hue="who", hue_order=names, palette=[c for c, _ in sts],
                             style="who", style_order=names, dashes=[d for _, d in sts], estimator="mean",
                             errorbar=seed_interval, err_kws={"alpha": 0.15, "linewidth": 0}, linewidth=1.1, ax=ax,
                             legend=False)
                bands_below_lines(ax)
            else:  # runs without an 'ap' array, or no label in scope with a validation positive
                ax.text(0.5, 0.5, f"no {MEASURE_NAMES[ms]} in these runs", ha="center", va="center",
                        transform=ax.transAxes, fontsize=NOTE_PT, color="0.35")
                ax.set_ylim(0, 100)
            handles = [Line2D([], [], color=c, dashes=d, linewidth=1.4) for c, d in sts]
            ax.set(xlabel="epoch", ylabel=f"share by {MEASURE_NAMES[ms]} (%)")
            ax.set_xlim(df["epoch"].min(), df["epoch"].max())
            honest_ylim(ax)  # shares flat at 33% are not zoomed into a trend
        if len(by_group) == 1:  # the legend says what each index covered (seed means)
            g0 = next(iter(by_group))
            names = [f"{n} ({t})" if (t := coverage_text(coverage, g0, i + 1)) else n for i, n in enumerate(names)]
        legend_below(fig, handles, names, ncol=min(3 if len(by_group) == 1 else 4, len(handles)))
        # one setting: one title above its row of two panels (the y labels name the measure)
        ptitles = ([_group_title(next(iter(by_group)), style)] if len(by_group) == 1
                   else [f"{_group_title(g, style)}: by {MEASURE_NAMES[ms]}" for g, ms in panels])
        titles(fig, axes, ptitles,
               f"share of {'contested ' if contested else ''}labels on which the player scores best among the "
               f"covering players (validation; accuracy@0.5 ties split credit, AP: labels with a validation "
               f"positive); mean over {_n_seeds_text(by_group)}; {interval_text(what='band')}", title,
               # two panels side by side, each titled: wrapped narrower (the axes titles' font is larger
               # than the 9 pt titles() wraps for, and a setting's name overran into its neighbour's)
               ONE_COLUMN if len(by_group) == 1 else 0.8 * ONE_COLUMN)
        save_figure(fig, out, rows, log, labels=labels, player_coverage=coverage,
                    error_bars=interval_text(what="band"),
                    definition="share = fraction of labels (in scope) on which the player has the best "
                               "per-label validation accuracy (share_*) or average precision (share_ap_*) among "
                               "covering players; ties split credit equally")
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
        save_figure(fig, Path(f"{out}_shares"), share_rows, log, **extra, labels=labels, error_bars=interval_text())
    coverage, outcomes = role_rows(by_group)
    _write_rows(Path(f"{out}_coverage.csv"), coverage, ["dataset", "variant", "method", "seed", "player", "n_owned",
                                                        "n_tail_owned", "n_extra", "n_extra_tail"])
    _write_rows(Path(f"{out}_roles.csv"), outcomes, ["dataset", "variant", "method", "seed", "measure", "owner_best",
                                                     "extra_best", "tied", "n"])
    return rank_rows, share_rows


def _ranks_heatmap(groups: list[str], rank_rows: list[dict], style: FigureStyle, title: str,
                   n_seeds: str) -> Any:
    """Players x {rare, frequent}: mean rank (± std over seeds) as a seaborn heatmap;
    cells without a contested label say ``n/a``."""
    import seaborn as sns

    n_max = max(int(r["player"]) for r in rank_rows)
    fig, axes = _grid(len(groups), w=ONE_COLUMN * 1.25, h=0.42 * n_max + 1.5)
    for ax, g in zip(axes, groups):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in rank_rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        N = max(r["player"] for r in rs)
        cols = [(lg, sfx) for sfx in ("", "_ap") for lg in LABEL_GROUPS]  # accuracy columns, then AP
        M = np.full((N, len(cols)), np.nan)
        SD = np.full((N, len(cols)), np.nan)
        for r in rs:
            for j, (lg, sfx) in enumerate(cols):
                if r["label_group"] == lg:
                    M[r["player"] - 1, j] = r[f"mean_rank{sfx}_mean"]
                    SD[r["player"] - 1, j] = r[f"mean_rank{sfx}_std"]
        annot = np.array([[f"{M[i, j]:.2f}\n± {SD[i, j]:.2f}" if np.isfinite(M[i, j]) else ""
                           for j in range(len(cols))] for i in range(N)], dtype=object)
        sns.heatmap(M, mask=~np.isfinite(M), annot=annot, fmt="", cmap="viridis_r", vmin=1, vmax=max(2, N),
                    linewidths=1.0, linecolor="white", cbar_kws={"label": "mean rank (1 = best)",
                                                                 "ticks": list(range(1, max(2, N) + 1))},
                    annot_kws={"fontsize": 8.5}, ax=ax)
        ax.grid(False)
        ax.set_facecolor("0.93")
        for i in range(N):
            for j in range(len(cols)):
                if not np.isfinite(M[i, j]):
                    ax.text(j + 0.5, i + 0.5, "n/a", ha="center", va="center", fontsize=8.5, color="0.35")
        ax.set_xticks(np.arange(len(cols)) + 0.5,
                      [f"{lg}\n{'AP' if sfx else 'acc.@0.5'}" for lg, sfx in cols], fontsize=8)
        ax.set_yticks(np.arange(N) + 0.5, [f"Player {i + 1}" for i in range(N)], rotation=0)
        tied = {(lg, sfx): next(r[f"n_all_tied_labels{sfx}_mean"] for r in rs if r["label_group"] == lg)
                for lg, sfx in cols}
        ax.set_xlabel(wrap("all players tied on " + "; ".join(
            f"{MEASURE_NAMES['ap' if sfx else 'accuracy']}: " + " and ".join(
                f"{tied[(lg, sfx)]:g} {lg}" for lg in LABEL_GROUPS) for sfx in ("", "_ap"))
            + " label(s) (seed mean)", chars_per_line(ONE_COLUMN, NOTE_PT)), fontsize=NOTE_PT)
    titles(fig, axes, [_group_title(g, style) for g in groups],
           f"rank among the players covering a contested label (by validation accuracy@0.5 and by AP), final "
           f"epoch; mean ± std over {n_seeds}; n/a: no contested label (AP: none with a validation positive)",
           title, ONE_COLUMN)
    return fig


def _shares_bars(groups: list[str], share_rows: list[dict], seed_shares: list[dict], style: FigureStyle,
                 title: str, labels: str, n_seeds: str) -> Any:
    """Final-epoch specialization share of each player within rare and within frequent
    labels: seaborn bars (the mean over seeds with the error bar of
    :func:`~cdgtmll.figures.intervals.seed_interval`, dots: seeds)."""
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
           f"mean over {n_seeds} (dots: seeds); {interval_text()}", title, ONE_COLUMN)
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
