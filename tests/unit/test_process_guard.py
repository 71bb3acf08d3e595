"""The fast loop starts no process (tests/conftest.py): a test without the ``slow`` marker that
tries to is refused, and fails even where the code under test catches the refusal."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest

from tests.conftest import STARTED, ProcessStartInFastTest


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
    lambda: subprocess.check_output(["bash", "-c", "true"]),
    lambda: os.popen("true").read(),
    lambda: os.system("true"),
    lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
], ids=["run", "check_output", "popen", "system", "mp-fork", "mp-spawn"])
def test_a_test_without_the_slow_marker_cannot_start_a_process(start, request):
    with pytest.raises(ProcessStartInFastTest, match="starts a process"):
        start()
    assert request.node.stash[STARTED], "the attempt is recorded, so a caught refusal still fails the test"
    request.node.stash[STARTED].clear()  # this test's attempts were meant


def test_git_is_the_one_command_a_fast_test_may_run(request):
    """The lineage code reads the repository through git (tests/conftest.py: _is_git)."""
    assert subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout.startswith("git ")
    assert not request.node.stash[STARTED]


@pytest.mark.slow
def test_a_slow_test_may():
    assert subprocess.run([sys.executable, "-c", "print(2 + 2)"], capture_output=True, text=True,
                          check=True).stdout == "4\n"
