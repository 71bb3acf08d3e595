"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

MIRROR_ENV = "CDGTMLL_DATA_MIRROR"


def mirror_path() -> Path:
    """The offline dataset mirror: $CDGTMLL_DATA_MIRROR, else ``<repo>/../shared/datasets``."""
    env = os.environ.get(MIRROR_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture(scope="session")
def mirror() -> Path:
    """Path of the read-only dataset mirror (MULAN ARFF files, VOC label files, MANIFEST.tsv);
    skips the test when it is absent."""
    p = mirror_path()
    if not p.is_dir():
        pytest.skip(f"dataset mirror not found at {p}: set {MIRROR_ENV} or provide ../shared/datasets")
    return p
