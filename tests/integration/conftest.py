"""Fixtures of the integration tests (every test below this folder is marked ``integration``
by tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from filelock import FileLock

from tests.support.dvc_repo import quick_dvc_run
from tests.support.tools import load_tool


@pytest.fixture(scope="session")
def report_browser() -> ModuleType:
    """``tools/report_browser.py``, which drives Snakemake's HTML report in headless Chromium:
    ``report_browser.ReportBrowser(report_browser.require_chromium())``."""
    return load_tool("report_browser")


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory, mirror) -> Path:
    """The quick profile's finished run at test scale (:func:`tests.support.dvc_repo.quick_dvc_run`:
    1 epoch, 1 seed, ``dvc repro``, committed), made once per pytest session and shared by its
    xdist workers: the first worker to ask makes it under a file lock in the folder all of them
    see (pytest-xdist's recipe: the parent of each worker's base temporary folder), the others
    wait for it and take it as it is; a failed run is failed once, and named to every test that
    asks again. Read-only by convention: a test takes a copy (:func:`tests.support.dvc_repo.copy_run`)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # one session's workers only
    repo, done, failed = shared / "quick-run" / "repo", shared / "quick-run.done", shared / "quick-run.failed"
    with FileLock(str(shared / "quick-run.lock")):
        if failed.exists():
            pytest.fail(f"the shared quick run failed (in another test): {failed.read_text()[-3000:]}")
        if not done.exists():
            try:
                quick_dvc_run(repo, mirror)
            except BaseException as exc:
                failed.write_text(f"{type(exc).__name__}: {exc}")
                raise
            done.write_text(str(repo))
    return repo
