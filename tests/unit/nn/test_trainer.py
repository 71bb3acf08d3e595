"""Shared trainer: determinism, checkpoint/resume equivalence, schedule, BCE method."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from cdgtmll.methods.base import FitData, RunContext, available, build
from cdgtmll.methods.neural import BCEMethod, LossHeadMethod
from cdgtmll.nn.checkpoint import CHECKPOINT, TRAIN_LOG, read_log
from cdgtmll.nn.trainer import TrainingInterrupted
from cdgtmll.nn.val_metrics import validation_metrics
from tests.support.mirror import YEAST_TRAIN, yeast_arrays

torch.set_num_threads(1)

TIMING = ("epoch_time", "val_time")


def load_data() -> FitData:
    """Yeast (first 600 rows: 450 train / 150 val) when the mirror is there, else synthetic."""
    if YEAST_TRAIN.is_file():
        X, Y = yeast_arrays(600)
    else:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(600, 20)).astype(np.float32)
        Y = (rng.random((600, 14)) < np.linspace(0.02, 0.5, 14)).astype(np.uint8)
    return FitData(X[:450], Y[:450], X[450:], Y[450:], [f"l{k}" for k in range(Y.shape[1])])


DATA = load_data()
SMALL = {"hidden_dim": 64, "batch_size": 64}


def strip_timing(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_bce_registered_and_unknown_hparams():
    assert "BCE" in available() and "CD-GTMLL" in available()
    assert isinstance(build("BCE"), BCEMethod)
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        build("BCE", {"gamma": 2.0})
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        build("CD-GTMLL", {"gamma": 2.0})


def test_loss_head_method_generic():
    cls = type("TmpBCE", (LossHeadMethod,), {"loss_name": "bce"})
    m = cls(epochs=2, **SMALL)
    assert m.hparams()["loss"] == "bce"
    with pytest.raises(KeyError):
        type("TmpNope", (LossHeadMethod,), {"loss_name": "no-such-loss"})()


@pytest.mark.parametrize("name", ["BCE", "CD-GTMLL"])
def test_resume_equivalence(tmp_path, name):
    hp = {"epochs": 4, **SMALL}
    full = build(name, hp).fit(DATA, RunContext(seed=3, workdir=tmp_path / "full"))
    P_full = full.predict_proba(DATA.X_val)

    wd = tmp_path / "resumed"
    with pytest.raises(TrainingInterrupted):
        build(name, hp).fit(DATA, RunContext(seed=3, workdir=wd, extra={"_stop_after_epoch": 2}))
    assert len(read_log(wd / TRAIN_LOG)) == 2
    assert torch.load(wd / CHECKPOINT, weights_only=False)["epoch"] == 2
    interrupted_rows = read_log(wd / TRAIN_LOG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checkpoint must match (no "ignoring" warning)
        resumed = build(name, hp).fit(DATA, RunContext(seed=3, workdir=wd))
    # it really resumed: epochs 1-2 (timings included) come from the checkpoint
    assert read_log(wd / TRAIN_LOG)[:2] == interrupted_rows
    P_res = resumed.predict_proba(DATA.X_val)

    assert np.array_equal(P_full, P_res), "resume must be bit-identical on CPU"
    assert strip_timing(read_log(tmp_path / "full" / TRAIN_LOG)) == strip_timing(read_log(wd / TRAIN_LOG))
    assert strip_timing(full.train_log) == strip_timing(resumed.train_log)
    if name == "CD-GTMLL":
        a = np.load(tmp_path / "full" / "player_val_acc.npz")
        b = np.load(wd / "player_val_acc.npz")
        assert np.array_equal(a["accuracy"], b["accuracy"]) and a["accuracy"].shape[0] == 4

    # a finished run resumes to "nothing to do" and gives the same model
    again = build(name, hp).fit(DATA, RunContext(seed=3, workdir=wd))
    assert np.array_equal(again.predict_proba(DATA.X_val), P_full)


def test_checkpoint_of_other_config_is_ignored(tmp_path):
    build("BCE", {"epochs": 2, **SMALL}).fit(DATA, RunContext(seed=0, workdir=tmp_path / "a"))
    with pytest.warns(UserWarning, match="different configuration"):
        m = build("BCE", {"epochs": 2, "lr_backbone": 1e-3, **SMALL}).fit(DATA, RunContext(seed=0, workdir=tmp_path / "a"))
    fresh = build("BCE", {"epochs": 2, "lr_backbone": 1e-3, **SMALL}).fit(DATA, RunContext(seed=0, workdir=tmp_path / "b"))
    assert np.array_equal(m.predict_proba(DATA.X_val), fresh.predict_proba(DATA.X_val))
    # different seed: also a different configuration
    with pytest.warns(UserWarning, match="different configuration"):
        build("BCE", {"epochs": 2, "lr_backbone": 1e-3, **SMALL}).fit(DATA, RunContext(seed=1, workdir=tmp_path / "b"))


def test_determinism_and_deterministic_flag_restored(tmp_path):
    before = torch.are_deterministic_algorithms_enabled()
    a = build("BCE", {"epochs": 2, **SMALL}).fit(DATA, RunContext(seed=7, workdir=tmp_path / "a"))
    b = build("BCE", {"epochs": 2, **SMALL}).fit(DATA, RunContext(seed=7, workdir=tmp_path / "b"))
    c = build("BCE", {"epochs": 2, **SMALL}).fit(DATA, RunContext(seed=8, workdir=tmp_path / "c"))
    assert torch.are_deterministic_algorithms_enabled() == before
    Pa, Pb, Pc = (m.predict_proba(DATA.X_val) for m in (a, b, c))
    assert np.array_equal(Pa, Pb) and not np.array_equal(Pa, Pc)
    assert Pa.shape == (150, DATA.n_labels) and Pa.dtype == np.float64


def test_schedule_overrides_and_log(tmp_path):
    m = build("BCE", {"epochs": 100, "lr_backbone": 1e-3, "lr_head": 4e-3, **SMALL})
    m.fit(DATA, RunContext(seed=0, workdir=tmp_path, epochs=3, batch_size=100))  # ctx overrides
    rows = read_log(tmp_path / TRAIN_LOG)
    assert len(rows) == 3
    spe, total = math.ceil(450 / 100), 3 * math.ceil(450 / 100)
    for e, r in enumerate(rows):
        f = 0.5 * (1 + math.cos(math.pi * e * spe / total))
        assert float(r["lr_backbone"]) == pytest.approx(1e-3 * f)
        assert float(r["lr_head"]) == pytest.approx(4e-3 * f)
    assert float(rows[-1]["loss"]) < float(rows[0]["loss"])
    assert list(rows[0]) == ["epoch", "loss", "lr_backbone", "lr_head", "val_mAP", "val_microF1", *TIMING]


def test_validation_metrics_match_sklearn():
    from sklearn.metrics import average_precision_score, f1_score

    from cdgtmll.nn.val_metrics import average_precision_per_label

    rng = np.random.default_rng(0)
    Y = (rng.random((80, 7)) < 0.3).astype(np.uint8)
    Y[:, 5] = 0  # no positive: NaN, excluded from mAP
    Y[:, 6] = 1  # all positive
    for S in (rng.random((80, 7)), np.round(rng.random((80, 7)), 1), np.full((80, 7), 0.3)):  # ties, all tied
        ap = average_precision_per_label(Y, S)
        ref = [average_precision_score(Y[:, k], S[:, k]) for k in (0, 1, 2, 3, 4, 6)]
        assert np.allclose(ap[[0, 1, 2, 3, 4, 6]], ref, rtol=0, atol=1e-12) and np.isnan(ap[5])
        out = validation_metrics(Y, S)
        assert out["val_mAP"] == pytest.approx(np.mean(ref), abs=1e-12)
        assert out["val_microF1"] == pytest.approx(f1_score(Y, (S > 0.5).astype(int), average="micro", zero_division=0))


def test_param_groups_must_cover_model(tmp_path):
    class Broken(BCEMethod):
        def param_groups(self, model):
            return {"backbone": list(model.backbone.parameters())}

    with pytest.raises(ValueError, match="exactly once"):
        Broken(epochs=1, **SMALL).fit(DATA, RunContext(seed=0, workdir=tmp_path))
