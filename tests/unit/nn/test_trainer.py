"""Shared trainer: determinism, checkpoint/resume equivalence, schedule, BCE method."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from cdgtmll.lineage.provenance import device_info, device_kind
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


def test_loss_head_method_generic(monkeypatch):
    """A loss-head method is a spec naming its loss (``fixed["loss"]``) and one call; the class
    gets the trainer's defaults from the spec; a loss nobody registered is a KeyError."""
    from cdgtmll.methods import base
    from cdgtmll.methods.neural import register_loss_method
    from cdgtmll.methods.spec import MethodSpec

    monkeypatch.setattr(base, "_SPECS", dict(base._SPECS))
    monkeypatch.setattr(base, "_CLASSES", dict(base._CLASSES))

    def spec(name: str, loss: str) -> MethodSpec:
        return MethodSpec(name, impl=f"{__name__}:{name}", trainer=True, neural=True, fixed={"loss": loss})

    cls = register_loss_method(spec("TmpBCE", "bce"))
    assert issubclass(cls, LossHeadMethod)
    m = cls(epochs=2, **SMALL)
    assert m.hparams()["loss"] == "bce" and m.hparams()["epochs"] == 2 and m.hparams()["lr_backbone"] == 2e-3
    assert base.build("TmpBCE", {"epochs": 2}).hparams() == {**cls().hparams(), "epochs": 2}
    with pytest.raises(KeyError):
        register_loss_method(spec("TmpNope", "no-such-loss"))()


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
    assert list(rows[0]) == ["epoch", "loss", "lr_backbone", "lr_head", "grad_norm_max", "clipped_steps", "val_mAP",
                             "val_microF1", *TIMING, "machine"]
    # the kind of machine that trained each epoch (cdgtmll.lineage.provenance.device_kind)
    assert {r["machine"] for r in rows} == {device_kind(device_info("cpu"))}


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


def test_same_outputs_as_the_reference_runs(tmp_path):
    """The trainer's savings (checkpoint cadence, buffered log, validation AP without argsort,
    determinism without torch._inductor) leave its arithmetic alone: BCE's predictions and log
    (timings and the ``machine`` column aside) equal, bit for bit, those of the reference trainer
    (tests/fixtures/yeast_reference_runs.json), under both epoch-selection rules."""
    import hashlib

    from tests.support.reference_runs import reference_data, reference_outputs

    ref, data = reference_outputs(), reference_data()
    for sel in ("last", "best_val"):
        m = build("BCE", {"epochs": 4, "hidden_dim": 64, "batch_size": 64, "select_epoch": sel})
        m.fit(data, RunContext(seed=3, workdir=tmp_path / sel))
        P = np.ascontiguousarray(m.predict_proba(data.X_val))
        want = ref[f"BCE/{sel}"]
        assert hashlib.sha256(P.tobytes()).hexdigest() == want["predictions_sha256"]
        later = ("machine", "grad_norm_max", "clipped_steps")  # columns that came after the reference
        log = [{k: float(v) for k, v in r.items() if k not in later} for r in strip_timing(m.train_log)]
        assert log == want["log"]


def test_bce_fit_on_the_vectorised_terms_equals_torchs_op_bit_for_bit(tmp_path, monkeypatch):
    """A BCE fit whose full batches take :func:`cdgtmll.nn.losses.common.bce_terms`' vectorised
    path (300 x 14 = 4200 elements >= BCE_FAST_MIN_ELEMENTS; the last batch of 150 rows takes
    torch's op) gives the predictions, validation
    columns and selected epoch of the same fit on torch's ``binary_cross_entropy_with_logits``,
    bit for bit (the gradient is torch's); only the logged loss, a sum of the forward values, may
    differ in the last bits."""
    import torch.nn.functional as F

    from cdgtmll.nn.losses import bce as bce_mod
    from cdgtmll.nn.losses.common import BCE_FAST_MIN_ELEMENTS

    hp = {"epochs": 3, "hidden_dim": 64, "batch_size": 300, "select_epoch": "best_val"}
    assert 300 * DATA.Y_train.shape[1] >= BCE_FAST_MIN_ELEMENTS
    runs = {}
    for side in ("vectorised", "torch"):
        if side == "torch":
            monkeypatch.setattr(bce_mod, "bce_terms",
                                lambda z, y: F.binary_cross_entropy_with_logits(z, y, reduction="none"))
        m = build("BCE", hp)
        m.fit(DATA, RunContext(seed=5, workdir=tmp_path / side))
        runs[side] = (np.ascontiguousarray(m.predict_proba(DATA.X_val)), strip_timing(m.train_log))
    (P_fast, log_fast), (P_torch, log_torch) = runs["vectorised"], runs["torch"]
    assert P_fast.tobytes() == P_torch.tobytes()
    assert [{k: v for k, v in r.items() if k != "loss"} for r in log_fast] == \
        [{k: v for k, v in r.items() if k != "loss"} for r in log_torch]
    assert [r["loss"] for r in log_fast] == pytest.approx([r["loss"] for r in log_torch], rel=1e-6, abs=0)


