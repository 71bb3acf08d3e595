"""Footnotes of the tables, from what the runs record (see :mod:`cdgtmll.tables.build`):

* not-run cells and their reasons (``†``), datasets or settings not run (``n.r.``);
* rows the paper's table does not have (the ``‡`` block), how the paper spells a row;
* for a table with configured datasets as columns, which metrics a dataset outside the
  paper's table shows, and datasets without a configured R-variant;
* how an image backbone was used, the threshold mode, runs per cell (n);
* the decision rule of rows scored by their own rule (global mode); labels left out of
  Macro-/Rare-F1 for having no test positive; labels without training positives;
  metrics equal to another row's by construction; each method's deviation from its paper.
"""

from __future__ import annotations

import pandas as pd

from cdgtmll.tables.collect import F1_COLUMNS, METRIC_LABEL, RANKING_METRICS, _s, equal_by_construction
from cdgtmll.tables.layout import (
    NOT_IN_PAPER_MARK,
    NOT_RUN,
    OTHER_T1_METRICS,
    PAPER_SPELLING_T3,
    TABLE1,
    rows_with_cells,
)


def footnotes(table: dict, summary: pd.DataFrame, mode: str, threshold: float) -> list[str]:
    """Every footnote of a table built by :func:`cdgtmll.tables.layout.build_table`."""
    notes = []
    reasons: dict[str, list[str]] = {}
    for (row, _), cell in table["cells"].items():
        if "not_run" in cell and row not in reasons.setdefault(cell["not_run"], []):
            reasons[cell["not_run"]].append(row)
    for reason, rows in reasons.items():
        notes.append(f"† {', '.join(rows)}: not run: {reason}")
    notes += _block_notes(table)
    run_ds = set(summary["dataset"]) if not summary.empty else set()
    missing = list(dict.fromkeys(title for ds, title, setting, *_ in table["columns"]
                                 if ds not in run_ds and setting is not None))
    if missing:
        notes.append(f"{NOT_RUN} = not run in this configuration: {', '.join(sorted(missing))}. "
                     "No value is copied from the paper.")
    run_settings = set(zip(summary["dataset"], summary["setting"])) if not summary.empty else set()
    unset = [f"{title} {sub}" for ds, title, setting, _, sub in table["columns"]
             if ds in run_ds and setting is not None and (ds, setting) not in run_settings]
    if unset:
        notes.append(f"{NOT_RUN} in {', '.join(dict.fromkeys(unset))}: this setting was not run in this "
                     "configuration (the dataset's other columns were).")
    notes += _column_notes(table)
    if "backbone" in summary:
        for ds, title in dict.fromkeys((ds, title) for ds, title, *_ in table["columns"]):
            uses = summary.loc[(summary["dataset"] == ds) & (summary["mode"] == mode), "backbone"]
            uses = sorted({u for v in uses for u in str(v).split("; ") if u})
            if uses:
                notes.append(f"{title}: {' and '.join(uses)}.")
    metrics_here = {c[3] for c in table["columns"]}
    if metrics_here and metrics_here <= set(RANKING_METRICS):
        how = ("threshold-free: the same in both threshold modes (global and adaptive) and for rows "
               "with their own decision rule")
    else:
        how = "F1 metrics at " + (f"a global threshold of {threshold}" if mode == "global" else
                                  "label-adaptive thresholds tuned per label on the validation split")
    notes.append(f"Values in %, mean ± sample std over runs (training seeds; R-variants also over sampling "
                 f"seeds); {how}. Best mean bold, second underlined.{_runs_per_cell(table)}")
    rows_run = rows_with_cells(table)
    if mode == "global" and "own_thresholds" in summary and not metrics_here <= set(RANKING_METRICS):
        own = summary[summary["own_thresholds"] & (summary["mode"] == mode) & summary["method"].isin(rows_run)]
        notes += _own_rule_notes(own)
    notes += _exclusion_notes(table, summary, mode)
    notes += _construction_notes(table, summary, mode)
    notes += _untrained_notes(table, summary, mode)
    notes += _deviation_notes(table, summary, mode)
    return notes


def _block_notes(table: dict) -> list[str]:
    """The rows of the ``‡`` block (not rows of the paper's table) and the paper's spelling of a row."""
    number = table.get("number")
    notes = []
    for label, rows in table.get("blocks", []):
        if label is not None:
            which = f"the paper's Table {number}" if number else "the paper"
            notes.append(f"{NOT_IN_PAPER_MARK} Rows under the rule are not rows of {which}: {', '.join(rows)}. "
                         "They are run by this pipeline as references or further peers; the paper reports no "
                         "number for them in this table.")
    if number == 3:
        for row, printed in PAPER_SPELLING_T3.items():
            if row in table["rows"]:
                notes.append(f"{row} is printed \"{printed}\" in the paper's Table 3.")
    return notes


