"""DVC with the shipped ``.dvc/config`` and Makefile targets, in a tiny git repository (one
stage writing two small files; the pipeline itself is not run): a corrupt object in the
remote fails ``make pull`` naming the workspace file, and ``make gc`` keeps every
experiment, so that ``dvc exp apply`` still works after it.

The shipped files are used as they are: ``.dvc/config`` (the remote ``cdgtmll`` beside the
checkout, ``verify = true``), the Makefile (``make pull``, ``make push``, ``make gc``) and
``mk/`` (included by it). The venv is this checkout's (a link), marked up to date.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")

STAGE = """\
stages:
  experiments:
    cmd: python make_runs.py
    deps: [make_runs.py]
    params: [{params.yaml: }]
    outs:
      - results/runs:
          persist: true
"""
# a stand-in for the pipeline: one run's predictions.npz and metrics.json, from params.yaml
MAKE_RUNS = """\
import json, os, yaml
import numpy as np
x = yaml.safe_load(open("params.yaml"))["x"]
d = "results/runs/yeast/clean/BCE/seed0"
os.makedirs(d, exist_ok=True)
with open(d + "/predictions.npz", "wb") as fh:
    np.savez(fh, val=np.full((20, 14), x, np.float32), test=np.full((20, 14), x, np.float32))
with open(d + "/metrics.json", "w") as fh:
    json.dump({"x": x, "mAP": 0.5}, fh)
"""
RUN = "results/runs/yeast/clean/BCE/seed0"


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["DVC_NO_ANALYTICS"] = "1"
    env.pop("CDGTMLL_DVC_REMOTE", None)
    env.update(extra)
    return env


def _run(cwd: Path, *cmd: str, env: dict | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(list(cmd), cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=300)
    if ok:
        assert res.returncode == 0, f"{cmd}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def _dvc(cwd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return _run(cwd, sys.executable, "-m", "dvc", *args, **kw)


def _make(cwd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return _run(cwd, "make", "--no-print-directory", *args, **kw)


def _mark_venv(repo: Path) -> None:
    """This checkout's venv, up to date for the Makefile (its stamp newer than the lock files)."""
    (repo / ".venv").symlink_to(ROOT / ".venv")
    for f in ("requirements.lock", "pyproject.toml"):
        os.utime(repo / f, (946684800, 946684800))  # 2000-01-01


def _tiny_repo(dst: Path) -> Path:
    """A git + DVC repository with the shipped Makefile, mk/ and .dvc/config, and one stage."""
    dst.mkdir(parents=True)
    shutil.copy2(ROOT / "Makefile", dst / "Makefile")
    shutil.copytree(ROOT / "mk", dst / "mk")
    (dst / "requirements.lock").write_text("")
    (dst / "pyproject.toml").write_text("")
    (dst / "dvc.yaml").write_text(STAGE)
    (dst / "make_runs.py").write_text(MAKE_RUNS)
    (dst / "params.yaml").write_text("x: 1\n")
    (dst / ".gitignore").write_text("/.venv\n/results\n")
    _run(dst, "git", "init", "-q")
    _run(dst, "git", "config", "user.name", "cdgtmll test")
    _run(dst, "git", "config", "user.email", "test@cdgtmll.invalid")
    _dvc(dst, "init", "-q")
    shutil.copy2(ROOT / ".dvc/config", dst / ".dvc/config")  # the shipped remote and cache settings
    _mark_venv(dst)
    _dvc(dst, "repro", "-q")
    _run(dst, "git", "add", "-A")
    _run(dst, "git", "commit", "-qm", "tiny")
    return dst


def _objects(repo: Path) -> dict[str, str]:
    """{file inside results/runs: md5} from the output's .dir listing in the cache."""
    lock = (repo / "dvc.lock").read_text()
    md5 = lock.split("md5: ")[-1].split()[0]
    listing = json.loads((repo / ".dvc/cache/files/md5" / md5[:2] / md5[2:]).read_text())
    return {e["relpath"]: e["md5"] for e in listing}


def test_corrupt_remote_objects_fail_make_pull_naming_each_file(tmp_path):
    repo = _tiny_repo(tmp_path / "repo")
    _make(repo, "push")
    remote = tmp_path / "cdgtmll-dvc-remote/files/md5"  # ../../cdgtmll-dvc-remote from .dvc/
    objs = _objects(repo)
    pred, metrics = (
        remote / objs[f"yeast/clean/BCE/seed0/{n}"][:2] / objs[f"yeast/clean/BCE/seed0/{n}"][2:]
        for n in ("predictions.npz", "metrics.json")
    )
    assert pred.is_file() and metrics.is_file()
    for f in (pred, metrics):
        f.chmod(0o644)
    with open(pred, "r+b") as fh:  # truncated predictions
        fh.truncate(pred.stat().st_size // 2)
    text = metrics.read_text()  # an edited metrics file: valid JSON, another number
    metrics.write_text(text.replace("0.5", "0.9"))

    clone = tmp_path / "clone"
    _run(tmp_path, "git", "clone", "-q", str(repo), str(clone))
    _mark_venv(clone)
    # the url given the documented way (`dvc remote modify --local`, as `make pull` does with it)
    res = _make(clone, "pull", env=_env(CDGTMLL_DVC_REMOTE=str(tmp_path / "cdgtmll-dvc-remote")), ok=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "2 file(s) recorded in dvc.lock are not in the DVC cache" in out, out
    for name, obj in (("predictions.npz", pred), ("metrics.json", metrics)):
        line = next(ln for ln in out.splitlines() if f"{RUN}/{name}: CORRUPT in the remote" in ln)
        assert objs[f"yeast/clean/BCE/seed0/{name}"] in line and str(obj) in line, line
    assert "make push" in out
    # nothing corrupt in the workspace, and nothing ran after the failed pull
    assert not (clone / RUN / "metrics.json").exists() and not (clone / RUN / "predictions.npz").exists()
    assert "snakemake" not in res.stdout
    # `dvc remote modify --local` changed the url only: the shipped `verify = true` still applies
    assert "url = " in (clone / ".dvc/config.local").read_text()
    assert _dvc(clone, "config", "remote.cdgtmll.verify").stdout.strip() == "true"


def test_make_gc_keeps_experiments_for_exp_apply(tmp_path):
    repo = _tiny_repo(tmp_path / "repo")
    _dvc(repo, "exp", "run", "-q", "-n", "x-2", "-S", "x=2")
    _dvc(repo, "exp", "run", "-q", "-n", "x-3", "-S", "x=3")
    gc = _make(repo, "gc")
    assert "all experiments" in gc.stdout + gc.stderr
    _dvc(repo, "exp", "apply", "x-2")  # rc 255 after `dvc gc -w`: the experiment's outputs were collected
    assert json.loads((repo / RUN / "metrics.json").read_text())["x"] == 2
    assert "x: 2" in (repo / "params.yaml").read_text()
