"""Faults during training and writing: no stale data, no silent bad input.

* a diverging run stops at the first non-finite loss / gradient norm and says why
  (epoch, step, loss terms, learning rates), leaving no checkpoint of NaN weights;
  NaN scores are reported as "non-finite", not as "outside [0, 1]";
* a full disk during a checkpoint save reads "no space left on device" with the path
  (not torch's ``enforce fail at inline_container.cc``);
* a ``kill -9`` inside an atomic write leaves no ``.tmp`` file after the next write;
  ``kill -9`` during training, then resume, gives the uninterrupted run's metrics.

The triggers are real where possible: an inf feature cell and a learning rate of 1e6 on
Yeast (both diverge within the first epoch), torch's own writer failing on /dev/full,
a tmpfs that is too small (user namespace; skipped where it cannot be mounted), a
child process killed with SIGKILL. Yeast comes from the dataset mirror (skipped without).
"""

from __future__ import annotations

import errno
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import cdgtmll
from cdgtmll import io as cio
from cdgtmll.lineage.code import package_sha256
from cdgtmll.methods import base
from cdgtmll.methods.base import FitData, RunContext
from cdgtmll.nn import checkpoint, divergence
from cdgtmll.nn import trainer as trainer_mod
from tests.support.mirror import YEAST_TRAIN, yeast_fitdata
from tests.support.paths import ROOT

# the catalogue's UserWarnings (unverified files, labels without positives) are expected
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

torch.set_num_threads(1)

SMALL = {"hidden_dim": 64, "batch_size": 64}
SRC = str(Path(cdgtmll.__file__).resolve().parents[1])


def yeast(n_train: int = 450, n_val: int = 150) -> FitData:
    return yeast_fitdata(n_train, n_val)


def method(name: str, **hp):
    """The method class itself: bypasses the config's hyper-parameter ranges (lr <= 1),
    as a direct API user (or a future range change) would."""
    return base.get(name)(**{"epochs": 3, **SMALL, **hp})


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


# ------------------------------------------------------------------ 1. divergence


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the standardisation's mean/std
def test_inf_feature_stops_at_first_step_and_says_why(tmp_path):
    d = yeast()
    X = d.X_train.copy()
    X[5, 3] = np.inf  # one bad cell: the backbone's standardisation turns every row into NaN
    data = FitData(X, d.Y_train, d.X_val, d.Y_val, d.label_names)
    with pytest.raises(FloatingPointError) as exc:
        method("BCE").fit(data, RunContext(seed=0, workdir=tmp_path))
    e, msg = exc.value, str(exc.value)
    assert type(e).__name__ == "TrainingDiverged"
    assert (e.epoch, e.step, e.global_step) == (1, 1, 1) and math.isnan(e.loss)
    assert msg.startswith("BCE: training diverged at epoch 1, step 1 of 8 (global step 1 of 24): the loss is nan")
    assert "Learning rates at that step: backbone=0.002, head=0.002." in msg
    assert "X_train holds 1 non-finite value(s) (first at row 5, column 3)" in msg
    assert "no checkpoint of this run was written" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no NaN checkpoint, no log


def test_huge_learning_rate_stops_at_first_nonfinite_gradient(tmp_path):
    with pytest.raises(FloatingPointError) as exc:
        method("BCE", lr_backbone=1e6, epochs=5).fit(yeast(), RunContext(seed=0, workdir=tmp_path))
    e, msg = exc.value, str(exc.value)
    # it stops within the first epoch, at the first step whose loss or gradient norm is not finite
    assert e.epoch == 1 and 1 <= e.step <= 8 and e.steps_per_epoch == 8 and e.total_steps == 40
    assert not (math.isfinite(e.loss) and math.isfinite(e.grad_norm))
    f = trainer_mod.cosine_factor(e.global_step - 1, e.total_steps)  # the rates of that step
    assert e.lrs == pytest.approx({"backbone": 1e6 * f, "head": 1e6 * f})
    assert f"epoch 1, step {e.step} of 8" in msg and "Learning rates at that step: backbone=" in msg
    assert "Lower the learning rate(s)" in msg
    assert list(tmp_path.iterdir()) == []