def _column_notes(table: dict) -> list[str]:
    """For the tables with configured datasets as columns: the metrics of datasets outside the
    paper's Table 1, and datasets without a configured R-variant."""
    if not table.get("configured"):
        return []
    notes = []
    t1 = {ds for ds, *_ in TABLE1}
    if table.get("number") == 1:
        others = list(dict.fromkeys(title for ds, title, *_ in table["columns"] if ds not in t1))
        if others:
            notes.append(f"{', '.join(others)}: not in the paper's Table 1, shown with "
                         f"{' and '.join(METRIC_LABEL[m] for m in OTHER_T1_METRICS)} (mAP is threshold-free, "
                         "so comparable across rows whatever their decision rule; Rare-F1 is the paper's tail "
                         "metric). Every metric of every dataset is in metrics_full.")
    none = list(dict.fromkeys(title for _, title, setting, *_ in table["columns"] if setting is None))
    if none:
        notes.append(f"{NOT_RUN} in {', '.join(none)}: no R-variant configured for the dataset "
                     "(experiments.r_variants, r_variants.severities).")
    return notes


def _runs_per_cell(table: dict) -> str:
    ns = sorted({c["n"] for c in table["cells"].values() if "n" in c})
    if not ns:
        return ""
    return f" Runs per cell (n): {ns[0]}." if len(ns) == 1 else f" Runs per cell (n): {ns[0]} to {ns[-1]}."


def _own_rule_notes(own: pd.DataFrame) -> list[str]:
    """Rows scored by their own decision rule, grouped by the rule behind each F1 column."""
    if own.empty:
        return []
    from cdgtmll.metrics import thresholds

    plugin = " | ".join((thresholds.RULE_PLUGIN_MICRO, thresholds.RULE_PLUGIN_MACRO, thresholds.RULE_PLUGIN_MACRO))
    by_rule: dict[str, list[str]] = {}
    for method, rules in zip(own["method"], own.get("f1_rules", pd.Series([""] * len(own), index=own.index))):
        by_rule.setdefault(_s(rules), [])
        if method not in by_rule[_s(rules)]:
            by_rule[_s(rules)].append(method)
    notes = []
    for rules, methods in by_rule.items():
        who = ", ".join(methods)
        if rules == plugin:
            notes.append(f"{who}: F1 columns at the method's own plug-in rule for each metric (Koyejo et al., 2015): "
                         "Micro-F1 at one threshold shared by all labels, tuned on the validation split for "
                         "micro-F1; Macro-F1 and Rare-F1 at per-label thresholds tuned for per-label F1.")
        else:
            cols = rules.split(" | ") if rules and "||" not in rules else []
            detail = "" if len(set(cols)) <= 1 else "; " + ", ".join(
                f"{METRIC_LABEL[m]}: {r}" for m, r in zip(F1_COLUMNS, cols))
            notes.append(f"{who}: F1 metrics at the method's own thresholds (the decision rule is part of the "
                         f"method{detail}).")
    return notes


def _exclusion_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """How many labels without test positives Macro-/Rare-F1 left out (or counted as 0), per dataset."""
    want = {(ds, title): [m for d, _, _, m, _ in table["columns"] if d == ds and m in ("macro_f1", "rare_f1")]
            for ds, title, *_ in table["columns"]}
    if summary.empty or "f1_exclusion" not in summary:
        return []
    parts: dict[str, list[str]] = {}
    for (ds, title), mets in want.items():
        if not mets:
            continue
        recs = summary.loc[(summary["dataset"] == ds) & (summary["mode"] == mode), "f1_exclusion"]
        recs = sorted({r for v in recs for r in str(v).split(" || ") if r})
        for rec in recs:
            rule, mleft, mof, rleft, rof, none_all, none_tail = (rec.split(" | ") + [""] * 7)[:7]
            if not rule:
                parts.setdefault("", []).append(title)
                continue
            bits = []
            for m in dict.fromkeys(mets):
                left, of, none, what = ((mleft, mof, none_all, "labels") if m == "macro_f1"
                                        else (rleft, rof, none_tail, "tail labels"))
                bits.append(f"{METRIC_LABEL[m]} {left if rule == 'exclude' else none} of {of} {what}")
            parts.setdefault(rule, []).append(f"{title}: {', '.join(bits)}")
    notes = []
    if parts.get("exclude"):
        notes.append("Macro-F1 and Rare-F1 leave out labels with no positive in the test split, as mAP does "
                     "(evaluation.f1_no_positive_labels: exclude); left out: " + "; ".join(parts["exclude"]) + ".")
    if parts.get("zero"):
        notes.append("Macro-F1 and Rare-F1 count labels with no positive in the test split as F1 = 0 "
                     "(evaluation.f1_no_positive_labels: zero); such labels: " + "; ".join(parts["zero"]) + ".")
    if parts.get(""):
        notes.append(f"{', '.join(dict.fromkeys(parts['']))}: the rule for labels without test positives is not "
                     "recorded in these metrics files (evaluated before it existed: they count as F1 = 0).")
    return notes


