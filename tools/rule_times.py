"""Wall and CPU time per rule of a finished run, from Snakemake's benchmark files.

    python tools/rule_times.py                      # this checkout's logs/benchmarks
    python tools/rule_times.py --root DIR --top 10  # another checkout; the 10 costliest jobs

Every rule of the workflow names a ``benchmark:`` file under ``logs/benchmarks/<rule
folder>/...tsv`` (workflow/rules/*.smk), where Snakemake writes the job's wall seconds (``s``),
its CPU seconds (``cpu_time``, user + system of the job's processes, sampled by psutil) and
its peak memory (``max_rss``, MB). This prints, as Markdown:

* one row per rule folder (``train``, ``evaluate``, ``prepare``, ``variants``, ``figures``,
  ``report``): jobs, wall and CPU seconds summed over its jobs, the share of all jobs' CPU,
  the largest peak memory;
* the ``train`` jobs summed per method (the benchmark file is ``<dataset>/<variant>/<method>.tsv``);
* with ``--top N``, the N jobs with the most CPU.

The sums are of the jobs only, and the CPU sums are lower bounds: Snakemake samples a job's
CPU time (psutil) every 0.5 s for its first 15 s, then every 30 s, so up to 30 s of a job's
last CPU time is not in its file (Snakemake 9.27, benchmark.py). Snakemake's own time
(planning, scheduling, starting each job) is in no file; compare the sums with the run's total
wall and CPU time measured around it (e.g. ``/usr/bin/time make all``).
A file without a data row (a job still running, or killed) is counted under ``unfinished``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path


def read_benchmarks(root: Path) -> tuple[list[dict], list[Path]]:
    """Records ``{folder, path, method, wall, cpu, rss}`` of every benchmark file with a data
    row under ``root/logs/benchmarks``, and the files without one."""
    base = root / "logs" / "benchmarks"
    if not base.is_dir():
        raise SystemExit(f"rule_times: no {base}: run the workflow first (or pass --root)")
    records, unfinished = [], []
    for f in sorted(base.rglob("*.tsv")):
        with f.open(newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if not rows:
            unfinished.append(f)
            continue
        row = rows[-1]  # a job run again appends nothing: Snakemake rewrites the file
        rel = f.relative_to(base)
        try:
            wall, cpu = float(row["s"]), float(row["cpu_time"])
            rss = float(row["max_rss"]) if row.get("max_rss") not in (None, "", "NA", "-") else float("nan")
        except (KeyError, ValueError) as exc:
            raise SystemExit(f"rule_times: {f}: expected Snakemake's benchmark columns s, cpu_time, max_rss "
                             f"({exc})") from None
        records.append({"folder": rel.parts[0], "path": rel.as_posix(), "method": rel.stem,
                        "wall": wall, "cpu": cpu, "rss": rss})
    return records, unfinished


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def render(records: list[dict], unfinished: list[Path], top: int = 0) -> str:
    total_cpu = sum(r["cpu"] for r in records) or float("nan")
    by_folder: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_folder[r["folder"]].append(r)
    rows = []
    for folder, rs in sorted(by_folder.items(), key=lambda kv: -sum(r["cpu"] for r in kv[1])):
        cpu = sum(r["cpu"] for r in rs)
        rows.append([folder, str(len(rs)), f"{sum(r['wall'] for r in rs):.0f}", f"{cpu:.0f}",
                     f"{100 * cpu / total_cpu:.1f}%", f"{max(r['rss'] for r in rs):.0f}"])
    rows.append(["**all jobs**", str(len(records)), f"{sum(r['wall'] for r in records):.0f}", f"{total_cpu:.0f}",
                 "100%", f"{max((r['rss'] for r in records), default=float('nan')):.0f}"])
    parts = [_table(["rule folder", "jobs", "wall s (sum)", "CPU s (sum)", "CPU share", "max RSS MB"], rows)]

    train = [r for r in records if r["folder"] == "train"]
    if train:
        per: dict[str, list[dict]] = defaultdict(list)
        for r in train:
            per[r["method"]].append(r)
        mrows = [[m, str(len(rs)), f"{sum(r['wall'] for r in rs):.0f}", f"{sum(r['cpu'] for r in rs):.0f}",
                  f"{sum(r['cpu'] for r in rs) / len(rs):.0f}"]
                 for m, rs in sorted(per.items(), key=lambda kv: -sum(r["cpu"] for r in kv[1]))]
        parts.append(_table(["train: method", "jobs", "wall s (sum)", "CPU s (sum)", "CPU s per job"], mrows))
    if top:
        trows = [[r["path"], f"{r['wall']:.0f}", f"{r['cpu']:.0f}"]
                 for r in sorted(records, key=lambda r: -r["cpu"])[:top]]
        parts.append(_table(["job (benchmark file)", "wall s", "CPU s"], trows))
    if unfinished:
        parts.append(f"unfinished (no data row): {len(unfinished)} files, e.g. {unfinished[0]}")
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("."), help="the checkout that ran the workflow (default: .)")
    ap.add_argument("--top", type=int, default=0, help="also list the N jobs with the most CPU time")
    args = ap.parse_args(argv)
    records, unfinished = read_benchmarks(args.root)
    sys.stdout.write(render(records, unfinished, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
