"""No host sync per training step on CUDA: every step of BCE, CD-GTMLL and an
architecture baseline (C-Tran) runs under ``torch.cuda.set_sync_debug_mode("error")``, on real
Yeast and on the toy JPEG images (ResNet-50 fine-tuning, bf16; after the first epoch, in which
cuDNN's autotuner times each input shape once), the loader included; a run also
records the AdamW path and flags it took (``numerics``). The CPU proxy of the same checks runs in
CI: tests/unit/nn/test_step_sync.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cdgtmll.labels import tail_labels
from cdgtmll.methods.base import RunContext, build
from cdgtmll.methods.cdgtmll import terms
from cdgtmll.train import run_seed
from tests.support.finetune import make_image_data, spec
from tests.support.runs import yeast_fit_data
from tests.support.step_sync import cuda_sync_error, guard_steps

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only")

EPOCHS = 2
HP = {"epochs": EPOCHS, "batch_size": 256, "hidden_dim": 512}
TABULAR = {"BCE": ("BCE", {}), "CD-GTMLL": ("CD-GTMLL", {}), "CD-GTMLL-fast": ("CD-GTMLL", {}),
           "CD-GTMLL-predictions": ("CD-GTMLL", {"peer_smoothing": "predictions"}), "C-Tran": ("C-Tran", {})}


@pytest.fixture(scope="module")
def yeast(tmp_path_factory, mirror):
    return yeast_fit_data(tmp_path_factory.mktemp("yeast_cuda_sync"), mirror)


@pytest.mark.parametrize("case", list(TABULAR))
def test_tabular_steps_do_not_sync(yeast, tmp_path, monkeypatch, case):
    if case == "CD-GTMLL-fast":
        monkeypatch.setattr(terms, "FAST_MIN_ELEMENTS", 0)
    epochs = guard_steps(monkeypatch, cuda_sync_error)
    name, hp = TABULAR[case]
    m = build(name, {**HP, **hp}).fit(yeast, RunContext(seed=0, workdir=tmp_path, device="cuda"))
    assert epochs == [-(-yeast.X_train.shape[0] // HP["batch_size"])] * EPOCHS
    assert np.isfinite(m.predict_proba(yeast.X_val)).all()
    assert m.numerics["optimizer_impl"] == "foreach" and m.numerics["cudnn_benchmark"] is False


@pytest.mark.parametrize("method", ["BCE", "CD-GTMLL", "C-Tran"])
def test_image_steps_do_not_sync(tmp_path, monkeypatch, method):
    data = make_image_data(tmp_path / "JPEGImages")
    s = spec(method, device="cuda", amp="bf16", epochs=2)
    # the first epoch unguarded: cuDNN's autotuner (on for images) times each new shape once
    epochs = guard_steps(monkeypatch, cuda_sync_error, skip=1)
    run_seed(data, tail_labels(data.part("train")[1]), s, 0, tmp_path / "run", {}, False)
    assert epochs == [-(-80 // s.training["batch_size"])]
    num = json.loads((tmp_path / "run" / "provenance.json").read_text())["numerics"]
    assert num["optimizer_impl"] == "foreach" and num["cudnn_benchmark"] is True and num["allow_tf32"] is False


def test_fused_is_close_to_foreach_on_cuda(yeast, tmp_path):
    """``optimizer_impl: fused`` against ``auto`` (foreach) on CUDA: same predictions within 1e-4
    after two epochs (the tolerance the CPU test of fused states, tests/unit/nn/test_trainer.py)."""
    P = {impl: build("BCE", {**HP, "optimizer_impl": impl}).fit(
        yeast, RunContext(seed=0, workdir=tmp_path / impl, device="cuda")).predict_proba(yeast.X_val)
        for impl in ("auto", "fused")}
    assert np.allclose(P["auto"], P["fused"], atol=1e-4)