def _deviation_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """How the rows with cells in this table differ from their papers (each method's
    ``table_note``, with the hyper-parameters its runs used; docs/methods.md has all)."""
    if summary.empty or "deviation" not in summary:
        return []
    rows = set(rows_with_cells(table))
    hit = summary[(summary["mode"] == mode) & summary["method"].isin(rows) & (summary["deviation"] != "")]
    return sorted(set(hit["deviation"]))


def _untrained_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """Datasets/settings whose runs had labels without a positive in the training split
    (recorded by each run; evaluation rule ``counted``)."""
    if summary.empty or "untrained_labels" not in summary:
        return []
    shown = {ds for ds, *_ in table["columns"]}
    hit = summary[(summary["mode"] == mode) & summary["dataset"].isin(shown) & (summary["untrained_labels"] != "")]
    if hit.empty:
        return []
    parts = sorted({f"{r.dataset} {r.setting}: {r.untrained_labels}" for r in hit.itertuples()})
    return ["Labels with no positive in the training split of the runs (no method can learn them from the "
            "training data; they are counted in every metric, evaluate.UNTRAINED_RULE): " + "; ".join(parts) + "."]


def _construction_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """Rows whose threshold-free metrics in this table equal another row's by construction."""
    if summary.empty or "equal_by_construction" not in summary:
        return []
    metrics_here = {m for *_, m, _ in table["columns"]}
    datasets = {ds for ds, *_ in table["columns"]}
    notes = []
    for r in rows_with_cells(table, tuple(set(RANKING_METRICS) & metrics_here)):
        vals = summary.loc[(summary["method"] == r) & (summary["mode"] == mode)
                           & summary["dataset"].isin(datasets), "equal_by_construction"]
        for v in sorted({x for s_ in vals for x in str(s_).split("; ") if x}):
            ref, _, mets = v.partition(":")
            shown = [METRIC_LABEL[m] for m in mets.split(",") if m in metrics_here]
            if shown:
                notes.append(f"{r}: {' and '.join(shown)} equal{'s' if len(shown) == 1 else ''} {ref}'s by "
                             f"construction ({_why(v)}), not a separate result.")
    return notes


def _full_notes(summary: pd.DataFrame) -> list[str]:
    """Footnotes of ``metrics_full.md``: labels left out of Macro-/Rare-F1 per dataset, and
    metrics equal to another row's by construction."""
    notes = []
    if summary.empty:
        return notes
    if "f1_exclusion" in summary:
        for ds in dict.fromkeys(summary["dataset"]):
            recs = sorted({r for v in summary.loc[summary["dataset"] == ds, "f1_exclusion"]
                           for r in str(v).split(" || ") if r})
            for rec in recs:
                rule, mleft, mof, rleft, rof, none_all, none_tail = (rec.split(" | ") + [""] * 7)[:7]
                if not rule:
                    notes.append(f"{ds}: rule for labels without test positives not recorded (counted as F1 = 0).")
                elif rule == "exclude":
                    notes.append(f"{ds}: labels with no test positive left out (as in mAP): Macro-F1 {mleft} of {mof} "
                                 f"labels, Rare-F1 {rleft} of {rof} tail labels.")
                else:
                    notes.append(f"{ds}: labels with no test positive counted as F1 = 0: {none_all} of {mof} labels, "
                                 f"{none_tail} of {rof} tail labels.")
    if "equal_by_construction" in summary:
        for method in dict.fromkeys(summary["method"]):
            vals = summary.loc[summary["method"] == method, "equal_by_construction"]
            for v in sorted({x for s_ in vals for x in str(s_).split("; ") if x}):
                ref, _, mets = v.partition(":")
                notes.append(f"{method}: {', '.join(METRIC_LABEL[m] for m in mets.split(','))} equal {ref}'s by "
                             f"construction ({_why(v)}).")
    if "f1_rules" in summary:
        own = summary[summary["own_thresholds"] & (summary["mode"] == "global")] if "own_thresholds" in summary \
            else summary.iloc[:0]
        notes += [f"Mode global: {n}" for n in _own_rule_notes(own)]
    return notes


def _why(value: str) -> str:
    """The reason of an ``equal_by_construction`` value ``'<reference>:<metrics>'``."""
    for registered, hp in (("PE", {}), ("ETU", {"utility": "precision"})):
        eq = equal_by_construction(registered, hp)
        if eq and f"{eq[0]}:{','.join(eq[1])}" == value:
            return eq[2]
    return "same scores"

