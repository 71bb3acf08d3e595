"""At most one pending re-evaluation timer in Snakemake's job scheduler: a workaround for a
Snakemake 9 scheduler loop whose cost grows with every job done (snakemake 9.27.1). The
Snakefile applies it at parse time.

The upstream code (snakemake 9.27.1, ``snakemake/scheduling/job_scheduler.py``):
``JobScheduler.schedule()`` ends every scheduling pass with
``self._schedule_reevalutation(self.job_rate_limiter.timespan)`` whenever a job rate limiter is
set, which is always outside dry and touch runs (``--max-jobs-per-timespan`` defaults to
``100/1s``), and ``_schedule_reevalutation`` starts a new ``threading.Timer`` whose callback
releases the scheduler's semaphore, that is, runs one more pass. A pass started by a timer
starts the next timer: a chain, one pass per second for the rest of the run. A pass started by
anything else (a job finished, a job failed) also ends by starting a timer, so each such event
adds one more chain. After n jobs, the scheduler makes about n passes per second, each one
walking the DAG's ready jobs, until the run ends. The default profile's 215 jobs cost
Snakemake's own process 647 s of CPU in a 68-minute run (docs/benchmarks.md); upstream's open
report of the same loop is snakemake/snakemake#3804
(https://github.com/snakemake/snakemake/issues/3804: threads piling up until Python cannot
start another).

:func:`one_reevaluation_timer` replaces that method so that a scheduler has at most one pending
timer: a request while one is pending is dropped. Nothing the limiter guarantees changes:

* the pending timer fires no later than the dropped one would have (the delay is always the
  limiter's one ``timespan``), and the pass it runs ends by asking for the next timer, so a
  pass still follows every pass within ``timespan`` seconds, and jobs held back by the rate
  limit still start when its window frees up;
* jobs finishing or failing still start a pass at once (``_proceed`` / ``error_callback``
  release the semaphore themselves; no timer is involved).

The timer thread is a daemon: a pending timer no longer keeps the finished Snakemake process
alive until it fires (upstream's non-daemon timers hold the exit for up to ``timespan``).

Measured gain (docs/benchmarks.md, "Run-time workarounds"; ``benchmarks/bench_runtime_workarounds.py
--only scheduler``): Snakemake's own process on the default profile's DAG at 1 epoch and 1 seed
(210 jobs, 2 cores) used 18.0 s of CPU with it and 43.3 s without (2026-11-27); 100 jobs of
``sleep 2`` on 2 cores, 3.01 s against 4.73 s (2026-11-28, load 4-6). The CPU saved grows with
the jobs times the run's length.

Guard: the replacement is applied only where the module, the class and the method exist and the
method is exactly the upstream source it was written against (:data:`UPSTREAM_SHA256`); any
other Snakemake keeps its own scheduler (the Snakefile logs that), and
tests/unit/runtime/test_snakemake_timer.py fails on the locked version if that stops being the
case, so that an upgrade re-checks the workaround instead of silently dropping it.
"""

from __future__ import annotations

import threading

from cdgtmll.runtime.guard import source_is

#: sha256 of ``inspect.getsource(JobScheduler._schedule_reevalutation)`` in snakemake 9.27.1
UPSTREAM_SHA256 = "bb09f100ea5766bbab2a2fa26d28d2a7488140ed6e74224adcebab65112bbf69"

_GUARD = threading.Lock()


def _schedule_reevaluation_once(self, delay: float) -> None:
    """Release the scheduler's semaphore after ``delay`` seconds, unless a release is already
    pending (which then comes first)."""
    with _GUARD:
        if getattr(self, "_cdgtmll_timer_pending", False):
            return
        self._cdgtmll_timer_pending = True

    def fire() -> None:
        with _GUARD:
            self._cdgtmll_timer_pending = False  # before the pass it starts asks for the next
        self._open_jobs.release()

    timer = threading.Timer(delay, fire)
    timer.daemon = True
    timer.start()


def one_reevaluation_timer() -> bool:
    """Patch ``JobScheduler._schedule_reevalutation`` (sic: upstream's spelling) in this process;
    return whether it was patched (False: not the upstream source this was written against)."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:  # another Snakemake layout
        return False
    current = getattr(JobScheduler, "_schedule_reevalutation", None)
    if current is None:
        return False
    if current is _schedule_reevaluation_once:
        return True
    if not source_is(current, UPSTREAM_SHA256):
        return False
    JobScheduler._schedule_reevalutation = _schedule_reevaluation_once
    return True