def test_validation_ap_equals_the_argsort_form_bit_for_bit():
    """The trainer's validation AP (binary search in sorted scores) equals the argsort form it
    replaced, bit for bit, with ties, on real label matrices (Yeast) and random scores."""
    from cdgtmll.nn.val_metrics import average_precision_per_label, average_precision_per_label_argsort

    Y = DATA.Y_val
    rng = np.random.default_rng(0)
    Yz = Y.copy()
    Yz[:, 3] = 0  # a label without positives: NaN in both
    for S in (rng.random(Y.shape).astype(np.float32), np.round(rng.random(Y.shape), 2),
              (rng.random(Y.shape) ** 8).astype(np.float32), np.zeros(Y.shape, np.float32)):
        for Yk in (Y, Yz):
            a, b = average_precision_per_label_argsort(Yk, S), average_precision_per_label(Yk, S)
            assert np.array_equal(a, b, equal_nan=True)


def test_checkpoint_cadence(tmp_path, monkeypatch):
    """Checkpoints (and the log) every ``checkpoint_every`` epochs and after the last one, not after
    every epoch (that cost 8% of a Yeast fit); the default cadence is CHECKPOINT_EVERY."""
    from cdgtmll.nn import trainer as trainer_mod

    saved = []
    real = trainer_mod.save_checkpoint
    monkeypatch.setattr(trainer_mod, "save_checkpoint", lambda path, state: (saved.append(state["epoch"]),
                                                                            real(path, state)))
    build("BCE", {"epochs": 5, **SMALL}).fit(DATA, RunContext(seed=0, workdir=tmp_path / "a",
                                                               extra={"checkpoint_every": 2}))
    assert saved == [2, 4, 5]
    assert len(read_log(tmp_path / "a" / TRAIN_LOG)) == 5
    saved.clear()
    build("BCE", {"epochs": trainer_mod.CHECKPOINT_EVERY + 1, **SMALL}).fit(DATA, RunContext(seed=0,
                                                                                   workdir=tmp_path / "b"))
    assert saved == [trainer_mod.CHECKPOINT_EVERY, trainer_mod.CHECKPOINT_EVERY + 1]


CHILD_SIGTERM = """
import os, signal, sys
# Python's own dispositions, whatever this process inherited: bash starts a background job (`&`,
# no job control) with SIGINT ignored, and the trainer rightly leaves an ignored signal alone
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
import cdgtmll.lineage.code as lineage_code
lineage_code._PACKAGE_SHA256 = sys.argv[2]  # the parent's: files edited meanwhile must not change the fingerprint
from cdgtmll.methods import base
from cdgtmll.methods.base import RunContext
from tests.unit.nn.test_trainer import DATA, SMALL

class Killed(base.get("CD-GTMLL")):
    def training_step(self, model, xb, yb, progress):
        if abs(progress - 0.5) < 1e-9:  # the middle of epoch 3 of 4 (8 steps per epoch)
            os.kill(os.getpid(), signal.{sig})
        return super().training_step(model, xb, yb, progress)

Killed(epochs=4, **SMALL).fit(DATA, RunContext(seed=3, workdir=sys.argv[1], extra={{"checkpoint_every": 100}}))
print("NOT STOPPED")
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_signal_checkpoints_the_epoch_then_stops_and_resume_is_bit_identical(tmp_path, sig):
    """SIGTERM/SIGINT in the middle of epoch 3 (of 4, no cadence checkpoint before the end): the
    trainer finishes epoch 3, writes its checkpoint and log, and the process ends by that signal;
    the resumed run equals the uninterrupted one bit for bit."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from cdgtmll.lineage import code as lineage_code
    from tests.support.paths import ROOT

    hp = {"epochs": 4, **SMALL}
    full = build("CD-GTMLL", hp).fit(DATA, RunContext(seed=3, workdir=tmp_path / "full"))
    wd = tmp_path / "killed"
    script = tmp_path / "child.py"
    script.write_text(CHILD_SIGTERM.format(root=str(ROOT), sig=sig))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(lineage_code.__file__).parents[2]), str(ROOT)])}
    out = subprocess.run([sys.executable, str(script), str(wd), lineage_code.package_sha256()], capture_output=True,
                         text=True, timeout=300, env=env)
    if sig == "SIGTERM":
        assert out.returncode == -signal.SIGTERM, out.stderr[-2000:]
    else:
        assert out.returncode != 0 and "KeyboardInterrupt" in out.stderr, out.stderr[-2000:]
    assert "NOT STOPPED" not in out.stdout
    assert torch.load(wd / CHECKPOINT, weights_only=False)["epoch"] == 3
    assert len(read_log(wd / TRAIN_LOG)) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = build("CD-GTMLL", hp).fit(DATA, RunContext(seed=3, workdir=wd))
    assert np.array_equal(full.predict_proba(DATA.X_val), resumed.predict_proba(DATA.X_val))
    assert strip_timing(read_log(tmp_path / "full" / TRAIN_LOG)) == strip_timing(read_log(wd / TRAIN_LOG))


