"""Measure the job counts and timings of docs/benchmarks.md ("Timings") and write them there.

Every number in that block comes from this script; nothing there is typed by hand. Each
measurement is stored in ``docs/timings.json`` with its date, the machine, the 1-minute load
average during it (sampled at start and end) and the CPU time it used (user + system of the
command and every process it waited for), so parts can be re-measured separately (``--only``)
and the block is regenerated from the whole file. Wall time on a shared machine depends on the
load; CPU time much less so.

Usage (from the repository root, with the project's venv on PATH)::

    python tools/readme_timings.py                      # everything (about 30-40 min on 2 cores)
    python tools/readme_timings.py --only jobs quick    # a subset; the rest is kept from the file
    python tools/readme_timings.py --render             # only rewrite the block from the file

Measurements
------------
``jobs``          ``snakemake -n --forceall all --configfile <profile>`` for every ``config/*.yaml``: the
                  job count Snakemake prints ("total") and the number of training jobs (train, train_more and
                  train_once); once with the XMC library environments this checkout has ready (the record
                  names them; ``CDGTMLL_ENVS_ROOT`` points at another checkout's) and once with none
                  (``without_xmc_envs``): their rows then plan as not runnable, and run no jobs.
``install_cold``  a ``git clone`` of HEAD into a temporary folder, then ``make venv`` with an
                  empty uv cache (every wheel fetched from the index): wall and CPU time, and
                  the size of the resulting ``.venv``.
``install_warm``  the same with the checkout's filled uv cache (``UV_CACHE_DIR=.cache/uv``, as
                  after one install on this machine).
``quick``         ``snakemake --cores 2 all --configfile config/quick.yaml`` in a fresh clone
                  (the packaged Yeast or the mirror): wall and CPU time.
``tests``         ``pytest -n 3 --dist loadfile -q`` (what ``make test`` runs: :data:`TEST_ARGS`) in the working
                  tree: wall and CPU time and the counts from pytest's summary line.

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
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "docs" / "timings.json"
#: the page holding the generated block (between BEGIN and END)
TARGET = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- timings:begin (tools/readme_timings.py writes this block) -->", "<!-- timings:end -->"
#: pytest's arguments in the Makefile's ``test`` recipe (tests/unit/test_readme_timings.py checks)
TEST_ARGS = ("-n", "3", "--dist", "loadfile", "-q")
KINDS = ("jobs", "install_cold", "install_warm", "quick", "tests")


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


def child_cpu() -> float:
    """User + system seconds of every child process waited for so far (and of theirs)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str] | str, cwd: Path, env: dict | None = None,
          log: Path | None = None) -> tuple[float, str, float, float]:
    """Run ``cmd``; return (wall seconds, combined output, mean 1-min load average sampled at
    start and end, CPU seconds of the command and its children)."""
    load0 = os.getloadavg()[0]
    cpu0, t0 = child_cpu(), time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True, text=True)
    wall, cpu = time.monotonic() - t0, child_cpu() - cpu0
    out = proc.stdout + proc.stderr
    if log:
        log.write_text(out)
    if proc.returncode != 0:
        raise SystemExit(f"readme_timings: {cmd!r} failed with exit {proc.returncode} in {cwd}; "
                         f"last output:\n{out[-3000:]}")
    return wall, out, (load0 + os.getloadavg()[0]) / 2, cpu


def clone(tmp: Path) -> Path:
    dest = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    return dest


def job_counts(profile: Path, env: dict[str, str]) -> dict[str, int]:
    """The jobs and the training jobs of one profile's dry run."""
    # --forceall: every job of the DAG, whatever results/ holds; --workflow-profile none: the
    # job table Snakemake prints (a logger plugin in the workflow profile may replace it)
    _, text, _, _ = timed(["snakemake", "-n", "--forceall", "--workflow-profile", "none", "all",
                           "--configfile", str(profile.relative_to(ROOT))], ROOT, env=env)
    total = re.search(r"^total\s+(\d+)\s*$", text, re.M)
    # training jobs: rule train, plus train_more (a powered run's extra seeds: config `power`)
    # and train_once (a deterministic method's one seed) (the first of Snakemake's job-stats
    # tables, as for the total)
    train = sum(int(m.group(1)) for rule in ("train", "train_more", "train_once")
                if (m := re.search(rf"^{rule}\s+(\d+)\s*$", text, re.M)))
    if not total:
        raise SystemExit(f"readme_timings: no job total in `snakemake -n` output for {profile.name}")
    return {"total": int(total.group(1)), "train": train}


