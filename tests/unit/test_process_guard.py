"""The fast loop starts no process (tests/conftest.py): a test without the ``slow`` marker that
tries to is refused, and fails even where the code under test catches the refusal; ``git``
included: the lineage code's one git call gives a fixed state there."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest

from cdgtmll.lineage import worktree
from tests.conftest import STARTED, ProcessStartInFastTest
from tests.support.fixed_git import FIXED_COMMIT, fixed_run_git
from tests.support.paths import ROOT


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
    lambda: subprocess.check_output(["bash", "-c", "true"]),
    lambda: os.popen("true").read(),
    lambda: os.system("true"),
    lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    lambda: subprocess.run(["git", "--version"], capture_output=True, check=True),
], ids=["run", "check_output", "popen", "system", "mp-fork", "mp-spawn", "git"])
def test_a_test_without_the_slow_marker_cannot_start_a_process(start, request):
    with pytest.raises(ProcessStartInFastTest, match="starts a process"):
        start()
    assert request.node.stash[STARTED], "the attempt is recorded, so a caught refusal still fails the test"
    request.node.stash[STARTED].clear()  # this test's attempts were meant


def test_git_state_is_the_fixed_one_and_starts_no_process(tmp_path, request):
    """The lineage code reads the repository through one function (worktree.run_git), which a
    fast test gets as a clean checkout at a fixed commit: the record of the state says so."""
    assert worktree.run_git is fixed_run_git
    assert worktree.git_state(tmp_path) == {"commit": FIXED_COMMIT, "dirty": False, "code_dirty_files": [],
                                            "dirty_files": [], "dirty_files_total": 0,
                                            "dirty_rule": worktree.DIRTY_RULE}
    assert not request.node.stash[STARTED]


@pytest.mark.slow
def test_a_slow_test_reads_the_real_repository():
    """Outside the fast loop run_git is the package's own and runs git."""
    assert worktree.run_git is not fixed_run_git
    assert worktree.git_state(ROOT)["commit"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                                                                capture_output=True, check=True).stdout.strip()


@pytest.mark.slow
def test_a_slow_test_may():
    assert subprocess.run([sys.executable, "-c", "print(2 + 2)"], capture_output=True, text=True,
                          check=True).stdout == "4\n"
