"""Aggregate per-run metrics into the paper's tables (CSV, Markdown, LaTeX, HTML).

``python -m cdgtmll.tables.build --metrics RUN/seed*/metrics.json ... --methods M ... --out results/tables
[--part all|tables|summary] [--datasets NAME[=TITLE] ...] [--severities NAME=S1,S2 ...]
[--profile NAME [--profile-file PATH]] [--profiles-dir config]``

``--part`` splits the work between two rules: ``tables`` writes the paper's tables with their
``.sources.json`` and ``profile.json`` from the tables' own runs (rule ``tables``: it runs as
soon as those runs are evaluated, before the studies' settings train), ``summary`` writes
``all_runs.csv``, ``metrics_full.*`` and the ``--summary-json`` / ``--summary-dir`` files from
every run (rule ``metrics_summary``); ``all`` (the default) writes both.

* ``all_runs.csv`` – one row per (dataset, variant, method, training seed,
  threshold mode) with every metric of App. E.4: the long form every table is
  computed from.
* ``metrics_full.{csv,md,html}`` – every metric, mean ± std per (dataset, setting, method).
* ``table1_standard.{csv,md,tex,html}`` – Table 1's exact columns (VOC/COCO: mAP,
  Rare-F1; Yeast: Micro-F1, Rare-F1; Mediamill: Macro-F1, Rare-F1).
* ``table2_rare.*`` – Table 2: Rare-F1 on the R-variants at the paper's severities.
* ``table3_xmc.*`` – Table 3: P@1/3/5 on Eurlex-4K, Wiki10-31K, AmazonCat-13K.
* ``table{1,2,3}_configured.*`` – the same three layouts with the *configured* datasets
  (``--datasets``, in config order) as columns: Table 1's metrics for a dataset of the
  paper's Table 1, mAP and Rare-F1 for any other; Rare-F1 at each configured severity
  (``--severities``); P@1/3/5 (see :mod:`cdgtmll.tables.layout`).
* ``profile.json`` – which profile (``--profile``, ``--profile-file``), datasets and methods
  the tables were written for; the HTML pages name it under their title.

Tables are written for the threshold mode named in the file (``global`` = one
threshold for all labels, ``adaptive`` = per-label thresholds tuned on
validation); the unsuffixed file uses ``global``. Cells are mean ± sample std
(ddof = 1) in percent over training seeds, and for R-variants over training
seeds x sampling seeds; ``n`` gives the number of runs (CSV; the footnotes give its range).
Datasets not run are marked ``n.r.`` with a footnote; nothing is ever filled in from the paper.
Each ``n.r.`` footnote says why: a dataset not in this profile's datasets (``--datasets``), a
severity not in its ``--severities``, a row of the paper's table not in its ``--methods``, each
with the shipped profiles (``--profiles-dir``, default the checkout's ``config/``) that run it,
and for a dataset where its data comes from (the dataset registry's sources: a packaged copy, a
download URL, or a dataset mirror only); or configured, but no run was given. The footnotes
depend on the shipped profiles, which are inputs of the ``tables`` rule.
Best mean per column is bold, second underlined, only where no other row shows the same value at
the printed precision (:func:`cdgtmll.tables.layout.rank_marks`). A footnote gives, per dataset and
metric, the ceiling over the panel (the best test-oracle value of any run given) and, for Rare-F1,
the tail's size and its labels' training and test positive counts; a column whose ceiling is
below ``--min-ceiling`` points or whose Rare-F1 averages fewer than ``--min-tail-labels`` tail
labels is said to be unable to separate methods and has no marks. Rows the paper's table does not have
(reference rows, further peers) come last, under a rule, marked ``‡ not in the paper``.
For image datasets a footnote says how the ResNet-50 was used in the runs behind the cells
(fine-tuned end to end, or frozen with heads on cached features), read from each run's
``provenance.json``. Each table has a ``.sources.json`` sidecar listing the metrics files
(with sha256) behind every cell, which ``cdgtmll audit`` follows (for any of the table's files).
Every file is written into a folder beside ``--out`` and moved in only once all are written
(the ``.sources.json`` files last): a failed run (a corrupt ``metrics.json``: named, deleted,
re-made by the next ``snakemake`` run) leaves the previous tables, never a sidecar without its table.

Partial tables (:mod:`cdgtmll.tables.partial`, while the workflow runs): ``--pending PATH ...``
names the metrics files planned but not evaluated yet; a cell whose runs are among them shows
``…`` instead of ``n.r.`` (a value followed by ``…``: the mean of the runs done so far), with a
footnote. ``--as-of TIME`` marks every file but the CSVs with ``partial: k of n runs done (as of
TIME)`` (per table: that table's runs). ``--keep-corrupt`` leaves a metrics or provenance file that
cannot be read where it is (the run's own rules deal with it). Without these options the files
are the final tables' byte for byte.

Further footnotes, from what each ``metrics.json`` records:

* the decision rule behind each F1 column of a row scored by its own rule (global mode):
  the plug-in rows (PE, SRB) use one shared threshold for Micro-F1 and per-label
  thresholds for Macro-F1 / Rare-F1 (``decision_rules`` of the ``method`` block);
* how many labels Macro-F1 / Rare-F1 left out because they have no test positive
  (``f1_no_positive_labels``; rule ``evaluation.f1_no_positive_labels``), per dataset;
* which threshold-free metrics of a row equal another row's *by construction*
  (:func:`equal_by_construction`: PE's mAP and P@k are BCE's), so that equal cells are
  not read as a finding.

Layout of the code: this module is the command line (:func:`main`); the work is done in
:mod:`cdgtmll.tables.collect` (the long table and its summary),
:mod:`cdgtmll.tables.layout` (rows, columns, cells), :mod:`cdgtmll.tables.footnotes` (footnotes)
and :mod:`cdgtmll.tables.render` (the writers).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from cdgtmll.io import CorruptArtifactError, atomic_write, staged_dir, write_json
from cdgtmll.lineage.code import identity
from cdgtmll.lineage.summary import code_footnote, code_lineage, device_footnote, device_lineage, is_mixed
from cdgtmll.tables.collect import METRICS, MODES, collect, pending_runs, summarise, write_summary_dir
from cdgtmll.tables.footnotes import (
    ProfileContext,
    _full_notes,
    default_profiles_dir,
    footnotes,
    shipped_profiles,
    tail_records,
)
from cdgtmll.tables.layout import (
    CONFIGURED_CAPTIONS,
    DIGITS,
    LAYOUTS,
    MIN_CEILING,
    MIN_TAIL_LABELS,
    PAPER_ROWS,
    PAPER_TITLES,
    build_table,
    column_checks,
    configured_columns,
    paper_columns,
)
from cdgtmll.tables.render import partial_banner, pending_note, write_metrics_full, write_table
from cdgtmll.variants.naming import parse_setting

MODE_TITLE = {"global": "global threshold", "adaptive": "label-adaptive thresholds"}
#: what one call writes (``--part``)
PARTS = ("all", "tables", "summary")


def _datasets(items: list[str] | None, summary) -> list[tuple[str, str]]:
    """(name, column title) of the configured datasets: the paper's title for its datasets,
    else the given ``NAME=TITLE`` title, else the registry's display name, else the name.
    Default: the datasets run."""
    from cdgtmll.data.registry import REGISTRY

    if items is None:
        items = list(dict.fromkeys(summary["dataset"])) if not summary.empty else []
    out = []
    for item in items:
        name, _, title = item.partition("=")
        known = REGISTRY[name].display_name if name in REGISTRY else name
        out.append((name, PAPER_TITLES.get(name) or title or known))
    return out


def _severities(items: list[str] | None, summary) -> dict[str, list[float]]:
    """``NAME=S1,S2`` -> {name: [s1, s2]}; default: the R-variant settings run per dataset."""
    if items is None:
        out: dict[str, list[float]] = {}
        if not summary.empty:
            for ds, setting in zip(summary["dataset"], summary["setting"]):
                parsed = parse_setting(setting)
                if parsed is not None and parsed[0] == "R":
                    out.setdefault(ds, []).append(parsed[1])
        return {ds: sorted(set(v)) for ds, v in out.items()}
    out = {}
    for item in items:
        name, eq, values = item.partition("=")
        try:
            out[name] = [float(v) for v in values.split(",") if v.strip()] if eq else []
        except ValueError:
            raise SystemExit(f"--severities {item!r}: expected NAME=S1,S2 with numbers, e.g. yeast=0.4,0.5") from None
    return out


def _context(args: argparse.Namespace, severities: dict[str, list[float]]) -> ProfileContext:
    """What the ``n.r.`` footnotes say about this profile and the shipped ones."""
    given = args.datasets is not None
    return ProfileContext(
        name=args.profile,
        datasets=tuple(d.partition("=")[0] for d in args.datasets) if given else None,
        methods=tuple(args.methods),
        severities=severities if args.severities is not None else None,
        shipped=shipped_profiles(args.profiles_dir if args.profiles_dir is not None else default_profiles_dir()))


def add_pending(table: dict, pending: dict[tuple[str, str, str], list[str]]) -> None:
    """Mark the cells of a table built by :func:`cdgtmll.tables.layout.build_table` whose runs are
    pending (``pending``: :func:`cdgtmll.tables.collect.pending_runs`): a cell without a value gets
    ``{"pending": paths}`` (shown ``…`` instead of ``n.r.``), a cell with one the key ``pending``
    beside it. A method that cannot run on the dataset (``not run†``) is left as it is."""
    for j, (ds, _, setting, *_rest) in enumerate(table["columns"]):
        for r in table["rows"]:
            paths = pending.get((ds, setting, r))
            cell = table["cells"].get((r, j))
            if not paths or (cell is not None and "not_run" in cell):
                continue
            table["cells"].setdefault((r, j), {})["pending"] = sorted(set(paths))


def table_runs(table: dict) -> tuple[int, int]:
    """(runs done, runs done or pending) behind a table's cells: its ``k of n``."""
    done = {p for c in table["cells"].values() for p in c.get("sources", ())}
    pending = {p for c in table["cells"].values() for p in c.get("pending", ())} - done
    return len(done), len(done) + len(pending)


