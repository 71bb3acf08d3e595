"""What git says about the checkout a job ran in, with code told apart from configuration.

A run is **dirty** when the *code* it ran had uncommitted changes: a file under
:data:`CODE_PATTERNS` (the package, the rules, the Snakefile, the lock files, ``pyproject.toml``,
``mk/`` and what the jobs' software environments are built from) differs from the commit. A
run made from such a tree cannot be traced to code anyone can check out; ``cdgtmll audit``
fails on it (``MIXED CODE``) and the tables say it in their code-lineage footnote.

Configuration is not code: ``params.yaml`` (which ``dvc exp run -S`` writes before the stage
runs) and the profiles (``config/*.yaml``, ``profiles/*``) are *inputs* of a run. Each run
records their content hash (:mod:`cdgtmll.lineage.configs`) and the audit checks them; an
uncommitted edit to them does not make a run dirty. Nor do documentation, tests or DVC's own
files (``dvc.lock``, ``.dvc/``): they change no number.

``mk/`` counts as code: it builds the environments the XMC peers (napkinXC, PECOS,
LibMultiLabel) run in, whose versions decide those rows' numbers, exactly as
``requirements*.lock`` decide the package's. ``environment.yml`` (the jobs' conda environment)
and the ``Dockerfile`` (the container of ``--sdm apptainer``) likewise.

A record (:func:`git_state`) keeps the whole ``git status`` listing for information
(``dirty_files``) beside the code files among it (``code_dirty_files``); ``dirty`` says whether
there are any of the latter. Records written before this rule (``dirty``: any tracked change,
``dirty_files``: up to 20 lines of ``git status --porcelain``) are read by the same rule
(:func:`code_dirty`), so that a run made by ``dvc exp run -S`` before it is not called dirty
either.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path
from typing import Any

#: the files whose uncommitted changes make a run dirty, relative to the workflow's root: a
#: pattern ending in ``/`` is a folder (everything under it), others are ``fnmatch`` patterns
#: of a whole path
CODE_PATTERNS = ("src/", "workflow/", "mk/", "Snakefile", "pyproject.toml", "requirements*.lock",
                 "environment.yml", "Dockerfile")
#: how a record says what its ``dirty`` flag means
DIRTY_RULE = ("uncommitted changes to code only: " + ", ".join(CODE_PATTERNS)
              + " (config files are inputs, recorded by content hash)")
#: how many lines of ``git status`` a record keeps (the count of all of them is kept too)
MAX_LISTED = 50
#: records written before the code-only rule kept at most this many lines of ``git status``
#: (``provenance.json`` of a training job): a list that long may have been cut
LEGACY_LISTED = 20


def is_code_path(path: str) -> bool:
    """Whether ``path`` (relative to the workflow's root, ``/``-separated) is code (:data:`CODE_PATTERNS`)."""
    path = path.strip().strip('"')
    path = path[2:] if path.startswith("./") else path
    for pattern in CODE_PATTERNS:
        if pattern.endswith("/"):
            if path.startswith(pattern) or path == pattern[:-1]:
                return True
        elif fnmatch.fnmatchcase(path, pattern):
            return True
    return False


def status_paths(line: str) -> list[str]:
    """The path(s) of one ``git status --porcelain`` line (``XY path``; a rename or copy
    ``XY old -> new``: both), without C-style quotes."""
    rest = line[3:] if len(line) > 3 and line[2] == " " else line.split(" ", 1)[-1]
    return [p.strip().strip('"') for p in rest.split(" -> ")]


def run_git(cwd: str | os.PathLike, *args: str) -> str | None:
    """The standard output of ``git ARGS`` run in ``cwd``; None where git is missing, fails or
    takes over 20 s (outside a checkout: ``rev-parse`` fails). The one place the package starts
    git: every record of the repository's state (:func:`git_state`, which runs' provenance and
    evaluation records hold) reads it through this function, called through
    the module (``worktree.run_git``), so that the fast tests, which may start no process, replace
    it with a fixed state (tests/conftest.py) while the integration tests run real git."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _porcelain(raw: str) -> list[str]:
    """``git status --porcelain -z`` output as ``XY path`` lines (``XY old -> new`` for a
    rename or copy, whose entry is followed by the old path)."""
    fields = raw.split("\0")
    lines: list[str] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        xy, path = entry[:2], entry[3:]
        if "R" in xy or "C" in xy:  # the source path follows as a field of its own
            old = fields[i] if i < len(fields) else ""
            i += 1
            lines.append(f"{xy} {old} -> {path}")
        else:
            lines.append(f"{xy} {path}")
    return lines


def git_state(cwd: str | os.PathLike | None = None) -> dict[str, Any]:
    """The commit of the checkout that holds ``cwd`` (the workflow's root; default the current
    folder) and whether its code had uncommitted changes (module docstring)::

        {"commit": sha, "dirty": bool (code only), "code_dirty_files": [...],
         "dirty_files": [every changed tracked file, up to MAX_LISTED], "dirty_files_total": n,
         "dirty_rule": DIRTY_RULE}

    Lines are ``git status --porcelain`` lines (``XY path``), paths relative to ``cwd``; files
    outside ``cwd`` (a workflow in a sub-folder of a larger repository) are listed but are
    never code of this workflow. Untracked files are left out (results and logs are ignored
    by ``.gitignore``; a new module is code only once it is added). Outside git:
    ``{"commit": None, "dirty": None, "note": "not a git checkout"}``."""
    cwd = Path(cwd or Path.cwd())
    commit = run_git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "note": "not a git checkout"}
    prefix = (run_git(cwd, "rev-parse", "--show-prefix") or "").strip()
    raw = run_git(cwd, "status", "--porcelain", "-z", "--untracked-files=no") or ""
    lines, code = [], []
    for line in _porcelain(raw):
        xy, rest = line[:2], line[3:]
        paths = [p[len(prefix):] if p.startswith(prefix) else None for p in rest.split(" -> ")]
        shown = f"{xy} " + " -> ".join(p if p is not None else f"(outside the workflow) {q}"
                                       for p, q in zip(paths, rest.split(" -> ")))
        lines.append(shown)
        if any(p is not None and is_code_path(p) for p in paths):
            code.append(shown)
    return {"commit": commit.strip(), "dirty": bool(code), "code_dirty_files": code,
            "dirty_files": lines[:MAX_LISTED], "dirty_files_total": len(lines), "dirty_rule": DIRTY_RULE}


def code_dirty_files(git: dict[str, Any] | None) -> list[str] | None:
    """The changed code files of a recorded git state (a ``git`` block of a provenance record),
    by the code-only rule, also for a record written before it (:data:`LEGACY_LISTED` lines of
    ``git status``, ``dirty`` for any change). None when the record cannot tell: not a git
    checkout, or an old record that says dirty without a listing, or whose listing was cut at
    :data:`LEGACY_LISTED` lines with no code among them."""
    git = git or {}
    if "code_dirty_files" in git:
        return list(git.get("code_dirty_files") or [])
    if git.get("dirty") is None:
        return None
    if not git.get("dirty"):
        return []
    listed = git.get("dirty_files")
    if not isinstance(listed, list):
        return None
    code = [line for line in listed if any(is_code_path(p) for p in status_paths(str(line)))]
    if not code and len(listed) >= LEGACY_LISTED:
        return None
    return code


def code_dirty(git: dict[str, Any] | None) -> bool | None:
    """Whether a recorded git state had uncommitted changes to code (:func:`code_dirty_files`):
    True, False, or None outside a git checkout. An old record that cannot tell which files
    changed counts as dirty (the safe side: the audit then asks for a clean re-run)."""
    git = git or {}
    if git.get("dirty") is None and "code_dirty_files" not in git:
        return None
    files = code_dirty_files(git)
    return True if files is None else bool(files)
