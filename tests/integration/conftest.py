"""Fixtures of the integration tests (every test below this folder is marked ``integration``
by tests/conftest.py)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.support.tools import load_tool


@pytest.fixture(scope="session")
def report_browser() -> ModuleType:
    """``tools/report_browser.py``, which drives Snakemake's HTML report in headless Chromium:
    ``report_browser.ReportBrowser(report_browser.require_chromium())``."""
    return load_tool("report_browser")
