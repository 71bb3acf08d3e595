"""benchmarks/bench_floor.py, row 2's budget: :func:`objective_alone` times the method's own
objective (the same loss as :meth:`training_step` on the same batch) and leaves the model as it
found it."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cdgtmll.methods.base import FitData, RunContext, build
from cdgtmll.nn.trainer import seed_everything
from tests.support.paths import ROOT

BENCH = ROOT / "benchmarks" / "bench_floor.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))  # it imports bench_cdgtmll_cost beside it
    try:
        spec = importlib.util.spec_from_file_location("bench_floor", BENCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH.parent))
    return module


@pytest.mark.parametrize("method", ["BCE", "CD-GTMLL"])
def test_objective_alone_times_the_training_objective(bench, method):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12)).astype(np.float32)
    Y = (rng.random((300, 9)) < 0.3).astype(np.uint8)
    data = FitData(X, Y, None, None, [f"l{k}" for k in range(9)])
    m = build(method, {"batch_size": 64, "hidden_dim": 16})
    m.prepare(data, RunContext(seed=0, workdir=Path(".")))
    seed_everything(0)
    model = m.build_model(X, Y)
    model.train()
    X_t = torch.from_numpy(X)
    targets = m.train_targets(model, torch.from_numpy(Y.astype(np.float32)))
    expected, _ = m.training_step(model, X_t[:64], targets[:64], 0.5)  # the real forward on the batch
    seen = []
    step = m.training_step

    def spy(*args):
        out = step(*args)
        seen.append(out[0].detach())
        return out

    m.training_step = spy
    seconds = bench.objective_alone(m, model, X_t, targets, 64, 2)
    assert math.isfinite(seconds) and seconds > 0
    assert len(seen) == 8  # 4 passes of 2 steps
    assert all(torch.allclose(loss, expected.detach(), rtol=1e-6, atol=1e-7) for loss in seen)
    assert not {"forward", "pair_logits"} & set(vars(model))  # the instance is restored