def test_cdgtmll_names_its_nonfinite_terms(tmp_path):
    with pytest.raises(FloatingPointError) as exc:
        method("CD-GTMLL", lr_backbone=1e6).fit(yeast(), RunContext(seed=0, workdir=tmp_path))
    e, msg = exc.value, str(exc.value)
    # CD-GTMLL's block clipping returns the global norm, so the step whose gradient first
    # overflows is caught, before the loss terms turn NaN; the message says which it was
    assert e.grad_norm is not None and not math.isfinite(e.grad_norm)
    assert f"the gradient norm is {e.grad_norm}" in msg
    if e.bad_terms:
        assert "Non-finite loss term(s): " + ", ".join(f"{k}={e.terms[k]}" for k in e.bad_terms) in msg
    else:
        assert "All logged loss terms are finite." in msg and {"R", "C_loglik", "C_div"} <= set(e.terms)
    assert "fusion=" in msg and list(tmp_path.iterdir()) == []


def test_divergence_in_epoch_two_keeps_the_last_good_checkpoint(tmp_path):
    """Only C_div turns NaN, in epoch 2: the message names it alone; epoch 1's checkpoint,
    log and player-accuracy file stay as they were, nothing of epoch 2 is written."""
    Base = base.get("CD-GTMLL")

    class PoisonedCDivergence(Base):
        poison_from = 10 / 24  # global step 11 of 24 = epoch 2, step 3 (8 steps per epoch)

        def build_model(self, X_train, Y_train):
            model = super().build_model(X_train, Y_train)
            terms = model.potential_terms

            def potential_terms(xb, yb):
                t = terms(xb, yb)
                if self._poison:
                    t["C_div"] = t["C_div"] * float("nan")
                return t

            model.potential_terms = potential_terms
            return model

        def training_step(self, model, xb, yb, progress):
            self._poison = progress >= self.poison_from - 1e-12
            return super().training_step(model, xb, yb, progress)

    with pytest.raises(FloatingPointError) as exc:
        PoisonedCDivergence(epochs=3, **SMALL).fit(yeast(), RunContext(seed=0, workdir=tmp_path,
                                                                       extra={"checkpoint_every": 1}))
    e, msg = exc.value, str(exc.value)
    assert msg.startswith("CD-GTMLL: training diverged at epoch 2, step 3 of 8 (global step 11 of 24): the loss is nan")
    assert (e.epoch, e.step, e.global_step) == (2, 3, 11)
    assert e.bad_terms == ["C_div", "Phi"] and math.isfinite(e.terms["R"]) and math.isfinite(e.terms["C_loglik"])
    assert "Non-finite loss term(s): C_div=nan, Phi=nan." in msg
    assert f"nothing was written for epoch 2; {tmp_path / 'checkpoint.pt'} still holds epoch 1" in msg
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert state["epoch"] == 1
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())
    assert len(checkpoint.read_log(tmp_path / "train_log.csv")) == 1
    assert np.load(tmp_path / "player_val_acc.npz")["accuracy"].shape[0] == 1
    assert temps(tmp_path) == []


def test_deferred_watch_reports_the_first_bad_step():
    """The CUDA mode (values kept on the device, read at the end) on CPU tensors: the
    first non-finite step wins, with its own loss, terms and gradient norm."""
    watch = divergence.FiniteWatch(torch.device("cpu"), immediate=False)
    watch.start(3)
    steps = [(0.5, [1.0, 2.0], 3.0), (0.25, [1.0, 2.0], float("inf")), (float("nan"), [float("nan"), 7.0], 9.0)]
    for b, (loss, terms, g) in enumerate(steps):
        lt = torch.tensor(loss)
        assert watch.observe(b, lt, torch.tensor([loss, *terms]), torch.tensor(g)) is None
    assert watch.finish() == (1, [0.25, 1.0, 2.0], math.inf)
    ok = divergence.FiniteWatch(torch.device("cpu"), immediate=False)
    ok.start(1)
    assert ok.observe(0, torch.tensor(0.1), torch.tensor([0.1]), None) is None and ok.finish() is None


