"""A finished Snakemake run's jobs as a job-log TSV, and the shipped table of reference seconds.

    python tools/job_log.py jobs RUN_DIR OUT.tsv --note "what run this is" --reference yes|no [--log LOG]
    python tools/job_log.py reference RUN_DIR [--out src/cdgtmll/pipeline/reference_seconds.json]
        --load "2-7" [--machine "..."] [--date YYYY-MM-DD] [--commit SHA] [--log LOG]

Both read the jobs of ONE Snakemake invocation: ``--log`` (a ``.snakemake/log/*.snakemake.log``
of the run; default the one with the most finished jobs, ``--log all`` for every job the
metadata records). The metadata keeps only each output's latest job, so a few jobs re-run
after the main invocation (a figure after a code change) would otherwise sit hours after it.

``jobs`` reads RUN_DIR/.snakemake/metadata and RUN_DIR/logs/benchmarks
(:func:`cdgtmll.pipeline.joblog.run_jobs`) and writes one row per job: rule, method, dataset,
variant, seeds, start_s and end_s (seconds after the run's first start), cpu_s (the benchmark
file's ``cpu_time``, empty without one). The header comments name the run (``--note``) and,
as ``shipped reference: yes|no``, whether the replay test (tests/unit/pipeline/test_eta_replay.py)
may check this run's estimate with the shipped reference table: ``no`` for the run the table
was made from (the check would be circular).

``reference`` writes the table of median seconds per (rule, method, dataset) of RUN_DIR's jobs
(:func:`cdgtmll.pipeline.joblog.reference_table`), recording where it came from: the run's
commit (``git -C RUN_DIR rev-parse HEAD`` unless given), date (of its first job, UTC, unless
given), machine (this machine unless given) and the load it ran under (``--load``: say it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
from pathlib import Path

from cdgtmll.io import write_json
from cdgtmll.lineage import worktree
from cdgtmll.pipeline.joblog import main_log, reference_table, run_jobs, write_job_log

#: where the package's reference table lives (package data of cdgtmll)
SHIPPED = Path(__file__).resolve().parents[1] / "src" / "cdgtmll" / "workflow" / "reference_seconds.json"


def _commit(run_dir: Path) -> str:
    """The commit of the checkout holding ``run_dir``, read through the package's one git call
    (:func:`cdgtmll.lineage.worktree.run_git`)."""
    sha = worktree.run_git(run_dir, "rev-parse", "HEAD")
    dirty = worktree.run_git(run_dir, "status", "--porcelain", "--untracked-files=no")
    if sha is None or dirty is None:
        return "unknown (not a git checkout)"
    return f"{sha.strip()} (tracked files modified)" if dirty.strip() else sha.strip()


def _machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "?"
    return f"{platform.node()}: {os.cpu_count()} cores, {cpu}, {platform.system()} {platform.machine()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("jobs", help="write the run's job-log TSV")
    j.add_argument("run_dir", type=Path)
    j.add_argument("out", type=Path)
    j.add_argument("--note", action="append", default=[], help="a header line saying what run this is (repeatable)")
    j.add_argument("--reference", choices=("yes", "no"), required=True,
                   help="may the replay test use the shipped reference table for this run (no: the table's own run)")
    r = sub.add_parser("reference", help="write the table of reference seconds per key")
    r.add_argument("run_dir", type=Path)
    r.add_argument("--out", type=Path, default=SHIPPED)
    r.add_argument("--load", required=True, help="the load the run ran under, e.g. '2-7 (2 cores)'")
    r.add_argument("--machine", default=None)
    r.add_argument("--date", default=None)
    r.add_argument("--commit", default=None)
    for p in (j, r):
        p.add_argument("--log", default=None, help="the invocation's Snakemake log; 'all': no log, every job")
    args = ap.parse_args(argv)
    log = None if args.log == "all" else Path(args.log) if args.log else main_log(args.run_dir)
    if log is not None and not log.is_file():
        print(f"job_log: no Snakemake log {log}", file=sys.stderr)
        return 1
    try:
        jobs = run_jobs(args.run_dir, log=log)
    except (FileNotFoundError, ValueError) as exc:
        print(f"job_log: {exc}", file=sys.stderr)
        return 1
    if not jobs:
        print(f"job_log: {args.run_dir}/.snakemake/metadata holds no finished job", file=sys.stderr)
        return 1
    first = dt.datetime.fromtimestamp(min(x.start for x in jobs), dt.UTC)
    span = max(x.end for x in jobs) - min(x.start for x in jobs)
    if args.cmd == "jobs":
        header = [*args.note, f"made by tools/job_log.py jobs from {args.run_dir.resolve()}"
                  + (f" (the invocation of {log.relative_to(args.run_dir) if log.is_relative_to(args.run_dir) else log})"
                     if log else " (every job of .snakemake/metadata)"),
                  f"first job started {first.isoformat(timespec='seconds')}; {len(jobs)} jobs; {span:.0f} s",
                  f"shipped reference: {args.reference}"]
        write_job_log(args.out, jobs, header)
        print(f"job_log: {len(jobs)} jobs over {span:.0f} s -> {args.out}")
        return 0
    about = {
        "made_by": f"tools/job_log.py reference {args.run_dir.resolve()}" + (f" --log {log.name}" if log else ""),
        "commit": args.commit or _commit(args.run_dir),
        "date": args.date or first.date().isoformat(),
        "machine": args.machine or _machine(),
        "load": args.load,
        "jobs": len(jobs),
        "run_seconds": round(span, 1),
        "note": "median wall seconds (Snakemake metadata end - start) per (rule, method, dataset)",
    }
    write_json(args.out, reference_table(jobs, about))
    print(f"job_log: reference seconds of {len(jobs)} jobs -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
