"""A run's dirty flag is about code only (src/cdgtmll/lineage/worktree.py):
``git status`` of a real repository with uncommitted edits to ``params.yaml`` (as ``dvc exp run
-S`` leaves it), a profile, the docs and DVC's lock says *not dirty*, and lists them; an edit to
a module, a rule, a lock file or ``mk/`` says *dirty*, naming it. Records written before the
rule (``dirty`` for any change, up to 20 lines of ``git status``) are read by the same rule."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cdgtmll.lineage.worktree import LEGACY_LISTED, code_dirty, code_dirty_files, git_state, is_code_path

#: runs real git in a temporary repository or this checkout: processes, so outside the fast loop
#: (there git gives a fixed state: tests/conftest.py)
REAL_GIT = pytest.mark.slow

TRACKED = {
    "params.yaml": "profile: config/quick.yaml\nsettings: {}\n",
    "config/quick.yaml": "name: quick\n",
    "profiles/slurm/config.yaml": "executor: slurm\n",
    "docs/lineage.md": "# Lineage\n",
    "dvc.lock": "schema: '2.0'\n",
    "src/cdgtmll/train.py": "x = 1\n",
    "workflow/rules/train.smk": "# rules\n",
    "Snakefile": "# Snakefile\n",
    "requirements.lock": "numpy==2.0\n",
    "requirements-pecos.lock": "pecos==1\n",
    "mk/xmc-envs.mk": "# make\n",
    "pyproject.toml": "[project]\n",
}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def _repo(root: Path, files: dict[str, str] = TRACKED) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.org")
    _git(root, "config", "user.name", "t")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    return root


def _edit(root: Path, *names: str) -> None:
    for name in names:
        with open(root / name, "a") as fh:
            fh.write("# edited\n")


@pytest.mark.parametrize("path, code", [
    ("src/cdgtmll/train.py", True), ("workflow/rules/evaluate.smk", True), ("Snakefile", True),
    ("requirements.lock", True), ("requirements-napkinxc.lock", True), ("pyproject.toml", True),
    ("mk/build-env.sh", True), ("environment.yml", True), ("Dockerfile", True), ("./src/x.py", True),
    ('"src/with space.py"', True),
    ("params.yaml", False), ("config/quick.yaml", False), ("profiles/slurm/config.yaml", False),
    ("docs/lineage.md", False), ("tests/unit/test_x.py", False), ("dvc.lock", False), (".dvc/config", False),
    ("README.md", False), ("srcfoo/x.py", False), ("tools/screenshots.py", False),
])
def test_what_counts_as_code(path, code):
    assert is_code_path(path) is code


@REAL_GIT
def test_config_docs_and_dvc_edits_are_listed_but_not_dirty(tmp_path):
    root = _repo(tmp_path / "repo")
    _edit(root, "params.yaml", "config/quick.yaml", "profiles/slurm/config.yaml", "docs/lineage.md", "dvc.lock")
    git = git_state(root)
    assert git["commit"] == _git(root, "rev-parse", "HEAD").strip()
    assert git["dirty"] is False and git["code_dirty_files"] == []
    assert sorted(git["dirty_files"]) == sorted(f" M {f}" for f in ("params.yaml", "config/quick.yaml",
                                                                     "profiles/slurm/config.yaml", "docs/lineage.md",
                                                                     "dvc.lock"))
    assert git["dirty_files_total"] == 5 and "config files are inputs" in git["dirty_rule"]
    assert code_dirty(git) is False


@REAL_GIT
@pytest.mark.parametrize("name", ["src/cdgtmll/train.py", "workflow/rules/train.smk", "Snakefile", "requirements.lock",
                                  "requirements-pecos.lock", "mk/xmc-envs.mk", "pyproject.toml"])
def test_an_edit_to_code_is_dirty_and_named(tmp_path, name):
    root = _repo(tmp_path / "repo")
    _edit(root, "params.yaml", name)
    git = git_state(root)
    assert git["dirty"] is True and git["code_dirty_files"] == [f" M {name}"]
    assert f" M {name}" in git["dirty_files"] and " M params.yaml" in git["dirty_files"]
    assert code_dirty(git) is True and code_dirty_files(git) == [f" M {name}"]


@REAL_GIT
def test_a_staged_rename_of_a_module_is_code(tmp_path):
    root = _repo(tmp_path / "repo")
    _git(root, "mv", "src/cdgtmll/train.py", "src/cdgtmll/trainer2.py")
    git = git_state(root)
    assert git["dirty"] is True and git["code_dirty_files"] == ["R  src/cdgtmll/train.py -> src/cdgtmll/trainer2.py"]


@REAL_GIT
def test_a_workflow_in_a_sub_folder_judges_its_own_paths(tmp_path):
    """The paths are the workflow's (``cwd``), not the repository's: ``proj/src/...`` is code of
    the workflow in ``proj/``, ``other/src/...`` is not."""
    files = {f"proj/{k}": v for k, v in TRACKED.items()} | {"other/src/x.py": "y = 1\n"}
    root = _repo(tmp_path / "repo", files)
    _edit(root, "other/src/x.py", "proj/params.yaml")
    git = git_state(root / "proj")
    assert git["dirty"] is False
    assert " M params.yaml" in git["dirty_files"]
    assert " M (outside the workflow) other/src/x.py" in git["dirty_files"]
    _edit(root, "proj/src/cdgtmll/train.py")
    assert git_state(root / "proj")["code_dirty_files"] == [" M src/cdgtmll/train.py"]


@REAL_GIT
def test_outside_git_nothing_is_claimed(tmp_path):
    git = git_state(tmp_path)
    assert git == {"commit": None, "dirty": None, "note": "not a git checkout"}
    assert code_dirty(git) is None


@pytest.mark.parametrize("record, dirty, files", [
    # what provenance.json of a training job records (any tracked change, the first line stripped)
    ({"commit": "c", "dirty": True, "dirty_files": ["M params.yaml"]}, False, []),
    ({"commit": "c", "dirty": True, "dirty_files": ["M params.yaml", " M config/quick.yaml"]}, False, []),
    ({"commit": "c", "dirty": True, "dirty_files": ["M params.yaml", " M src/cdgtmll/io.py"]}, True,
     [" M src/cdgtmll/io.py"]),
    ({"commit": "c", "dirty": True, "dirty_files": ["R  a.md -> workflow/x.smk"]}, True, ["R  a.md -> workflow/x.smk"]),
    ({"commit": "c", "dirty": False, "dirty_files": []}, False, []),
    # says dirty, but not which files: cannot tell, the safe side
    ({"commit": "c", "dirty": True}, True, None),
    # a listing cut at its 20 lines with no code among them: the rest may have been code
    ({"commit": "c", "dirty": True, "dirty_files": [f" M docs/{i}.md" for i in range(LEGACY_LISTED)]}, True, None),
    ({"commit": None, "dirty": None, "note": "not a git checkout"}, None, None),
    # a record of the code-only rule: as it says
    ({"commit": "c", "dirty": False, "code_dirty_files": [], "dirty_files": [" M params.yaml"]}, False, []),
])
def test_records_are_read_by_the_code_only_rule(record, dirty, files):
    assert code_dirty(record) is dirty
    assert code_dirty_files(record) == files
