"""Shared pytest fixtures and hooks.

Layout: ``unit/<package>/`` tests one package of ``src/cdgtmll`` each (``unit/`` itself: the
command line, the package's shape and its import graph); ``integration/``
runs the workflow, DVC, Slurm, installs, the fault catalogue and the HTML report in
subprocesses; ``cuda/`` needs a CUDA device; ``support/`` holds the helpers tests import
(``from tests.support.mirror import ...``, see :mod:`tests.support`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mirror import MIRROR_ENV, mirror_path, packaged_yeast_mirror

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


@pytest.hookimpl(tryfirst=True)  # marked before `-m` deselects
def pytest_collection_modifyitems(config, items):
    """Mark every test under ``tests/integration/`` ``integration`` and every test under
    ``tests/cuda/`` ``cuda`` (so ``pytest -m "not integration"`` is the fast loop).

    Then run the test files with ``slow`` end-to-end tests first (a stable sort: otherwise
    collection order). ``make test`` runs ``pytest -n 2 --dist loadfile``: each file goes to one
    worker, so a module fixture that runs a pipeline runs once (pytest-xdist's ``loadgroup``
    would group finer, but with pytest 9.2 it silently stops grouping:
    https://github.com/pytest-dev/pytest-xdist/issues/1386), and the long files start first
    instead of one finishing alone after the other worker is idle."""
    for item in items:
        for folder, marker in FOLDER_MARKERS.items():
            if item.path.is_relative_to(folder):
                item.add_marker(marker)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
