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

``--procs FILE`` reads instead the exact CPU time of every Python process of a run, logged by
``tools/proc_cpu/sitecustomize.py`` (run the workflow with ``PYTHONPATH=$PWD/tools/proc_cpu
CDGTMLL_PROC_LOG=$PWD/FILE``), and prints one row per program (the ``-m`` module, else the script's
name) and the training processes per method (the last folder of ``--outdir``: the benchmark
file's name). Those sums are exact for what ran in Python; other programs (make, the shell,
uv) are in neither table.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
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


def _grouped(records: list[dict], key: str) -> list[tuple[str, list[dict]]]:
    """``records`` grouped by ``record[key]``, the groups by CPU time summed, largest first."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[r[key]].append(r)
    return sorted(groups.items(), key=lambda kv: -sum(r["cpu"] for r in kv[1]))


def render(records: list[dict], unfinished: list[Path], top: int = 0) -> str:
    total_cpu = sum(r["cpu"] for r in records) or float("nan")
    rows = []
    for folder, rs in _grouped(records, "folder"):
        cpu = sum(r["cpu"] for r in rs)
        rows.append([folder, str(len(rs)), f"{sum(r['wall'] for r in rs):.0f}", f"{cpu:.0f}",
                     f"{100 * cpu / total_cpu:.1f}%", f"{max(r['rss'] for r in rs):.0f}"])
    rows.append(["**all jobs**", str(len(records)), f"{sum(r['wall'] for r in records):.0f}", f"{total_cpu:.0f}",
                 "100%", f"{max((r['rss'] for r in records), default=float('nan')):.0f}"])
    parts = [_table(["rule folder", "jobs", "wall s (sum)", "CPU s (sum)", "CPU share", "max RSS MB"], rows)]

    train = [r for r in records if r["folder"] == "train"]
    if train:
        mrows = [[m, str(len(rs)), f"{sum(r['wall'] for r in rs):.0f}", f"{sum(r['cpu'] for r in rs):.0f}",
                  f"{sum(r['cpu'] for r in rs) / len(rs):.0f}"] for m, rs in _grouped(train, "method")]
        parts.append(_table(["train: method", "jobs", "wall s (sum)", "CPU s (sum)", "CPU s per job"], mrows))
    if top:
        trows = [[r["path"], f"{r['wall']:.0f}", f"{r['cpu']:.0f}"]
                 for r in sorted(records, key=lambda r: -r["cpu"])[:top]]
        parts.append(_table(["job (benchmark file)", "wall s", "CPU s"], trows))
    if unfinished:
        parts.append(f"unfinished (no data row): {len(unfinished)} files, e.g. {unfinished[0]}")
    return "\n\n".join(parts) + "\n"


PROC_KEYS = ("pid", "user", "system", "wall", "module", "argv")


def read_procs(path: Path) -> list[dict]:
    """Records ``{program, method, cpu, wall}`` of every line of a process log written by
    ``tools/proc_cpu/sitecustomize.py``; SystemExit naming the file and line of a line that
    is not such a record."""
    if not path.is_file():
        raise SystemExit(f"rule_times: no process log {path}: run the workflow with "
                         f"PYTHONPATH=$PWD/tools/proc_cpu CDGTMLL_PROC_LOG={path.absolute()}")
    records = []
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            missing = [k for k in PROC_KEYS if k not in rec]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
            if not isinstance(rec["argv"], list):
                raise ValueError("argv is not a list")
            argv = [str(a) for a in rec["argv"]]
            cpu, wall = float(rec["user"]) + float(rec["system"]), float(rec["wall"])
        except (ValueError, TypeError) as exc:
            raise SystemExit(f"rule_times: {path}:{no}: expected one JSON record with {', '.join(PROC_KEYS)} "
                             f"per line, as tools/proc_cpu/sitecustomize.py writes ({exc})") from None
        program = rec["module"] or (Path(argv[0]).name if argv and argv[0] else "python")
        method, label = None, shlex.join([program, *argv[1:]])
        if program == "cdgtmll.train" and "--outdir" in argv[:-1]:
            outdir = argv[argv.index("--outdir") + 1]
            method, label = Path(outdir).name, f"{program} --outdir {outdir}"  # the spec JSON left out
        records.append({"program": program, "method": method, "cpu": cpu, "wall": wall, "label": label})
    return records


def render_procs(records: list[dict], top: int = 0) -> str:
    """The process log as Markdown: CPU per program, training CPU per method, the top jobs."""
    total = sum(r["cpu"] for r in records) or float("nan")
    rows = [[f"`{name}`", str(len(rs)), f"{sum(r['wall'] for r in rs):.0f}", f"{sum(r['cpu'] for r in rs):.1f}",
             f"{100 * sum(r['cpu'] for r in rs) / total:.1f}%"] for name, rs in _grouped(records, "program")]
    rows.append(["**all Python processes**", str(len(records)), f"{sum(r['wall'] for r in records):.0f}",
                 f"{total:.1f}", "100%"])
    parts = [_table(["program", "processes", "wall s (sum)", "CPU s (sum, exact)", "CPU share"], rows)]
    train = [r for r in records if r["method"] is not None]
    if train:
        parts.append(_table(["train: method", "jobs", "wall s (sum)", "CPU s (sum, exact)", "CPU s per job"],
                            [[m, str(len(rs)), f"{sum(r['wall'] for r in rs):.0f}", f"{sum(r['cpu'] for r in rs):.1f}",
                              f"{sum(r['cpu'] for r in rs) / len(rs):.1f}"] for m, rs in _grouped(train, "method")]))
    if top:
        parts.append(_table(["process", "wall s", "CPU s"],
                            [[f"`{r['label'][:120]}`", f"{r['wall']:.0f}", f"{r['cpu']:.1f}"]
                             for r in sorted(records, key=lambda r: -r["cpu"])[:top]]))
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("."), help="the checkout that ran the workflow (default: .)")
    ap.add_argument("--top", type=int, default=0, help="also list the N jobs with the most CPU time")
    ap.add_argument("--procs", type=Path, metavar="FILE",
                    help="read this process log (tools/proc_cpu/sitecustomize.py) instead of the benchmark files")
    args = ap.parse_args(argv)
    if args.procs is not None:
        sys.stdout.write(render_procs(read_procs(args.procs), args.top))
        return 0
    records, unfinished = read_benchmarks(args.root)
    sys.stdout.write(render(records, unfinished, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
