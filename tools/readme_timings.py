"""Measure the numbers the README states (job counts, install, tests, quick run) and write them.

Every timing and count in the README's "Timings" section comes from this script; nothing there
is typed by hand. Each measurement is stored with its date, the machine and the load average
during it in ``docs/timings.json``, so parts can be re-measured separately (``--only``) and the
README table is regenerated from the whole file.

Usage (from the repository root, with the project's venv on PATH)::

    python tools/readme_timings.py                      # everything (about 25-35 min on 2 cores)
    python tools/readme_timings.py --only jobs quick    # a subset; the rest is kept from the file
    python tools/readme_timings.py --render             # only rewrite README.md from the file

Measurements
------------
``jobs``    ``snakemake -n all --configfile <profile>`` for every ``config/*.yaml``: the job
            count Snakemake prints ("total") and the number of training jobs.
``install`` a ``git clone`` of HEAD into a temporary folder, then ``make venv``: wall time and
            the size of the resulting ``.venv``.
``quick``   ``snakemake --cores 2 all --configfile config/quick.yaml`` in a fresh clone (the
            packaged Yeast or the mirror), wall time.
``tests``   ``pytest -n 2 --dist loadfile -q`` (what ``make test`` runs) in the working tree: wall time and the
            passed / skipped / failed counts from pytest's summary line.

The clones are of the committed HEAD: uncommitted changes are not measured, and the record says
which commit was measured and whether the working tree was dirty.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "docs" / "timings.json"
README = ROOT / "README.md"
BEGIN, END = "<!-- timings:begin (tools/readme_timings.py writes this block) -->", "<!-- timings:end -->"
KINDS = ("jobs", "install", "quick", "tests")


def machine() -> str:
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    gpu = "no GPU" if shutil.which("nvidia-smi") is None else "NVIDIA GPU"
    return f"{os.cpu_count()} cores, {mem_kib / 2**20:.0f} GiB, {gpu}, {platform.system()} {platform.machine()}"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def stamp(clone: bool = False) -> dict:
    """When and where; ``dirty`` is False for a measurement in a fresh clone (it has only HEAD)."""
    return {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
            "commit": git("rev-parse", "--short", "HEAD"), "dirty": False if clone else bool(git("status", "--porcelain"))}


def timed(cmd: list[str] | str, cwd: Path, env: dict | None = None, log: Path | None = None) -> tuple[float, str, float]:
    """Run ``cmd``; return (wall seconds, combined output, mean 1-min load average sampled at start and end)."""
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True, text=True)
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    if log:
        log.write_text(out)
    if proc.returncode != 0:
        raise SystemExit(f"readme_timings: {cmd!r} failed with exit {proc.returncode} in {cwd}; "
                         f"last output:\n{out[-3000:]}")
    return wall, out, (load0 + os.getloadavg()[0]) / 2


def clone(tmp: Path) -> Path:
    dest = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    return dest


def measure_jobs() -> dict:
    out = {}
    for prof in sorted((ROOT / "config").glob("*.yaml")):
        _, text, _ = timed(["snakemake", "-n", "all", "--configfile", str(prof.relative_to(ROOT))], ROOT)
        total = re.search(r"^total\s+(\d+)\s*$", text, re.M)
        train = re.search(r"^train\s+(\d+)\s*$", text, re.M)
        if not total:
            raise SystemExit(f"readme_timings: no job total in `snakemake -n` output for {prof.name}")
        out[prof.name] = {"total": int(total.group(1)), "train": int(train.group(1)) if train else 0}
    return {**stamp(), "profiles": out}


def measure_install(tmp: Path) -> dict:
    repo = clone(tmp)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    wall, _, load = timed(["make", "venv"], repo, env=env)
    size = subprocess.run(["du", "-sb", str(repo / ".venv")], capture_output=True, text=True, check=True).stdout
    return {**stamp(clone=True), "seconds": round(wall, 1), "venv_bytes": int(size.split()[0]), "load": round(load, 2),
            "command": "make venv (fresh clone)"}


def measure_quick(tmp: Path) -> dict:
    repo = clone(tmp)
    env = dict(os.environ, PYTHONPATH=str(repo / "src"))
    wall, text, load = timed(["snakemake", "--cores", "2", "all", "--configfile", "config/quick.yaml"], repo, env=env)
    total = re.findall(r"(\d+) of (\d+) steps \(100%\) done", text)
    return {**stamp(clone=True), "seconds": round(wall, 1), "load": round(load, 2), "jobs": int(total[-1][1]) if total else None,
            "command": "snakemake --cores 2 all --configfile config/quick.yaml (fresh clone)"}


def measure_tests() -> dict:
    wall, text, load = timed([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-q", "-p", "no:cacheprovider"], ROOT)
    summary = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed)", line)][-1]
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", summary)}
    return {**stamp(), "seconds": round(wall, 1), "load": round(load, 2), "counts": counts, "summary": summary.strip("= "),
            "command": "pytest -n 2 --dist loadfile -q (make test)"}


MEASURE = {"jobs": lambda tmp: measure_jobs(), "install": measure_install, "quick": measure_quick,
           "tests": lambda tmp: measure_tests()}


def _mmss(s: float) -> str:
    m, s = divmod(int(round(s)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def render(store: dict) -> str:
    rows = ["| what | measured | when, commit, load (1-min avg) |", "|---|---|---|"]

    def when(r: dict) -> str:
        load = f", load {r['load']}" if "load" in r else ""
        return f"{r['date']}, {r['commit']}{' (dirty tree)' if r['dirty'] else ''}{load}"

    if "jobs" in store:
        r = store["jobs"]
        for name, c in r["profiles"].items():
            rows.append(f"| `snakemake -n all --configfile config/{name}` | {c['total']} jobs, of which {c['train']} "
                        f"training jobs | {when(r)} |")
    if "install" in store:
        r = store["install"]
        rows.append(f"| `{r['command']}` | {_mmss(r['seconds'])}, `.venv` {r['venv_bytes'] / 2**30:.1f} GiB | {when(r)} |")
    if "quick" in store:
        r = store["quick"]
        rows.append(f"| `{r['command']}` | {_mmss(r['seconds'])} ({r['jobs']} jobs) | {when(r)} |")
    if "tests" in store:
        r = store["tests"]
        rows.append(f"| `{r['command']}` | {_mmss(r['seconds'])}: {r['summary']} | {when(r)} |")
    machines = sorted({r["machine"] for r in store.values()})
    head = (f"Measured by `python tools/readme_timings.py` on {'; '.join(machines)}. "
            "Raw records: `docs/timings.json`. A load above the core count means other work shared the machine.")
    return "\n".join([BEGIN, head, "", *rows, END])


def write_readme(block: str) -> None:
    text = README.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"readme_timings: {README} has no '{BEGIN}' ... '{END}' block to replace")
    pre, rest = text.split(BEGIN, 1)
    post = rest.split(END, 1)[1]
    tmp = README.with_suffix(".md.tmp")
    tmp.write_text(pre + block + post)
    tmp.replace(README)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--render", action="store_true", help="only rewrite README.md from docs/timings.json")
    args = ap.parse_args(argv)
    store = json.loads(STORE.read_text()) if STORE.exists() else {}
    if not args.render:
        with tempfile.TemporaryDirectory(prefix="cdgtmll-timings-") as tmp:
            for kind in args.only:
                print(f"readme_timings: measuring {kind} ...", flush=True)
                sub = Path(tmp) / kind
                sub.mkdir()
                store[kind] = MEASURE[kind](sub)
                STORE.parent.mkdir(exist_ok=True)
                STORE.write_text(json.dumps(store, indent=1, sort_keys=True) + "\n")
                print(f"readme_timings: {kind}: {json.dumps(store[kind])}", flush=True)
    write_readme(render(store))
    return 0


if __name__ == "__main__":
    sys.exit(main())