def measure_jobs(tmp: Path) -> dict:
    from cdgtmll.external.envs import LIBRARIES, ExternalEnv

    ready = sorted(name for name in LIBRARIES if ExternalEnv.of(name).ready())
    none = tmp / "no-xmc-envs"  # an envs root without environments
    none.mkdir()
    out = {}
    for prof in sorted((ROOT / "config").glob("*.yaml")):
        out[prof.name] = {**job_counts(prof, dict(os.environ)),
                          "without_xmc_envs": job_counts(prof, dict(os.environ, CDGTMLL_ENVS_ROOT=str(none)))}
    return {**stamp(), "xmc_envs": ready, "profiles": out}


def measure_install(tmp: Path, warm: bool) -> dict:
    """``make venv`` in a fresh clone, as a user's shell runs it: no venv on PATH, the clone's
    own caches (the Makefile's ``XDG_CACHE_HOME``), and uv's cache either empty or the
    checkout's filled one."""
    repo = clone(tmp)
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "XDG_CACHE_HOME", "UV_CACHE_DIR", "MPLCONFIGDIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    cache = ROOT / ".cache" / "uv"
    if warm and not cache.is_dir():
        raise SystemExit(f"readme_timings: install_warm needs a filled uv cache at {cache} (run `make venv` first)")
    env["UV_CACHE_DIR"] = str(cache if warm else tmp / "empty-uv-cache")
    wall, _, load, cpu = timed(["make", "venv"], repo, env=env)
    size = subprocess.run(["du", "-sb", str(repo / ".venv")], capture_output=True, text=True, check=True).stdout
    what = "the checkout's filled uv cache" if warm else "an empty uv cache"
    return {**stamp(clone=True), "seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "venv_bytes": int(size.split()[0]), "load": round(load, 2),
            "command": f"make venv (fresh clone, {what})"}


def measure_quick(tmp: Path) -> dict:
    repo = clone(tmp)
    env = dict(os.environ, PYTHONPATH=str(repo / "src"))
    wall, text, load, cpu = timed(["snakemake", "--cores", "2", "all", "--configfile", "config/quick.yaml"], repo, env=env)
    total = [t for t in re.findall(r"(\d+) of (\d+) steps (?:\(\d+%\) )?done", text) if t[0] == t[1]]
    return {**stamp(clone=True), "seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "load": round(load, 2),
            "jobs": int(total[-1][1]) if total else None,
            "command": "snakemake --cores 2 all --configfile config/quick.yaml (fresh clone)"}


def slowest_tests(text: str) -> list[dict]:
    """The ``slowest N durations`` block pytest prints (``--durations`` in pyproject.toml; headed
    ``slowest durations`` with ``--durations=0``): one
    ``{"seconds", "phase", "test"}`` per line, in pytest's order (slowest first)."""
    out, inside = [], False
    for line in text.splitlines():
        if re.search(r"=+ slowest (\d+ )?durations =+", line):  # "slowest durations" with --durations=0
            inside = True
            continue
        if inside:
            m = re.match(r"\s*([\d.]+)s (call|setup|teardown)\s+(.+?)\s*$", line)
            if not m:
                if out:
                    break
                continue
            out.append({"seconds": float(m.group(1)), "phase": m.group(2), "test": m.group(3)})
    return out


def file_seconds(rows: list[dict]) -> dict[str, float]:
    """Seconds per test file (every phase of its tests), longest first: what tests/conftest.py
    orders the files by, so that ``make test``'s two workers take the longest files first."""
    out: dict[str, float] = {}
    for r in rows:
        f = r["test"].split("::")[0]
        out[f] = out.get(f, 0.0) + r["seconds"]
    return {f: round(s, 2) for f, s in sorted(out.items(), key=lambda kv: -kv[1])}


def measure_tests() -> dict:
    # make test's command, with every duration printed (--durations=0 overrides pyproject's 25)
    wall, text, load, cpu = timed([sys.executable, "-m", "pytest", *TEST_ARGS, "-p", "no:cacheprovider", "--durations=0"], ROOT)
    summary = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed)", line)][-1]
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", summary)}
    rows = slowest_tests(text)
    if not rows:
        raise SystemExit("readme_timings: pytest printed no durations block (--durations=0): nothing recorded")
    return {**stamp(), "seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "load": round(load, 2), "counts": counts,
            "summary": summary.strip("= "), "slowest": rows[:25], "files": file_seconds(rows),
            "command": f"pytest {' '.join(TEST_ARGS)} (make test)"}


