"""Is the clip engaged? The trainer's per-epoch ``grad_norm_max`` / ``clipped_steps``
columns, ``grad_norms.npy`` and :func:`cdgtmll.nn.trainer.clip_summary`, on real Yeast with the
default protocol (batch 256, lr 2e-3, hidden 512, grad_clip 5), few epochs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from cdgtmll.methods.base import FitData, RunContext, build
from cdgtmll.nn.checkpoint import TRAIN_LOG, read_log
from cdgtmll.nn.trainer import GRAD_NORMS, TrainingInterrupted, clip_summary, read_grad_norms
from tests.support.runs import prepared_yeast, yeast_fit_data

torch.set_num_threads(1)

PROTOCOL = {"epochs": 3, "batch_size": 256, "lr_backbone": 2e-3, "hidden_dim": 512}


@pytest.fixture(scope="module")
def yeast(tmp_path_factory, mirror) -> FitData:
    return yeast_fit_data(tmp_path_factory.mktemp("yeast_clip"), mirror)


def independent_norms(method, block: bool) -> list[float]:
    """Wrap ``method.clip_gradients`` to record, before it runs, the norm that decides clipping,
    from the gradients themselves: the global 2-norm over every parameter, or (block) the largest
    of the backbone+fusion norm and each player's head-row norms."""
    seen: list[float] = []
    original = method.clip_gradients

    def wrapped(model: nn.Module, max_norm: float):
        with torch.no_grad():
            if block:
                rest = [p.grad.double() for p in (*model.backbone.parameters(), model.fusion_logits)
                        if p.grad is not None]
                norms = [math.sqrt(sum(float((g * g).sum()) for g in rest))]
                gw, gb = model.heads.weight.grad.double(), model.heads.bias.grad.double()
                for i in range(model.n_players):
                    rows = model.pair_player == i
                    norms.append(math.sqrt(float((gw[rows] ** 2).sum() + (gb[rows] ** 2).sum())))
                seen.append(max(norms))
            else:
                seen.append(math.sqrt(sum(float((p.grad.double() ** 2).sum())
                                          for p in model.parameters() if p.grad is not None)))
        return original(model, max_norm)

    method.clip_gradients = wrapped
    return seen


def fit(data: FitData, workdir, clip_scope: str = "global", grad_clip: float | None = 5.0, epochs: int = 3,
        method: str = "CD-GTMLL", **ctx_extra):
    hp = {**PROTOCOL, "epochs": epochs, "grad_clip": grad_clip}
    if method == "CD-GTMLL":
        hp["clip_scope"] = clip_scope
    m = build(method, hp)
    seen = independent_norms(m, clip_scope == "block") if grad_clip else []
    m.fit(data, RunContext(seed=0, workdir=workdir, extra=ctx_extra or None))
    return m, read_log(workdir / TRAIN_LOG), seen


@pytest.mark.parametrize("clip_scope", ["global", "block"])
def test_clip_columns_on_real_yeast(yeast, tmp_path, clip_scope):
    """At E.1's grad_clip 5 no Yeast step is clipped (``clipped_steps`` 0); at 1e-3 every step is.
    ``grad_norm_max`` is the epoch's largest pre-clip norm recomputed independently from the
    gradients (block: the largest block norm), and ``grad_norms.npy`` holds every step's."""
    steps = math.ceil(yeast.X_train.shape[0] / PROTOCOL["batch_size"])
    for clip in (5.0, 1e-3):
        wd = tmp_path / f"{clip_scope}-{clip}"
        m, rows, seen = fit(yeast, wd, clip_scope, clip)
        assert len(seen) == 3 * steps
        # the method's record, which train.run_seed writes into provenance.json ("grad_clip")
        assert m.grad_clip_summary == clip_summary(read_grad_norms(wd), clip, rows)
        per_epoch = np.asarray(seen).reshape(3, steps)
        for r, s in zip(rows, per_epoch):
            assert float(r["grad_norm_max"]) == pytest.approx(s.max(), rel=1e-5)
            assert int(r["clipped_steps"]) == int((s > clip).sum())
        stored = np.load(wd / GRAD_NORMS)
        np.testing.assert_allclose(stored, np.asarray(seen), rtol=1e-5)
        summary = clip_summary(read_grad_norms(wd), clip)
        assert summary["steps"] == 3 * steps
        assert summary["max"] == pytest.approx(max(seen), rel=1e-5)
        assert summary["median"] == pytest.approx(float(np.median(stored.astype(np.float64))), rel=1e-12)
        if clip == 5.0:
            assert max(seen) < 5.0 and all(int(r["clipped_steps"]) == 0 for r in rows)
            assert summary["clipped_steps"] == 0 and summary["engaged"] is False
        else:
            assert all(int(r["clipped_steps"]) == steps for r in rows)
            assert summary["clipped_steps"] == 3 * steps and summary["engaged"] is True


