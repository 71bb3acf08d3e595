"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import MIRROR_ENV, mirror_path, packaged_yeast_mirror


@pytest.fixture(scope="session")
def mirror() -> Path:
    """Path of the read-only dataset mirror (MULAN ARFF files, VOC label files, MANIFEST.tsv).

    Without one (a fresh clone with no ``../shared/datasets`` and ``CDGTMLL_DATA_MIRROR``
    unset), a mirror holding only ``yeast/``, MULAN's three Yeast files rebuilt from the
    packaged copy in river==0.26.1 and checked against the registry's sha256
    (:func:`helpers.packaged_yeast_mirror`). Tests that need other files get them through
    :func:`helpers.mirror_file`, which skips naming the file. Skips when neither exists."""
    p = mirror_path()
    if p.is_dir():
        return p
    rebuilt, why = packaged_yeast_mirror()
    if rebuilt is None:
        pytest.skip(f"dataset mirror not found at {p} (set {MIRROR_ENV} or provide ../shared/datasets), "
                    f"and Yeast cannot be rebuilt: {why}")
    return rebuilt


def pytest_collection_modifyitems(config, items):
    """Run the test files with ``slow`` end-to-end tests first (a stable sort: otherwise
    collection order). ``make test`` runs ``pytest -n 2 --dist loadfile``: each file goes to one
    worker, so a module fixture that runs a pipeline runs once (pytest-xdist's ``loadgroup`` would
    group finer, but with pytest 9.2 it silently stops grouping: pytest-xdist issue #1386), and
    the long files start first instead of one finishing alone after the other worker is idle."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
