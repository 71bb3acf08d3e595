"""Shared pytest fixtures and hooks.

Layout: ``unit/<package>/`` tests one package of ``src/cdgtmll`` each (``unit/`` itself: the
command line, the package's shape and its import graph); ``integration/``
runs the workflow, DVC, Slurm, installs, the fault catalogue and the HTML report in
subprocesses; ``cuda/`` needs a CUDA device; ``support/`` holds the helpers tests import
(``from tests.support.mirror import ...``, see :mod:`tests.support`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdgtmll.runtime.openmp import passive_openmp_waits
from tests.support.mirror import MIRROR_ENV, mirror_path, packaged_yeast_mirror

# Before any test imports torch: three workers on two cores (`make test`) run torch's OpenMP
# threads beside each other, and a spinning idle thread takes a core another worker needs. The
# xdist workers inherit it from this process (cdgtmll/runtime/openmp.py).
passive_openmp_waits()

TESTS = Path(__file__).resolve().parent
#: every test below one of these folders gets the marker (registered in pyproject.toml)
FOLDER_MARKERS = {TESTS / "integration": "integration", TESTS / "cuda": "cuda"}


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


@pytest.hookimpl(tryfirst=True)  # marked before `-m` deselects
def pytest_collection_modifyitems(config, items):
    """Mark every test under ``tests/integration/`` ``integration`` and every test under
    ``tests/cuda/`` ``cuda`` (so ``pytest -m "not integration"`` is the fast loop).

    Then run the longest test files first: by the seconds per file that docs/timings.json
    records from the last measured ``make test`` (:func:`recorded_file_seconds`, written by
    ``tools/readme_timings.py``), then the files with ``slow`` end-to-end tests, then the rest (a stable sort: otherwise
    collection order; a file's tests keep their order). ``make test`` runs ``pytest -n 3 --dist
    loadfile``: each file goes to one worker, so a module fixture that runs a pipeline runs once
    (pytest-xdist's ``loadgroup`` would group finer, but with pytest 9.2 it silently stops
    grouping: https://github.com/pytest-dev/pytest-xdist/issues/1386), and each idle worker takes
    the next file: longest first, the workers finish within about one short file of each
    other instead of one running a long file alone at the end."""
    for item in items:
        for folder, marker in FOLDER_MARKERS.items():
            if item.path.is_relative_to(folder):
                item.add_marker(marker)
    seconds = recorded_file_seconds()
    items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::")[0], 0.0), item.get_closest_marker("slow") is None))


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
