"""Shared pytest fixtures and hooks.

Layout: ``unit/<package>/`` tests one package of ``src/cdgtmll`` each (``unit/`` itself: the
command line, the package's shape and its import graph); ``integration/``
runs the workflow, DVC, Slurm, installs, the fault catalogue and the HTML report in
subprocesses; ``cuda/`` needs a CUDA device; ``support/`` holds the helpers tests import
(``from tests.support.mirror import ...``, see :mod:`tests.support`).
"""

from __future__ import annotations

import _posixsubprocess
import importlib
import importlib.util
import json
import os
import platform
import subprocess
from pathlib import Path

import pytest

from cdgtmll.lineage import worktree
from cdgtmll.runtime.openmp import passive_openmp_waits
from tests.support.fixed_git import fixed_run_git
from tests.support.mirror import MIRROR_ENV, mirror_path, packaged_yeast_mirror

# Before any test imports torch: three workers on two cores (`make test`) run torch's OpenMP
# threads beside each other, and a spinning idle thread takes a core another worker needs. The
# xdist workers inherit it from this process (cdgtmll/runtime/openmp.py).
passive_openmp_waits()

TESTS = Path(__file__).resolve().parent
#: every test below one of these folders gets the marker (registered in pyproject.toml)
FOLDER_MARKERS = {TESTS / "integration": "integration", TESTS / "cuda": "cuda"}
#: tests with one of these markers may start processes; every other test (the fast loop,
#: ``pytest -m "not integration and not slow"``) may not (:func:`pytest_runtest_protocol`), and
#: reads the repository's state from a fixed one (:mod:`tests.support.fixed_git`)
PROCESS_MARKERS = ("slow", "integration", "cuda")
#: where a process starts: ``subprocess`` (run, check_output, Popen, os.popen, asyncio), what
#: ``multiprocessing``'s spawn and forkserver call, ``fork`` (its fork start method, torch
#: DataLoader workers), ``posix_spawn`` and ``os.system``
PROCESS_STARTS = ((subprocess.Popen, "_execute_child"), (_posixsubprocess, "fork_exec"), (os, "fork"),
                  (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system"))
STARTED = pytest.StashKey[list]()


class ProcessStartInFastTest(RuntimeError):
    """A test without a marker of :data:`PROCESS_MARKERS` tried to start a process."""


@pytest.fixture(scope="session")
def mirror() -> Path:
    """Path of the read-only dataset mirror (MULAN ARFF files, VOC label files, MANIFEST.tsv).

    Without one (a fresh clone with no ``../shared/datasets`` and ``CDGTMLL_DATA_MIRROR``
    unset), a mirror holding only ``yeast/``, MULAN's three Yeast files rebuilt from the
    packaged copy in river==0.26.1 and checked against the registry's sha256
    (:func:`tests.support.mirror.packaged_yeast_mirror`). Tests that need other files get them
    through :func:`tests.support.mirror.mirror_file`, which skips naming the file. Skips when
    neither exists."""
    p = mirror_path()
    if p.is_dir():
        return p
    rebuilt, why = packaged_yeast_mirror()
    if rebuilt is None:
        pytest.skip(f"dataset mirror not found at {p} (set {MIRROR_ENV} or provide ../shared/datasets), "
                    f"and Yeast cannot be rebuilt: {why}")
    return rebuilt


def pytest_configure(config):
    """pytest-xdist (3.8) hands out ``--dist loadfile``'s files by their number of tests, most
    first, unless ``--no-loadscope-reorder``: where docs/timings.json records the files' seconds,
    the order :func:`pytest_collection_modifyitems` gives (longest first) is kept instead."""
    if hasattr(config.option, "loadscopereorder") and recorded_file_seconds():
        config.option.loadscopereorder = False


def pytest_sessionstart(session):
    """Two answers a process gets once, by starting a process, are asked for here, before any
    test, so that the fast tests that need them start none: the processor's name, which
    ``platform.processor()`` reads from ``uname -p`` (each run's provenance records it), and the
    number of physical cores, which joblib's loky counts with ``lscpu`` when scikit-learn first
    asks (its OpenMP helpers: KMeans, GaussianMixture). A third is the C library ``libdl``,
    which the CUDA bindings' loader (``cuda.pathfinder``, imported with ``torch``) finds with
    ``ldconfig -p`` at its first import: imported here, it does not fail whichever fast test
    happens to import torch first in its process."""
    from joblib.externals.loky import cpu_count

    platform.processor()
    cpu_count(only_physical_cores=True)
    if importlib.util.find_spec("cuda") and importlib.util.find_spec("cuda.pathfinder"):
        importlib.import_module("cuda.pathfinder")


@pytest.hookimpl(tryfirst=True)  # marked before `-m` deselects
def pytest_collection_modifyitems(config, items):
    """Mark every test under ``tests/integration/`` ``integration``, every test under
    ``tests/cuda/`` ``cuda``, and the tests :func:`recorded_slow_tests` names ``slow`` (so
    ``pytest -m "not integration and not slow"`` is the fast loop).

    Then run the longest test files first: by the seconds per file that docs/timings.json
    records from the last measured ``make test`` (:func:`recorded_file_seconds`, written by
    ``tools/readme_timings.py``; a file it does not know, by the recorded seconds of its tests,
    found by name: :func:`recorded_test_seconds`), then the files with ``slow`` end-to-end tests, then the rest (a stable sort: otherwise
    collection order; a file's tests keep their order). ``make test`` runs ``pytest -n 3 --dist
    loadfile``: each file goes to one worker, so a module fixture that runs a pipeline runs once
    (pytest-xdist's ``loadgroup`` would group finer, but with pytest 9.2 it silently stops
    grouping: https://github.com/pytest-dev/pytest-xdist/issues/1386), and each idle worker takes
    the next file: longest first, the workers finish within about one short file of each
    other instead of one running a long file alone at the end."""
    heavy = recorded_slow_tests()
    for item in items:
        for folder, marker in FOLDER_MARKERS.items():
            if item.path.is_relative_to(folder):
                item.add_marker(marker)
        if item.nodeid in heavy:
            item.add_marker("slow")
    seconds = recorded_file_seconds()
    known, by_name = set(seconds), recorded_test_seconds()
    for item in items:  # a file the record does not know (new, or split off one it knows): its tests' seconds
        path, _, name = item.nodeid.partition("::")
        if path not in known and name in by_name:
            seconds[path] = seconds.get(path, 0.0) + by_name[name]
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], 0.0), item.get_closest_marker("slow") is None))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test of the fast loop starts no process: while it runs (its fixtures' set-up and
    tear-down included), each of :data:`PROCESS_STARTS` raises :class:`ProcessStartInFastTest`,
    and the test fails (:func:`pytest_runtest_makereport`) even where the code under test
    catches the error. A test that needs a process is marked ``slow`` or lives under
    ``tests/integration/``. The lineage code reads the repository's state through git, in one
    function (:func:`cdgtmll.lineage.worktree.run_git`): here it gives a fixed state instead, a
    clean checkout at :data:`tests.support.fixed_git.FIXED_COMMIT` (every training run and
    evaluation records it)."""
    if any(item.get_closest_marker(m) for m in PROCESS_MARKERS):
        return (yield)
    started = item.stash[STARTED] = []
    saved = [(owner, name, getattr(owner, name)) for owner, name in PROCESS_STARTS if hasattr(owner, name)]
    saved.append((worktree, "run_git", worktree.run_git))

    def refuse(name):
        def start(*args, **kwargs):
            what = args[1] if name == "_execute_child" and len(args) > 1 else args[:1]
            started.append(f"{name}({what!r:.200})")
            raise ProcessStartInFastTest(f"{item.nodeid} starts a process ({started[-1]}): a test without the "
                                         "slow marker runs in-process (tests/conftest.py, docs/testing.md)")
        return start

    for owner, name, _ in saved[:-1]:
        setattr(owner, name, refuse(name))
    worktree.run_git = fixed_run_git
    try:
        return (yield)
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Fails a passing phase of a test that tried to start a process (the code under test may
    have caught :class:`ProcessStartInFastTest`)."""
    report = yield
    started = item.stash.get(STARTED, [])
    if started and report.passed:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} tried to start a process: {'; '.join(started)}; mark it slow or run it in-process"
    started.clear()  # each attempt fails one phase, not the next one again
    return report