def test_deferred_mode_in_training_finds_the_same_step(tmp_path, monkeypatch):
    """The CUDA code path (no per-step read; the epoch's kept values are read after the
    epoch) run on CPU: it reports the step the immediate check stops at, and writes nothing."""
    with pytest.raises(FloatingPointError) as now:
        method("BCE", lr_backbone=1e6).fit(yeast(), RunContext(seed=0, workdir=tmp_path / "now"))

    class Deferred(divergence.FiniteWatch):
        def __init__(self, device, immediate):
            super().__init__(device, immediate=False)

    monkeypatch.setattr(trainer_mod, "FiniteWatch", Deferred)  # the name the trainer calls
    with pytest.raises(FloatingPointError) as later:
        method("BCE", lr_backbone=1e6).fit(yeast(), RunContext(seed=0, workdir=tmp_path / "later"))
    a, b = now.value, later.value
    assert (b.epoch, b.step, b.loss, b.grad_norm, b.lrs) == (a.epoch, a.step, a.loss, a.grad_norm, a.lrs)
    assert str(b).replace("later", "now") == str(a)
    assert list((tmp_path / "later").iterdir()) == []


def test_score_check_says_nonfinite_with_counts():
    from cdgtmll.train import _check_scores

    s = np.full((4, 3), 0.5)
    s[0, 0], s[1, 1], s[1, 2] = np.nan, np.inf, np.nan
    with pytest.raises(ValueError) as exc:
        _check_scores(s, 4, 3, "BCE", "val")
    msg = str(exc.value)
    assert "outside [0, 1]" not in msg
    assert "3 non-finite value(s) of 12 on 'val' (2 NaN, 1 +inf, 0 -inf; in 2 of 4 rows)" in msg
    s = np.full((2, 2), 0.5)
    s[0, 1] = 1.5
    with pytest.raises(ValueError, match=r"1 value\(s\) of 4 outside \[0, 1\] on 'test' \(min 0.5, max 1.5\)"):
        _check_scores(s, 2, 2, "BCE", "test")


# ------------------------------------------------------------------ 2. full disk


def _fit_two_epochs(workdir: Path):
    return method("BCE", epochs=2).fit(yeast(), RunContext(seed=0, workdir=workdir))


def test_full_disk_oserror_names_the_checkpoint(tmp_path, monkeypatch):
    def save(obj, f, *a, **kw):
        Path(f).write_bytes(b"\0" * 1000)  # a partial write, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(OSError) as exc:
        _fit_two_epochs(tmp_path)
    msg = str(exc.value)
    assert exc.value.errno == errno.ENOSPC
    assert msg.startswith(f"no space left on device while writing {tmp_path / 'checkpoint.pt'}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no partial checkpoint, no temp


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_torch_enforce_fail_is_translated(tmp_path, monkeypatch):
    """torch's C++ writer hides the errno: ``[enforce fail at inline_container.cc] .
    unexpected pos``. Real text (written to /dev/full); the disk is full per disk_usage."""
    real_save = torch.save

    def save(obj, f, *a, **kw):
        Path(f).write_bytes(b"\0" * 1000)
        real_save(obj, "/dev/full", *a, **kw)

    monkeypatch.setattr(torch, "save", save)
    full = shutil.disk_usage(tmp_path)._replace(free=0)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: full)
    with pytest.raises(OSError) as exc:
        _fit_two_epochs(tmp_path / "full")
    msg = str(exc.value)
    assert "inline_container.cc" in str(exc.value.__cause__)  # the original, kept as the cause
    assert msg.startswith(f"no space left on device while writing {tmp_path / 'full' / 'checkpoint.pt'} (0 B free")
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == []

    # the same torch error with plenty of space free is not called "no space left"
    monkeypatch.setattr(shutil, "disk_usage", lambda p: full._replace(free=10 * 2**30))
    with pytest.raises(RuntimeError, match="inline_container.cc"):
        _fit_two_epochs(tmp_path / "roomy")
    assert temps(tmp_path / "roomy") == []


