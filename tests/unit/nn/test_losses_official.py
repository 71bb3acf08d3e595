"""DBL and Focal against numbers from their official code (``tests/fixtures/official``,
written by :mod:`tests.support.official_refs`, which ports the official functions
verbatim), and the focal loss at saturated logits."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cdgtmll.nn.losses.common import reduce
from cdgtmll.nn.losses.registry import build_loss
from tests.support.official_refs import FIXTURES


def _load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


# --------------------------------------------------------------------------- DBL


@pytest.mark.parametrize("config", ["voc", "coco"])
def test_dbl_default_equals_released_resample_loss(config):
    """Default ``bias_div_lam=True``: the released ``ResampleLoss`` (DB configs of VOC / COCO)."""
    ref = _load("dbl")
    cfg = ref["configs"][config]
    counts = np.asarray(ref["class_freq"])
    z = torch.tensor(ref["logits"], dtype=torch.float64)
    y = torch.tensor(ref["labels"], dtype=torch.float64)
    loss = build_loss("dbl", counts, int(ref["train_num"]), smooth_mu=cfg["smooth_mu"], lam=cfg["lam"])
    np.testing.assert_allclose(loss.logit_bias.flatten().numpy(), cfg["init_bias"], rtol=1e-6)
    np.testing.assert_allclose(loss.rebalance_weight(y).numpy(), cfg["rebalance_weight"], rtol=1e-6)
    official = torch.tensor(cfg["elementwise"], dtype=torch.float64)
    assert loss(z, y).item() == pytest.approx(reduce(official).item(), rel=1e-6)


def test_dbl_paper_option_is_the_released_code_with_kappa_times_lambda():
    """``bias_div_lam=False`` (paper Eq. 9) = the released bias times lambda."""
    ref = _load("dbl")
    cfg = ref["configs"]["voc"]
    paper = build_loss("dbl", np.asarray(ref["class_freq"]), int(ref["train_num"]), bias_div_lam=False)
    np.testing.assert_allclose(paper.logit_bias.flatten().numpy(), np.asarray(cfg["init_bias"]) * cfg["lam"], rtol=1e-6)


# --------------------------------------------------------------------------- Focal


@pytest.mark.parametrize("case", range(4))
def test_focal_equals_fvcore_sigmoid_focal_loss(case):
    ref = _load("focal")
    c = ref["cases"][case]
    z = torch.tensor(ref["logits"], dtype=torch.float64, requires_grad=True)
    y = torch.tensor(ref["targets"], dtype=torch.float64)
    alpha = None if c["alpha"] < 0 else c["alpha"]
    loss = build_loss("focal", np.ones(z.shape[1]), 10, gamma=c["gamma"], alpha=alpha)(z, y)
    loss.backward()
    assert loss.item() == pytest.approx(reduce(torch.tensor(c["elementwise"], dtype=torch.float64)).item(), rel=1e-6)
    np.testing.assert_allclose(z.grad.numpy(), c["grad"], rtol=1e-6, atol=1e-12)


def _focal_f64_reference(z: torch.Tensor, y: torch.Tensor, gamma: float, alpha: float | None) -> torch.Tensor:
    """The paper's formula in float64 with the accurate pieces (softplus, sigmoid of -s_t):
    finite values and gradients at |z| = 30, where float64 does not saturate."""
    s_t = torch.where(y > 0.5, z, -z)
    ce = F.softplus(-s_t)
    loss = torch.sigmoid(-s_t) ** gamma * ce
    if alpha is not None:
        loss = (y * alpha + (1 - y) * (1 - alpha)) * loss
    return reduce(loss)


@pytest.mark.parametrize("gamma", [0.1, 0.25, 0.5, 0.9, 1.0, 2.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_focal_finite_at_saturated_logits(gamma, dtype):
    """0 < gamma < 1 gave NaN gradients at saturated logits (as torchvision / fvcore do)."""
    z0 = torch.tensor([[30.0, -30.0, 30.0, -30.0, 0.5, -2.0]], dtype=torch.float64)
    y = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    for alpha in (0.25, None):
        z = z0.to(dtype, copy=True).requires_grad_(True)
        loss = build_loss("focal", np.ones(6), 10, gamma=gamma, alpha=alpha)(z, y.to(dtype))
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(z.grad).all()
        zr = z0.clone().requires_grad_(True)
        ref = _focal_f64_reference(zr, y, gamma, alpha)
        ref.backward()
        rtol = 1e-6 if dtype == torch.float32 else 1e-12
        assert loss.item() == pytest.approx(ref.item(), rel=rtol)
        np.testing.assert_allclose(z.grad.double().numpy(), zr.grad.numpy(), rtol=rtol * 10, atol=0)
    # beyond float range of the complement (q = 0 exactly): finite, gradient 0 at the easy side
    z = torch.tensor([[200.0, -200.0, 1e4, -1e4]], dtype=dtype, requires_grad=True)
    yy = torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=dtype)
    loss = build_loss("focal", np.ones(4), 10, gamma=gamma)(z, yy)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(z.grad).all()
    assert loss.item() == pytest.approx(0.0, abs=1e-30)


def test_dbl_refuses_focal_gamma_below_one():
    """DBL's focal factor multiplies its NTR term: for 0 < gamma < 1 its gradient is unbounded at
    saturated logits (NaN), so such a gamma is refused by the loss and by the config check."""
    import numpy as np
    import pytest

    from cdgtmll.methods.base import check_values
    from cdgtmll.nn.losses.registry import build_loss, loss_hparam_space

    with pytest.raises(ValueError, match="focal_gamma.*expected 0 or a number >= 1"):
        build_loss("dbl", np.array([5, 3, 1]), 10, focal_gamma=0.5)
    with pytest.raises(ValueError):
        check_values("loss 'dbl'", loss_hparam_space("dbl"), {"focal_gamma": 0.5})
    check_values("loss 'dbl'", loss_hparam_space("dbl"), {"focal_gamma": 0})
    check_values("loss 'dbl'", loss_hparam_space("dbl"), {"focal_gamma": 2.0})
