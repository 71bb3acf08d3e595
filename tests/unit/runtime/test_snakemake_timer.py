"""cdgtmll.runtime.snakemake_timer: at most one pending re-evaluation timer in Snakemake's job
scheduler, applied to the locked Snakemake, in a real Snakemake run; any other scheduler is left
as it is. That the project's Snakefile applies it, and says so when it cannot:
tests/integration/pipeline/test_snakefile_setup.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.support.paths import ROOT


class _Scheduler:
    """The two attributes of snakemake's JobScheduler the method uses."""

    def __init__(self) -> None:
        self._open_jobs = threading.Semaphore(0)


def _releases(sem: threading.Semaphore) -> int:
    n = 0
    while sem.acquire(blocking=False):
        n += 1
    return n


@pytest.mark.slow
def test_the_locked_snakemake_gets_the_workaround():
    """The installed Snakemake's method is the source the workaround was written against; an
    upgrade that changes it fails here, so that the workaround is re-checked, not dropped."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    from cdgtmll.runtime.snakemake_timer import _schedule_reevaluation_once, one_reevaluation_timer

    original = JobScheduler._schedule_reevalutation
    try:
        assert one_reevaluation_timer() is True
        assert JobScheduler._schedule_reevalutation is _schedule_reevaluation_once
        assert one_reevaluation_timer() is True  # idempotent
    finally:
        JobScheduler._schedule_reevalutation = original


@pytest.mark.slow  # imports Snakemake, whose Slurm plugin runs `which sacct` on import
def test_a_changed_or_missing_upstream_method_is_left_alone(monkeypatch):
    """The guard: a Snakemake whose method has another source, or none, keeps its own scheduler
    (the fallback), and the call says it did not patch."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    from cdgtmll.runtime.snakemake_timer import one_reevaluation_timer

    def _schedule_reevalutation(self, delay):  # an upgrade's version of the method
        return None

    monkeypatch.setattr(JobScheduler, "_schedule_reevalutation", _schedule_reevalutation)
    assert one_reevaluation_timer() is False
    assert JobScheduler._schedule_reevalutation is _schedule_reevalutation
    monkeypatch.delattr(JobScheduler, "_schedule_reevalutation")
    assert one_reevaluation_timer() is False
    assert not hasattr(JobScheduler, "_schedule_reevalutation")


@pytest.mark.slow  # imports Snakemake, whose Slurm plugin runs `which sacct` on import
def test_requests_while_one_is_pending_give_one_release_and_the_next_request_arms_again():
    """Five passes asking for a re-evaluation within the delay: upstream's method releases the
    semaphore five times (five chains), the workaround once; once that timer has fired, the
    next request arms a new one (the chain goes on)."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    from cdgtmll.runtime.snakemake_timer import _schedule_reevaluation_once

    for method, want in ((JobScheduler._schedule_reevalutation, 5), (_schedule_reevaluation_once, 1)):
        s = _Scheduler()
        for _ in range(5):
            method(s, 0.05)
        time.sleep(0.5)
        assert _releases(s._open_jobs) == want, method
    s = _Scheduler()
    _schedule_reevaluation_once(s, 0.05)
    time.sleep(0.3)
    _schedule_reevaluation_once(s, 0.05)
    time.sleep(0.3)
    assert _releases(s._open_jobs) == 2


SNAKEFILE = textwrap.dedent("""
    import os, threading, time
    if os.environ.get("ONE_TIMER") == "1":
        from cdgtmll.runtime.snakemake_timer import one_reevaluation_timer
        assert one_reevaluation_timer()
    PEAK = [0]
    def _sample():  # the most timer threads alive at once, read every 10 ms in this process
        while True:
            PEAK[0] = max(PEAK[0], sum(isinstance(t, threading.Timer) for t in threading.enumerate()))
            time.sleep(0.01)
    threading.Thread(target=_sample, daemon=True).start()
    rule all:
        input: expand("out/{i}.txt", i=range(8))
    rule job:
        output: "out/{i}.txt"
        shell: "sleep 0.3; touch {output}"
    onsuccess:
        print(f"PEAK_TIMERS={PEAK[0]}")
""")


@pytest.mark.slow
def test_a_real_snakemake_run_keeps_one_timer_instead_of_one_per_job(tmp_path):
    """Eight one-core jobs through the locked Snakemake: while jobs wait for the core, upstream
    adds a self-renewing timer for every job that finishes (at least one per job but the last
    two alive at once), the workaround keeps one (two for the moment a fired timer's thread
    ends while the pass it started arms the next)."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    peak = {}
    for one in ("0", "1"):
        env = {**os.environ, "ONE_TIMER": one, "PYTHONPATH": str(ROOT / "src")}
        res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--forceall", "-q"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        (line,) = [x for x in (res.stdout + res.stderr).splitlines() if x.startswith("PEAK_TIMERS=")]
        peak[one] = int(line.split("=")[1])
    assert peak["1"] <= 2 and peak["0"] >= 6, peak
