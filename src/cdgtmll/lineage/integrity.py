"""Before every run: the ``metrics.json`` files the tables read are the ones on disk.

Snakemake notices a changed input only when its modification time is newer than the job's
outputs (then it compares the checksum it recorded). A ``metrics.json`` edited by hand and
given back an old time (``cp -a``, ``touch -d``, a restore from a backup) is not looked at
again, and the tables keep showing what they showed, or worse, a later rebuild shows the
edited value. The tables record the sha256 of every ``metrics.json`` they read (each table's
``.sources.json`` and ``all_runs.csv``); :func:`check_recorded_metrics`, called by the
Snakefile as it is parsed (main process only), compares them with the files on disk:

* the same bytes: nothing to do (a plain re-run plans nothing);
* other bytes whose content no longer matches the self-hash the evaluate job sealed it with
  (:func:`cdgtmll.lineage.seal.seal_problem`: a value edited by hand): the file is deleted, as every
  reader of the pipeline deletes a corrupt file, so that Snakemake re-runs rule ``evaluate``
  for it and every table after it in this same run;
* other bytes that carry a valid self-hash: deleted too, so that rule ``evaluate`` makes it
  again from its predictions in this same run and the tables are rebuilt from what the
  predictions give. The self-hash is tamper-evidence, not a signature: such a file may be a
  real evaluation the tables did not read (a restored copy, a run whose tables job did not
  finish) or a forgery whose maker recomputed the seal, and nothing short of evaluating the
  predictions again tells them apart. Evaluating is cheap (seconds per run), and since
  ``metrics.json`` holds nothing particular to one machine or one time
  (:mod:`cdgtmll.metrics.evaluate_run`), a real evaluation comes back byte for byte. (Giving such a file a new time and
  rebuilding the tables from it would let a re-sealed forgery reach Table 1, with only
  ``cdgtmll audit`` failing it.)

Each case prints one line naming the file, the record that differs and what was done. A forger
who also re-records the sha256 in the tables' records is not seen here (the records agree with
the file); ``cdgtmll audit`` fails that one, since it re-evaluates the predictions and names each
metric that differs (:mod:`cdgtmll.lineage.audit`).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from cdgtmll.io import producer_of, sha256_file
from cdgtmll.lineage.seal import seal_problem

#: where rules ``tables`` and ``metrics_summary`` write (workflow/rules/report.smk)
TABLES_DIR = Path("results/tables")


def recorded_metrics(tables_dir: str | os.PathLike = TABLES_DIR) -> dict[Path, tuple[str, Path]]:
    """``{metrics.json path: (sha256 recorded, the record that recorded it)}`` from every
    ``*.sources.json`` and ``all_runs.csv`` in ``tables_dir``. A record that cannot be read is
    skipped: its own job re-makes it, and the audit names it."""
    tables_dir = Path(tables_dir)
    out: dict[Path, tuple[str, Path]] = {}
    for src in sorted(tables_dir.glob("*.sources.json")):
        try:
            cells = json.loads(src.read_text(encoding="utf-8")).get("cells") or {}
        except (OSError, ValueError, AttributeError):
            continue
        for runs in cells.values():
            for r in runs:
                if isinstance(r, dict) and r.get("path") and r.get("sha256"):
                    out.setdefault(Path(r["path"]), (str(r["sha256"]), src))
    long_table = tables_dir / "all_runs.csv"
    if long_table.is_file():
        try:
            with open(long_table, newline="", encoding="utf-8") as fh:
                for rec in csv.DictReader(fh):
                    if rec.get("metrics_path") and rec.get("metrics_sha256"):
                        out.setdefault(Path(rec["metrics_path"]), (rec["metrics_sha256"], long_table))
        except (OSError, ValueError, csv.Error):
            pass
    return out


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def check_recorded_metrics(tables_dir: str | os.PathLike = TABLES_DIR, root: str | os.PathLike = ".") -> list[str]:
    """Compare the recorded sha256 of every ``metrics.json`` the tables read with the file on
    disk and delete each file that differs, so that rule ``evaluate`` makes it again from its
    predictions (module docstring). Only files inside ``root`` (the working directory)
    are touched. Returns one line per file acted on, for the log."""
    root = Path(root).resolve()
    lines: list[str] = []
    for path, (recorded, record) in sorted(recorded_metrics(Path(root) / tables_dir).items()):
        full = path if path.is_absolute() else root / path
        if not full.is_file() or not _inside(full, root):
            continue  # missing: Snakemake re-makes it anyway
        actual = sha256_file(full)
        if actual == recorded:
            continue
        shown = record.relative_to(root) if _inside(record, root) else record
        why = f"{path}: sha256 {actual[:16]}… differs from the {recorded[:16]}… that {shown} recorded"
        try:
            problem = seal_problem(json.loads(full.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            problem = f"cannot be read ({type(exc).__name__}: {exc})"
        full.unlink()
        if problem is not None:
            lines.append(f"{why}, and {problem}; deleted, so that this run re-makes it ({producer_of(full)}) and "
                         "the tables after it")
        else:
            lines.append(f"{why}; its self-hash holds, but the tables did not read it (a restored or re-made "
                         "evaluation, or a forgery with a recomputed seal): deleted, so that this run evaluates its "
                         f"predictions again ({producer_of(full)}) and rebuilds the tables from them")
    return lines
