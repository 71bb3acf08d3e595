"""Results as they arrive: the paper's tables, ``metrics_full`` and the claims page of the runs
evaluated so far, in ``results/partial/``, while the workflow runs.

``python -m cdgtmll.tables.partial --plan results/partial/plan.json``

The plan is written by the workflow when it starts (``partial_onstart`` in
``workflow/rules/report.smk``, from the same helpers that build the final rules' commands):
each of the rules ``tables``, ``metrics_summary`` and ``claims_check`` with its options and the
metrics files (figure inputs) it expects, and which of them this run (re)makes. A refresh

* sorts the expected ``metrics.json`` into done and pending: done = the file is there, parses
  and matches its self-hash (:func:`cdgtmll.lineage.seal.read_sealed_json`, never deleting
  anything: the run's own rules deal with a bad file), its ``provenance.json`` parses, and, for
  a file this run re-makes, it was written after the run started (an old one waits for its job);
* runs the final rules' own code (:func:`cdgtmll.tables.build.main`, :func:`cdgtmll.claims.check.main`)
  on the done runs with ``--pending`` (cells ``…`` instead of ``n.r.``) and ``--as-of`` (every
  page and table starts with ``partial: k of n runs done (as of <UTC time>)``), into
  ``results/partial/tables/`` and ``results/partial/claims/``; each part is written into a staged
  folder and moved in once complete (:func:`cdgtmll.io.staged_dir`);
* writes ``results/partial/build.json`` (what was built, k of n, when) and ``README.md``
  (the CSVs carry no banner: their readers take the first line as the header).

The workflow's logger plugin calls :func:`refresh_soon` after each finished evaluate job: it
records the request and starts a detached ``nice -n 19`` refresher unless one runs
(``refresh.pid``). The refresher builds once at least ``max(60 s, 19 x the last refresh's CPU
seconds)`` have passed since the last refresh started, so that refreshing costs at most about
5 % of the run's CPU (``CDGTMLL_PARTIAL_INTERVAL_S`` replaces the interval, for tests), and
builds again as long as requests came in meanwhile, so the runs finished last are shown too;
without a plan (a dry run, another workflow) it does nothing. When the workflow succeeds, ``partial_onsuccess``
removes ``results/partial/`` (:func:`remove_partial`); after a failure or an interrupt it stays.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from cdgtmll.io import CorruptArtifactError, atomic_write, read_json, staged_dir, write_json
from cdgtmll.lineage.seal import read_sealed_json

#: where the partial results go (relative to the workflow's folder)
PARTIAL_DIR = Path("results/partial")
#: the plan the workflow writes when it starts (``partial_onstart``)
PLAN = PARTIAL_DIR / "plan.json"
#: the rules whose finished jobs trigger a refresh (the logger plugin)
EVALUATE_RULES = frozenset({"evaluate", "evaluate_more"})
#: the running refresh (pid, start), the last finished one (start, CPU seconds), the last request
LOCK_NAME, STATE_NAME, LOG_NAME, REQUEST_NAME = "refresh.pid", "refresh.json", "refresh.log", "request.json"
#: what the last refresh built (the run's progress, ``status.json`` beside it, is the logger plugin's)
BUILD_NAME = "build.json"
#: everything a refresh writes in the folder (remove_partial removes these, and the folder once empty)
OWN_NAMES = ("tables", "claims", "README.md", BUILD_NAME, LOCK_NAME, STATE_NAME, LOG_NAME, REQUEST_NAME, "plan.json")
#: the shortest time between two refreshes, and the variable that replaces the whole interval
#: rule by a number of seconds (tests: 0)
MIN_INTERVAL_S, INTERVAL_ENV = 60.0, "CDGTMLL_PARTIAL_INTERVAL_S"
#: the interval is at least this many times the last refresh's CPU time: refreshing takes at most
#: 1 / (1 + 19) = 5 % of the CPU time of a run
CPU_FACTOR = 19.0
#: the plan's format (a plan of another format is refused by name)
PLAN_FORMAT = 1
README = """# Partial results (not final)

Written while the workflow runs, from the runs evaluated so far (`python -m cdgtmll.tables.partial`,
docs/outputs.md "While a run goes on"). Every table and page here starts with
`partial: k of n runs done (as of <UTC time>)`; a cell shown `…` waits for runs of this workflow run
(`n.r.` is what the configuration does not run). The CSV files carry no banner (their readers take
the first line as the header): this file and `build.json` say they are partial.

When the workflow ends successfully the final files are in `results/tables/` and `results/claims/`,
and this folder is removed.

