"""Helpers shared by the test modules (tests/ is on ``sys.path``: ``from helpers import ...``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

MIRROR_ENV = "CDGTMLL_DATA_MIRROR"


def mirror_path() -> Path:
    """The offline dataset mirror: $CDGTMLL_DATA_MIRROR, else ``<repo>/../shared/datasets``."""
    env = os.environ.get(MIRROR_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"


#: the mirror's Yeast training file (MULAN ARFF, 1,500 rows, 103 features, 14 labels)
YEAST_TRAIN = mirror_path() / "yeast" / "yeast-train.arff"


def yeast_arrays(n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(X float32, Y uint8)`` of the first ``n_rows`` rows of Yeast's training file;
    skips the test when the mirror has no Yeast."""
    from cdgtmll.data.mulan import read_mulan_arff

    if not YEAST_TRAIN.is_file():
        pytest.skip(f"Yeast not found at {YEAST_TRAIN} (set {MIRROR_ENV})")
    X, Y, _ = read_mulan_arff(YEAST_TRAIN, 14)
    return np.asarray(X, dtype=np.float32)[:n_rows], np.asarray(Y)[:n_rows]


def yeast_fitdata(n_train: int, n_val: int):
    """FitData of Yeast rows ``[0, n_train)`` (train) and ``[n_train, n_train + n_val)`` (validation)."""
    from cdgtmll.methods import FitData

    X, Y = yeast_arrays(n_train + n_val)
    return FitData(X[:n_train], Y[:n_train], X[n_train:], Y[n_train:], [f"Class{k + 1}" for k in range(14)])


def snakemake_env(mirror: Path | None = None) -> dict:
    """Environment for a Snakemake subprocess: this venv first on PATH, caches outside the
    repository, and the dataset mirror when given."""
    import sys

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["XDG_CACHE_HOME"] = env.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache")
    env["MPLCONFIGDIR"] = "/tmp/cdgtmll-mpl"
    if mirror is not None:
        env[MIRROR_ENV] = str(mirror)
    return env