@pytest.mark.slow
def test_deterministic_mode_without_the_compiler_stack():
    """Training sets deterministic algorithms on CPU without importing the compiler stack
    (torch._dynamo, torch._inductor, sympy: +1.6 s of CPU per process), neither through
    torch.use_deterministic_algorithms nor through torch.optim's wrappers. The flag is on during
    training and restored after it."""
    import subprocess
    import sys

    code = (
        "import sys, tempfile, torch\n"
        "from tests.unit.nn.test_trainer import DATA, SMALL\n"
        "from cdgtmll.methods.base import RunContext, build\n"
        "seen = []\n"
        "class Probe(build('BCE').__class__):\n"
        "    def training_step(self, *a):\n"
        "        seen.append(torch.are_deterministic_algorithms_enabled())\n"
        "        return super().training_step(*a)\n"
        "Probe(epochs=1, **SMALL).fit(DATA, RunContext(seed=0, workdir=tempfile.mkdtemp()))\n"
        "print(all(seen), torch.are_deterministic_algorithms_enabled(),\n"
        "      [m for m in ('torch._dynamo', 'torch._inductor', 'sympy') if m in sys.modules])\n"
    )
    from tests.support.paths import ROOT

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "True False []"


def test_optimizer_impl_fused_is_an_explicit_option(tmp_path):
    """``optimizer_impl: fused`` (AdamW(fused=True)) is opt-in: the default keeps torch's per-tensor
    arithmetic; fused gives close but not identical predictions; it is part of the hyper-parameters
    (so of the run spec) only when set; an unknown value names the allowed ones."""
    hp = {"epochs": 2, **SMALL}
    default = build("BCE", hp).fit(DATA, RunContext(seed=1, workdir=tmp_path / "a"))
    fused = build("BCE", {**hp, "optimizer_impl": "fused"}).fit(DATA, RunContext(
        seed=1, workdir=tmp_path / "b"))
    P0, P1 = default.predict_proba(DATA.X_val), fused.predict_proba(DATA.X_val)
    assert not np.array_equal(P0, P1) and np.allclose(P0, P1, atol=1e-4)
    assert "optimizer_impl" not in default.hparams() and fused.hparams()["optimizer_impl"] == "fused"
    with pytest.raises(ValueError, match="optimizer_impl"):
        build("BCE", {"optimizer_impl": "adam8bit"})


def test_batch_rows_are_gathered_with_index_select_and_equal_plain_indexing(monkeypatch):
    """``take_rows`` (the trainer's per-batch gather) returns the same bytes as ``T[idx]`` for a
    dense tensor, also non-contiguous and int64/int32 indices with repeats, through
    ``index_select``; CSR rows (:class:`SparseRows`) are indexed as before."""
    import scipy.sparse as sp

    from cdgtmll.nn.sparse import SparseRows
    from cdgtmll.nn.trainer import take_rows

    g = torch.Generator().manual_seed(0)
    X = torch.randn(300, 17, generator=g)
    for T in (X, X.t().contiguous().t(), X[:, ::2], X.double()):
        for idx in (torch.randperm(300, generator=g)[:64], torch.tensor([5, 5, 0, 299], dtype=torch.int32)):
            got = take_rows(T, idx)
            assert got.dtype == T.dtype and torch.equal(got, T[idx.long()])
    calls = []
    real = torch.Tensor.index_select
    monkeypatch.setattr(torch.Tensor, "index_select", lambda self, *a: calls.append(a) or real(self, *a))
    take_rows(X, torch.arange(3))
    monkeypatch.undo()
    assert len(calls) == 1
    M = sp.random(40, 9, density=0.3, format="csr", random_state=1, dtype=np.float32)
    rows = SparseRows(M, dense=True)
    idx = torch.tensor([3, 1, 3])
    assert torch.equal(take_rows(rows, idx), rows[idx])