{banner}
"""

#: the builders started by this process (the logger plugin's): reaped, and stopped by remove_partial
_children: list[subprocess.Popen] = []


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def write_plan(plan: dict, path: Path = PLAN) -> Path:
    """Write ``plan`` (see ``partial_onstart``) atomically, with its format and creation time."""
    write_json(path, {"format": PLAN_FORMAT, "created": time.time(), "created_utc": utc_now(), **plan})
    return path


def read_plan(path: Path) -> dict:
    """The plan at ``path``; SystemExit naming the file and field when it is not one."""
    plan = read_json(path)
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise SystemExit(f"{path}: not a partial-results plan of format {PLAN_FORMAT} (field 'format')")
    for key in ("tables", "summary", "claims"):
        if not isinstance(plan.get(key), dict) or not isinstance(plan[key].get("options"), list):
            raise SystemExit(f"{path}: field '{key}.options' missing or not a list")
    return plan


def run_done(path: Path, remade: bool, started: float) -> bool:
    """Whether the ``metrics.json`` at ``path`` can be shown: present, readable, sealed, its
    ``provenance.json`` readable, and (``remade``: this run's jobs write it) written after the
    run ``started``. Nothing is deleted."""
    try:
        if remade and path.stat().st_mtime < started:
            return False
        read_sealed_json(path, unsealed_ok=True)
        prov = path.parent / "provenance.json"
        if prov.is_file():
            read_json(prov)
    except (OSError, CorruptArtifactError):
        return False
    return True


def _aliases_done(options: list[str], done_dirs: set[str]) -> list[str]:
    """``options`` without the ``--alias SETTING RUN`` pairs whose run folder has no run done
    (:func:`cdgtmll.tables.collect.collect` wants a metrics file under each)."""
    out, i = [], 0
    while i < len(options):
        if options[i] == "--alias" and i + 2 < len(options):
            if str(Path(options[i + 2])) in done_dirs:
                out += options[i:i + 3]
            i += 3
            continue
        out.append(options[i])
        i += 1
    return out


def build(plan_path: Path) -> dict:
    """One refresh of the partial results from the plan at ``plan_path``; returns the status it
    writes to ``build.json``."""
    from cdgtmll.claims import check
    from cdgtmll.tables import build as tables_build
    from cdgtmll.tables.render import partial_banner

    plan = read_plan(plan_path)
    out = Path(plan.get("out") or plan_path.parent)
    started = float(plan.get("created", 0.0))
    remade = set(map(str, map(Path, plan.get("remade") or [])))
    as_of = utc_now()
    expected = list(dict.fromkeys(str(Path(p)) for key in ("tables", "summary") for p in plan[key].get("metrics", [])))
    done = {p for p in expected if run_done(Path(p), p in remade, started)}
    status: dict = {"partial": True, "as_of": as_of, "plan": str(plan_path), "done": len(done), "total": len(expected),
                    "parts": {}}

    def alive() -> bool:  # the workflow ended (partial_onsuccess removed the plan): publish nothing more
        return plan_path.is_file()

    def part(name: str, metrics: list[str], options: list[str]) -> None:
        have = [p for p in metrics if p in done]
        pending = [p for p in metrics if p not in done]
        if not have:
            status["parts"][name] = "not built: no run done yet"
            return
        if not alive():
            status["parts"][name] = "not built: the workflow ended"
            return
        argv = ["--part", name, "--metrics", *have, *options, "--pending", *pending, "--as-of", as_of,
                "--keep-corrupt", "--out", str(out / "tables")]
        try:
            tables_build.main(argv)
            status["parts"][name] = f"built: {len(have)} of {len(metrics)} runs done"
        except (Exception, SystemExit) as exc:  # noqa: BLE001 -- one part failing leaves the others
            status["parts"][name] = f"failed: {type(exc).__name__}: {exc}"

    tables, summary, claims = plan["tables"], plan["summary"], plan["claims"]
    part("tables", [str(Path(p)) for p in tables.get("metrics", [])], list(map(str, tables["options"])))
    done_dirs = {str(Path(p).parent.parent) for p in done}
    part("summary", [str(Path(p)) for p in summary.get("metrics", [])],
         _aliases_done(list(map(str, summary["options"])), done_dirs))
    runs = out / "tables" / "all_runs.csv"
    if status["parts"].get("summary", "").startswith("built") and alive():
        argv = ["--runs", str(runs), *map(str, claims["options"])]
        for option, paths in (claims.get("figures") or {}).items():
            # a figure input made (again) by this run is used once it is newer than the run's start
            hit = [p for p in paths if Path(p).is_file()
                   and (str(Path(p)) not in remade or Path(p).stat().st_mtime >= started)]
            if hit:
                argv += [option, hit[0]]
        pending = [str(Path(p)) for p in summary.get("metrics", []) if str(Path(p)) not in done]
        try:
            with staged_dir(out / "claims") as tmp:
                check.main([*argv, "--pending", *pending, "--as-of", as_of, "--out", str(tmp / "claims_check")])
            status["parts"]["claims"] = "built"
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            status["parts"]["claims"] = f"failed: {type(exc).__name__}: {exc}"
    else:
        status["parts"]["claims"] = "not built: no metrics summary yet"
    if alive():
        atomic_write(out / "README.md", README.format(banner=partial_banner(len(done), len(expected), as_of)))
        write_json(out / BUILD_NAME, status)
    return status


def interval_s(last_cpu_s: float | None) -> float:
    """Seconds between the starts of two refreshes: ``max(60 s, 19 x the last refresh's CPU
    seconds)``, or the number of seconds ``CDGTMLL_PARTIAL_INTERVAL_S`` gives."""
    try:
        return max(0.0, float(os.environ[INTERVAL_ENV]))
    except (KeyError, ValueError):
        return max(MIN_INTERVAL_S, CPU_FACTOR * float(last_cpu_s or 0.0))


def _read(path: Path) -> dict:
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _alive(pid) -> bool:
    """Whether process ``pid`` runs (this process's own children are reaped first)."""
    for proc in list(_children):
        if proc.poll() is not None:
            _children.remove(proc)
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return True


def refresh_soon(plan: Path = PLAN) -> bool:
    """Ask for a refresh of the partial results: record the request (``request.json``) and, unless
    a refresher runs already (``refresh.pid``), start one, detached and ``nice -n 19``. The
    refresher (:func:`main`) waits until :func:`interval_s` has passed since the last refresh
    started, builds, and builds again (after the interval) as long as requests came in while it
    built, so the last finished runs are always shown. True when one was started. Never raises:
    the caller is Snakemake's logger. Without a plan (a dry run, another workflow): nothing."""
    try:
        plan = Path(plan)
        if not plan.is_file():
            return False
        folder = plan.parent

        now = time.time()
        write_json(folder / REQUEST_NAME, {"requested": now})
        lock = _read(folder / LOCK_NAME)
        if lock and _alive(lock.get("pid")):
            return False
        # one thread each: the refresh takes what it needs from the jobs' cores, never more
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "cdgtmll.tables.partial", "--plan", str(plan)]
        nice = shutil.which("nice")
        with open(folder / LOG_NAME, "ab") as log:
            proc = subprocess.Popen([nice, "-n", "19", *cmd] if nice else cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True, env=env,
                                    preexec_fn=None if nice else (lambda: os.nice(19)))
        _children.append(proc)
        write_json(folder / LOCK_NAME, {"pid": proc.pid, "started": now})
        return True
    except Exception:  # noqa: BLE001 -- a refresh that cannot start must not disturb the run
        return False


def remove_partial(folder: Path = PARTIAL_DIR, wait_s: float = 10.0) -> None:
    """The workflow succeeded: remove the plan first (a running refresh then publishes nothing
    more), stop the refreshes this process started, wait for another one to end, remove the
    partial results (:data:`OWN_NAMES`; ``folder`` too once nothing else is in it)."""
    folder = Path(folder)
    with contextlib.suppress(FileNotFoundError):
        (folder / PLAN.name).unlink()
    for proc in list(_children):
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: nice, python
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(wait_s)
        _children.remove(proc)
    lock = _read(folder / LOCK_NAME)
    deadline = time.time() + wait_s
    while lock and _alive(lock.get("pid")) and time.time() < deadline:
        time.sleep(0.2)
    for name in OWN_NAMES:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty


def _wait_for_turn(plan: Path, state: Path) -> bool:
    """Sleep until :func:`interval_s` has passed since the last refresh started (``state``);
    False as soon as the plan is gone (the workflow ended)."""
    last = _read(state)
    due = float(last.get("started") or 0.0) + interval_s(last.get("cpu_s"))
    while time.time() < due:
        if not plan.is_file():
            return False
        time.sleep(min(1.0, max(0.0, due - time.time())))
    return plan.is_file()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", type=Path, default=PLAN, help="the plan the workflow wrote (default: %(default)s)")
    args = ap.parse_args(argv)
    if not args.plan.is_file():
        print(f"no plan at {args.plan}: nothing to do (the workflow is not running, or it ended)")
        return 0
    folder = args.plan.parent
    served = None  # when the last build of this process started
    try:
        while _wait_for_turn(args.plan, folder / STATE_NAME):
            if served is not None and float(_read(folder / REQUEST_NAME).get("requested") or 0.0) <= served:
                break  # nothing finished since the last build started
            t0 = time.time()
            before = resource.getrusage(resource.RUSAGE_SELF)
            try:
                status = build(args.plan)
            finally:
                use = resource.getrusage(resource.RUSAGE_SELF)
                cpu = (use.ru_utime - before.ru_utime) + (use.ru_stime - before.ru_stime)
                if folder.is_dir():
                    write_json(folder / STATE_NAME, {"started": t0, "finished": time.time(), "cpu_s": round(cpu, 3)})
            served = t0
            print(json.dumps(status), flush=True)
    finally:
        if _read(folder / LOCK_NAME).get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                (folder / LOCK_NAME).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
