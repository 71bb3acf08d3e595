"""The critical-difference diagram of the methods across datasets (rule ``figure_ranks``).

``python -m cdgtmll.figures.cd_diagram --runs results/tables/all_runs.csv --out figures/cd_diagram
[--datasets D ...] [--methods M ...] [--mode global|adaptive] [--alpha 0.05] [--not-run 'D|M|why' ...]
[--style-order M ...] [--dataset-name ID=NAME ...] [--title TEXT]``

One panel per metric of the paper's tables (:data:`cdgtmll.claims.ranks.TABLE_METRICS`), in the
form of Demšar (JMLR 7:1-30, 2006, Fig. 1-2): an axis of average ranks (1 = best, on the left),
each method marked at its average rank and named on the side of its half, and thick bars
under the axis joining methods that no Holm-corrected Wilcoxon signed-rank test separates
(Benavoli, Corani and Mangili, JMLR 17, 2016; the statistics: :mod:`cdgtmll.claims.ranks`).
The panel title gives the Friedman / Iman-Davenport p-value and the number of datasets; methods
not ranked (no value on some dataset) are named under the panel.

Writes ``<out>.pdf``, ``<out>.png`` (300 dpi), ``<out>.csv`` (per metric and method: the
average rank drawn, its side, the bars it is in) and ``<out>.sources.json`` (the runs table
read, with its sha256), atomically, byte-identical for the same inputs.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cdgtmll.claims.compare import normalise_runs
from cdgtmll.claims.ranks import (
    ALPHA,
    METRIC_NAMES,
    TABLE_METRICS,
    MetricRanking,
    add_ranking_args,
    min_wilcoxon_p,
    parse_not_run,
    rank_all,
    write,
)
from cdgtmll.figures.studies.runs import _plt, _write_rows
from cdgtmll.figures.style import (
    NOTE_PT,
    ONE_COLUMN,
    TWO_COLUMNS,
    FigureStyle,
    add_style_args,
    chars_per_line,
    figure_style,
    save_kw,
    save_metadata,
    style_from_args,
    titles,
    wrap,
)
from cdgtmll.io import atomic_path, sha256_bytes, write_json

CSV_COLUMNS = ("metric", "method", "average_rank", "side", "bars", "n_datasets", "datasets", "friedman_p",
               "iman_davenport_p", "not_ranked")  # fmt: skip
#: vertical layout of a panel, in label rows: the axis at 0, bars below it, then one row per label
ROW = 1.0
BAR_STEP = 0.4
#: inches of one label row; inches the rank axis takes at least; the method names' size (points)
ROW_IN = 0.17
AXIS_IN = 2.0
TEXT_PT = 8.0


def _p_text(p: float) -> str:
    if not math.isfinite(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def panel_title(r: MetricRanking) -> str:
    """``mAP: 4 datasets, Friedman p = 0.012 (Iman-Davenport p = 0.003)``."""
    n, k = r.values.shape
    name = METRIC_NAMES.get(r.metric, r.metric)
    if k < 3 or not math.isfinite(r.friedman["chi2"]):
        why = "fewer than 3 methods" if k < 3 else "all tied"
        return f"{name}: {n} datasets, no Friedman test ({why})"
    return (f"{name}: {n} datasets, Friedman p {_eq(r.friedman['chi2_p'])} "
            f"(Iman-Davenport p {_eq(r.friedman['f_f_p'])})")


def _eq(p: float) -> str:
    t = _p_text(p)
    return t if t.startswith("<") else f"= {t}"


def layout(r: MetricRanking) -> dict[str, Any]:
    """Where a panel draws: each method's side (``left`` for the better half, named on the
    left) and label row (1 = the row under the bars), and the bars (:attr:`MetricRanking.bars`).
    Left labels go down in rank order, right ones down from the worst, so that no two elbow
    lines cross."""
    order = r.methods
    k = len(order)
    n_left = math.ceil(k / 2)
    right = order[n_left:]
    side = {m: ("left" if i < n_left else "right") for i, m in enumerate(order)}
    row = {m: i + 1 for i, m in enumerate(order[:n_left])}
    row.update({m: len(right) - i for i, m in enumerate(right)})
    return {"side": side, "row": row, "rows": max(n_left, len(right)), "bars": r.bars}


def label(r: MetricRanking, m: str) -> str:
    return f"{m} ({float(r.average_ranks[m]):.2f})"


def label_width(rankings: Sequence[MetricRanking]) -> float:
    """Inches the longest method label takes at :data:`TEXT_PT` (about 0.6 em a character)."""
    n = max((len(label(r, m)) for r in rankings for m in r.methods), default=10)
    return n * 0.6 * TEXT_PT / 72


def figure_width(rankings: Sequence[MetricRanking]) -> float:
    """One column (3.4 in) when the labels leave the rank axis 2 in, else wider, at most two."""
    return min(TWO_COLUMNS, max(ONE_COLUMN, 2 * label_width(rankings) + AXIS_IN + 0.2))


def draw_panel(ax: Any, r: MetricRanking, style: FigureStyle, label_in: float, width_in: float) -> dict[str, Any]:
    """One critical-difference diagram on ``ax`` (no axes frame: a rank axis drawn as lines);
    ``label_in``: inches kept on each side for the labels; ``width_in``: the axes' width."""
    k = len(r.methods)
    ax.set_axis_off()
    if k < 2:
        ax.text(0.5, 0.5, f"not ranked: {k} method(s) with a value on every dataset", ha="center",
                va="center", transform=ax.transAxes, fontsize=NOTE_PT, color="0.25")
        return {"side": {}, "row": {}, "rows": 0, "bars": []}
    lay = layout(r)
    lo, hi, pad = 1.0, float(k), 0.15
    u = (hi - lo + 2 * pad) / max(0.5, width_in - 2 * label_in)  # rank units per inch
    x_left, x_right = lo - pad, hi + pad
    nb = len(lay["bars"])
    first = -(0.75 + BAR_STEP * max(nb, 1))  # the first label row sits below the bars
    ax.plot([lo, hi], [0, 0], color="0.15", linewidth=0.8, solid_capstyle="butt", zorder=2)
    for t in range(1, k + 1):
        ax.plot([t, t], [0, 0.22], color="0.15", linewidth=0.8, zorder=2)
        ax.text(t, 0.32, f"{t}", ha="center", va="bottom", fontsize=NOTE_PT)
    for j in range(1, k):  # half ranks
        ax.plot([j + 0.5, j + 0.5], [0, 0.12], color="0.15", linewidth=0.6, zorder=2)
    ax.text(x_left - 0.05 * u, 0.32, "average rank", ha="right", va="bottom", fontsize=NOTE_PT, color="0.25")
    for m in r.methods:
        x = float(r.average_ranks[m])
        y = first - ROW * (lay["row"][m] - 1)
        st = style.method(m)
        left = lay["side"][m] == "left"
        end = x_left if left else x_right
        ax.plot([x, x, end], [0, y, y], color="0.45", linewidth=0.7, zorder=1.5, solid_joinstyle="miter")
        ax.plot([x], [0], marker=st.marker, color=st.color, markersize=5.5, markeredgecolor="0.15",
                markeredgewidth=0.5, linestyle="none", zorder=4)
        ax.text(end + (-0.05 if left else 0.05) * u, y, label(r, m), ha="right" if left else "left",
                va="center", fontsize=TEXT_PT)
    for i, bar in enumerate(lay["bars"]):
        xs = [float(r.average_ranks[m]) for m in bar]
        y = -(0.45 + BAR_STEP * i)
        ax.plot([min(xs) - 0.03, max(xs) + 0.03], [y, y], color="0.1", linewidth=2.6, solid_capstyle="round",
                zorder=3)
    ax.set_xlim(x_left - label_in * u, x_right + label_in * u)
    ax.set_ylim(first - ROW * (lay["rows"] - 1) - 0.6, 0.9)
    return lay