CHILD_TMPFS = """
import sys
sys.path.insert(0, {src!r})
import torch
from cdgtmll.io import atomic_path, atomic_write
target = sys.argv[1] + "/run/checkpoint.pt"
atomic_write(sys.argv[1] + "/run/train_log.csv", "epoch,loss\\n")  # fits
for what, write in (("torch", lambda: torch.save({{"w": torch.zeros(200_000)}}, tmp)),
                    ("python", lambda: tmp.write_bytes(bytes(800_000)))):
    try:
        with atomic_path(target) as tmp:  # what the trainer's checkpoint save does
            write()
    except Exception as e:
        print("ERROR", what, type(e).__name__, e, "| cause:", repr(e.__cause__))
"""


def test_full_disk_real_tmpfs(tmp_path):
    """A 256 KiB tmpfs (user + mount namespace, no root needed where allowed): an 800 KB
    checkpoint does not fit, written by torch (no errno) and by Python (ENOSPC)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=256k tmpfs {mnt}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
    script = tmp_path / "child.py"
    script.write_text(CHILD_TMPFS.format(src=SRC))
    out = subprocess.run(
        ["unshare", "-rm", "sh", "-c",
         f'mount -t tmpfs -o size=256k tmpfs {mnt} && "{sys.executable}" {script} {mnt} && echo LS $(ls -A {mnt}/run)'],
        capture_output=True, text=True, timeout=120,
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stdout + out.stderr
    for line, what, cause in zip(lines, ("torch", "python"), ("inline_container.cc", "No space left on device")):
        assert line.startswith(f"ERROR {what} DiskFullError no space left on device while writing "
                               f"{mnt}/run/checkpoint.pt ("), line
        assert cause in line.split("| cause:")[1]
    assert lines[2] == "LS train_log.csv"  # no partial checkpoint, no temp


# ------------------------------------------------------------------ 3./4. kill -9


def _wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float = 90.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    proc.kill()
    raise AssertionError(f"child never printed {prefix!r}: {proc.stderr.read()}")


def _sigkill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)  # reaped: the pid is gone
    assert proc.returncode == -signal.SIGKILL


CHILD_ATOMIC = """
import sys, time
sys.path.insert(0, {src!r})
from cdgtmll.io import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    if sys.argv[2] == "partial":
        tmp.write_bytes(b"half a file")
    print("TMP", tmp, flush=True)
    time.sleep(300)
"""


@pytest.mark.parametrize("content", ["empty", "partial"])
def test_kill9_inside_atomic_write_leaves_no_tmp(tmp_path, content):
    target = tmp_path / "out" / "predictions.npz"
    script = tmp_path / "child.py"
    script.write_text(CHILD_ATOMIC.format(src=SRC))
    proc = subprocess.Popen([sys.executable, str(script), str(target), content], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    tmp = Path(_wait_for_line(proc, "TMP "))
    _sigkill(proc)
    assert tmp.exists() and temps(target.parent) == [tmp.name]  # what kill -9 leaves
    assert (tmp.stat().st_size == 0) == (content == "empty")

    cio.atomic_write(target, "complete")  # the next write (here: of the same target) cleans up
    assert target.read_text() == "complete"
    assert temps(target.parent) == []


def test_temps_of_live_or_foreign_writers_are_kept(tmp_path):
    """Only a temporary whose writer is gone is removed: one of a running process (a
    concurrent writer) or of another host (shared file system) stays."""
    target = tmp_path / "log.csv"
    script = tmp_path / "child.py"
    script.write_text(CHILD_ATOMIC.format(src=SRC))
    proc = subprocess.Popen([sys.executable, str(script), str(target), "partial"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        live = Path(_wait_for_line(proc, "TMP "))
        foreign = tmp_path / f".log.csv.atomic-00000000-{proc.pid}-abcdefgh.tmp"
        foreign.write_text("another machine's")
        assert cio.remove_stale_temps(tmp_path) == []
        cio.atomic_write(target, "x")
        assert live.exists() and foreign.exists()
    finally:
        _sigkill(proc)
    assert cio.remove_stale_temps(tmp_path) == [live]
    assert foreign.exists()


CHILD_TRAIN = """
import sys, time
sys.path.insert(0, {src!r}); sys.path.insert(0, {root!r})  # root: the checkout, for tests.support
import torch
torch.set_num_threads(1)
import cdgtmll.lineage.code as lineage_code
lineage_code._PACKAGE_SHA256 = sys.argv[2]  # the parent's: files edited meanwhile must not change the fingerprint
from tests.support.mirror import yeast_fitdata
from cdgtmll.methods import base
from cdgtmll.methods.base import RunContext
real_save, calls = torch.save, [0]

