"""A pytest plugin that measures each test's CPU time and writes the record of the tests too
heavy for the fast loop (``tests/slow_tests.json``, read by tests/conftest.py)::

    python -m pytest -p tests.support.cpu_record -m "not integration" -n 2 tests/unit

CPU time (user + system, of the test's process and of the processes it waited for) moves far
less with the machine's load than wall time does. A test's set-up and tear-down count (a module
fixture: in its first test). Each pytest-xdist worker writes its part; the controller merges
them when the session ends."""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parents[1] / "slow_tests.json"
#: a test that takes at least this much CPU is ``slow`` (outside the fast loop)
THRESHOLD_CPU_S = 0.3
PARTS = RECORD.parent / ".cpu_record"
SECONDS: dict[str, float] = {}


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = _cpu()
    try:
        return (yield)
    finally:
        SECONDS[item.nodeid] = _cpu() - start


def pytest_sessionfinish(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        PARTS.mkdir(exist_ok=True)
        (PARTS / f"{worker}.json").write_text(json.dumps(SECONDS))
        return
    seconds = dict(SECONDS)
    for part in sorted(PARTS.glob("*.json")) if PARTS.is_dir() else []:
        seconds.update(json.loads(part.read_text()))
        part.unlink()
    if PARTS.is_dir():
        PARTS.rmdir()
    slow = {t: round(s, 2) for t, s in sorted(seconds.items(), key=lambda kv: -kv[1]) if s >= THRESHOLD_CPU_S}
    record = {"threshold_cpu_s": THRESHOLD_CPU_S, "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "load": [round(x, 2) for x in os.getloadavg()],
              "tests_measured": len(seconds), "cpu_s_of_the_rest": round(sum(s for s in seconds.values()
                                                                              if s < THRESHOLD_CPU_S), 1),
              "slow": slow}
    tmp = RECORD.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(RECORD)