def _write_tables(args: argparse.Namespace, out: Path, summary, stamp: str, lineage: dict, code_note: list[str],
                  n_runs: int, devices: dict, device_note: list[str], runs=None) -> None:
    """The paper's tables (both threshold modes, as in the paper and with the configured
    columns), each with its ``.sources.json``, and ``profile.json``, into ``out``. ``runs``:
    the long table, whose oracle values and tails say which columns can separate methods
    (:func:`cdgtmll.tables.layout.column_checks`)."""
    datasets = _datasets(args.datasets, summary)
    built_by = identity(["cdgtmll.tables.build"])
    record = {"code": {"tables": {k: built_by[k] for k in ("sha256", "roots", "lock_sha256")}, "runs": lineage}}
    not_run = {}
    for item in args.not_run:
        ds, method, reason = item.split("|", 2)
        not_run[(ds, method)] = reason
    severities = _severities(args.severities, summary)
    context = _context(args, severities)
    checks = column_checks(runs, tail_records(runs), args.min_ceiling, args.min_tail_labels) \
        if runs is not None else {}
    pending = pending_runs(args.pending, dict(args.alias))
    for mode in MODES:
        suffix = "" if mode == "global" else "_adaptive"
        mode_title = MODE_TITLE[mode] + (f" {args.threshold}" if mode == "global" else "")
        for stem, number, caption in LAYOUTS:
            for configured in (False, True):
                cols = configured_columns(number, datasets, severities) if configured else paper_columns(number)
                table = build_table(summary, mode, cols, PAPER_ROWS[number], args.methods, not_run,
                                    number=number, digits=DIGITS[number], checks=checks)
                table["configured"] = configured
                add_pending(table, pending)
                name = f"table{number}_configured" if configured else stem
                what = "configured datasets" if configured else "as in the paper"
                notes = footnotes(table, summary, mode, args.threshold, context) + code_note + device_note
                if any("pending" in c for c in table["cells"].values()):
                    notes.append(pending_note())
                write_table(table, out, f"{name}{suffix}", CONFIGURED_CAPTIONS[number] if configured else caption,
                            notes, title=f"Table {number} ({what}), {mode_title}", stamp=stamp, record=record,
                            banner=partial_banner(*table_runs(table), args.as_of) if args.as_of else "")
    write_json(out / "profile.json", {"profile": args.profile, "configfiles": args.profile_file,
                                      "datasets": [d for d, _ in datasets], "methods": args.methods,
                                      "runs": n_runs, "code_lineage": lineage,
                                      "mixed_code": is_mixed(lineage), "code_footnote": code_note[0] if code_note else None,
                                      "device_lineage": devices,
                                      "device_footnote": device_note[0] if device_note else None})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", required=True, type=Path, nargs="+",
                    help="metrics.json files of this configuration's runs")
    ap.add_argument("--methods", nargs="+", help="methods of the config, in order (the tables' rows; not read by "
                                                "--part summary)")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--summary-json", type=Path, help="flat metrics summary (every mode, dataset, setting, method)")
    ap.add_argument("--summary-dir", type=Path,
                    help="one small JSON per (dataset, setting, method) for `dvc metrics show`: "
                         "<dir>/<dataset>/<setting>/<method>.json")
    ap.add_argument("--not-run", action="append", default=[], metavar="DATASET|METHOD|REASON",
                    help="a configured method that could not run on a dataset, and why")
    ap.add_argument("--datasets", nargs="+", metavar="NAME[=TITLE]",
                    help="configured datasets, in order: the columns of table{1,2,3}_configured "
                         "(default: the datasets run)")
    ap.add_argument("--severities", action="append", metavar="NAME=S1,S2",
                    help="configured R-variant severities of a dataset (default: those run)")
    ap.add_argument("--profile", default="", help="config profile name, shown on the HTML pages")
    ap.add_argument("--profile-file", nargs="*", default=[], help="the profile's config file(s)")
    ap.add_argument("--profiles-dir", type=Path, default=None,
                    help="the shipped profiles (*.yaml) named in the n.r. footnotes (default: the checkout's config/)")
    ap.add_argument("--alias", nargs=2, action="append", default=[], metavar=("SETTING_DIR", "RUN_DIR"),
                    help="a setting whose run spec is another's (e.g. .../CD-GTMLL@alpha=0.4 and .../CD-GTMLL): "
                         "its rows are read from RUN_DIR's metrics, under the setting's name (column alias_of)")
    ap.add_argument("--min-ceiling", type=float, default=MIN_CEILING, metavar="POINTS",
                    help="a column whose ceiling over the panel (best test-oracle value of any run) is below this many "
                         f"points cannot separate methods: no marks, a footnote says so (tables.min_ceiling; default "
                         f"{MIN_CEILING:g})")
    ap.add_argument("--min-tail-labels", type=int, default=MIN_TAIL_LABELS, metavar="N",
                    help="a Rare-F1 column averaging fewer tail labels cannot separate methods (tables.min_tail_labels; "
                         f"default {MIN_TAIL_LABELS})")
    ap.add_argument("--part", choices=PARTS, default="all",
                    help="tables: the tables, their .sources.json and profile.json; summary: all_runs.csv, "
                         "metrics_full.* and the --summary-json/--summary-dir files; all: both (default)")
    ap.add_argument("--pending", nargs="*", default=[], type=Path, metavar="PATH",
                    help="partial tables: metrics.json files planned but not evaluated yet; their cells show … "
                         "instead of n.r.")
    ap.add_argument("--as-of", metavar="TIME", help="partial tables: every file but the CSVs starts with "
                                                    "'partial: k of n runs done (as of TIME)'")
    ap.add_argument("--keep-corrupt", action="store_true",
                    help="leave a metrics.json or provenance.json that cannot be read where it is (partial tables)")
    args = ap.parse_args(argv)
    if args.part != "summary" and not args.methods:
        ap.error(f"--part {args.part} writes the tables: --methods is required")
    try:
        df = collect(args.metrics, dict(args.alias), remove=not args.keep_corrupt)
    except CorruptArtifactError:
        raise  # its own message names the file and the rule that re-makes it
    except ValueError as exc:  # a wrong --alias
        raise SystemExit(f"error: {exc}") from None
    summary = summarise(df)
    n_runs = int(df["metrics_path"].nunique())  # a setting read from another's run (alias_of) is not a run
    stamp = (f"Profile {args.profile}" + (f" ({', '.join(args.profile_file)})" if args.profile_file else "") + "; "
             if args.profile else "") + f"{n_runs} runs (metrics.json files); written by python -m cdgtmll.tables.build."
    lineage = code_lineage(df)  # which commits and code the runs come from
    code_note = [n] if (n := code_footnote(lineage)) else []
    devices = device_lineage(df)  # which kinds of machine the runs ran on
    device_note = [n] if (n := device_footnote(devices)) else []
    # every file into a folder beside the tables first, moved in once all are written (each table's
    # .sources.json last): a failure leaves the previous set, never a sources file without its table
    with staged_dir(args.out, last=(".sources.json",)) as out:
        if args.part in ("all", "summary"):
            atomic_write(out / "all_runs.csv", df.to_csv(index=False))
            done = set(df["metrics_path"])
            banner = partial_banner(len(done), len(done | set(map(str, args.pending))), args.as_of) \
                if args.as_of else ""
            write_metrics_full(summary, out, _full_notes(summary) + code_note + device_note, stamp, banner)
        if args.part in ("all", "tables"):
            _write_tables(args, out, summary, stamp, lineage, code_note, n_runs, devices, device_note, df)
    if args.part in ("all", "summary"):
        if args.summary_json:
            flat: dict = {}
            for _, r in summary.iterrows():
                key = f"{r['mode']}/{r['dataset']}/{r['setting']}/{r['method']}"
                flat[key] = {m: None if math.isnan(r[f"{m}_mean"]) else round(float(r[f"{m}_mean"]), 6)
                             for m in METRICS}
            write_json(args.summary_json, flat)
        if args.summary_dir:
            write_summary_dir(summary, args.summary_dir)
    print(json.dumps({"runs": n_runs, "tables": str(args.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