def recorded_slow_tests(path: Path = TESTS / "slow_tests.json") -> set[str]:
    """The tests that took at least the record's threshold of CPU time when last measured
    (``slow`` in ``tests/slow_tests.json``, written by :mod:`tests.support.cpu_record`): they are
    marked ``slow``, so the fast loop stays under a minute of CPU (docs/testing.md)."""
    try:
        return set(json.loads(path.read_text())["slow"])
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def recorded_file_seconds(path: Path = TESTS.parent / "docs" / "timings.json") -> dict[str, float]:
    """Seconds per test file (``tests/...py``) in docs/timings.json's ``tests`` record: its
    ``files`` (every test's durations), else the sums over its ``slowest`` tests; empty where
    there is no record (the order is then the markers')."""
    try:
        rec = json.loads(path.read_text())["tests"]
        if "files" in rec:
            return {f: float(s) for f, s in rec["files"].items()}
        out: dict[str, float] = {}
        for r in rec["slowest"]:
            f = r["test"].split("::")[0]
            out[f] = out.get(f, 0.0) + float(r["seconds"])
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def recorded_test_seconds(path: Path = TESTS.parent / "docs" / "timings.json") -> dict[str, float]:
    """Seconds per test of docs/timings.json's ``slowest`` tests (their phases summed), by the test's
    name without its file (``test_x[param]``): a test moved to another file keeps its time."""
    try:
        out: dict[str, float] = {}
        for r in json.loads(path.read_text())["tests"]["slowest"]:
            name = r["test"].partition("::")[2]
            out[name] = out.get(name, 0.0) + float(r["seconds"])
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
