"""No host read per training step, checked on the CPU (the CI proxy of
tests/cuda/test_cuda_sync.py): with :func:`cdgtmll.nn.device_sync.host_reads_free` answering
False, the step loop takes the code a CUDA run takes, and :class:`tests.support.step_sync.HostReadGuard`
fails on any ``item``/``float``/``bool``/``tolist``/``cpu``/``numpy`` of a step tensor and on
any tensor built from host data for a device, for BCE, CD-GTMLL (default, with the fast
curiosity forms, with the EMA of predictions, with one backbone per player) and two architecture
baselines, on real Yeast
and on the toy JPEG images. That path computes the same numbers as the CPU's own: the train
logs and predictions are compared bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cdgtmll.data.processed import ProcessedData
from cdgtmll.labels import tail_labels
from cdgtmll.methods.base import FitData, RunContext, build
from cdgtmll.methods.cdgtmll import terms
from cdgtmll.nn import device_sync, trainer
from cdgtmll.nn.checkpoint import TRAIN_LOG
from cdgtmll.train import run_seed
from tests.support.finetune import make_image_data, spec
from tests.support.runs import yeast_fit_data
from tests.support.step_sync import HostRead, cpu_proxy, guard_steps

torch.set_num_threads(1)

EPOCHS = 2
HP = {"epochs": EPOCHS, "batch_size": 256, "hidden_dim": 64}
CASES = {
    "BCE": ("BCE", {}),
    "CD-GTMLL": ("CD-GTMLL", {}),
    "CD-GTMLL-fast": ("CD-GTMLL", {}),  # FAST_MIN_ELEMENTS = 0: the fast curiosity forms on Yeast's small batches
    "CD-GTMLL-predictions": ("CD-GTMLL", {"peer_smoothing": "predictions"}),
    "CD-GTMLL-separate": ("CD-GTMLL", {"player_backbones": "separate"}),
    "C-Tran": ("C-Tran", {}),
    "ML-GCN": ("ML-GCN", {}),
}


@pytest.fixture(scope="module")
def yeast(tmp_path_factory, mirror) -> FitData:
    return yeast_fit_data(tmp_path_factory.mktemp("yeast_sync"), mirror)


def device_path(monkeypatch) -> None:
    monkeypatch.setattr(device_sync, "host_reads_free", lambda device: False)


def fit(case: str, data: FitData, workdir) -> tuple[bytes, np.ndarray]:
    name, hp = CASES[case]
    m = build(name, {**HP, **hp}).fit(data, RunContext(seed=0, workdir=workdir))
    return (workdir / TRAIN_LOG).read_bytes(), m.predict_proba(data.X_val)


@pytest.mark.parametrize("case", list(CASES))
def test_steps_read_nothing_on_the_host(yeast, tmp_path, monkeypatch, case):
    if case == "CD-GTMLL-fast":
        monkeypatch.setattr(terms, "FAST_MIN_ELEMENTS", 0)
    log_cpu, pred_cpu = fit(case, yeast, tmp_path / "cpu")
    device_path(monkeypatch)
    epochs = guard_steps(monkeypatch, cpu_proxy)
    log_dev, pred_dev = fit(case, yeast, tmp_path / "device")
    steps = -(-yeast.X_train.shape[0] // HP["batch_size"])
    assert epochs == [steps] * EPOCHS  # every step of every epoch ran under the guard
    # the device path's numbers are the CPU's, bit for bit (timings aside)
    drop = ("epoch_time", "val_time")

    def table(raw: bytes) -> list[list[str]]:
        lines = [r.split(",") for r in raw.decode().splitlines()]
        keep = [i for i, c in enumerate(lines[0]) if c not in drop]
        return [[r[i] for i in keep] for r in lines]

    assert table(log_dev) == table(log_cpu)
    assert np.array_equal(pred_dev, pred_cpu)


def test_guard_catches_a_per_step_copy(yeast, tmp_path, monkeypatch):
    """The guard fails on what the step loop did before: CD-GTMLL's ``beta`` (a Python float)
    sent to the device with ``torch.as_tensor(v, device=...)``, a blocking copy on CUDA."""
    device_path(monkeypatch)
    guard_steps(monkeypatch, cpu_proxy)
    monkeypatch.setattr(trainer, "step_scalar", lambda v, device: torch.as_tensor(v, device=device).detach())
    with pytest.raises(HostRead, match="host-to-device copy"):
        fit("CD-GTMLL", yeast, tmp_path / "old")


def test_guard_catches_a_host_read(yeast, tmp_path, monkeypatch):
    """... and on CD-GTMLL's ``bool(z.max() > 80)``, which the CPU path keeps (free there)."""
    guard_steps(monkeypatch, cpu_proxy)  # host reads stay "free": the CPU path
    monkeypatch.setattr(terms, "FAST_MIN_ELEMENTS", 0)
    with pytest.raises(HostRead, match="__bool__"):
        fit("CD-GTMLL", yeast, tmp_path / "cpu-path")


