"""Fixtures of the fault catalogue."""

from __future__ import annotations

import pytest

from cdgtmll.data import acquire


@pytest.fixture()
def no_env_mirror(monkeypatch):
    """No ``$CDGTMLL_DATA_MIRROR``: acquisition looks only where the test says."""
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)
