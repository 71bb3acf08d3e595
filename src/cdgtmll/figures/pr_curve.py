"""Figures of the paper, each from run artefacts, each with the data behind it as CSV.

``python -m cdgtmll.figures.pr_curve pr --runs DIR... --clean CLEAN.npz --out figures/pr_tail``

PR curve (paper Fig. "Precision-recall curves on Pascal VOC-R"): for every method, the
micro-averaged precision-recall curve over the tail labels (bottom ``q`` of labels by
clean training prevalence, App. E.4) of the test split. Each run's curve is made
monotone by the usual interpolation p(r) = max_{r' >= r} p(r') over the curve's operating
points (every score threshold; not scikit-learn's appended end point (recall 0,
precision 1), which is no threshold: with it every curve would start at precision 1, as
in the PASCAL VOC devkit's ``VOCap``, whose sentinel at recall 0 has precision 0) and
sampled on a fixed recall grid; the figure shows the mean over runs (training seeds x
sampling seeds) with a ±1 std band, drawn beneath every curve. Writes ``<out>.pdf``,
``<out>.png`` (300 dpi), ``<out>.csv`` (the curves) and ``<out>.sources.json`` (the
prediction files with sha256). Style (colours, names): :mod:`cdgtmll.figures.style`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from cdgtmll.data.processed import ProcessedData
from cdgtmll.figures.studies.runs import _grid, _plt
from cdgtmll.figures.style import (
    ONE_COLUMN,
    TWO_COLUMNS,
    FigureStyle,
    add_style_args,
    bands_below_lines,
    figure_style,
    legend_below,
    legend_right,
    method_handles,
    n_labels,
    save_kw,
    save_metadata,
    style_from_args,
    titles,
)
from cdgtmll.io import atomic_path, atomic_write, sha256_file, write_json
from cdgtmll.labels import tail_labels

RECALL_GRID = np.linspace(0.0, 1.0, 101)


def tail_pr_curve(Y: np.ndarray, S: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """Interpolated micro precision over ``tail`` columns at RECALL_GRID (nan if no positives)."""
    from sklearn.metrics import precision_recall_curve

    y = np.asarray(Y)[:, tail].ravel()
    s = np.asarray(S)[:, tail].ravel()
    if y.sum() == 0:
        return np.full(RECALL_GRID.shape, np.nan)
    prec, rec, _ = precision_recall_curve(y, s)
    prec, rec = prec[:-1], rec[:-1]  # drop the appended (recall 0, precision 1): not an operating point
    # interpolated precision: best precision at any recall >= r
    order = np.argsort(rec)
    rec, prec = rec[order], prec[order]
    best = np.maximum.accumulate(prec[::-1])[::-1]
    idx = np.searchsorted(rec, RECALL_GRID, side="left")
    out = np.where(idx < len(rec), best[np.minimum(idx, len(rec) - 1)], 0.0)
    return out


#: Grey of the methods outside ``highlight`` (context lines without band or marker).
CONTEXT_GREY = (0.62, 0.62, 0.62)


def pr_figure(runs: dict[str, list[Path]], clean: ProcessedData, q: float, tie_seed: int,
              out: Path, title: str = "", style: FigureStyle | None = None,
              highlight: list[str] | None = None) -> None:
    """Tail PR curves, one per method. ``highlight`` (``figures.pr_curve.highlight``): the
    methods drawn in their colours with a ±1 std band; the run's other methods are thin grey
    lines beneath them, without band or marker (22 coloured curves with bands are unreadable).
    None, or a list that covers every method: all in colour. The CSV and sources always hold
    every method."""
    import pandas as pd
    import seaborn as sns

    style = style or FigureStyle()
    tail = tail_labels(clean.part("train")[1], q=q, tie_seed=tie_seed)
    Y_test = np.asarray(clean.part("test")[1])
    rows, sources, long = [], {}, []
    methods = sorted(runs, key=style.index)  # drawing (and legend) order; the CSV keeps the input order
    ns, means = {}, {}
    for method in runs:
        curves = []
        for k, p in enumerate(runs[method]):
            with np.load(p, allow_pickle=False) as z:
                c = tail_pr_curve(Y_test, z["test"], tail)
            curves.append(c)
            long += [{"method": method, "run": k, "recall": float(r), "precision": float(v)}
                     for r, v in zip(RECALL_GRID, c)]
            sources.setdefault(method, []).append({"path": str(p), "sha256": sha256_file(p)})
        C = np.vstack(curves)
        mean = means[method] = np.nanmean(C, axis=0)
        std = np.nanstd(C, axis=0, ddof=1) if len(C) > 1 else np.zeros_like(mean)
        ns[method] = len(C)
        for r, m, s in zip(RECALL_GRID, mean, std):
            rows.append({"method": method, "recall": round(float(r), 4), "precision_mean": float(m),
                         "precision_std": float(s), "n_runs": len(C)})
    df = pd.DataFrame(long)
    context = [m for m in methods if highlight is not None and m not in highlight]
    methods = [m for m in methods if m not in context]
    with figure_style():
        many = len(methods) > 8
        fig, axes = _grid(1, w=TWO_COLUMNS if many else ONE_COLUMN, h=3.4 if many or context else 2.8)
        ax = axes[0]
        for method in context:  # beneath the highlighted methods: mean only
            ax.plot(RECALL_GRID, means[method], color=CONTEXT_GREY, linewidth=0.7, zorder=1.5)
        for method in methods:
            st = style.method(method)
            sns.lineplot(data=df[df["method"] == method], x="recall", y="precision", estimator="mean",
                         errorbar="sd", err_kws={"alpha": 0.12, "linewidth": 0}, ax=ax, legend=False,
                         **{**st.line_kw(), "markevery": (style.index(method) % 10, 10), "markersize": 4,
                            "linewidth": st.linewidth * 0.85})
        bands_below_lines(ax)
        ax.set(xlabel="recall (tail labels, micro-averaged)", ylabel="interpolated precision", xlim=(0, 1),
               ylim=(0, 1.02))
        handles, labels = method_handles(methods, style, n_labels(methods, ns), kind="line")
        if context:
            from matplotlib.lines import Line2D

            handles.append(Line2D([], [], color=CONTEXT_GREY, linewidth=0.9))
            labels.append(f"{len(context)} other methods")
        if many:
            legend_right(ax, handles, labels, ncol=2 if len(methods) > 12 else 1)
        else:
            legend_below(fig, handles, labels, ncol=min(3, len(methods)))
        names = {}
        for p in (p for ps in runs.values() for p in ps):
            parts = Path(p).parts
            if len(parts) >= 5:
                names.setdefault(parts[-5], set()).add(parts[-4])
        ds_name = clean.meta.get("display_name") or style.dataset(clean.name)
        style.dataset_names = {**style.dataset_names, clean.name: ds_name}
        default_title = "; ".join(style.settings_list(ds, sorted(vs)) for ds, vs in sorted(names.items())) \
            or ds_name
        n_runs = sorted(set(ns.values()))
        grey = f"; grey: {len(context)} other methods (mean)" if context else ""
        titles(fig, [ax], [title or f"{default_title}: tail-label precision-recall"],
               f"tail = the {len(tail)} labels with the lowest training prevalence (bottom {100 * q:g}%); "
               f"mean ± std over {'-'.join(map(str, n_runs))} runs (training × sampling seeds; band){grey}",
               panel_width=4.3 if many else ONE_COLUMN)
        out.parent.mkdir(parents=True, exist_ok=True)
        for ext in ("pdf", "png"):
            with atomic_path(out.with_suffix(f".{ext}"), suffix=f".{ext}") as tmp:
                fig.savefig(tmp, format=ext, metadata=save_metadata(ext), **save_kw())
        _plt().close(fig)
    atomic_write(out.with_suffix(".csv"), pd.DataFrame(rows).to_csv(index=False))
    write_json(out.with_suffix(".sources.json"), {
        "figure": out.name, "tail_labels": [clean.label_names[t] for t in tail], "runs": sources})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="fig", required=True)
    pr = sub.add_parser("pr", help="tail PR curves on an R-variant")
    pr.add_argument("--predictions", nargs="+", required=True, type=Path,
                    help=".../<method>/seed<k>/predictions.npz files; grouped by <method>")
    pr.add_argument("--clean", required=True, type=Path)
    pr.add_argument("--q", type=float, default=0.2)
    pr.add_argument("--tie-seed", type=int, default=0)
    pr.add_argument("--title", default="", help="replaces the title (default: the dataset's display name "
                                                "and the R-variant, from the prediction paths)")
    pr.add_argument("--out", required=True, type=Path, help="output path without extension")
    pr.add_argument("--highlight", nargs="*", default=None, metavar="METHOD",
                    help="methods drawn in colour with a band; the others grey (default: all in colour)")
    add_style_args(pr)
    args = ap.parse_args(argv)
    if args.fig == "pr":
        runs: dict[str, list[Path]] = {}
        for p in args.predictions:
            runs.setdefault(p.parent.parent.name, []).append(p)
        pr_figure(runs, ProcessedData.load(args.clean), args.q, args.tie_seed, args.out, args.title,
                  style=style_from_args(args), highlight=args.highlight)
    return 0


if __name__ == "__main__":
    sys.exit(main())