@pytest.mark.slow  # fine-tunes the ResNet-50
@pytest.mark.parametrize("method", ["BCE", "CD-GTMLL", "C-Tran"])
def test_image_steps_read_nothing_on_the_host(tmp_path, monkeypatch, method):
    """Fine-tuning the (random-init) ResNet-50 on the toy JPEGs: the steps under the guard (the
    loader's host-side decoding outside it), the same predictions as the CPU path."""
    data: ProcessedData = make_image_data(tmp_path / "JPEGImages")
    tail = tail_labels(data.part("train")[1])
    s = spec(method, epochs=1)
    run_seed(data, tail, s, 0, tmp_path / "cpu", {}, False)
    device_path(monkeypatch)
    epochs = guard_steps(monkeypatch, cpu_proxy, unguard_loader=True)
    run_seed(data, tail, s, 0, tmp_path / "device", {}, False)
    assert epochs == [-(-80 // s.training["batch_size"])]
    a, b = (np.load(tmp_path / d / "predictions.npz")["test"] for d in ("cpu", "device"))
    assert np.array_equal(a, b)


def test_loglik_columns_dense_form_matches():
    """CD-GTMLL's per-label log-likelihood sums with clipped entries: the device path's dense
    correction equals the CPU's sparse one (values to float32 rounding, gradients exactly the
    closed form's), and ``neg_softplus_value`` is the same on both paths with logits above 80."""
    g = torch.Generator().manual_seed(0)
    z = (torch.randn(64, 9, generator=g) * 12).requires_grad_()
    z.data[3, 2] = 95.0
    y = (torch.rand(64, 9, generator=g) < 0.3).float()
    gl, gc = torch.randn(9, generator=g), torch.randn(9, generator=g)
    out = {}
    for free in (True, False):
        mp = pytest.MonkeyPatch()
        mp.setattr(device_sync, "host_reads_free", lambda device, free=free: free)
        try:
            z.grad = None
            ll, llc = terms._LogLikColumns.apply(z, y, 9.2)
            (ll @ gl + llc @ gc).backward()
            nsp = terms.neg_softplus_value(z.detach(), torch.sigmoid(-z.detach()))
            out[free] = (ll.detach(), llc.detach(), z.grad.clone(), nsp)
        finally:
            mp.undo()
    clipped = (z.detach().abs() > 9.2).any(0)
    assert clipped.sum() >= 3  # the correction is exercised
    assert torch.equal(out[True][0], out[False][0])
    torch.testing.assert_close(out[True][1], out[False][1], rtol=1e-6, atol=1e-5)
    r = y - torch.sigmoid(z.detach())
    expect = r * (gl + gc * (z.detach().abs() <= 9.2))
    torch.testing.assert_close(out[False][2], expect, rtol=0, atol=0)
    torch.testing.assert_close(out[True][2], expect, rtol=1e-6, atol=1e-6)
    assert torch.equal(out[True][3], out[False][3])


OTHER_NEURAL = ["ASL", "CB", "DBL", "Focal", "LDAM", "LogitAdj", "CC", "ML-Decoder", "BalanceMix", "LCIFS", "PE",
                "SRB", "MLBOTE", "LSFA",
                pytest.param("MLC-NC", marks=pytest.mark.xfail(
                    strict=True, raises=HostRead,
                    reason="its contrastive prototype loss gathers the batch's positive (row, class) entries, a "
                           "data-dependent count (nonzero): one sync per step on CUDA; the dense form would cost "
                           "K times the work"))]


@pytest.mark.parametrize("name", OTHER_NEURAL)
def test_every_other_neural_method_steps_without_host_reads(yeast, tmp_path, monkeypatch, name):
    """The rest of the neural methods, one epoch each on Yeast under the same guard."""
    device_path(monkeypatch)
    epochs = guard_steps(monkeypatch, cpu_proxy)
    build(name, {"epochs": 1, "batch_size": 256, "hidden_dim": 32}).fit(yeast, RunContext(seed=0, workdir=tmp_path))
    assert epochs and all(n > 0 for n in epochs)
