"""Passive OpenMP waits for every job of the workflow: a performance setting for OpenMP's
default spin-waiting, exported by the Snakefile before any job starts.

What it works around: OpenMP (torch's intra-op threads, and the XMC libraries') keeps a thread
that waits for work spinning for a while before it sleeps (the ``OMP_WAIT_POLICY`` default of
GNU libgomp and LLVM libomp; upstream report of the CPU it burns: pytorch/pytorch#80777,
https://github.com/pytorch/pytorch/issues/80777). With more runnable threads than free cores, as
when Snakemake runs several jobs on a small machine or a job shares its node, the spinning
threads take cores from the threads that have work. ``OMP_WAIT_POLICY=PASSIVE`` makes waiting
threads sleep at once. It changes when threads wait, not what they compute: the outputs are the
same bytes (tests/unit/runtime/test_openmp.py).

Measured gain: ``benchmarks/bench_runtime_workarounds.py --only openmp`` and
``benchmarks/bench_openmp_wait.py`` (docs/benchmarks.md, "Run-time workarounds" and "OpenMP
waits"): on 2 cores under load 7-9 (2026-11-28), a 2-thread job used 4.46 s of CPU with it and
10.66 s without; beside two busy loops (2026-11-27) 11.5 s against 24.9 s; alone on idle cores,
no CPU change and 8% more wall time.

Guard: a public, standard environment variable (OpenMP 3.0 onwards), so no version check: a
user's own ``OMP_WAIT_POLICY`` wins (the fallback is OpenMP's own default), and a runtime that
ignores the variable keeps its default.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: the OpenMP wait policy the workflow's jobs get unless the user's environment names one
OPENMP_WAIT_POLICY = "PASSIVE"


def passive_openmp_waits(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``OMP_WAIT_POLICY`` to :data:`OPENMP_WAIT_POLICY` in ``environ`` (default: this
    process's environment, which Snakemake's jobs inherit) unless it is set already; a user's
    own choice wins. Returns whether it was set here. It has to be in the environment before a
    process loads its OpenMP runtime (``import torch``): jobs are new processes, so setting it
    in Snakemake's process, before any job starts, covers all of them."""
    env = os.environ if environ is None else environ
    if env.get("OMP_WAIT_POLICY"):
        return False
    env["OMP_WAIT_POLICY"] = OPENMP_WAIT_POLICY
    return True