def panel_height(r: MetricRanking) -> float:
    """Inches: the axis, the bars, one label row per method of the fuller side."""
    if len(r.methods) < 2:
        return 0.4
    lay = layout(r)
    return ROW_IN * (1.65 + BAR_STEP * max(len(lay["bars"]), 1) + ROW * (lay["rows"] - 1))


def figure_rows(rankings: Sequence[MetricRanking], lays: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r, lay in zip(rankings, lays):
        bar_ids = {m: ";".join(str(i + 1) for i, b in enumerate(lay["bars"]) if m in b) for m in r.methods}
        common = {"metric": r.metric, "n_datasets": len(r.datasets), "datasets": ";".join(r.datasets),
                  "friedman_p": r.friedman["chi2_p"], "iman_davenport_p": r.friedman["f_f_p"]}
        for m in r.methods:
            rows.append({**common, "method": m, "average_rank": float(r.average_ranks[m]),
                         "side": lay["side"].get(m, ""), "bars": bar_ids[m], "not_ranked": ""})
        for name, why in r.left_out:
            rows.append({**common, "method": name, "average_rank": math.nan, "side": "", "bars": "",
                         "not_ranked": why})
    return rows


def cd_figure(runs_csv: str | Path, out: str | Path, datasets: Sequence[str] = (), methods: Sequence[str] = (),
              mode: str = "global", alpha: float = ALPHA, not_run: dict[tuple[str, str], str] | None = None,
              metrics: Sequence[str] = TABLE_METRICS, title: str = "",
              style: FigureStyle | None = None, ranks_out: str | Path | None = None) -> list[dict[str, Any]]:
    """Draw and write the diagram (module doc); returns the CSV rows. ``ranks_out``: also write
    the same rankings as the claims page's section (:func:`cdgtmll.claims.ranks.write`), so that
    the runs are ranked once."""
    import pandas as pd

    runs_csv, out = Path(runs_csv), Path(out)
    data = runs_csv.read_bytes()
    runs = normalise_runs(pd.read_csv(runs_csv))
    datasets = list(datasets) or sorted(set(runs.loc[runs["setting"] == "clean", "dataset"]))
    rankings = rank_all(runs, datasets, list(methods) or None, metrics, mode, alpha, not_run)
    if ranks_out is not None:
        write(rankings, ranks_out, datasets, alpha, mode)
    style = style or FigureStyle()
    style.add_methods(m for r in rankings for m in r.methods)
    names = ", ".join(style.dataset(d) for d in datasets)
    with figure_style():
        plt = _plt()
        w = figure_width(rankings) if rankings else ONE_COLUMN
        if rankings:
            heights = [panel_height(r) for r in rankings]
            fig, axes = plt.subplots(len(rankings), 1, figsize=(w, sum(heights) + 0.3 * len(rankings) + 0.7),
                                     height_ratios=heights, layout="constrained", squeeze=False)
            axes = list(axes.ravel())
            lw = label_width(rankings)
            lays = [draw_panel(ax, r, style, lw, w - 0.1) for ax, r in zip(axes, rankings)]
            for ax, r in zip(axes, rankings):
                if r.left_out:
                    text = "not ranked: " + "; ".join(f"{m} ({why})" for m, why in r.left_out)
                    ax.text(0.5, 0.0, wrap(text, chars_per_line(w, NOTE_PT)), transform=ax.transAxes,
                            ha="center", va="top", fontsize=NOTE_PT, color="0.25")
            n = max(len(r.datasets) for r in rankings)
            note = (f"Mean over training seeds on each dataset's clean setting ({names}); bars join methods "
                    f"no Wilcoxon signed-rank test over the {n} datasets separates after Holm "
                    f"(α = {alpha:g}; the smallest possible p on {n} datasets is {min_wilcoxon_p(n):.3g}).")
            titles(fig, axes, [panel_title(r) for r in rankings], note, title, w)
        else:
            fig, axes = plt.subplots(1, 1, figsize=(w, 0.8), layout="constrained", squeeze=False)
            axes = list(axes.ravel())
            axes[0].set_axis_off()
            axes[0].text(0.5, 0.5, wrap(f"No ranking: it needs 2 or more datasets; this profile ran "
                                        f"{len(datasets)} ({names or 'none'}).", chars_per_line(w, 9)),
                         ha="center", va="center", transform=axes[0].transAxes, fontsize=9)
            lays = []
        rows = figure_rows(rankings, lays)
        out.parent.mkdir(parents=True, exist_ok=True)
        for ext in ("pdf", "png"):
            with atomic_path(Path(f"{out}.{ext}"), suffix=f".{ext}") as tmp:
                fig.savefig(tmp, format=ext, metadata=save_metadata(ext), **save_kw())
        plt.close(fig)
    _write_rows(Path(f"{out}.csv"), rows, CSV_COLUMNS)
    write_json(Path(f"{out}.sources.json"), {
        "figure": out.name, "runs_table": {"path": str(runs_csv), "sha256": sha256_bytes(data)},
        "datasets": datasets, "mode": mode, "alpha": alpha, "test": "Wilcoxon signed-rank, Holm",
    })
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_ranking_args(ap)
    ap.add_argument("--out", required=True, help="output stem: <out>.pdf/.png/.csv/.sources.json")
    ap.add_argument("--ranks-out", default=None,
                    help="also write the rankings drawn as <stem>.csv and <stem>.md (cdgtmll.claims.ranks.write)")
    ap.add_argument("--title", default="", help="replaces the panel titles")
    add_style_args(ap)
    args = ap.parse_args(argv)
    cd_figure(args.runs, args.out, args.datasets, args.methods, args.mode, args.alpha,
              parse_not_run(args.not_run), title=args.title, style=style_from_args(args), ranks_out=args.ranks_out)
    for ext in ("pdf", "png", "csv", "sources.json"):
        print(f"{args.out}.{ext}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
