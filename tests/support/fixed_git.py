"""The repository state the fast tests see: :func:`cdgtmll.lineage.worktree.run_git` replaced by
:func:`fixed_run_git` (tests/conftest.py), since a fast test starts no process. Every folder is
then a clean checkout at :data:`FIXED_COMMIT`; the integration and ``slow`` tests run real git."""

from __future__ import annotations

import os

#: the commit every folder is checked out at in a fast test (no real commit has this hash)
FIXED_COMMIT = "0123456789abcdef" * 2 + "01234567"
#: ``git ARGS`` -> its output: the commands the lineage code runs (cdgtmll.lineage.worktree)
FIXED_OUTPUT = {
    ("rev-parse", "HEAD"): FIXED_COMMIT + "\n",
    ("rev-parse", "--show-prefix"): "\n",  # the workflow is the repository's root
    ("status", "--porcelain", "-z", "--untracked-files=no"): "",  # nothing changed
    ("status", "--porcelain", "--untracked-files=no"): "",
}


def fixed_run_git(cwd: str | os.PathLike, *args: str) -> str | None:
    """What :func:`cdgtmll.lineage.worktree.run_git` returns for a clean checkout at
    :data:`FIXED_COMMIT`; a command not in :data:`FIXED_OUTPUT` fails (None), as git's own
    failure does, so that a new git command in the lineage code is noticed here."""
    return FIXED_OUTPUT.get(tuple(args))
