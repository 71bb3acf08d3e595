"""Snakemake in a subprocess: its environment, a copy of the checkout to run it in, and the
``cdgtmll audit`` command line (``from tests.support.workflow import ...``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.mirror import MIRROR_ENV
from tests.support.paths import ROOT

#: what a copy of the checkout leaves out at its top level (outputs, caches, environments): by
#: path, so that a package of the same name (src/cdgtmll/figures) is copied
TOP_SKIP = {".venv", ".snakemake", "results", "logs", "figures", ".cache", "report.html", ".git"}
#: left out at any depth
ANY_SKIP = {"__pycache__", ".pytest_cache", ".ruff_cache"}


def checkout_ignore(*extra_paths: str):
    """An ignore function for :func:`shutil.copytree` from the checkout: :data:`TOP_SKIP` at its
    top, :data:`ANY_SKIP` and ``*.egg-info`` anywhere, and the given paths relative to it
    (``"logs/benchmarks"``, ``".dvc/cache"``)."""
    paths = set(extra_paths)

    def ignore(d: str, names: list[str]) -> list[str]:
        rel = Path(d).resolve().relative_to(ROOT)
        return [n for n in names if n in ANY_SKIP or n.endswith(".egg-info") or (rel / n).as_posix() in paths
                or (rel == Path(".") and n in TOP_SKIP)]

    return ignore


def snakemake_env(mirror: Path | None = None) -> dict:
    """Environment for a Snakemake subprocess: this venv first on PATH, caches outside the
    repository, the dataset mirror when given, and no ``OMP_WAIT_POLICY`` (a user's default)."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)  # as a user's shell: the Snakefile sets it for the jobs (conftest.py sets it here)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["XDG_CACHE_HOME"] = env.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache")
    env["MPLCONFIGDIR"] = "/tmp/cdgtmll-mpl"
    if mirror is not None:
        env[MIRROR_ENV] = str(mirror)
    return env


def copy_repo(dst: Path) -> Path:
    """A copy of the checkout at ``dst`` without its outputs and caches (:func:`checkout_ignore`),
    with empty ``results/`` and ``figures/``."""
    shutil.copytree(ROOT, dst, ignore=checkout_ignore(), symlinks=True)
    for d in ("results", "figures"):
        (dst / d).mkdir(exist_ok=True)
    return dst


def run_snakemake(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """``python -m snakemake ARGS`` in ``repo``."""
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)


def run_audit(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """``cdgtmll audit ARGS`` (through ``python -m cdgtmll.cli``) in ``repo``."""
    return subprocess.run([sys.executable, "-m", "cdgtmll.cli", "audit", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=300)


def workflow_only(dst: Path, mirror: Path, configs: bool = False) -> tuple[Path, dict]:
    """The workflow alone at ``dst`` (Snakefile, environment.yml, workflow/, profiles/default and an
    empty config/, or the shipped profiles with ``configs``), the package taken from this checkout
    through PYTHONPATH; and the environment to run Snakemake there on ``mirror``. For fault tests
    that bring a config of their own: faster to copy than :func:`copy_repo`."""
    (dst / "config").mkdir(parents=True)
    for f in ("Snakefile", "environment.yml"):
        shutil.copy(ROOT / f, dst / f)
    shutil.copytree(ROOT / "workflow", dst / "workflow")
    shutil.copytree(ROOT / "profiles/default", dst / "profiles/default")
    if configs:  # the n.r. footnotes name the shipped profiles that run a dataset or a method
        for p in (ROOT / "config").glob("*.yaml"):
            shutil.copy(p, dst / "config" / p.name)
    env = dict(os.environ, CDGTMLL_DATA_MIRROR=str(mirror), PYTHONPATH=str(ROOT / "src"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return dst, env


def succeeded(res: subprocess.CompletedProcess) -> str:
    """The output (stdout, then stderr) of a command that must have succeeded; its tail otherwise."""
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    return out


def default_sigint() -> None:
    """``preexec_fn`` of a process a test interrupts as Ctrl-C in a terminal does: SIGINT as a
    terminal's foreground job has it. A suite started in the background (``make test &``, ``nohup``)
    passes SIGINT down ignored, and Python keeps an ignored SIGINT ignored, so the process would
    never see the interrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
