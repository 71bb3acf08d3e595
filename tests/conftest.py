"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import MIRROR_ENV, mirror_path


@pytest.fixture(scope="session")
def mirror() -> Path:
    """Path of the read-only dataset mirror (MULAN ARFF files, VOC label files, MANIFEST.tsv);
    skips the test when it is absent."""
    p = mirror_path()
    if not p.is_dir():
        pytest.skip(f"dataset mirror not found at {p}: set {MIRROR_ENV} or provide ../shared/datasets")
    return p