def save(obj, f, *a, **kw):  # the checkpoint of epoch 3 is complete in its temp file: die before the rename
    real_save(obj, f, *a, **kw)
    calls[0] += 1
    if calls[0] == 3:
        print("SAVED", f, flush=True)
        time.sleep(300)

torch.save = save
base.get("CD-GTMLL")(epochs=4, hidden_dim=64, batch_size=64).fit(yeast_fitdata(450, 150),
                                                                RunContext(seed=3, workdir=sys.argv[1],
                                                                           extra={{"checkpoint_every": 1}}))
"""


@pytest.mark.skipif(not YEAST_TRAIN.is_file(), reason="needs yeast/yeast-train.arff: no dataset mirror "
                    "and no packaged copy (river==0.26.1) to rebuild it from")
def test_kill9_during_training_then_resume_gives_identical_metrics(tmp_path):
    """SIGKILL while epoch 3's checkpoint is being written (temp complete, not renamed):
    the resumed run removes the orphaned temp, resumes from epoch 2 and ends with the
    uninterrupted run's log (timings aside) and predictions, bit for bit (CPU).
    (``tests/unit/nn/test_trainer.py::test_resume_equivalence`` covers the in-process stop.)"""
    data = yeast()
    hp = {"epochs": 4, **SMALL}
    full = base.get("CD-GTMLL")(**hp).fit(data, RunContext(seed=3, workdir=tmp_path / "full"))

    wd = tmp_path / "killed"
    script = tmp_path / "child.py"
    script.write_text(CHILD_TRAIN.format(src=SRC, root=str(ROOT)))
    proc = subprocess.Popen([sys.executable, str(script), str(wd), package_sha256()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tmp = Path(_wait_for_line(proc, "SAVED "))
    _sigkill(proc)
    assert tmp.exists() and temps(wd) == [tmp.name]
    assert torch.load(wd / "checkpoint.pt", weights_only=False)["epoch"] == 2
    killed_rows = checkpoint.read_log(wd / "train_log.csv")
    assert len(killed_rows) == 2

    resumed = base.get("CD-GTMLL")(**hp).fit(data, RunContext(seed=3, workdir=wd))
    assert temps(wd) == []
    rows = checkpoint.read_log(wd / "train_log.csv")
    assert rows[:2] == killed_rows  # really resumed (epochs 1-2, timings included, from the checkpoint)
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ("epoch_time", "val_time")} for r in rs]  # noqa: E731
    assert strip(rows) == strip(checkpoint.read_log(tmp_path / "full" / "train_log.csv"))
    assert np.array_equal(resumed.predict_proba(data.X_val), full.predict_proba(data.X_val))
    a, b = np.load(tmp_path / "full" / "player_val_acc.npz"), np.load(wd / "player_val_acc.npz")
    assert np.array_equal(a["accuracy"], b["accuracy"])
