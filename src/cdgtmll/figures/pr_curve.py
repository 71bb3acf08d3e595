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
sampling seeds) with a band, drawn beneath every curve: the 95% t-interval of the mean at
each recall cut to [0, 1], where precision lies (cutting a confidence interval to where the
mean can be keeps its coverage: :func:`cdgtmll.figures.intervals.seed_interval`; the CSV's
``precision_ci_low``/``precision_ci_high``; no band and no ``precision_std`` from one run, e.g.
a deterministic method's, fitted once). Every line is named: a
highlighted method in the legend; the grey context methods by one legend entry (the method's
name when it is one) and, when several, by name in a note under the axes ("grey, mean only: ..."). A run whose tail scores give
no ranking (all tied, or not finite: :func:`curve_problem`) has no curve and is left out of
its method's mean; a method left with no run, or configured without runs (``--no-runs``),
is named with the reason in a footnote line under the legend ("no curve: ..."), in the CSV
(a row with ``n_runs`` 0 and the reason in ``no_curve``) and in ``sources.json``
(``no_curve``). The title is one short line, the subtitle at most two. Writes ``<out>.pdf``,
``<out>.png`` (300 dpi), ``<out>.csv`` (the curves) and ``<out>.sources.json`` (the
prediction files with sha256). Style (colours, names): :mod:`cdgtmll.figures.style`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

from cdgtmll.data.processed import ProcessedData
from cdgtmll.figures.intervals import FRACTION, interval_text, seed_interval
from cdgtmll.figures.studies.runs import _grid, _plt
from cdgtmll.figures.style import (
    NOTE_PT,
    ONE_COLUMN,
    TWO_COLUMNS,
    FigureStyle,
    add_style_args,
    bands_below_lines,
    chars_per_line,
    figure_style,
    footnote,
    legend_below,
    legend_right,
    method_handles,
    n_labels,
    save_kw,
    save_metadata,
    style_from_args,
    titles,
    wrap,
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


def curve_problem(S: np.ndarray, tail: np.ndarray) -> str | None:
    """Why the scores ``S`` of one run give no tail PR curve (None when they do): scores that
    are not finite, or tail scores all tied (one operating point: no ranking to draw)."""
    s = np.asarray(S)[:, tail]
    if not np.isfinite(s).all():
        return "scores not finite"
    if s.size == 0 or np.ptp(s) == 0:
        return "all tail-label scores tied: no ranking"
    return None


#: Grey of the methods outside ``highlight`` (context lines without band or marker).
CONTEXT_GREY = (0.62, 0.62, 0.62)
_R_VARIANT = re.compile(r"^R(\d+(?:\.\d+)?)-s(\d+)$")


def _short_reason(reason: str) -> str:
    """A reason as the footnote prints it: up to its first parenthesis or its remedy (": run
    ..."); sources.json keeps it whole."""
    return re.split(r" \(|: run ", reason, maxsplit=1)[0].strip()


def _no_curve_text(no_curve: dict[str, str]) -> str:
    """``no curve: A, B — why; C — why``: the methods, grouped by reason, in drawing order (no
    parentheses: :func:`~cdgtmll.figures.style.wrap` never breaks inside them)."""
    groups: dict[str, list[str]] = {}
    for m, why in no_curve.items():
        groups.setdefault(_short_reason(why), []).append(m)
    return "no curve: " + "; ".join(f"{', '.join(ms)} \u2014 {why}" for why, ms in groups.items())


def _title_and_subtitle(names: dict[str, set[str]], ds_name: str, style: FigureStyle, n_tail: int, q: float,
                        n_runs: list[int]) -> tuple[str, str, str]:
    """(title, subtitle, setting): a short title (one line at one column), a subtitle of at
    most two lines, and the setting in full words (for sources.json). One dataset with
    R-variants of one severity: "Yeast-R, 50% tail positives removed: tail PR" and "tail: 2
    rarest labels (bottom 20%); sampling seed 0; mean of 3 runs; band: 95% t-interval of the
    mean, cut to [0, 1]"; anything else: the full setting as the title."""
    runs = "-".join(map(str, n_runs))
    setting = "; ".join(style.settings_list(ds, sorted(vs)) for ds, vs in sorted(names.items())) or ds_name
    parsed = [_R_VARIANT.match(v) for vs in names.values() for v in vs]
    tail = f"tail: {n_tail} rarest labels (bottom {100 * q:g}%)"
    band = f"mean of {runs} run{'' if n_runs == [1] else 's'}" + ("" if n_runs == [1] else
                                                               f"; {interval_text(FRACTION, what='band')}")
    if len(names) == 1 and parsed and all(parsed) and len({float(m[1]) for m in parsed}) == 1:
        pct = f"{100 * float(parsed[0][1]):g}%"
        seeds = sorted({int(m[2]) for m in parsed})
        return (f"{ds_name}-R, {pct} tail positives removed: tail PR",
                f"{tail}; sampling seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}; {band}", setting)
    return f"{setting}: tail PR", f"{tail}; {band}", setting


def pr_figure(runs: dict[str, list[Path]], clean: ProcessedData, q: float, tie_seed: int,
              out: Path, title: str = "", style: FigureStyle | None = None,
              highlight: list[str] | None = None, no_runs: dict[str, str] | None = None) -> None:
    """Tail PR curves, one per method. ``highlight`` (``figures.pr_curve.highlight``): the
    methods drawn in their colours with a band (module docstring); the run's other methods are thin grey
    lines beneath them, without band or marker (22 coloured curves with bands are unreadable), named
    by one legend entry and, when several, in a note under the axes.
    None, or a list that covers every method: all in colour. ``no_runs``: methods the figure
    should show but that have no runs, with the reason (the rule passes the configured methods
    that cannot run here). A method without a curve (no runs, or no run whose scores rank the
    tail: :func:`curve_problem`) is named with its reason under the legend, in the CSV and in
    sources.json. The CSV and sources always hold every method."""
    import pandas as pd
    import seaborn as sns

    style = style or FigureStyle()
    tail = tail_labels(clean.part("train")[1], q=q, tie_seed=tie_seed)
    Y_test = np.asarray(clean.part("test")[1])
    rows, sources, long = [], {}, []
    methods = sorted(runs, key=style.index)  # drawing (and legend) order; the CSV keeps the input order
    ns, means = {}, {}
    no_curve: dict[str, str] = {}
    for method in runs:
        curves, problems = [], []
        for k, p in enumerate(runs[method]):
            sources.setdefault(method, []).append({"path": str(p), "sha256": sha256_file(p)})
            with np.load(p, allow_pickle=False) as z:
                S = z["test"]
            why = curve_problem(S, tail)
            if why is not None:
                problems.append(why)
                continue
            c = tail_pr_curve(Y_test, S, tail)
            curves.append(c)
            long += [{"method": method, "run": k, "recall": float(r), "precision": float(v)}
                     for r, v in zip(RECALL_GRID, c)]
        if not curves:
            reasons = sorted(set(problems))
            no_curve[method] = f"{'; '.join(reasons)} in {len(problems)} of {len(runs[method])} runs"
            rows.append({"method": method, "recall": None, "precision_mean": None, "precision_std": None,
                         "precision_ci_low": None, "precision_ci_high": None, "n_runs": 0,
                         "no_curve": no_curve[method]})
            continue
        C = np.vstack(curves)
        mean = means[method] = np.nanmean(C, axis=0)
        # one run (a deterministic method, fitted once): no std, as no band, rather than a std of 0
        std = np.nanstd(C, axis=0, ddof=1) if len(C) > 1 else np.full_like(mean, np.nan)
        ns[method] = len(C)
        left_out = f"{len(problems)} of {len(runs[method])} runs left out: {'; '.join(sorted(set(problems)))}" \
            if problems else ""
        for j, (r, m, s) in enumerate(zip(RECALL_GRID, mean, std)):
            lo, hi = seed_interval(C[:, j].tolist(), FRACTION)
            rows.append({"method": method, "recall": round(float(r), 4), "precision_mean": float(m),
                         "precision_std": float(s), "precision_ci_low": lo, "precision_ci_high": hi,
                         "n_runs": len(C), "no_curve": left_out})
    for method, why in (no_runs or {}).items():
        if method not in runs:
            no_curve[method] = f"not run: {why}"
            rows.append({"method": method, "recall": None, "precision_mean": None, "precision_std": None,
                         "precision_ci_low": None, "precision_ci_high": None, "n_runs": 0,
                         "no_curve": no_curve[method]})
    no_curve = {m: no_curve[m] for m in sorted(no_curve, key=style.index)}
    df = pd.DataFrame(long, columns=["method", "run", "recall", "precision"])
    drawn = [m for m in methods if m in means]
    context = [m for m in drawn if highlight is not None and m not in highlight]
    coloured = [m for m in drawn if m not in context]
    many = len(coloured) > 8
    pw = 4.3 if many else ONE_COLUMN
    # the footnote is as wide as the axes: the panel less its y axis (one column), or the
    # two-column figure less its y axis and the legend on the right
    note_parts = ([f"grey, mean only: {', '.join(context)}"] if len(context) > 1 else []) + \
        ([_no_curve_text(no_curve)] if no_curve else [])
    note = wrap("\n".join(note_parts), chars_per_line(4.0 if many else pw - 0.8, NOTE_PT))
    with figure_style():
        # the footnote's lines (about 0.14 in each at NOTE_PT) come on top of the panel's height, with
        # as much again for the axes: the axes keep most of the height with a note of several lines
        fig, axes = _grid(1, w=TWO_COLUMNS if many else ONE_COLUMN,
                          h=(3.4 if many or context else 2.8) + 0.3 * (note.count("\n") + 1 if note else 0))
        ax = axes[0]
        for method in context:  # beneath the highlighted methods: mean only
            ax.plot(RECALL_GRID, means[method], color=CONTEXT_GREY, linewidth=0.7, zorder=1.5)
        for method in coloured:
            st = style.method(method)
            sns.lineplot(data=df[df["method"] == method], x="recall", y="precision", estimator="mean",
                         errorbar=lambda v: seed_interval(v, FRACTION), err_kws={"alpha": 0.12, "linewidth": 0},
                         ax=ax, legend=False,
                         **{**st.line_kw(), "markevery": (style.index(method) % 10, 10), "markersize": 4,
                            "linewidth": st.linewidth * 0.85})
        bands_below_lines(ax)
        ax.set(xlabel="recall (tail labels, micro-averaged)", ylabel="interpolated precision", xlim=(0, 1),
               ylim=(0, 1.02))
        handles, labels = method_handles(coloured, style, n_labels(coloured, ns), kind="line")
        if context:
            from matplotlib.lines import Line2D

            handles.append(Line2D([], [], color=CONTEXT_GREY, linewidth=0.9))
            labels.append(context[0] if len(context) == 1 else f"{len(context)} other methods (named below)")
        if many:
            legend_right(ax, handles, labels, ncol=2 if len(coloured) > 12 else 1)
        elif handles:
            legend_below(fig, handles, labels, ncol=min(3, len(handles)))
        names = {}
        for p in (p for ps in runs.values() for p in ps):
            parts = Path(p).parts
            if len(parts) >= 5:
                names.setdefault(parts[-5], set()).add(parts[-4])
        # the config's display name (--dataset-name) first: prepare is not given it (a name is not
        # data, so renaming a dataset re-runs no prepare), so the processed file holds the id
        if clean.name not in style.dataset_names:
            ds_name = clean.meta.get("display_name") or style.dataset(clean.name)
            style.dataset_names = {**style.dataset_names, clean.name: ds_name}
        ds_name = style.dataset(clean.name)
        default_title, subtitle, setting = _title_and_subtitle(names, ds_name, style, len(tail), q,
                                                               sorted(set(ns.values())) or [0])
        titles(fig, [ax], [title or default_title], subtitle, panel_width=pw)
        if note:
            footnote(ax, note)
        out.parent.mkdir(parents=True, exist_ok=True)
        for ext in ("pdf", "png"):
            with atomic_path(out.with_suffix(f".{ext}"), suffix=f".{ext}") as tmp:
                fig.savefig(tmp, format=ext, metadata=save_metadata(ext), **save_kw())
        _plt().close(fig)
    atomic_write(out.with_suffix(".csv"), pd.DataFrame(rows).to_csv(index=False))
    write_json(out.with_suffix(".sources.json"), {
        "figure": out.name, "title": title or default_title, "subtitle": subtitle.replace("\u00a0", " "),
        "setting": setting,
        "tail_labels": [clean.label_names[t] for t in tail], "runs": sources,
        "no_curve": [{"method": m, "reason": why} for m, why in no_curve.items()]})


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
    pr.add_argument("--no-runs", action="append", default=[], metavar="METHOD=REASON",
                    help="a method the figure should show that has no runs, with the reason (repeatable): "
                         "named under the legend and in the CSV and sources")
    add_style_args(pr)
    args = ap.parse_args(argv)
    if args.fig == "pr":
        runs: dict[str, list[Path]] = {}
        for p in args.predictions:
            runs.setdefault(p.parent.parent.name, []).append(p)
        no_runs = {}
        for item in args.no_runs:
            method, sep, why = item.partition("=")
            if not sep or not method or not why:
                ap.error(f"--no-runs '{item}': expected METHOD=REASON")
            no_runs[method] = why
        pr_figure(runs, ProcessedData.load(args.clean), args.q, args.tie_seed, args.out, args.title,
                  style=style_from_args(args), highlight=args.highlight, no_runs=no_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