MEASURE = {"jobs": measure_jobs, "install_cold": lambda tmp: measure_install(tmp, warm=False),
           "install_warm": lambda tmp: measure_install(tmp, warm=True), "quick": measure_quick,
           "tests": lambda tmp: measure_tests()}


def _mmss(s: float) -> str:
    m, s = divmod(int(round(s)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def render(store: dict) -> str:
    rows = ["| what | measured: wall time; CPU time (user + system) | when, commit, load (1-min average) |", "|---|---|---|"]

    def when(r: dict) -> str:
        load = f", load {r['load']}" if "load" in r else ""
        return f"{r['date']}, {r['commit']}{' (dirty tree)' if r['dirty'] else ''}{load}"

    def cpu(r: dict) -> str:
        return f"CPU {_mmss(r['cpu_seconds'])}" if "cpu_seconds" in r else "CPU time not recorded"

    if "jobs" in store:
        r = store["jobs"]
        envs = ", ".join(r.get("xmc_envs", [])) or "none"
        for name, c in r["profiles"].items():
            without = c.get("without_xmc_envs")
            without = (f"; without the XMC library environments {without['total']} ({without['train']})"
                       if without else "")
            rows.append(f"| `snakemake -n --forceall all --configfile config/{name}` | {c['total']} jobs, of which {c['train']} "
                        f"training jobs (XMC library environments ready: {envs}){without} | {when(r)} |")
    for kind in ("install_cold", "install_warm"):
        if kind in store:
            r = store[kind]
            rows.append(f"| `{r['command']}` | {_mmss(r['seconds'])}; {cpu(r)}; `.venv` "
                        f"{r['venv_bytes'] / 2**30:.1f} GiB | {when(r)} |")
    if "quick" in store:
        r = store["quick"]
        rows.append(f"| `{r['command']}` | {_mmss(r['seconds'])}; {cpu(r)} ({r['jobs']} jobs) | {when(r)} |")
    if "tests" in store:
        r = store["tests"]
        rows.append(f"| `{r['command']}` | {_mmss(r['seconds'])}; {cpu(r)}: {r['summary']} | {when(r)} |")
    machines = sorted({r["machine"] for r in store.values()})
    head = (f"Measured by `python tools/readme_timings.py` on {'; '.join(machines)}. Raw records: "
            "[`timings.json`](timings.json). A load above the core count means other work shared the machine "
            "and stretched the wall time; the CPU time is what the command itself used.")
    return "\n".join([BEGIN, head, "", *rows, END])


def write_block(block: str, target: Path = TARGET) -> None:
    text = target.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"readme_timings: {target} has no '{BEGIN}' ... '{END}' block to replace")
    pre, rest = text.split(BEGIN, 1)
    post = rest.split(END, 1)[1]
    tmp = target.with_suffix(".md.tmp")
    tmp.write_text(pre + block + post)
    tmp.replace(target)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--render", action="store_true", help="only rewrite the block in docs/benchmarks.md from docs/timings.json")
    args = ap.parse_args(argv)
    store = json.loads(STORE.read_text()) if STORE.exists() else {}
    store.pop("install", None)  # a record without its uv cache state (cold or warm): not shown
    if not args.render:
        # the suite runs in this checkout, the rest in fresh clones: the suite first, before this
        # tool writes docs/timings.json (its audit tests fail on runs from uncommitted changes)
        kinds = sorted(dict.fromkeys(args.only), key=lambda k: k != "tests")
        if "tests" in kinds and git("status", "--porcelain"):
            ap.error("the checkout has uncommitted changes: the suite's audit tests fail on runs made from them; "
                     "commit first (`git status`)")
        with tempfile.TemporaryDirectory(prefix="cdgtmll-timings-") as tmp:
            for kind in kinds:
                print(f"readme_timings: measuring {kind} ...", flush=True)
                sub = Path(tmp) / kind
                sub.mkdir()
                store[kind] = MEASURE[kind](sub)
                STORE.parent.mkdir(exist_ok=True)
                STORE.write_text(json.dumps(store, indent=1, sort_keys=True) + "\n")
                print(f"readme_timings: {kind}: {json.dumps(store[kind])}", flush=True)
    write_block(render(store))
    return 0


if __name__ == "__main__":
    sys.exit(main())