def test_block_statistic_is_the_largest_block_norm_not_the_global_norm(yeast, tmp_path):
    """Under clip_scope block the logged norm is the largest block norm, below the global norm
    (which the trainer still checks for NaN) whenever more than one block has a gradient."""
    _, rows_g, seen_g = fit(yeast, tmp_path / "g", "global", 5.0, epochs=1)
    _, rows_b, seen_b = fit(yeast, tmp_path / "b", "block", 5.0, epochs=1)
    # same run (nothing is clipped at 5 on Yeast): same gradients, so block max < global norm, step by step
    assert all(b < g for b, g in zip(seen_b, seen_g))
    assert float(rows_b[0]["grad_norm_max"]) < float(rows_g[0]["grad_norm_max"])


def test_no_clipping_logs_the_global_norm_and_zero_clipped_steps(yeast, tmp_path):
    _, rows, _ = fit(yeast, tmp_path / "none", grad_clip=None, epochs=1, method="BCE")
    assert int(rows[0]["clipped_steps"]) == 0 and float(rows[0]["grad_norm_max"]) > 0
    norms = read_grad_norms(tmp_path / "none")
    assert np.isfinite(norms).all() and float(rows[0]["grad_norm_max"]) == pytest.approx(float(norms.max()), rel=1e-7)
    assert clip_summary(norms, None)["clipped_steps"] == 0


def test_resumed_run_keeps_the_whole_runs_norms(yeast, tmp_path):
    """Interrupted after epoch 2 and resumed: the log columns and ``grad_norms.npy`` equal the
    uninterrupted run's bit for bit (CPU), so the summary covers every step."""
    _, rows_full, _ = fit(yeast, tmp_path / "full", epochs=4)
    with pytest.raises(TrainingInterrupted):
        fit(yeast, tmp_path / "cut", epochs=4, _stop_after_epoch=2, checkpoint_every=1)
    _, rows_cut, _ = fit(yeast, tmp_path / "cut", epochs=4, checkpoint_every=1)
    key = ("grad_norm_max", "clipped_steps")
    assert [[r[k] for k in key] for r in rows_cut] == [[r[k] for k in key] for r in rows_full]
    a, b = read_grad_norms(tmp_path / "full"), read_grad_norms(tmp_path / "cut")
    assert a.tobytes() == b.tobytes() and np.isfinite(a).all()
    assert clip_summary(a, 5.0) == clip_summary(b, 5.0)


def test_summary_from_the_log_alone():
    rows = [{"grad_norm_max": "0.5", "clipped_steps": "0"}, {"grad_norm_max": "7.0", "clipped_steps": "3"}]
    s = clip_summary(None, 5.0, rows)
    assert s == {"grad_clip": 5.0, "steps": None, "clipped_steps": 3, "max": 7.0, "median": None, "engaged": True}
    s = clip_summary(np.array([1.0, 6.0, np.nan, 2.0], dtype=np.float32), 5.0)
    assert s == {"grad_clip": 5.0, "steps": 3, "clipped_steps": 1, "max": 6.0, "median": 2.0, "engaged": True}


def test_provenance_records_whether_the_clip_acted(tmp_path, mirror):
    """A run made as rule ``train`` makes it records the clip's summary in provenance.json, so the
    readings table and the audit need no log to say whether the clip engaged."""
    import json

    from tests.support.runs import train_seeds

    clean, path = prepared_yeast(tmp_path / "data", mirror)
    rundir = train_seeds(clean, path, tmp_path / "run", "BCE", [0], {**PROTOCOL, "epochs": 2, "grad_clip": 5.0})
    rec = json.loads((rundir / "seed0" / "provenance.json").read_text())["grad_clip"]
    norms = read_grad_norms(rundir / "seed0")
    assert rec == clip_summary(norms, 5.0, read_log(rundir / "seed0" / TRAIN_LOG))
    assert rec["steps"] == 2 * math.ceil(clean.part("train")[0].shape[0] / 256) and rec["clipped_steps"] == 0
