"""The environment every job of the workflow inherits, set by the Snakefile before any job starts.

OpenMP (torch's intra-op threads, and the XMC libraries') keeps a thread that waits for work
spinning for a while before it sleeps. With more runnable threads than free cores, as when
Snakemake runs several jobs on a small machine or a job shares its node, the spinning threads
take cores from the threads that have work. ``OMP_WAIT_POLICY=PASSIVE`` makes waiting threads
sleep at once. It changes when threads wait, not what they compute: the outputs are the same
bytes. Measured by ``benchmarks/bench_openmp_wait.py`` (docs/benchmarks.md, "OpenMP waits").
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
