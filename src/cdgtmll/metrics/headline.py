"""The headline of a run for ``dvc exp show``: ``results/headline.json``, a few short numbers.

``results/metrics/<dataset>/<setting>/<method>.json`` (rule ``metrics_summary``) gives ``dvc
metrics show`` one row per dataset, setting and method; in ``dvc exp show`` the same files are
one column per metric and file, each named by its file path (DVC prefixes a name that several
files share). The headline is the proposed method's (:data:`cdgtmll.figures.style.PROPOSED`)
per dataset:

* ``clean.mAP`` and ``clean.rare``: mAP and Rare-F1 on the clean test split (Table 1);
* ``R.rare``: Rare-F1 on the most severe R-variant (Table 2), whose severity is ``R.severity``.

The names are short and no per-row file has them, so DVC prints them as they are; with more than
one dataset they start with the dataset (``yeast.clean.mAP``). Values are the per-row files'
(means over the runs, 4 decimals); a row that is missing leaves its numbers out. dvc.yaml's
stage writes the file after Snakemake (``python -m cdgtmll.metrics.headline``); docs/dvc.md
shows the ``dvc exp show`` command that prints it with the parameters that vary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cdgtmll.figures.style import PROPOSED
from cdgtmll.io import atomic_write
from cdgtmll.variants.naming import CLEAN, parse_setting

#: where rule metrics_summary writes the per-row files, and where the headline goes
ROWS = Path("results/metrics")
OUT = Path("results/headline.json")


class HeadlineError(ValueError):
    """A per-row metrics file cannot be read; the message names it."""


def _row(path: Path) -> dict:
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise HeadlineError(f"{path}: cannot read the metrics row ({exc}); rule metrics_summary writes it "
                            "(snakemake all --configfile <profile>)") from exc
    if not isinstance(row, dict):
        raise HeadlineError(f"{path}: expected a JSON object of metrics, got {type(row).__name__}")
    return row


def _number(row: dict, key: str, path: Path) -> float | None:
    value = row.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise HeadlineError(f"{path}: field '{key}' must be a number or null, got {value!r}")
    return value


def headline(rows: str | os.PathLike = ROWS, method: str = PROPOSED) -> dict:
    """``{dataset: {"clean": {"mAP", "rare"}, "R": {"rare", "severity"}}}`` from the per-row
    files of ``method`` under ``rows`` (module docstring); the dataset level is left out when
    there is one dataset. {} when ``method`` has no rows."""
    rows = Path(rows)
    out: dict[str, dict] = {}
    for dataset_dir in sorted(p for p in rows.iterdir() if p.is_dir()) if rows.is_dir() else []:
        entry: dict[str, dict] = {}
        clean = dataset_dir / CLEAN / f"{method}.json"
        if clean.is_file():
            row = _row(clean)
            entry["clean"] = {"mAP": _number(row, "mAP", clean), "rare": _number(row, "rare_f1", clean)}
        severities = [(parsed[1], d) for d in dataset_dir.iterdir()
                      if (parsed := parse_setting(d.name)) and parsed[0] == "R" and (d / f"{method}.json").is_file()]
        if severities:
            severity, d = max(severities)
            path = d / f"{method}.json"
            entry["R"] = {"rare": _number(_row(path), "rare_f1", path), "severity": severity}
        if entry:
            out[dataset_dir.name] = entry
    return next(iter(out.values())) if len(out) == 1 else out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdgtmll.metrics.headline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, default=ROWS, help=f"the per-row metrics files (default {ROWS})")
    ap.add_argument("--out", type=Path, default=OUT, help=f"the headline file (default {OUT})")
    ap.add_argument("--method", default=PROPOSED, help=f"whose numbers (default {PROPOSED})")
    args = ap.parse_args(argv)
    try:
        data = headline(args.rows, args.method)
    except HeadlineError as exc:
        print(f"headline: {exc}", file=sys.stderr)
        return 1
    atomic_write(args.out, json.dumps(data, indent=2) + "\n")  # in this order: dvc exp show's columns
    print(f"headline: {args.out}" + ("" if data else f" is empty: no rows of {args.method} under {args.rows}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
