"""Aggregate per-run metrics into the paper's tables (CSV, Markdown, LaTeX).

``python -m cdgtmll.tables --metrics RUN/seed*/metrics.json ... --methods M ... --out results/tables``

* ``all_runs.csv`` – one row per (dataset, variant, method, training seed,
  threshold mode) with every metric of App. E.4: the long form every table is
  computed from.
* ``metrics_full.{csv,md}`` – every metric, mean ± std per (dataset, setting, method).
* ``table1_standard.{csv,md,tex}`` – Table 1's exact columns (VOC/COCO: mAP,
  Rare-F1; Yeast: Micro-F1, Rare-F1; Mediamill: Macro-F1, Rare-F1).
* ``table2_rare.{csv,md,tex}`` – Table 2: Rare-F1 on the R-variants at the paper's
  severities.

Tables are written for the threshold mode named in the file (``global`` = one
threshold for all labels, ``adaptive`` = per-label thresholds tuned on
validation); the unsuffixed file uses ``global``. Cells are mean ± sample std
(ddof = 1) in percent over training seeds, and for R-variants over training
seeds x sampling seeds; ``n`` gives the number of runs. Datasets not run are
marked ``n.r.`` with a footnote; nothing is ever filled in from the paper.
Best mean per column is bold, second underlined. For image datasets a footnote says
how the ResNet-50 was used in the runs behind the cells (fine-tuned end to end, or
frozen with heads on cached features), read from each run's ``provenance.json``. Each table has a
``.sources.json`` sidecar listing the metrics files (with sha256) behind every
cell, which ``cdgtmll audit`` follows.

Further footnotes, from what each ``metrics.json`` records:

* the decision rule behind each F1 column of a row scored by its own rule (global mode):
  the plug-in rows (PE, SRB) use one shared threshold for Micro-F1 and per-label
  thresholds for Macro-F1 / Rare-F1 (``decision_rules`` of the ``method`` block);
* how many labels Macro-F1 / Rare-F1 left out because they have no test positive
  (``f1_no_positive_labels``; rule ``evaluation.f1_no_positive_labels``), per dataset;
* which threshold-free metrics of a row equal another row's *by construction*
  (:func:`equal_by_construction`: PE's mAP and P@k are BCE's), so that equal cells are
  not read as a finding.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from cdgtmll.config import CLEAN, parse_variant, variant_setting
from cdgtmll.io import atomic_write, read_json, sha256_file, write_json

METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")
METRIC_LABEL = {"mAP": "mAP", "micro_f1": "Micro-F1", "macro_f1": "Macro-F1", "rare_f1": "Rare-F1",
                "p@1": "P@1", "p@3": "P@3", "p@5": "P@5"}
NOT_RUN = "n.r."

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
PAPER_ROWS_T1 = ("BCE", "PE", "SRB", "DBL", "LSFA", "MLC-NC", "ASL", "BalanceMix", "MLBOTE", "CC",
                 "ML-GCN", "C-Tran", "ML-Decoder", "LCIFS", "CD-GTMLL")
PAPER_ROWS_T2 = ("BCE", "PE", "SRB", "DBL", "LSFA", "MLC-NC", "XR-Transformer", "MatchXML", "ASL",
                 "BalanceMix", "MLBOTE", "CD-GTMLL")
MODES = ("global", "adaptive")
#: threshold-free metrics (the same in every threshold mode)
RANKING_METRICS = ("mAP", "p@1", "p@3", "p@5")
F1_COLUMNS = ("micro_f1", "macro_f1", "rare_f1")
#: long-table columns describing how a row's F1 columns were computed
RULE_COLUMNS = tuple(f"{m}_rule" for m in F1_COLUMNS)
EXCLUSION_COLUMNS = ("f1_no_positive_labels", "macro_f1_left_out", "macro_f1_of", "rare_f1_left_out", "rare_f1_of",
                     "labels_without_test_positives", "tail_labels_without_test_positives")


def equal_by_construction(method: str, hparams: dict | None = None) -> tuple[str, tuple[str, ...], str] | None:
    """``(reference row, metrics, why)`` when a row's threshold-free metrics equal another
    row's by construction, else None. ``method`` is the registered method.

    * PE: step 1 *is* the BCE row (same model, loss and seed handling), step 2 only picks
      thresholds, which change no ranking: mAP and P@k equal BCE's on every seed.
    * ETU with ``utility='precision'``: scores rank each row like the BCE marginals
      (``w_l = 1``), so P@k equals BCE's; mAP does not (the per-row rescaling changes the
      order of rows within a label). With the default ``utility='macro-recall'`` each row
      is ranked by ``eta / prior`` and nothing equals BCE's.
    * SRB trains its own surrogate: nothing is equal.
    """
    hp = hparams or {}
    if method == "PE":
        return "BCE", RANKING_METRICS, ("PE only thresholds the BCE model's probabilities, same model and seeds, "
                                        "and thresholds do not change rankings")
    if method == "ETU" and hp.get("utility", "macro-recall") == "precision":
        return "BCE", ("p@1", "p@3", "p@5"), "ETU with utility 'precision' ranks each row by the BCE marginals"
    return None


def run_method(seed_dir: Path, method: str) -> tuple[str, dict]:
    """(registered method, hyper-parameters used) of a run, from its ``provenance.json``
    (else the directory name and no hyper-parameters)."""
    registered, hp = method.split("@")[0], {}
    prov = seed_dir / "provenance.json"
    if prov.is_file():
        spec = read_json(prov).get("config") or {}
        registered = spec.get("registered_method", registered)
        hp = {**(spec.get("resolved_hparams") or {}), **(spec.get("hparams") or {})}
    return registered, hp


def run_construction(seed_dir: Path, method: str) -> str:
    """``'<reference>:<m1>,<m2>,...'`` for :func:`equal_by_construction` of a run (method
    and hyper-parameters from its ``provenance.json``, else the directory name), or ''."""
    eq = equal_by_construction(*run_method(seed_dir, method))
    return f"{eq[0]}:{','.join(eq[1])}" if eq else ""


def run_deviation(seed_dir: Path, method: str) -> str:
    """The method's own footnote on how this run differs from its paper
    (:meth:`cdgtmll.methods.base.Method.table_note` of its class, with the run's
    hyper-parameters), or ''."""
    from cdgtmll.methods import base

    registered, hp = run_method(seed_dir, method)
    try:
        cls = base.get(registered)
    except KeyError:
        return ""
    return cls.table_note(hp) or ""


def _f1_record(m: dict, block: dict) -> dict:
    rules = block.get("decision_rules") or {}
    rec = {f"{c}_rule": rules.get(c, "") for c in F1_COLUMNS}
    ex = m.get("f1_no_positive_labels") or {}
    left, of, none = ex.get("left_out") or {}, ex.get("of") or {}, ex.get("labels_without_positives") or {}
    rec.update({"f1_no_positive_labels": ex.get("rule", ""),
                "macro_f1_left_out": left.get("macro_f1"), "macro_f1_of": of.get("macro_f1"),
                "rare_f1_left_out": left.get("rare_f1"), "rare_f1_of": of.get("rare_f1"),
                "labels_without_test_positives": none.get("all"),
                "tail_labels_without_test_positives": none.get("tail")})
    return rec


BACKBONE_USE = {False: "ResNet-50 fine-tuned end to end",
                True: "ResNet-50 frozen (ImageNet features extracted once, heads trained on them)"}


def backbone_use(seed_dir: Path) -> str:
    """How a run used an image backbone (its provenance's ``backbone`` block), or ''."""
    prov = seed_dir / "provenance.json"
    if not prov.is_file():
        return ""
    b = read_json(prov).get("backbone")
    return BACKBONE_USE[bool(b.get("frozen"))] if b else ""


def collect(paths: list[Path]) -> pd.DataFrame:
    """Long table of the given ``.../<dataset>/<variant>/<method>/seed<k>/metrics.json`` files."""
    rows = []
    for mpath in sorted(Path(p) for p in paths):
        seed_dir = mpath.parent
        method_dir = seed_dir.parent
        dataset, variant, method = method_dir.parent.parent.name, method_dir.parent.name, method_dir.name
        m = read_json(mpath)
        parsed = parse_variant(variant)
        sev, sseed = (None, None) if parsed is None else parsed
        backbone = backbone_use(seed_dir)
        construction = run_construction(seed_dir, method)
        deviation = run_deviation(seed_dir, method)
        digest = sha256_file(mpath)
        for mode in MODES:
            own = mode == "global" and "method" in m
            block = m["method"] if own else m[_mode_key(m, mode)]
            row = {"dataset": dataset, "variant": variant, "setting": variant_setting(variant),
                   "severity": sev, "sampling_seed": sseed,
                   "method": method, "seed": int(seed_dir.name[4:]), "mode": mode, "own_thresholds": own,
                   "backbone": backbone, "metrics_path": str(mpath), "metrics_sha256": digest}
            row.update({k: block.get(k) for k in METRICS})
            row.update(_f1_record(m, block))
            row["equal_by_construction"] = construction
            row["deviation"] = deviation
            untrained = m.get("labels_without_train_positives") or {}
            row["untrained_labels"] = ", ".join(untrained.get("names", []))
            rows.append(row)
    cols = ["dataset", "variant", "setting", "severity", "sampling_seed", "method", "seed", "mode", "own_thresholds", *METRICS,
            *RULE_COLUMNS, *EXCLUSION_COLUMNS, "equal_by_construction", "deviation", "untrained_labels", "backbone", "metrics_path", "metrics_sha256"]
    return pd.DataFrame(rows, columns=cols)


def _mode_key(m: dict, mode: str) -> str:
    if mode == "adaptive":
        return "adaptive"
    keys = [k for k in m if k.startswith("global@")]
    if len(keys) != 1:
        raise ValueError(f"metrics file has {len(keys)} 'global@' blocks, expected 1")
    return keys[0]


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std and n per (mode, dataset, setting, method); setting is 'clean' or the severity."""
    if df.empty:
        return pd.DataFrame(columns=["mode", "dataset", "setting", "method", "n"])
    g = df.groupby(["mode", "dataset", "setting", "method"], sort=False)
    out = g[list(METRICS)].agg(["mean", "std"])
    out.columns = [f"{m}_{s}" for m, s in out.columns]
    out["n"] = g.size()
    out["own_thresholds"] = g["own_thresholds"].any()
    out["backbone"] = g["backbone"].agg(lambda s: "; ".join(sorted(set(s) - {""})))
    if set(RULE_COLUMNS) <= set(df.columns):
        out["f1_rules"] = g[list(RULE_COLUMNS)].apply(
            lambda d: " || ".join(sorted({" | ".join(map(_s, r)) for r in d.itertuples(index=False)} - {" | ".join([""] * 3)})))
    if set(EXCLUSION_COLUMNS) <= set(df.columns):
        out["f1_exclusion"] = g[list(EXCLUSION_COLUMNS)].apply(
            lambda d: " || ".join(sorted({" | ".join(map(_s, r)) for r in d.itertuples(index=False)})))
    if "deviation" in df:
        out["deviation"] = g["deviation"].agg(lambda s: " ".join(sorted(set(map(_s, s)) - {""})))
    if "untrained_labels" in df:
        out["untrained_labels"] = g["untrained_labels"].agg(lambda s: "; ".join(sorted(set(map(_s, s)) - {""})))
    if "equal_by_construction" in df:
        out["equal_by_construction"] = g["equal_by_construction"].agg(lambda s: "; ".join(sorted(set(map(_s, s)) - {""})))
    out["sources"] = g["metrics_path"].agg(list)
    return out.reset_index()


def _s(v) -> str:
    """Cell value as text ('' for missing; integral floats without '.0')."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _fmt(mean: float, std: float, n: int) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "nan"
    s = f"{100 * mean:.1f}"
    if n > 1 and std is not None and not math.isnan(std):
        s += f" ± {100 * std:.1f}"
    return s


def _rank_marks(values: list[float | None]) -> list[str]:
    """'best' / 'second' / '' per entry by mean (higher is better); ties share a mark."""
    finite = sorted({v for v in values if v is not None and not math.isnan(v)}, reverse=True)
    marks = []
    for v in values:
        if v is None or math.isnan(v) or not finite:
            marks.append("")
        elif v == finite[0]:
            marks.append("best")
        elif len(finite) > 1 and v == finite[1]:
            marks.append("second")
        else:
            marks.append("")
    return marks


def build_table(summary: pd.DataFrame, mode: str, columns: list[tuple[str, str, str, str, str]],
                paper_rows: tuple[str, ...], methods_run: list[str],
                not_run: dict[tuple[str, str], str] | None = None) -> dict:
    """columns: (dataset, group title, setting, metric, subheader). Rows: methods run, paper order first."""
    rows = [m for m in paper_rows if m in methods_run] + [m for m in methods_run if m not in paper_rows]
    s = summary[summary["mode"] == mode] if not summary.empty else summary
    cells: dict[tuple[str, int], dict] = {}
    for j, (ds, _, setting, metric, _sub) in enumerate(columns):
        for r in rows:
            hit = s[(s["dataset"] == ds) & (s["setting"] == setting) & (s["method"] == r)] if not s.empty else s
            if (ds, r) in (not_run or {}):
                cells[(r, j)] = {"not_run": not_run[(ds, r)]}
            elif len(hit):
                h = hit.iloc[0]
                cells[(r, j)] = {"mean": float(h[f"{metric}_mean"]), "std": float(h[f"{metric}_std"]),
                                 "n": int(h["n"]), "sources": list(h["sources"])}
    for j in range(len(columns)):
        marks = _rank_marks([cells.get((r, j), {}).get("mean") for r in rows])
        for r, mk in zip(rows, marks):
            if (r, j) in cells and "mean" in cells[(r, j)]:
                cells[(r, j)]["mark"] = mk
    return {"rows": rows, "columns": columns, "cells": cells}


def _cell_text(cell: dict | None, style: str) -> str:
    if cell is None:
        return NOT_RUN
    if "not_run" in cell:
        return "not run†"
    t = _fmt(cell["mean"], cell["std"], cell["n"])
    if style == "md":
        return {"best": f"**{t}**", "second": f"<u>{t}</u>"}.get(cell.get("mark", ""), t)
    if style == "tex":
        t = t.replace("±", r"$\pm$")
        return {"best": rf"\textbf{{{t}}}", "second": rf"\underline{{{t}}}"}.get(cell.get("mark", ""), t)
    return t


def write_table(table: dict, out: Path, stem: str, caption: str, footnotes: list[str]) -> None:
    rows, cols, cells = table["rows"], table["columns"], table["cells"]
    headers = [f"{c[1]} {c[4]}" for c in cols]
    # CSV: machine-readable mean/std/n per cell
    recs = []
    for r in rows:
        rec = {"method": r}
        for j, h in enumerate(headers):
            c = cells.get((r, j))
            if c is None or "not_run" in c:
                rec.update({f"{h} mean": None, f"{h} std": None, f"{h} n": 0})
                if c is not None:
                    rec[f"{h} note"] = f"not run: {c['not_run']}"
                continue
            rec[f"{h} mean"] = round(100 * c["mean"], 4)
            rec[f"{h} std"] = None if math.isnan(c["std"]) else round(100 * c["std"], 4)
            rec[f"{h} n"] = c["n"]
        recs.append(rec)
    atomic_write(out / f"{stem}.csv", pd.DataFrame(recs).to_csv(index=False))
    # Markdown
    md = [f"**{caption}**", "", "| Method | " + " | ".join(headers) + " |",
          "|---|" + "---:|" * len(headers)]
    for r in rows:
        md.append(f"| {r} | " + " | ".join(_cell_text(cells.get((r, j)), "md") for j in range(len(cols))) + " |")
    md += [""] + [f"{i + 1}. {f}" for i, f in enumerate(footnotes)]
    atomic_write(out / f"{stem}.md", "\n".join(md) + "\n")
    # LaTeX (booktabs)
    groups: list[tuple[str, int]] = []
    for c in cols:
        g = c[1]
        if groups and groups[-1][0] == g:
            groups[-1] = (g, groups[-1][1] + 1)
        else:
            groups.append((g, 1))
    tex = [r"\begin{table*}[t]", r"\centering", r"\begin{tabular}{l" + "c" * len(cols) + "}", r"\toprule",
           r"\multirow{2}{*}{Method} & " + " & ".join(rf"\multicolumn{{{n}}}{{c}}{{{g}}}" for g, n in groups) + r"\\"]
    start, rules = 2, []
    for _, n in groups:
        rules.append(rf"\cmidrule(lr){{{start}-{start + n - 1}}}")
        start += n
    tex.append("".join(rules))
    tex.append(" & " + " & ".join(c[4].replace("%", r"\%") for c in cols) + r"\\")
    tex.append(r"\midrule")
    for r in rows:
        tex.append(f"{r} & " + " & ".join(_cell_text(cells.get((r, j)), "tex") for j in range(len(cols))) + r"\\")
    tex += [r"\bottomrule", r"\end{tabular}",
            rf"\caption{{{_tex_escape(caption + ' ' + ' '.join(footnotes))}}}",
            r"\end{table*}"]
    atomic_write(out / f"{stem}.tex", "\n".join(tex) + "\n")
    sources = {f"{r} | {headers[j]}": c["sources"] for (r, j), c in cells.items() if "sources" in c}
    write_json(out / f"{stem}.sources.json",
               {"table": stem, "cells": {k: [{"path": p, "sha256": sha256_file(p)} for p in v]
                                         for k, v in sources.items()}})


def _tex_escape(text: str) -> str:
    return text.replace("%", r"\%").replace("_", r"\_").replace("&", r"\&").replace("±", r"$\pm$")


def table1_columns() -> list[tuple[str, str, str, str]]:
    return [(ds, title, CLEAN, m) for ds, title, ms in TABLE1 for m in ms]


def table2_columns() -> list[tuple[str, str, str, str]]:
    return [(ds, title, f"R@{s:.2f}", "rare_f1") for ds, title, sevs in TABLE2 for s in sevs]


def _col_titles(cols: list, style_t2: bool) -> list:
    out = []
    for ds, title, setting, metric in cols:
        sub = f"@{round(100 * float(setting[2:]))}%" if style_t2 else METRIC_LABEL[metric]
        out.append((ds, title, setting, metric, sub))
    return out


def _footnotes(table: dict, summary: pd.DataFrame, mode: str, threshold: float) -> list[str]:
    notes = []
    reasons: dict[str, list[str]] = {}
    for (row, _), cell in table["cells"].items():
        if "not_run" in cell and row not in reasons.setdefault(cell["not_run"], []):
            reasons[cell["not_run"]].append(row)
    for reason, rows in reasons.items():
        notes.append(f"† {', '.join(rows)}: not run: {reason}")
    run_ds = set(summary["dataset"]) if not summary.empty else set()
    missing = sorted({title for ds, title, *_ in table["columns"] if ds not in run_ds})
    if missing:
        notes.append(f"{NOT_RUN} = not run in this configuration: {', '.join(missing)}. "
                     "No value is copied from the paper.")
    if "backbone" in summary:
        for ds, title in dict.fromkeys((ds, title) for ds, title, *_ in table["columns"]):
            uses = summary.loc[(summary["dataset"] == ds) & (summary["mode"] == mode), "backbone"]
            uses = sorted({u for v in uses for u in str(v).split("; ") if u})
            if uses:
                notes.append(f"{title}: {' and '.join(uses)}.")
    thr = f"a global threshold of {threshold}" if mode == "global" else \
        "label-adaptive thresholds tuned per label on the validation split"
    notes.append(f"Values in %, mean ± sample std over runs (training seeds; R-variants also over sampling "
                 f"seeds); F1 metrics at {thr}. Best mean bold, second underlined.")
    rows_run = _rows_with_cells(table)
    if mode == "global" and "own_thresholds" in summary:
        own = summary[summary["own_thresholds"] & (summary["mode"] == mode) & summary["method"].isin(rows_run)]
        notes += _own_rule_notes(own)
    notes += _exclusion_notes(table, summary, mode)
    notes += _construction_notes(table, summary, mode)
    notes += _untrained_notes(table, summary, mode)
    notes += _deviation_notes(table, summary, mode)
    return notes


def _rows_with_cells(table: dict, metrics: tuple[str, ...] | None = None) -> list[str]:
    """Rows with at least one numeric cell (in a column of ``metrics``, when given)."""
    cols = table["columns"]
    return [r for r in table["rows"]
            if any("mean" in c for (rr, j), c in table["cells"].items()
                   if rr == r and (metrics is None or cols[j][3] in metrics))]


def _own_rule_notes(own: pd.DataFrame) -> list[str]:
    """Rows scored by their own decision rule, grouped by the rule behind each F1 column."""
    if own.empty:
        return []
    from cdgtmll import metrics as M

    plugin = " | ".join((M.RULE_PLUGIN_MICRO, M.RULE_PLUGIN_MACRO, M.RULE_PLUGIN_MACRO))
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
    rows = set(_rows_with_cells(table))
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
    for r in _rows_with_cells(table, tuple(set(RANKING_METRICS) & metrics_here)):
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


#: the headline columns of `dvc metrics show` (means over runs): the F1s at the global threshold
#: and Rare-F1 at validation-tuned thresholds (Table 2 ``_adaptive``)
HEADLINE = (("mAP", "global", "mAP"), ("micro_f1", "global", "micro_f1"), ("macro_f1", "global", "macro_f1"),
            ("rare_f1", "global", "rare_f1"), ("rare_f1_adaptive", "adaptive", "rare_f1"))


def summary_rows(summary: pd.DataFrame) -> dict[tuple[str, str, str], dict]:
    """``{(dataset, setting, method): {headline metric: mean, ..., "n": runs}}``, 4 decimals."""
    rows: dict[tuple[str, str, str], dict] = {}
    for _, r in summary.iterrows():
        row = rows.setdefault((r["dataset"], r["setting"], r["method"]), {})
        for name, mode, metric in HEADLINE:
            if r["mode"] == mode:
                v = r[f"{metric}_mean"]
                row[name] = None if v is None or math.isnan(v) else round(float(v), 4)
        if r["mode"] == "global":
            row["n"] = int(r["n"])
    order = [name for name, _, _ in HEADLINE] + ["n"]
    return {k: {name: v[name] for name in order if name in v} for k, v in rows.items()}


def write_summary_dir(summary: pd.DataFrame, out: Path) -> list[Path]:
    """One JSON per (dataset, setting, method) under ``out`` (``<dataset>/<setting>/<method>.json``),
    so that `dvc metrics show` prints one row each with the headline metrics as columns;
    files of rows no longer in the summary are removed."""
    written = []
    for (dataset, setting, method), row in summary_rows(summary).items():
        path = out / dataset / setting / f"{method}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, row)
        written.append(path)
    if out.is_dir():
        for stale in set(out.rglob("*.json")) - set(written):
            stale.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True, type=Path, nargs="+",
                    help="metrics.json files of this configuration's runs")
    ap.add_argument("--methods", nargs="+", required=True, help="methods of the config, in order")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--summary-json", type=Path, help="flat metrics summary (every mode, dataset, setting, method)")
    ap.add_argument("--summary-dir", type=Path,
                    help="one small JSON per (dataset, setting, method) for `dvc metrics show`: "
                         "<dir>/<dataset>/<setting>/<method>.json")
    ap.add_argument("--not-run", action="append", default=[], metavar="DATASET|METHOD|REASON",
                    help="a configured method that could not run on a dataset, and why")
    args = ap.parse_args(argv)
    df = collect(args.metrics)
    not_run = {}
    for item in args.not_run:
        ds, method, reason = item.split("|", 2)
        not_run[(ds, method)] = reason
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out / "all_runs.csv", df.to_csv(index=False))
    summary = summarise(df)
    full = summary.drop(columns=["sources"])
    atomic_write(args.out / "metrics_full.csv", full.to_csv(index=False))
    md = ["| mode | dataset | setting | method | n | " + " | ".join(METRIC_LABEL[m] for m in METRICS) + " |",
          "|---|---|---|---|---:|" + "---:|" * len(METRICS)]
    for _, r in summary.iterrows():
        md.append(f"| {r['mode']} | {r['dataset']} | {r['setting']} | {r['method']} | {r['n']} | " +
                  " | ".join(_fmt(r[f'{m}_mean'], r[f'{m}_std'], r['n']) for m in METRICS) + " |")
    md += [""] + [f"{i + 1}. {n}" for i, n in enumerate(_full_notes(summary))]
    atomic_write(args.out / "metrics_full.md", "\n".join(md) + "\n")
    for mode in MODES:
        suffix = "" if mode == "global" else "_adaptive"
        t1 = build_table(summary, mode, _col_titles(table1_columns(), False), PAPER_ROWS_T1, args.methods, not_run)
        write_table(t1, args.out, f"table1_standard{suffix}",
                    "Standard-frequency results (%). Rare-F1 on the bottom 20% labels by training prevalence.",
                    _footnotes(t1, summary, mode, args.threshold))
        t2 = build_table(summary, mode, _col_titles(table2_columns(), True), PAPER_ROWS_T2, args.methods, not_run)
        write_table(t2, args.out, f"table2_rare{suffix}",
                    "Rare-F1 (%) on down-sampled R-variants; @x% = fraction of tail positives removed.",
                    _footnotes(t2, summary, mode, args.threshold))
    if args.summary_json:
        flat: dict = {}
        for _, r in summary.iterrows():
            key = f"{r['mode']}/{r['dataset']}/{r['setting']}/{r['method']}"
            flat[key] = {m: None if math.isnan(r[f"{m}_mean"]) else round(float(r[f"{m}_mean"]), 6)
                         for m in METRICS}
        write_json(args.summary_json, flat)
    if args.summary_dir:
        write_summary_dir(summary, args.summary_dir)
    print(json.dumps({"runs": int(len(df) // len(MODES)), "tables": str(args.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
