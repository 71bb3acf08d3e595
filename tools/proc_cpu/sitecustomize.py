"""Exact CPU time of every Python process of a run, for ``tools/rule_times.py --procs``.

Snakemake's benchmark files sample a job's CPU time (every 0.5 s for its first 15 s, then every
30 s), so their sums are lower bounds. Put this folder first on ``PYTHONPATH`` and name a log
file, both as absolute paths (jobs may run in other folders), and every Python process started
under it (Snakemake's own, each job's, the installer's helpers) appends one JSON line when it
exits:

    PYTHONPATH=$PWD/tools/proc_cpu CDGTMLL_PROC_LOG=$PWD/procs.jsonl make all

``{"pid", "ppid", "user", "system", "wall", "module", "argv", "cwd"}``: user and system CPU
seconds of the process itself (``getrusage(RUSAGE_SELF)``: its threads, not its child
processes, which log their own line when they are Python), seconds since this hook ran, the
``-m`` module (``__main__.__spec__.name``) or ``null``, the command line, and the working
directory. A process that is killed (SIGKILL, ``os._exit``) writes nothing, and one run with
``-I``/``-S`` or without ``PYTHONPATH`` (uv's bytecode compiler) is not seen. Without
``CDGTMLL_PROC_LOG`` this does nothing. A line is one ``write`` to a file opened with
``O_APPEND``, so processes that exit at once do not interleave their lines.
"""

from __future__ import annotations

import os

_LOG = os.environ.get("CDGTMLL_PROC_LOG")

if _LOG:
    import atexit
    import json
    import resource
    import sys
    import time

    _T0 = time.monotonic()

    def _record() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        try:
            cwd = os.getcwd()
        except OSError:  # the working directory was removed
            cwd = None
        line = json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "user": usage.ru_utime,
                           "system": usage.ru_stime, "wall": time.monotonic() - _T0,
                           "module": getattr(spec, "name", None), "argv": sys.argv, "cwd": cwd})
        try:
            fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:  # never fail the process it measures
            sys.stderr.write(f"proc_cpu: cannot append to CDGTMLL_PROC_LOG={_LOG}: {exc}\n")
            return
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    atexit.register(_record)
