"""Footnotes of the tables, from what the runs record (see :mod:`cdgtmll.tables.build`):

* not-run cells and their reasons (``†``); datasets, settings, cells and rows not run
  (``n.r.``), each with its reason (:class:`ProfileContext`): not in this profile's
  ``experiments.datasets`` / ``methods`` / ``r_variants.severities`` (naming the shipped
  profiles ``config/*.yaml`` that run it, and whether the dataset's data can be had on this
  machine: :func:`data_availability`), or configured but no run was given;
* rows the paper's table does not have (the ``‡`` block), how the paper spells a row;
* for a table with configured datasets as columns, which metrics a dataset outside the
  paper's table shows, and datasets without a configured R-variant;
* how an image backbone was used, the threshold mode, runs per cell (n);
* the decision rule of rows scored by their own rule (global mode); labels left out of
  Macro-/Rare-F1 for having no test positive; labels without training positives;
  metrics equal to another row's by construction; each method's deviation from its paper;
  rows of a deterministic method, fitted once (n = 1: :func:`deterministic_notes`);
* which epoch's weights the neural rows predicted with (``select_epoch``, recorded by each run;
  :func:`_epoch_notes`); training numerics settings other than the default (AdamW
  implementation, TF32, cuDNN autotuner: :func:`_numerics_notes`);
* what prepare warned about a dataset (labels constant in the training split, imputed
  features): :func:`cdgtmll.data.processed.dataset_warnings` of the processed file the runs
  were evaluated on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from cdgtmll.tables.collect import F1_COLUMNS, METRIC_LABEL, RANKING_METRICS, _s, equal_by_construction
from cdgtmll.tables.layout import (
    NOT_IN_PAPER_MARK,
    NOT_RUN,
    OTHER_T1_METRICS,
    PAPER_ROWS,
    PAPER_SPELLING_T3,
    TABLE1,
    TailLabel,
    rows_with_cells,
)
from cdgtmll.variants.naming import parse_setting


def footnotes(table: dict, summary: pd.DataFrame, mode: str, threshold: float,
              context: ProfileContext | None = None) -> list[str]:
    """Every footnote of a table built by :func:`cdgtmll.tables.layout.build_table`;
    ``context``: the profile the tables are for, to say why something is ``n.r.``."""
    ctx = context or ProfileContext()
    notes = []
    reasons: dict[str, list[str]] = {}
    for (row, _), cell in table["cells"].items():
        if "not_run" in cell and row not in reasons.setdefault(cell["not_run"], []):
            reasons[cell["not_run"]].append(row)
    for reason, rows in reasons.items():
        notes.append(f"† {', '.join(rows)}: not run: {reason}")
    notes += _block_notes(table)
    notes += _not_run_notes(table, summary, ctx)
    notes += _column_notes(table, ctx)
    notes += _cell_notes(table, summary, ctx)
    notes += _row_notes(table, ctx)
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
                 f"seeds); {how}. Best mean bold, second underlined, only where no other row shows the same "
                 f"value (ties at the printed precision are no one's best or second; a column that cannot "
                 f"separate methods has no marks).{_runs_per_cell(table)}")
    notes += _ceiling_notes(table)
    rows_run = rows_with_cells(table)
    if mode == "global" and "own_thresholds" in summary and not metrics_here <= set(RANKING_METRICS):
        own = summary[summary["own_thresholds"] & (summary["mode"] == mode) & summary["method"].isin(rows_run)]
        notes += _own_rule_notes(own)
    notes += _exclusion_notes(table, summary, mode)
    notes += _construction_notes(table, summary, mode)
    notes += _untrained_notes(table, summary, mode)
    notes += _epoch_notes(table, summary, mode)
    notes += _base_run_notes(table, summary, mode)
    notes += _dataset_notes(table, summary)
    notes += _deviation_notes(table, summary, mode)
    notes += deterministic_notes(table, summary, mode)
    notes += _numerics_notes(table, summary, mode)
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


def _column_notes(table: dict, ctx: ProfileContext | None = None) -> list[str]:
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
    ctx = ctx or ProfileContext()
    none = list(dict.fromkeys((ds, title) for ds, title, setting, *_ in table["columns"] if setting is None))
    if none:
        where: dict[str, list[str]] = {}
        for ds, title in none:
            where.setdefault(_profiles_with(ctx, lambda p, ds=ds: bool(p.severities.get(ds))), []).append(title)
        notes.append(f"{NOT_RUN} in {', '.join(t for _, t in none)}: no R-variant configured for the dataset "
                     f"in {ctx.this} (experiments.r_variants, r_variants.severities); R-variants "
                     + "; ".join(f"of {', '.join(ts)} configured in {w}" for w, ts in where.items()) + ".")
    return notes


def _runs_per_cell(table: dict) -> str:
    """The runs per cell (n); where rows differ (config ``power`` trains more seeds for some),
    which rows have how many: ``10 for BCE, CD-GTMLL; 3 for every other row``."""
    per_row: dict[str, set[int]] = {}
    for (row, _), c in table["cells"].items():
        if "n" in c:
            per_row.setdefault(row, set()).add(int(c["n"]))
    ns = sorted({n for v in per_row.values() for n in v})
    if not ns:
        return ""
    if len(ns) == 1:
        return f" Runs per cell (n): {ns[0]}."

    def text(v: set[int]) -> str:
        return f"{min(v)}" if len(v) == 1 else f"{min(v)} to {max(v)}"

    groups: dict[str, list[str]] = {}
    for row in [*(r for r in table.get("rows", []) if r in per_row), *(r for r in per_row if r not in table.get("rows", []))]:
        groups.setdefault(text(per_row[row]), []).append(row)
    if len(groups) == 1:
        return f" Runs per cell (n): {ns[0]} to {ns[-1]}."
    common = max(groups, key=lambda t: len(groups[t]))
    parts = [f"{t} for {', '.join(rows)}" for t, rows in groups.items() if t != common]
    return f" Runs per cell (n): {'; '.join(parts)}; {common} for every other row."


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


def deterministic_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """The rows with cells in this table whose runs are a deterministic method's, fitted once
    (each run's spec ``deterministic``: :func:`cdgtmll.tables.collect.run_deterministic`): their
    cells are one run, printed without a std. Where the table also averages R-variant draws, a
    cell of such a row is one run per draw."""
    if summary.empty or "deterministic" not in summary:
        return []
    rows = rows_with_cells(table)
    hit = summary[(summary["mode"] == mode) & summary["method"].isin(rows) & summary["deterministic"].astype(bool)]
    notes = []
    for method in [r for r in rows if r in set(hit["method"])]:
        ns = {int(c["n"]) for (row, _), c in table["cells"].items() if row == method and "n" in c}
        more = ("" if ns <= {1} else
                "; on an R-variant one run per sampling seed (n = the sampling seeds), each fitted once")
        notes.append(f"{method}: deterministic (its fit does not use the seed): fitted once, n = 1{more}.")
    return notes


def _numerics_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """Rows with cells in this table whose runs trained with numerics settings other than the
    default (each run's provenance ``numerics``: AdamW implementation, TF32, cuDNN autotuner;
    :func:`cdgtmll.tables.collect.numerics_record`), one note per set of settings."""
    if summary.empty or "numerics" not in summary:
        return []
    rows = rows_with_cells(table)
    hit = summary[(summary["mode"] == mode) & summary["method"].isin(rows) & (summary["numerics"] != "")]
    by: dict[str, list[str]] = {}
    for r in hit.itertuples():
        for setting in str(r.numerics).split("; "):
            if r.method not in by.setdefault(setting, []):
                by[setting].append(r.method)
    return [f"{', '.join(m for m in rows if m in methods)}: trained with {setting} (not the default; "
            "it changes results in the last digits). Per run: provenance.json numerics."
            for setting, methods in sorted(by.items())]


EPOCH_RULES = {
    "best_val": ("come from the weights of its epoch with the highest validation mAP (Eq. E.8; ties: the "
                 "earliest; select_epoch: best_val)"),
    "last": "come from the weights after its last training epoch (select_epoch: last)",
}


def _epoch_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """Which epoch's weights the rows with cells in this table predicted with, per rule
    (each run's provenance ``epoch_selection``; docs/methods.md "Epoch selection"): only the
    (dataset, setting) pairs the table has columns for, each range named by the column title."""
    if summary.empty or "select_epoch" not in summary:
        return []
    rows = rows_with_cells(table)
    shown = {(ds, setting) for ds, _, setting, *_ in table["columns"] if setting is not None}
    titles = {ds: title for ds, title, *_ in reversed(table["columns"])}
    hit = summary[(summary["mode"] == mode) & summary["method"].isin(rows)]
    hit = hit[[(ds, st) in shown for ds, st in zip(hit["dataset"], hit["setting"])]]
    return epoch_rule_notes(hit, rows, titles)


def epoch_rule_notes(summary: pd.DataFrame, order: list[str] | None = None,
                     titles: dict[str, str] | None = None) -> list[str]:
    """One note per epoch-selection rule found in ``summary`` (rows of one threshold mode):
    the methods that used it, in ``order`` (default: as they come), and for ``best_val``
    the range of kept epochs per method, each range followed by the settings it belongs to
    (``(<dataset> <setting>, ...)``: the dataset's title in ``titles``, default its name;
    settings with the same range share one)."""
    if summary.empty or "select_epoch" not in summary:
        return []
    titles = titles or {}
    by_rule: dict[str, dict[str, dict[str, list[str]]]] = {}
    for r in summary[summary["select_epoch"] != ""].itertuples():
        where = f"{titles.get(r.dataset, r.dataset)} {_s(getattr(r, 'setting', ''))}".strip()
        for rule in str(r.select_epoch).split("; "):
            kept = by_rule.setdefault(rule, {}).setdefault(r.method, {})
            span = _s(getattr(r, "selected_epochs", ""))
            if span and where not in kept.setdefault(span, []):
                kept[span].append(where)
    order = list(order) if order is not None else list(dict.fromkeys(summary["method"]))
    notes = []
    for rule in sorted(by_rule, key=lambda k: (k not in EPOCH_RULES, k)):
        methods = [m for m in order if m in by_rule[rule]]
        if not methods:
            continue
        if rule in EPOCH_RULES:
            what = EPOCH_RULES[rule]
        else:  # best_val without any finite validation mAP (collect.epoch_selection)
            what = f"come from the weights after its last training epoch (select_epoch: {rule})"
        kept = "" if rule != "best_val" else "; kept epochs: " + "; ".join(
            f"{m} {_spans(by_rule[rule][m])}" for m in methods if by_rule[rule][m])
        notes.append(f"{', '.join(methods)}: each run's predictions {what}{kept}. Per run: provenance.json "
                     "epoch_selection, all_runs.csv selected_epoch.")
    return notes


def _base_run_notes(table: dict, summary: pd.DataFrame, mode: str) -> list[str]:
    """Which rows' first stage is another row's run (each run's provenance ``base_run``:
    PE, ETU and LSFA read the BCE run of the same dataset, variant and seeds instead of training
    that model again), naming the shared runs, and the rows that had to fit it themselves, why."""
    if summary.empty or "base_run" not in summary:
        return []
    rows = rows_with_cells(table)
    shown = {(ds, setting) for ds, _, setting, *_ in table["columns"] if setting is not None}
    hit = summary[(summary["mode"] == mode) & summary["method"].isin(rows) & (summary["base_run"] != "")]
    hit = hit[[(ds, st) in shown for ds, st in zip(hit["dataset"], hit["setting"])]]
    read: dict[str, dict[str, list[str]]] = {}
    own: dict[tuple[str, str, str], None] = {}
    for r in hit.itertuples():
        for entry in str(r.base_run).split(" || "):
            kind, _, rest = entry.partition(" ")
            if kind == "read":
                base, _, folder = rest.partition(" ")
                read.setdefault(base, {}).setdefault(r.method, [])
                parts = folder.split("/")
                pattern = "/".join([*parts[:-3], "<dataset>", "<variant>", parts[-1]]) if len(parts) >= 3 else folder
                if pattern not in read[base][r.method]:
                    read[base][r.method].append(pattern)
            elif kind == "own":
                base, _, reason = rest.partition(": ")
                own.setdefault((r.method, base, reason), None)
    notes = []
    for base, methods in read.items():
        names = [m for m in rows if m in methods]
        folders = sorted({f for m in names for f in methods[m]})
        notes.append(f"{', '.join(names)}: stage 1 is the {base} run of the same dataset, variant and seeds "
                     f"({', '.join(folders)}), read from its final checkpoint, not trained again (the same model "
                     "byte for byte; per run: provenance.json base_run).")
    for method, base, reason in own:
        notes.append(f"{method}: stage 1 fitted in its own run, not read from a {base} run: {reason}.")
    return notes


def _spans(kept: dict[str, list[str]]) -> str:
    """``'3-7 of 10 (Yeast clean, Enron clean), 5 of 10 (Yeast R@0.40)'`` of ``{range: settings}``."""
    return ", ".join(f"{span} ({', '.join(where)})" for span, where in kept.items())


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


def _dataset_notes(table: dict, summary: pd.DataFrame) -> list[str]:
    """What prepare warned about each shown dataset (:func:`cdgtmll.data.processed.dataset_warnings`
    of the processed file its runs were evaluated on: ``inputs.clean_data`` of a metrics file)."""
    if summary.empty or "sources" not in summary:
        return []
    notes: list[str] = []
    for ds in dict.fromkeys(ds for ds, *_ in table["columns"]):
        paths = sorted({str(p) for v in summary.loc[summary["dataset"] == ds, "sources"] for p in v})
        for w in _prepare_warnings(paths[0]) if paths else ():
            if w not in notes:
                notes.append(w)
    return notes


def _prepare_warnings(metrics_path: str) -> tuple[str, ...]:
    """The dataset warnings of the clean data behind one metrics file: its recorded path as
    given (relative to the workflow folder, where the tables are built), else relative to the
    folder holding ``results/runs/<dataset>/<variant>/<method>/seed<k>/metrics.json``. Empty
    when the file or the record is missing."""
    from cdgtmll.data.processed import dataset_warnings

    try:
        rec = json.loads(Path(metrics_path).read_text(encoding="utf-8"))
        data = Path(rec["inputs"]["clean_data"]["path"])
    except (OSError, ValueError, KeyError, TypeError):
        return ()
    parents = Path(metrics_path).parents
    for cand in [data] + ([parents[6] / data] if not data.is_absolute() and len(parents) > 6 else []):
        if cand.is_file():
            try:
                return tuple(dataset_warnings(cand))
            except ValueError:
                return ()
    return ()


def _clean_data_path(metrics_path: str, rec: dict) -> Path | None:
    """The processed file a metrics record was evaluated on (``inputs.clean_data.path``): as
    recorded (relative to the workflow folder, where the tables are built), else relative to
    the folder holding ``results/runs/<dataset>/<variant>/<method>/seed<k>/metrics.json``."""
    try:
        data = Path(rec["inputs"]["clean_data"]["path"])
    except (KeyError, TypeError):
        return None
    parents = Path(metrics_path).parents
    for cand in [data] + ([parents[6] / data] if not data.is_absolute() and len(parents) > 6 else []):
        if cand.is_file():
            return cand
    return None


def _test_counts(metrics_path: str, rec: dict, tail: list[int], train: list[int]) -> list[int] | None:
    """Test-split positive counts of the ``tail`` labels: as the run records them (the
    ``readings`` block's ``tail_labels``, ``n_pos_test`` per label: :mod:`cdgtmll.metrics.readings`),
    else, for a run evaluated before that block existed, counted in the processed file the
    run was evaluated on (as :func:`_prepare_warnings` reads it: only its labels and split
    indices are loaded) and used only when its training counts of the tail equal the recorded
    ``train_counts`` (the same data). None when neither gives them."""
    for block in ((rec.get("readings") or {}).get("blocks") or {}).values():
        try:
            by_label = {int(t["label"]): int(t["n_pos_test"]) for t in block.get("tail_labels") or ()}
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if all(t in by_label for t in tail):
            return [by_label[t] for t in tail]
    path = _clean_data_path(metrics_path, rec)
    if path is None:
        return None
    from cdgtmll.data.processed import read_labels
    from cdgtmll.labels import label_counts

    try:
        Y, splits = read_labels(path)
    except (OSError, ValueError, KeyError):
        return None
    Y = Y[:, tail]
    if [int(c) for c in label_counts(Y[splits["train"]])] != list(train):
        return None
    return [int(c) for c in label_counts(Y[splits["test"]])]


def tail_records(runs: pd.DataFrame) -> dict:
    """``{dataset: (TailLabel, ...)}``: each dataset's tail (App. E.3/E.4: ``tail_labels``,
    ``tail_label_names`` and ``train_counts`` of its runs' metrics.json; the tail is chosen on
    the clean training split, so one run per dataset tells it), with test positive counts
    (:func:`_test_counts`). A dataset whose runs record no tail is left out."""
    out: dict = {}
    if runs.empty or "metrics_path" not in runs:
        return out
    for ds, paths in runs.groupby("dataset", sort=False)["metrics_path"]:
        path = sorted(set(map(str, paths)))[0]
        try:
            rec = json.loads(Path(path).read_text(encoding="utf-8"))
            tail = [int(t) for t in rec["tail_labels"]]
            names = [str(n) for n in rec.get("tail_label_names") or tail]
            train = [int(rec["train_counts"][t]) for t in tail]
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue
        test = _test_counts(path, rec, tail, train) or [None] * len(tail)
        out[ds] = tuple(TailLabel(n, tr, te) for n, tr, te in zip(names, train, test))
    return out


#: how many tail labels a footnote lists by name before it summarises the rest
TAIL_NAMES = 10


def _pts(v: float) -> str:
    return f"{100 * v:.1f}"


def _tail_text(tail: tuple, in_metric: int | None) -> str:
    """'2 labels: Class9 (88 training / 13 test positives), Class14 (19 / 5)'; beyond
    :data:`TAIL_NAMES` labels the ranges of the counts."""
    n = len(tail)
    have_test = all(t.test is not None for t in tail)
    if n == 0:
        text = "0 labels"
    elif n <= TAIL_NAMES:
        first, *rest = tail
        fmt = (lambda t: f"{t.train} / {t.test}") if have_test else (lambda t: f"{t.train}")
        what = "training / test positives" if have_test else "training positives"
        text = (f"{n} label{'s' if n != 1 else ''}: {first.name} ({fmt(first)} {what})"
                + "".join(f", {t.name} ({fmt(t)})" for t in rest))
    else:
        tr = sorted(t.train for t in tail)
        text = f"{n} labels, training positives {tr[0]} to {tr[-1]} (median {tr[n // 2]})"
        if have_test:
            te = sorted(t.test for t in tail)
            text += f", test positives {te[0]} to {te[-1]} (median {te[n // 2]})"
    if in_metric is not None and in_metric != n:
        text += f"; {in_metric} of them in Rare-F1 (the others have no test positive)"
    if n and not have_test:
        text += ("; test positives: not recorded by these runs (metrics.json without the readings block's "
                 "tail_labels) and their processed file is not readable here")
    return text


def _ceiling_notes(table: dict) -> list[str]:
    """Per column group (dataset): the ceiling of each column over the panel of runs, the
    tail's size and its labels' training and test positive counts (Rare-F1 columns), and
    the columns that cannot separate methods, with why (:class:`cdgtmll.tables.layout.ColumnCheck`)."""
    checks = table.get("checks") or {}
    cols = table["columns"]
    if not checks:
        return []
    notes = []
    tails_done: set[str] = set()
    groups: dict[str, list[int]] = {}
    for j in sorted(checks):
        groups.setdefault(cols[j][1], []).append(j)
    for title, js in groups.items():
        panel = list(dict.fromkeys(m for j in js for m in checks[j].panel))
        runs = max(checks[j].runs for j in js)
        parts = [f"{cols[j][4]} {_pts(checks[j].ceiling)}" for j in js if checks[j].ceiling is not None]
        text = ""
        if parts:
            text = (f"{title}: ceiling over the panel (the best test-oracle value of any run here: "
                    f"{runs} run{'s' if runs != 1 else ''} of {', '.join(panel)}; thresholds chosen on the test set, "
                    f"so a bound for these scores, not a result): {', '.join(parts)}.")
        ds = cols[js[0]][0]
        tail_js = [j for j in js if checks[j].metric == "rare_f1" and checks[j].tail is not None]
        if tail_js and ds not in tails_done:
            tails_done.add(ds)
            text += (f" {title if not text else 'Its'} Rare-F1 tail (App. E.3/E.4: the least frequent labels "
                     f"by training prevalence, clean training split): {_tail_text(checks[tail_js[0]].tail, checks[tail_js[0]].in_metric)}.")
        if text:
            notes.append(text.strip())
        flagged = [j for j in js if checks[j].reasons]
        for j in flagged:
            notes.append(f"{title} {cols[j][4]} cannot separate methods: {'; and '.join(checks[j].reasons)}. "
                         "No best or second is marked in it; its differences are not findings.")
    return notes


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
    notes += epoch_rule_notes(summary[summary["mode"] == "global"])
    if "deterministic" in summary:
        for method in dict.fromkeys(summary.loc[summary["deterministic"].astype(bool), "method"]):
            notes.append(f"{method}: deterministic (its fit does not use the seed): fitted once, n = 1 per "
                         "dataset and setting (R-variants: one run per sampling seed).")
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


# ------------------------------------------------------------------ why a column or row is n.r.

@dataclass(frozen=True)
class ShippedProfile:
    """What one shipped profile (``config/*.yaml``) runs: its ``name``, its file, its
    ``experiments.datasets`` and ``experiments.methods``, and the R-variant severities per
    dataset (empty when ``experiments.r_variants`` is false)."""

    name: str
    path: str
    datasets: tuple[str, ...]
    methods: tuple[str, ...]
    severities: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.path})"


@dataclass(frozen=True)
class ProfileContext:
    """What the footnotes know of the profile the tables are written for (``python -m
    cdgtmll.tables.build --profile --datasets --methods --severities``) and of the shipped
    profiles, to say *why* a column or row is ``n.r.``. ``datasets`` / ``severities``: None
    when not given (then the tables only know what ran)."""

    name: str = ""
    datasets: tuple[str, ...] | None = None
    methods: tuple[str, ...] = ()
    severities: dict | None = None
    shipped: tuple[ShippedProfile, ...] = ()

    @property
    def this(self) -> str:
        return f"this profile ({self.name})" if self.name else "this profile"


def default_profiles_dir() -> Path:
    """The checkout's ``config/`` (the shipped profiles), else ``./config``."""
    here = Path(__file__).resolve().parents[3] / "config"
    return here if here.is_dir() else Path.cwd() / "config"


def shipped_profiles(config_dir: Path | str | None = None) -> tuple[ShippedProfile, ...]:
    """Every ``<config_dir>/*.yaml`` with an ``experiments`` block, in file-name order; paths
    as ``config/<file>``. A file that does not parse is left out."""
    config_dir = Path(config_dir) if config_dir is not None else default_profiles_dir()
    out = []
    for p in sorted(config_dir.glob("*.yaml")) if config_dir.is_dir() else []:
        try:
            cfg = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        exp = cfg.get("experiments") if isinstance(cfg, dict) else None
        if not isinstance(exp, dict):
            continue
        sev = ((cfg.get("r_variants") or {}).get("severities") or {}) if exp.get("r_variants", True) else {}
        out.append(ShippedProfile(
            name=str(cfg.get("name") or p.stem), path=f"{config_dir.name}/{p.name}",
            datasets=tuple(map(str, exp.get("datasets") or ())), methods=tuple(map(str, exp.get("methods") or ())),
            severities={str(d): tuple(float(v) for v in (vs or ())) for d, vs in sev.items()}))
    return tuple(out)


def _profiles_with(ctx: ProfileContext, has) -> str:
    """'profile a (config/a.yaml)' / 'profiles a (config/a.yaml), b (config/b.yaml)': the shipped
    profiles for which ``has(profile)``; 'no shipped profile (config/*.yaml)' when none."""
    if not ctx.shipped:
        return "no shipped profile (none found: --profiles-dir)"
    hits = [p.label for p in ctx.shipped if has(p)]
    if not hits:
        return "no shipped profile (config/*.yaml)"
    return ("profile " if len(hits) == 1 else "profiles ") + ", ".join(hits)


def _archive_files(spec) -> tuple:
    """The image archives an image dataset's loader fetches besides ``spec.files`` (kept out of
    the registry's ``files`` so that an extracted copy suffices), by the dataset's format."""
    if spec.format == "voc-devkit":
        from cdgtmll.data.registry import voc_image_archives

        return voc_image_archives()
    if spec.format == "coco-json":
        from cdgtmll.data.coco import IMAGE_ARCHIVES

        return tuple(IMAGE_ARCHIVES.values())
    return ()


def data_availability(name: str) -> str:
    """Where the data of dataset ``name`` can come from, in words, from what the dataset registry
    records for each raw file (:mod:`cdgtmll.data.registry`): a packaged copy (installed with the
    lock), a download URL, or none (put in a dataset mirror by hand). The same on every machine:
    what a mirror on this one holds is not a property of the table."""
    from cdgtmll.data.registry import REGISTRY

    spec = REGISTRY.get(name)
    if spec is None:
        return "its data is not in the dataset registry (a data.custom dataset of a profile)"
    files = tuple(spec.files) + tuple(_archive_files(spec))
    where: dict[str, list[str]] = {}  # source -> the kinds of file (roles) it provides
    for f in files:
        copy = next((c for c in spec.packaged if f.name in c.replaces), None)
        src = (f"packaged copy {copy.distribution}=={copy.version}" if copy is not None
               else "download" if f.urls else "none")
        role = (f.role or "files").split("-")[0]
        if role not in where.setdefault(src, []):
            where[src].append(role)
    how = {"download": "by download from its official URLs or from a dataset mirror",
           "none": "no download URL: from a dataset mirror only, put there by hand (docs/datasets.md)"}
    parts = [f"{', '.join(roles)}: {how.get(src, src)}" for src, roles in where.items()]
    return "data " + "; ".join(parts)


def _dataset_reason(ds: str, ctx: ProfileContext, left_out: bool = False) -> str:
    """Why dataset ``ds`` has no runs: not in this profile (and which shipped profiles have
    it), or in it but no run given, or left out by the plan with the reason its cells carry
    (``left_out``: a dataset that cannot be had here, cdgtmll.data.availability); and whether
    its data can be had here."""
    if ctx.datasets is None:
        why = "no run of it among the metrics files given (this profile's datasets were not given: --datasets)"
    elif ds in ctx.datasets and left_out:
        why = f"in experiments.datasets of {ctx.this}, but left out of this run for the reason its cells' † note gives"
    elif ds in ctx.datasets:
        why = (f"in experiments.datasets of {ctx.this}, but no run of it among the metrics files given "
               "(runs missing or failed)")
    else:
        why = f"not in experiments.datasets of {ctx.this}"
    if ctx.datasets is None or ds not in ctx.datasets:
        why += f"; in experiments.datasets of {_profiles_with(ctx, lambda p: ds in p.datasets)}"
    return f"{why}; {data_availability(ds)}"


def _setting_reason(ds: str, setting: str, ctx: ProfileContext) -> str:
    """Why the R-variant ``setting`` ('R@0.40') of a dataset that ran has no runs."""
    parsed = parse_setting(setting)
    if parsed is None or parsed[0] != "R":
        return "no run of this setting among the metrics files given"
    sev = parsed[1]
    mine = None if ctx.severities is None else ctx.severities.get(ds, [])
    if mine is not None and any(abs(sev - v) < 1e-9 for v in mine):
        return f"severity {sev:.2f} is in r_variants.severities of {ctx.this}, but no run of it was given"
    if mine is None:
        why = "no run of this severity among the metrics files given"
    elif not mine:
        why = f"no R-variant of the dataset in {ctx.this} (experiments.r_variants, r_variants.severities)"
    else:
        why = (f"severity {sev:.2f} not in r_variants.severities of {ctx.this} "
               f"({', '.join(f'{v:.2f}' for v in mine)})")
    has = _profiles_with(ctx, lambda p: any(abs(sev - v) < 1e-9 for v in p.severities.get(ds, ())))
    return f"{why}; configured in {has}"


def _not_run_notes(table: dict, summary: pd.DataFrame, ctx: ProfileContext) -> list[str]:
    """The ``n.r.`` footnotes: datasets not run, settings not run, and, with the reason of
    each, grouped by reason."""
    notes = []
    pending = _pending_columns(table)  # partial tables: a column whose runs are pending is not n.r.
    run_ds = (set(summary["dataset"]) if not summary.empty else set()) | {ds for ds, _ in pending}
    missing = list(dict.fromkeys((ds, title) for ds, title, setting, *_ in table["columns"]
                                 if ds not in run_ds and setting is not None))
    if missing:
        notes.append(f"{NOT_RUN} = not run in this configuration: {', '.join(sorted({t for _, t in missing}))}. "
                     "No value is copied from the paper.")
        by_reason: dict[str, list[str]] = {}
        left_out = {table["columns"][j][0] for (_, j), cell in table["cells"].items() if "not_run" in cell}
        for ds, title in missing:
            by_reason.setdefault(_dataset_reason(ds, ctx, ds in left_out), []).append(title)
        notes += [f"{NOT_RUN} {', '.join(titles)}: {reason}." for reason, titles in by_reason.items()]
    run_settings = (set(zip(summary["dataset"], summary["setting"])) if not summary.empty else set()) | pending
    unset: dict[str, list[str]] = {}
    for ds, title, setting, _, sub in table["columns"]:
        if ds in run_ds and setting is not None and (ds, setting) not in run_settings:
            unset.setdefault(_setting_reason(ds, setting, ctx), []).append(f"{title} {sub}")
    for reason, cols in unset.items():
        notes.append(f"{NOT_RUN} in {', '.join(dict.fromkeys(cols))}: this setting was not run in this "
                     f"configuration (the dataset's other columns were): {reason}.")
    return notes


def _pending_columns(table: dict) -> set[tuple[str, str]]:
    """(dataset, setting) of the columns with a pending cell (partial tables:
    :func:`cdgtmll.tables.build.add_pending`): their runs are coming, so they are no ``n.r.``."""
    cols = table["columns"]
    return {(cols[j][0], cols[j][2]) for (_, j), c in table["cells"].items() if "pending" in c}


def _cell_notes(table: dict, summary: pd.DataFrame, ctx: ProfileContext) -> list[str]:
    """``n.r.`` cells of a configured row in a column whose dataset and setting ran: no run of
    that method there was given."""
    ran = (set(zip(summary["dataset"], summary["setting"])) if not summary.empty else set()) | _pending_columns(table)
    if not ran:
        return []
    gaps: dict[str, list[str]] = {}
    for j, (ds, title, setting, *_) in enumerate(table["columns"]):
        if (ds, setting) not in ran:
            continue
        for r in table["rows"]:
            if (r, j) not in table["cells"]:
                gaps.setdefault(r, [])
                if title not in gaps[r]:
                    gaps[r].append(title)
    where = f"in experiments.methods of {ctx.this}" if ctx.methods else "configured"
    return [f"{NOT_RUN} for {r} in {', '.join(cols)}: {where}, but no run of it there among the metrics files "
            "given (runs missing or failed)." for r, cols in gaps.items()]


def _row_notes(table: dict, ctx: ProfileContext) -> list[str]:
    """Rows of the paper's table that are not rows here: not in this profile's methods, with
    the shipped profiles that run them."""
    number = table.get("number")
    if number not in PAPER_ROWS or not ctx.methods:
        return []
    absent = [m for m in PAPER_ROWS[number] if m not in table["rows"]]
    if not absent:
        return []
    by_where: dict[str, list[str]] = {}
    for m in absent:
        by_where.setdefault(_profiles_with(ctx, lambda p, m=m: m in p.methods), []).append(m)
    parts = "; ".join(f"{', '.join(ms)} (in {where})" for where, ms in by_where.items())
    return [f"{NOT_RUN} rows of the paper's Table {number}, not shown: not in experiments.methods of "
            f"{ctx.this}: {parts}."]
