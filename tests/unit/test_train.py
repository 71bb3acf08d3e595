"""The training job's process (cdgtmll.train): a classical method's job never loads torch, a
neural one gets the rule's thread budget, and torch is seeded whether or not anything imported
it before the method was built.

Runs the shipped config (config/config.yaml) at test scale (2 epochs, seed 0) on the first 600
rows of Yeast from the dataset mirror, each job in a fresh interpreter as Snakemake starts it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cdgtmll.config import loader, plan
from tests.support.mirror import yeast_processed_npz
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def yeast_npz(tmp_path_factory) -> Path:
    return yeast_processed_npz(tmp_path_factory.mktemp("data") / "yeast.npz")


def _job(data: Path, method: str, out: Path, threads: str | None, preload_torch: bool = False) -> dict:
    """Run one training job in a fresh interpreter; what it had loaded and torch's threads."""
    cfg = loader.load(ROOT / "config/config.yaml", {"training": {"default": {"epochs": 2}}, "experiments": {"seeds": [0]}})
    spec = dataclasses.replace(plan.run_spec(cfg, "yeast", "clean", method), device="cpu")
    argv = ["--data", str(data), "--clean", str(data), "--spec", spec.to_json(), "--outdir", str(out)]
    code = ("import sys, json\n"
            + ("import torch\n" if preload_torch else "")
            + "from cdgtmll import train\n"
            f"rc = train.main({argv!r})\n"
            "torch = sys.modules.get('torch')\n"
            "print(json.dumps({'rc': rc, 'torch': torch is not None, 'sklearn': 'sklearn' in sys.modules,\n"
            "                  'threads': torch.get_num_threads() if torch else None}))\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "CDGTMLL_THREADS"}
    if threads is not None:
        env["CDGTMLL_THREADS"] = threads
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.splitlines()[-1])


@pytest.mark.slow
def test_classical_job_never_loads_torch_and_a_neural_job_gets_the_thread_budget(yeast_npz, tmp_path):
    classical = _job(yeast_npz, "BR-LogReg", tmp_path / "br", threads="1")
    assert classical == {"rc": 0, "torch": False, "sklearn": True, "threads": None}
    neural = _job(yeast_npz, "BCE", tmp_path / "bce", threads="1")
    assert neural["rc"] == 0 and neural["torch"] and neural["threads"] == 1
    assert (tmp_path / "br/seed0/predictions.npz").is_file() and (tmp_path / "bce/seed0/predictions.npz").is_file()


@pytest.mark.slow
def test_torch_is_seeded_whether_or_not_it_was_imported_before_the_method(yeast_npz, tmp_path):
    """torch loaded at start (as a plugin or a fine-tuning input may) or first by the method's
    module: the same predictions, byte for byte."""
    a = _job(yeast_npz, "CD-GTMLL", tmp_path / "late", threads="1")
    b = _job(yeast_npz, "CD-GTMLL", tmp_path / "early", threads="1", preload_torch=True)
    assert a["rc"] == b["rc"] == 0
    pa, pb = np.load(tmp_path / "late/seed0/predictions.npz"), np.load(tmp_path / "early/seed0/predictions.npz")
    assert sorted(pa.files) == sorted(pb.files)
    for k in pa.files:
        assert np.array_equal(pa[k], pb[k]), k
