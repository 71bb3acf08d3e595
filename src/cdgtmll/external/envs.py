"""The isolated environments of the external XMC libraries (mk/xmc-envs.mk).

Each library runs in a virtual environment of its own, ``.venv/xmc/<name>`` in the
checkout, built by make from a pinned lock ``requirements-<name>.lock`` (exact versions and sha256
hashes of every package, installed with ``--no-deps --require-hashes``):

========== ============================== ======================================
name       library (lock pin)             method
========== ============================== ======================================
pecos      libpecos==1.2.8 (numpy < 2)    XR-Linear
napkinxc   napkinxc==0.7.2                napkinXC-PLT (not in the paper)
libmultil. libmultilabel==0.10.0          LibMultiLabel-1vsRest (not in the paper)
========== ============================== ======================================

Why one environment per library, also for the two that would resolve inside the
project lock: libpecos 1.2.8 declares ``numpy<2`` and ``scipy<1.14`` (the project is on
numpy 2), LibMultiLabel brings numba/llvmlite (whose numpy upper bound would then cap
the project's numpy) and a LIBLINEAR built from source, and a library that crashes or
leaks takes down its worker, not the training job. The project lock stays as it is.

Why under ``.venv/``: that folder is git-ignored and left out wherever the working tree is
copied (the end-to-end, Slurm and DVC tests copy it by name), and ``rm -rf .venv`` resets
every environment of the project at once.

An environment is *ready* when ``.venv/xmc/<name>/.installed`` holds the sha256 of the
current lock (mk/build-env.sh writes it last, after the worker's import check passed). A
failed build leaves ``.venv/xmc/<name>.failed`` (that lock's sha256, then the log's tail)
and the log ``.venv/xmc/<name>.build.log``.
:meth:`ExternalEnv.ensure` is what a method's ``not_runnable_reason`` calls: ready -> None;
else the reason, which the tables print as "not run: ...": the recorded failure of the current
lock, or "not built: run `make xmc-envs`". Nothing builds an environment behind the user's back:
``make xmc-envs`` builds all three, ``make all`` the ones its profile's methods need
(``cdgtmll envs CONFIG``), and planning only looks.

The checkout is the one this package is imported from (``src/cdgtmll`` -> ``..``), or
``$CDGTMLL_ENVS_ROOT``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: environment name -> the distribution it exists for (pinned in its lock)
LIBRARIES = {"pecos": "libpecos", "napkinxc": "napkinxc", "libmultilabel": "libmultilabel"}
ROOT_ENV = "CDGTMLL_ENVS_ROOT"
MAKEFILE = "mk/xmc-envs.mk"
#: where the environments live, relative to the checkout
ENVS_DIR = ".venv/xmc"


def checkout_root() -> Path:
    """Where the locks, mk/xmc-envs.mk and the ``.venv/xmc/<name>`` folders are."""
    env = os.environ.get(ROOT_ENV)
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[3]
    return here if (here / MAKEFILE).is_file() else Path.cwd().resolve()


def _one_line(text: str, limit: int = 300) -> str:
    """A log line fit for a table footnote and for the tables command line: one line, at
    most ``limit`` characters, double quotes for single ones."""
    return " ".join(text.split()).replace("'", '"')[:limit]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class ExternalEnv:
    """One library's environment (module docstring)."""

    name: str
    root: Path

    @classmethod
    def of(cls, name: str, root: Path | None = None) -> ExternalEnv:
        if name not in LIBRARIES:
            raise KeyError(f"unknown external environment '{name}'; known: {', '.join(LIBRARIES)}")
        return cls(name, checkout_root() if root is None else Path(root))

    @property
    def lock(self) -> Path:
        return self.root / f"requirements-{self.name}.lock"

    @property
    def dir(self) -> Path:
        return self.root / ENVS_DIR / self.name

    @property
    def display(self) -> str:
        """The environment's folder relative to the checkout (``.venv/xmc/pecos``)."""
        return f"{ENVS_DIR}/{self.name}"

    @property
    def python(self) -> Path:
        return self.dir / "bin" / "python"

    @property
    def stamp(self) -> Path:
        return self.dir / ".installed"

    @property
    def failed_marker(self) -> Path:
        return self.root / ENVS_DIR / f"{self.name}.failed"

    @property
    def build_log(self) -> Path:
        return self.root / ENVS_DIR / f"{self.name}.build.log"

    @property
    def worker(self) -> Path:
        """The worker script (runs with :attr:`python`; imports no cdgtmll)."""
        return Path(__file__).resolve().parent / f"{self.name}_worker.py"

    def lock_sha256(self) -> str | None:
        return file_sha256(self.lock) if self.lock.is_file() else None

    def pinned(self, dist: str | None = None) -> str | None:
        """``'<dist>==<version>'`` as pinned in the lock (default: the env's library), or None."""
        dist = LIBRARIES[self.name] if dist is None else dist
        if not self.lock.is_file():
            return None
        norm = re.sub(r"[-_.]+", "-", dist).lower()
        for line in self.lock.read_text().splitlines():
            m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line)
            if m and re.sub(r"[-_.]+", "-", m.group(1)).lower() == norm:
                return f"{dist}=={m.group(2)}"
        return None

    def ready(self) -> bool:
        sha = self.lock_sha256()
        try:
            return sha is not None and self.python.exists() and self.stamp.read_text().strip() == sha
        except OSError:
            return False

    def failure(self) -> str | None:
        """Why the last build of the *current* lock failed, or None."""
        try:
            lines = self.failed_marker.read_text().splitlines()
        except OSError:
            return None
        if not lines or lines[0].strip() != self.lock_sha256():
            return None
        tail = [ln.strip() for ln in lines[1:] if ln.strip()]
        last = next((ln for ln in reversed(tail) if re.search(r"error|fail|not found|no such", ln, re.I)),
                    tail[-1] if tail else "no output")
        return (f"environment {self.display} could not be built from {self.lock.name}: {_one_line(last)} "
                f"(log {ENVS_DIR}/{self.build_log.name}; retry: make xmc-envs)")

    def build(self) -> str | None:
        """Build through make (mk/xmc-envs.mk); None on success, else why not."""
        make = shutil.which("make")
        if make is None:
            return f"environment {self.display} not built: no make on PATH (needed to build it from {self.lock.name})"
        print(f"[cdgtmll] building {self.display} from {self.lock.name} (log {ENVS_DIR}/{self.build_log.name}) ...",
              file=sys.stderr, flush=True)
        env = dict(os.environ)
        env.pop("MAKEFLAGS", None)
        env.pop("MFLAGS", None)
        res = subprocess.run([make, "--no-print-directory", "-f", MAKEFILE, f"{self.display}/.installed"],
                             cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        if res.returncode == 0 and self.ready():
            return None
        why = self.failure()
        if why is None:
            tail = " | ".join(ln.strip() for ln in res.stdout.strip().splitlines()[-3:]) or f"exit {res.returncode}"
            why = f"environment {self.display} could not be built from {self.lock.name}: {_one_line(tail)}"
        return why

    def ensure(self, build: bool = False) -> str | None:
        """None when the environment is ready, else the reason the method cannot run (module
        docstring). ``build=True`` builds a missing one first (what ``make xmc-envs`` does)."""
        if not self.lock.is_file():
            return f"lock file {self.lock.name} not found in {self.root} (it pins {self.display})"
        if self.ready():
            return None
        failed = self.failure()
        if failed is not None:
            return failed
        if not build:
            return (f"environment {self.display} not built: run `make xmc-envs` "
                    f"(or `make -f {MAKEFILE} {self.display}/.installed`)")
        return self.build()
