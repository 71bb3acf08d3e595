"""Which rows and columns each table has, and the cells that fill them.

Two families of tables, each in both threshold modes:

* the paper's layouts, with the paper's columns (datasets, metrics, severities) and rows:
  Table 1 ``table1_standard`` (tab:main_standard), Table 2 ``table2_rare`` (tab:main_rare),
  Table 3 ``table3_xmc`` (tab:xmc: P@1/3/5 on Eurlex-4K, Wiki10-31K, AmazonCat-13K);
* the same layouts with the *configured* datasets as columns (``table1_configured``,
  ``table2_configured``, ``table3_configured``), so that datasets the paper does not use
  (MULAN sets, ``data.custom``) appear in a table too. Their columns:

  - Table 1 layout: a dataset of the paper's Table 1 keeps the paper's two metrics for it;
    any other dataset shows **mAP and Rare-F1** (:data:`OTHER_T1_METRICS`): mAP is
    threshold-free, so it is comparable across rows whatever their decision rule, and
    Rare-F1 is the paper's tail metric in every column group of its Tables 1-2;
  - Table 2 layout: Rare-F1 at each configured R-variant severity of the dataset
    (``r_variants.severities``); a dataset without R-variants gets one ``n.r.`` column;
  - Table 3 layout: P@1, P@3, P@5 of every configured dataset.

Rows: every configured method, the paper's rows of that table first in the paper's order,
then the rows the paper's table does not have (reference rows such as BR-LogReg or Focal,
and peers such as XR-Linear, napkinXC-PLT, LibMultiLabel-1vsRest). The latter form a second
block (``table["blocks"]``) that every writer sets apart under a rule, labelled
:data:`NOT_IN_PAPER`, with a footnote.

A cell is mean, sample std and n over the runs of (mode, dataset, setting, method). A
column's best mean is marked ``best`` and the second ``second`` only where the table can tell
them apart (:func:`rank_marks`): a value shared by two rows *at the displayed precision* is
no one's, and a column that cannot separate methods (:class:`ColumnCheck`: its ceiling over
the panel of runs is below ``tables.min_ceiling`` points, or its tail has fewer than
``tables.min_tail_labels`` labels) gets no marks at all. The marks are what a reader takes as
the finding of a column; a mark on a tie, or on a column no model could score in, states a
finding the numbers do not hold.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from cdgtmll.tables.collect import METRIC_LABEL, METRICS
from cdgtmll.variants.naming import CLEAN, parse_setting, setting_id

NOT_RUN = "n.r."
#: the mark and label of the block of rows the paper's table does not have
NOT_IN_PAPER_MARK = "‡"
NOT_IN_PAPER = f"{NOT_IN_PAPER_MARK} not in the paper"

#: Table 1 of the paper: (dataset, column group title, metrics)
TABLE1 = (
    ("voc2007", "Pascal VOC", ("mAP", "rare_f1")),
    ("coco2014", "COCO", ("mAP", "rare_f1")),
    ("yeast", "Yeast", ("micro_f1", "rare_f1")),
    ("mediamill", "Mediamill", ("macro_f1", "rare_f1")),
)
#: Table 2 of the paper: (dataset, column group title, severities); metric is Rare-F1
TABLE2 = (
    ("voc2007", "Pascal VOC-R", (0.30, 0.50)),
    ("coco2014", "COCO-R", (0.30, 0.40)),
    ("yeast", "Yeast-R", (0.40, 0.50)),
    ("mediamill", "Mediamill-R", (0.40, 0.50)),
)
#: Table 3 of the paper: (dataset, column group title); metrics P@1, P@3, P@5
TABLE3 = (
    ("eurlex-4k", "Eurlex-4K"),
    ("wiki10-31k", "Wiki10-31K"),
    ("amazoncat-13k", "AmazonCat-13K"),
)
T3_METRICS = ("p@1", "p@3", "p@5")
PAPER_ROWS_T1 = ("BCE", "PE", "SRB", "DBL", "LSFA", "MLC-NC", "ASL", "BalanceMix", "MLBOTE", "CC",
                 "ML-GCN", "C-Tran", "ML-Decoder", "LCIFS", "CD-GTMLL")
PAPER_ROWS_T2 = ("BCE", "PE", "SRB", "DBL", "LSFA", "MLC-NC", "XR-Transformer", "MatchXML", "ASL",
                 "BalanceMix", "MLBOTE", "CD-GTMLL")
#: Table 3's rows; the paper prints ETU as "EUT"
PAPER_ROWS_T3 = ("BCE", "PE", "SRB", "XR-Transformer", "MatchXML", "ETU", "CD-GTMLL")
#: how the paper's Table 3 spells a row, where it differs from the method's name
PAPER_SPELLING_T3 = {"ETU": "EUT"}
#: metrics of a Table-1-layout column group for a dataset the paper's Table 1 does not have
OTHER_T1_METRICS = ("mAP", "rare_f1")
#: column group titles the paper uses for its datasets (Tables 1 and 3)
PAPER_TITLES = {**{ds: title for ds, title, _ in TABLE1}, **dict(TABLE3)}

#: (stem, paper table number, caption); the configured-dataset variants follow each
LAYOUTS = (
    ("table1_standard", 1, "Standard-frequency results (%). Rare-F1 on the bottom 20% labels by training prevalence."),
    ("table2_rare", 2, "Rare-F1 (%) on down-sampled R-variants; @x% = fraction of tail positives removed."),
    ("table3_xmc", 3, "Precision@k (%) on the three XMC benchmarks of the paper's Table 3."),
)
CONFIGURED_CAPTIONS = {
    1: "Table 1's layout on the configured datasets (%): the paper's two metrics for a dataset of its Table 1, "
       "mAP and Rare-F1 for any other. Rare-F1 on the bottom 20% labels by training prevalence.",
    2: "Table 2's layout on the configured datasets: Rare-F1 (%) on the configured R-variants; "
       "@x% = fraction of tail positives removed.",
    3: "Table 3's layout on the configured datasets: Precision@k (%).",
}
PAPER_ROWS = {1: PAPER_ROWS_T1, 2: PAPER_ROWS_T2, 3: PAPER_ROWS_T3}
#: decimals of a cell: as the paper prints the table (Table 3 has two)
DIGITS = {1: 1, 2: 1, 3: 2}



def table_stems() -> list[str]:
    """Every table ``python -m cdgtmll.tables.build`` writes, without mode suffix (``_adaptive``) and extension."""
    return [s for stem, number, _ in LAYOUTS for s in (stem, f"table{number}_configured")]


Column = tuple  # (dataset, group title, setting or None, metric, subheader)


def severity_label(setting: str) -> str:
    """``'R@0.50'`` -> ``'@50%'`` (the paper's Table 2 header for the setting)."""
    return f"@{round(100 * parse_setting(setting)[1])}%"


def table1_columns() -> list[Column]:
    return [(ds, title, CLEAN, m, METRIC_LABEL[m]) for ds, title, ms in TABLE1 for m in ms]


def table2_columns() -> list[Column]:
    return [(ds, title, s, "rare_f1", severity_label(s)) for ds, title, sevs in TABLE2
            for s in (setting_id("R", v) for v in sevs)]


def table3_columns() -> list[Column]:
    return [(ds, title, CLEAN, m, METRIC_LABEL[m]) for ds, title in TABLE3 for m in T3_METRICS]


def paper_columns(number: int) -> list[Column]:
    return {1: table1_columns, 2: table2_columns, 3: table3_columns}[number]()


def configured_columns(number: int, datasets: list[tuple[str, str]],
                       severities: dict[str, list[float]]) -> list[Column]:
    """Columns of Table ``number``'s layout for the configured ``datasets`` ((name, title),
    in config order); ``severities``: the configured R-variant severities per dataset."""
    t1 = {ds: ms for ds, _, ms in TABLE1}
    cols: list[Column] = []
    for ds, title in datasets:
        if number == 1:
            cols += [(ds, title, CLEAN, m, METRIC_LABEL[m]) for m in t1.get(ds, OTHER_T1_METRICS)]
        elif number == 2:
            sevs = severities.get(ds) or []
            cols += [(ds, f"{title}-R", s, "rare_f1", severity_label(s)) for s in (setting_id("R", v) for v in sevs)] or \
                [(ds, f"{title}-R", None, "rare_f1", "no R-variant")]
        else:
            cols += [(ds, title, CLEAN, m, METRIC_LABEL[m]) for m in T3_METRICS]
    return cols


def rank_marks(values: list[float | None], digits: int = 1) -> list[str]:
    """'best' / 'second' / '' per entry by mean (higher is better), compared **at the
    displayed precision** (``100 * v`` with ``digits`` decimals, as :func:`cdgtmll.tables.render.fmt`
    prints it). A mark goes only to a value no other row shares:

    * the top displayed value is ``best`` when one row has it; shared by several rows, none
      is bold, and none is underlined either (the rows tied at the top hold first *and*
      second place, so the next value is third);
    * the next displayed value is ``second`` when the top is one row's and one row has it;
    * a column where every row shows the same value gets no marks, and so does a column with
      one value (nothing to be best of); ``-0.0`` and ``0.0`` are the same value.

    Why the displayed precision: it is the one rule a reader can check on the page (two cells
    that read the same cannot be told apart by whoever reads them, so a mark between them
    would be an unprintable digit deciding it), it needs no choice of test or seeds (3 seeds
    separate little; the claims page says what the intervals separate), and it never
    crowns ``0.0 ± 0.0`` rows for being equal. Differences smaller than the std still get a
    mark: the std is printed beside it."""
    shown = [None if v is None or math.isnan(v) else _printed(v, digits) for v in values]
    distinct = sorted({t for t in shown if t is not None}, key=float, reverse=True)
    count = {t: shown.count(t) for t in distinct}
    best = distinct[0] if len(distinct) > 1 and count[distinct[0]] == 1 else None
    second = distinct[1] if best is not None and len(distinct) > 1 and count[distinct[1]] == 1 else None
    return ["best" if t is not None and t == best else "second" if t is not None and t == second else ""
            for t in shown]


def _printed(v: float, digits: int) -> str:
    """``v`` in percent as a cell prints it, one spelling per printed value (``-0.0`` is ``0.0``)."""
    t = f"{100 * v:.{digits}f}"
    return t.lstrip("-") if float(t) == 0 else t


@dataclass(frozen=True)
class TailLabel:
    """One label of a dataset's tail (App. E.3/E.4) with its positive counts: ``train`` in
    the clean training split (what the tail is chosen by), ``test`` in the test split (None
    when neither the runs nor a readable processed file give it)."""

    name: str
    train: int
    test: int | None = None


@dataclass(frozen=True)
class ColumnCheck:
    """Whether a column (one dataset, setting and metric) can separate methods.

    ``ceiling``: the best test-oracle value (:mod:`cdgtmll.metrics.oracle`, fraction) over the
    *panel*, every run of the dataset and setting the tables were given (``panel``: their
    methods; ``runs``: how many), None where no run records one. ``tail``: the tail labels
    with their counts (Rare-F1 columns; None for other metrics or where not recorded).
    ``in_metric``: tail labels Rare-F1 averages (those without test positives are left out
    under the rule ``exclude``). ``reasons``: why the column cannot separate methods, empty
    when it can."""

    dataset: str
    setting: str
    metric: str
    ceiling: float | None
    panel: tuple[str, ...]
    runs: int
    tail: tuple[TailLabel, ...] | None = None
    in_metric: int | None = None
    reasons: tuple[str, ...] = ()


#: defaults of ``tables.min_ceiling`` (points) and ``tables.min_tail_labels``
MIN_CEILING = 10.0
MIN_TAIL_LABELS = 3


def column_checks(runs: pd.DataFrame, tails: dict[str, tuple[TailLabel, ...]] | None = None,
                  min_ceiling: float = MIN_CEILING, min_tail_labels: int = MIN_TAIL_LABELS
                  ) -> dict[tuple[str, str, str], ColumnCheck]:
    """A :class:`ColumnCheck` per (dataset, setting, metric) of the long table ``runs``
    (:func:`cdgtmll.tables.collect.collect`: its ``oracle_<metric>`` columns, the same in both
    threshold modes), with ``tails`` per dataset. A column is flagged when its ceiling is
    below ``min_ceiling`` points (no thresholding of any run's scores reaches more, so the
    rows can only differ inside that band) or, for Rare-F1, when fewer than
    ``min_tail_labels`` tail labels enter the mean (a mean of one or two labels is those
    labels' F1, not a tail metric)."""
    out: dict[tuple[str, str, str], ColumnCheck] = {}
    if runs.empty:
        return out
    tails = tails or {}
    for (ds, setting), g in runs.groupby(["dataset", "setting"], sort=False):
        for metric in METRICS:
            col = f"oracle_{metric}"
            vals = pd.to_numeric(g[col], errors="coerce") if col in g else pd.Series(dtype=float)
            have = g[vals.notna()] if len(vals) else g.iloc[:0]
            ceiling = float(vals.max()) if vals.notna().any() else None
            panel = tuple(dict.fromkeys(have["method"]))
            n_runs = int(have["metrics_path"].nunique()) if "metrics_path" in have else len(have)
            reasons = []
            if ceiling is not None and 100 * ceiling < min_ceiling:
                reasons.append(f"its ceiling over the panel is {100 * ceiling:.1f} < {min_ceiling:g} points "
                               "(tables.min_ceiling)")
            tail = in_metric = None
            if metric == "rare_f1":
                tail = tails.get(ds)
                left = pd.to_numeric(g.get("rare_f1_left_out", pd.Series(dtype=float)), errors="coerce").max()
                of = pd.to_numeric(g.get("rare_f1_of", pd.Series(dtype=float)), errors="coerce").max()
                size = len(tail) if tail is not None else (None if pd.isna(of) else int(of))
                if size is not None:
                    in_metric = size - (0 if pd.isna(left) else int(left))
                    if in_metric < min_tail_labels:
                        reasons.append(f"{in_metric} tail label{'' if in_metric == 1 else 's'} enter"
                                       f"{'s' if in_metric == 1 else ''} Rare-F1, fewer than {min_tail_labels} "
                                       "(tables.min_tail_labels)")
            out[(ds, setting, metric)] = ColumnCheck(ds, setting, metric, ceiling, panel, n_runs, tail, in_metric,
                                                     tuple(reasons))
    return out


def build_table(summary: pd.DataFrame, mode: str, columns: list[Column],
                paper_rows: tuple[str, ...], methods_run: list[str],
                not_run: dict[tuple[str, str], str] | None = None, *, number: int | None = None,
                digits: int = 1, checks: dict[tuple[str, str, str], ColumnCheck] | None = None) -> dict:
    """columns: (dataset, group title, setting, metric, subheader). Rows: methods run, the paper's
    rows first in the paper's order; ``blocks`` = [(None, paper rows), (NOT_IN_PAPER, others)]
    (empty blocks left out). ``number``: the paper table whose rows ``paper_rows`` are.
    ``checks`` (:func:`column_checks`): a column flagged there gets no best/second mark; the
    table keeps each column's check under ``checks`` (column index -> check) for the footnotes."""
    in_paper = [m for m in paper_rows if m in methods_run]
    others = [m for m in methods_run if m not in paper_rows]
    rows = in_paper + others
    s = summary[summary["mode"] == mode] if not summary.empty else summary
    cells: dict[tuple[str, int], dict] = {}
    for j, (ds, _, setting, metric, _sub) in enumerate(columns):
        for r in rows:
            if (ds, r) in (not_run or {}):
                cells[(r, j)] = {"not_run": not_run[(ds, r)]}
                continue
            if setting is None or s.empty:
                continue
            hit = s[(s["dataset"] == ds) & (s["setting"] == setting) & (s["method"] == r)]
            if len(hit):
                h = hit.iloc[0]
                cells[(r, j)] = {"mean": float(h[f"{metric}_mean"]), "std": float(h[f"{metric}_std"]),
                                 "n": int(h["n"]), "sources": list(h["sources"])}
    col_checks = {j: checks[(ds, setting, metric)] for j, (ds, _, setting, metric, _s) in enumerate(columns)
                  if checks and (ds, setting, metric) in checks}
    for j in range(len(columns)):
        marks = rank_marks([cells.get((r, j), {}).get("mean") for r in rows], digits)
        if j in col_checks and col_checks[j].reasons:
            marks = [""] * len(rows)
        for r, mk in zip(rows, marks):
            if (r, j) in cells and "mean" in cells[(r, j)]:
                cells[(r, j)]["mark"] = mk
    blocks = [(label, b) for label, b in ((None, in_paper), (NOT_IN_PAPER, others)) if b]
    return {"rows": rows, "columns": columns, "cells": cells, "blocks": blocks, "number": number,
            "digits": digits, "mode": mode, "checks": col_checks}


def rows_with_cells(table: dict, metrics: tuple[str, ...] | None = None) -> list[str]:
    """Rows with at least one numeric cell (in a column of ``metrics``, when given)."""
    cols = table["columns"]
    return [r for r in table["rows"]
            if any("mean" in c for (rr, j), c in table["cells"].items()
                   if rr == r and (metrics is None or cols[j][3] in metrics))]


def header(column: Column) -> str:
    """A column's name in the CSV, the ``.sources.json`` keys and ``cdgtmll audit --cell``."""
    return f"{column[1]} {column[4]}"


def header_metric(text: str) -> str:
    """The metric of a column from its :func:`header`: its subheader (the last word) is a
    metric label (``Yeast Rare-F1``, ``Eurlex-4K P@3``), or a severity (``Yeast-R @50%``,
    Table 2's layout), whose metric is Rare-F1. KeyError for any other header."""
    sub = text.rsplit(" ", 1)[-1]
    by_label = {label: m for m, label in METRIC_LABEL.items()}
    if sub in by_label:
        return by_label[sub]
    if re.fullmatch(r"@\d+%", sub):
        return "rare_f1"
    raise KeyError(f"column '{text}': no metric label ({', '.join(by_label)}) or severity (@x%) at its end")


def table_digits(stem: str) -> int:
    """Decimals of the cells of the table written as ``stem`` (``table3_xmc_adaptive`` -> 2)."""
    m = re.match(r"table(\d)", stem)
    return DIGITS.get(int(m.group(1)), 1) if m else 1
