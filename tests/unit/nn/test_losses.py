"""Tests of the loss registry (src/cdgtmll/nn/losses/): hand-computed values,
reductions to BCE, gradients, edge cases (extreme logits, n_k = 0)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cdgtmll.nn.losses.common import bce_terms, reduce
from cdgtmll.nn.losses.registry import build_loss, loss_names
from tests.support.losses import ALL_CONFIGS, COUNTS, N_TRAIN, random_batch


def _bce_elem(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(z, y, reduction="none")


# --------------------------------------------------------------------- registry


def test_registry_has_all_losses():
    assert {"bce", "focal", "asl", "dbl", "cb", "ldam", "logit_adjust"} <= set(loss_names())


def test_build_loss_rejects_unknown_hparam_by_name():
    with pytest.raises(ValueError, match="gamm"):
        build_loss("focal", COUNTS, N_TRAIN, gamm=2.0)
    with pytest.raises(ValueError, match="kapa"):
        build_loss("dbl", COUNTS, N_TRAIN, kapa=0.1)
    with pytest.raises(KeyError, match="nope"):
        build_loss("nope", COUNTS, N_TRAIN)


# --------------------------------------------------------------------- BCE terms


def _extreme_batch(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of scale 3 plus saturated ones (+-20, +-50, +-100, +-1e4, 0) under both targets."""
    z, y = random_batch(64, 983, seed=11, scale=3.0)
    edge = torch.tensor([0.0, 20.0, -20.0, 50.0, -50.0, 100.0, -100.0, 1e4, -1e4])
    z[:2, : edge.numel()] = edge
    y[0, : edge.numel()], y[1, : edge.numel()] = 0.0, 1.0
    return z.to(dtype), y.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_terms_gradient_is_torchs_bit_for_bit(dtype, weighted):
    """The vectorised CPU forward keeps torch's backward: through the project's reduction, with
    and without per-element weights (CB's), the logits' gradient equals
    ``binary_cross_entropy_with_logits``' bit for bit, so every update is unchanged."""
    z, y = _extreme_batch(dtype)
    w = torch.rand(z.shape, generator=torch.Generator().manual_seed(2), dtype=dtype) if weighted else 1.0
    grads = []
    for fn in (bce_terms, _bce_elem):
        zz = z.clone().requires_grad_(True)
        reduce(w * fn(zz, y)).backward()
        grads.append(zz.grad)
    assert torch.equal(grads[0], grads[1])


def test_bce_terms_second_derivative_is_torchs():
    """With ``create_graph`` the backward stays differentiable, and the second derivative equals
    torch's (``sigmoid(z)(1 - sigmoid(z))`` per element)."""
    z, y = _extreme_batch(torch.float64)
    hess = []
    for fn in (bce_terms, _bce_elem):
        zz = z.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(zz, y).sum(), zz, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), zz)
        hess.append(h)
    torch.testing.assert_close(hess[0], hess[1], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bce_terms_values_match_torch_and_float64(dtype):
    """Forward values: within a few float32 ulps of torch's and of the float64 result, also for
    saturated logits (exactly 0 and exactly ``|z|`` where they must be)."""
    z, y = _extreme_batch(dtype)
    got = bce_terms(z, y)
    assert got.dtype == dtype and got.shape == z.shape
    exact = _bce_elem(z.double(), y.double())
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got.double(), exact, rtol=tol, atol=tol)
    torch.testing.assert_close(got, _bce_elem(z, y), rtol=tol, atol=tol)
    assert got[0, 7].item() == 1e4 and got[1, 7].item() == 0.0  # z = 1e4: y = 0 costs z, y = 1 costs 0
    assert got[0, 8].item() == 0.0 and got[1, 8].item() == 1e4
    assert torch.isfinite(got).all()


def test_bce_terms_fall_back_to_torch_where_the_fast_form_does_not_apply():
    """Soft targets that carry gradient, mixed dtypes, CPU autocast and batches below
    BCE_FAST_MIN_ELEMENTS take torch's op (its target gradient included); a target of another
    shape gets torch's error."""
    z, y = random_batch(64, 70, seed=12)  # 4480 elements: above BCE_FAST_MIN_ELEMENTS
    yg = torch.rand(64, 70, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    out = bce_terms(z, yg)
    assert out.grad_fn is not None and "BinaryCrossEntropyWithLogits" in type(out.grad_fn).__name__
    out.sum().backward()
    torch.testing.assert_close(yg.grad, -z)  # d/dy [(1-y) z - logsigmoid(z)] = -z
    assert torch.equal(bce_terms(z.double(), y), _bce_elem(z.double(), y))
    with pytest.raises(ValueError, match="Target size"):
        bce_terms(z, y[:1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(bce_terms(z, y), _bce_elem(z, y))
    fast = bce_terms(z.requires_grad_(True), y)
    assert type(fast.grad_fn).__name__ == "_BCEWithLogitsCPUBackward"
    small = bce_terms(z[:8].clone().requires_grad_(True), y[:8])  # a small batch keeps torch's op
    assert "BinaryCrossEntropyWithLogits" in type(small.grad_fn).__name__


# --------------------------------------------------------------------- focal


def test_focal_gamma0_no_alpha_equals_bce_exactly():
    z, y = random_batch(16, 5, seed=1, scale=5.0)
    counts = np.arange(1, 6)
    bce = build_loss("bce", counts, 100)(z, y)
    focal = build_loss("focal", counts, 100, gamma=0.0, alpha=None)(z, y)
    assert torch.equal(bce, focal)


def test_focal_hand_values():
    # one positive with z = 0 (p_t = 1/2), one negative with z = log 3 (p = 3/4, p_t = 1/4)
    z = torch.tensor([[0.0, math.log(3.0)]])
    y = torch.tensor([[1.0, 0.0]])
    loss = build_loss("focal", np.array([1, 1]), 10)(z, y)  # gamma 2, alpha 0.25
    expected = 0.25 * 0.5**2 * math.log(2.0) + 0.75 * 0.75**2 * math.log(4.0)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


# --------------------------------------------------------------------- ASL


def test_asl_without_focusing_and_clip_equals_bce():
    z, y = random_batch(16, 6, seed=2, scale=4.0)  # moderate logits, |z| << 18
    counts = np.ones(6)
    bce = build_loss("bce", counts, 10)(z, y)
    asl = build_loss("asl", counts, 10, gamma_neg=0.0, gamma_pos=0.0, clip=0.0)(z, y)
    assert asl.item() == pytest.approx(bce.item(), abs=1e-6)


def test_asl_hand_values():
    # positive z = 0: (1-p)^0 * log 2 ; negative z = 0: p = .5, p_m = .45,
    # weight .45^4, -log(1 - .45) = -log .55
    z = torch.zeros(1, 2)
    y = torch.tensor([[1.0, 0.0]])
    loss = build_loss("asl", np.ones(2), 10)(z, y)
    expected = math.log(2.0) + 0.45**4 * -math.log(0.55)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # negative with p < m is ignored entirely (p_m = 0)
    z = torch.tensor([[-5.0]])  # p = 0.0067 < 0.05
    loss = build_loss("asl", np.ones(1), 10)(z, torch.zeros(1, 1))
    assert loss.item() == 0.0


def test_asl_focusing_weights_carry_no_gradient():
    gp, gn, m = 1.0, 4.0, 0.05
    z0, y = random_batch(6, 4, seed=3, scale=2.0)
    z = z0.clone().requires_grad_(True)
    loss = build_loss("asl", np.ones(4), 10, gamma_pos=gp, gamma_neg=gn, clip=m)(z, y)
    loss.backward()
    p = torch.sigmoid(z0)
    p_m = (p - m).clamp(min=0)
    # weighted BCE with constant weights w: d/dz of -w log p = -w (1-p);
    # d/dz of -w log(1 - p + m) = w p (1-p) / (1 - p + m) where p > m (else 0)
    w_pos = (1 - p) ** gp
    w_neg = p_m**gn
    g_pos = -w_pos * (1 - p)
    g_neg = torch.where(p > m, w_neg * p * (1 - p) / (1 - p + m), torch.zeros_like(p))
    expected = (y * g_pos + (1 - y) * g_neg) / z0.shape[0]  # mean over the batch
    torch.testing.assert_close(z.grad, expected, rtol=1e-5, atol=1e-7)

    # with focal_grad=True the gradient differs (it includes d w / d z)
    z2 = z0.clone().requires_grad_(True)
    build_loss("asl", np.ones(4), 10, gamma_pos=gp, gamma_neg=gn, clip=m, focal_grad=True)(z2, y).backward()
    assert not torch.allclose(z2.grad, expected, rtol=1e-3, atol=1e-6)


# --------------------------------------------------------------------- DBL


def test_dbl_rebalance_weights_hand_computed():
    loss = build_loss("dbl", COUNTS, N_TRAIN)  # a = .1, b = 10, mu = .3
    y = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    w = loss.rebalance_weight(y)
    # instance {0, 2}: sum 1/n_j = 1/10 + 1/1000 = 0.101; r = (1/n_k) / 0.101
    r = [0.1 / 0.101, 0.01 / 0.101, 0.001 / 0.101]
    assert r == pytest.approx([0.990099, 0.0990099, 0.00990099], rel=1e-5)
    r_hat = [0.1 + 1.0 / (1.0 + math.exp(-10.0 * (x - 0.3))) for x in r]
    assert r_hat == pytest.approx([1.098994, 0.218167, 0.152105], rel=1e-5)
    torch.testing.assert_close(w[0], torch.tensor(r_hat, dtype=torch.float32))
    # instance without positives: official r = +inf, r_hat = a + 1
    torch.testing.assert_close(w[1], torch.full((3,), 1.1))


def test_dbl_ntr_hand_values():
    # single label, n = 100, N = 1000: p = .1, b_hat = -log 9, bias = kappa b_hat = -0.109861
    # (the paper's Eq. 9, bias_div_lam=False; the default, the released code, is checked
    # against the official ResampleLoss in test_losses_official.py)
    loss = build_loss("dbl", np.array([100]), 1000, lam=5.0, bias_div_lam=False)
    assert loss.logit_bias.item() == pytest.approx(-0.05 * math.log(9.0), rel=1e-6)
    z = torch.tensor([[0.5], [0.5], [-2.0], [3.0]])
    y = torch.tensor([[0.0], [1.0], [0.0], [1.0]])
    ntr, _ = loss.ntr_terms(z, y)
    # negative: (1/lam) log(1 + e^{lam s}); positive: log(1 + e^{-s}); s = z - 0.1098612
    expected = [0.4167257, 0.5169844, 5.242264e-06, 0.05407949]
    assert ntr.flatten().tolist() == pytest.approx(expected, rel=1e-5)


def test_dbl_bias_official_scaling_option():
    a = build_loss("dbl", np.array([100]), 1000, lam=5.0, bias_div_lam=False)
    b = build_loss("dbl", np.array([100]), 1000, lam=5.0)  # default: the released code's division
    assert b.logit_bias.item() == pytest.approx(a.logit_bias.item() / 5.0, rel=1e-6)


def _official_db_reference(z, y, counts, n_train, a=0.1, b=10.0, mu=0.3, kappa=0.05, lam=5.0, gamma=2.0, scale=2.0):
    """Transcription of the official ResampleLoss forward (rebalance + logit_reg +
    focal), element-wise, with the bias not divided by neg_scale (the paper's Eq. 9,
    ``bias_div_lam=False``; the released code's division is the default)."""
    counts = torch.tensor(counts, dtype=torch.float64)
    freq_inv = 1.0 / counts
    repeat_rate = (y * freq_inv).sum(1, keepdim=True)
    weight = torch.sigmoid(b * (freq_inv / repeat_rate - mu)) + a
    logits = z + (-torch.log(n_train / counts - 1) * kappa)
    logits = logits * (1 - y) * lam + logits * y
    weight = weight / lam * (1 - y) + weight * y
    logpt = -F.binary_cross_entropy_with_logits(logits, y, reduction="none")
    pt = torch.exp(logpt)
    loss = F.binary_cross_entropy_with_logits(logits, y, weight=weight, reduction="none")
    return scale * (1 - pt) ** gamma * loss


def test_dbl_paper_option_matches_official_formula_without_division():
    z, y = random_batch(8, 3, seed=4, scale=3.0)
    y[:, 0] = 1.0  # every instance has a positive (official code needs one)
    z, y = z.double(), y.double()
    ref = _official_db_reference(z, y, COUNTS, N_TRAIN)
    loss = build_loss("dbl", COUNTS, N_TRAIN, bias_div_lam=False)(z, y)
    assert loss.item() == pytest.approx(reduce(ref).item(), rel=1e-5)


# --------------------------------------------------------------------- CB


def test_cb_weights_closed_form_and_sum():
    beta = 0.999
    loss = build_loss("cb", COUNTS, N_TRAIN, beta=beta)
    raw = [(1 - beta) / (1 - beta**n) for n in COUNTS]
    closed = [3 * w / sum(raw) for w in raw]
    cw = loss.class_weight.flatten()
    assert cw.sum().item() == pytest.approx(3.0, rel=1e-6)
    assert cw.tolist() == pytest.approx(closed, rel=1e-6)


def test_cb_instance_weights_and_loss():
    loss = build_loss("cb", COUNTS, N_TRAIN)
    cw = loss.class_weight.flatten()
    y = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    z = torch.tensor([[0.3, -1.0, 2.0], [0.0, 1.0, -1.0], [4.0, -4.0, 0.5]])
    omega = torch.stack([(cw[0] + cw[2]) / 2, torch.tensor(1.0), cw[1]])
    torch.testing.assert_close(loss.instance_weight(y).flatten(), omega)
    expected = (omega * _bce_elem(z, y).sum(1)).mean()
    torch.testing.assert_close(loss(z, y), expected)


def test_cb_zero_count_treated_as_one():
    a = build_loss("cb", np.array([0, 5, 50]), 100)
    b = build_loss("cb", np.array([1, 5, 50]), 100)
    torch.testing.assert_close(a.class_weight, b.class_weight)
    assert torch.isfinite(a.class_weight).all()


# --------------------------------------------------------------------- LDAM


def test_ldam_margins():
    counts = np.array([10, 100, 1000, 16])
    loss = build_loss("ldam", counts, N_TRAIN)
    m = loss.margins.flatten().double()
    assert m.max().item() == pytest.approx(0.5, rel=1e-6)
    assert m[0].item() == pytest.approx(0.5, rel=1e-6)  # rarest label
    expected = 0.5 * (counts / 10.0) ** -0.25
    assert m.tolist() == pytest.approx(expected.tolist(), rel=1e-6)
    # n_k = 0 -> treated as 1, the largest margin
    m0 = build_loss("ldam", np.array([0, 16]), 100).margins.flatten()
    assert m0.tolist() == pytest.approx([0.5, 0.25], rel=1e-6)


def test_ldam_is_bce_on_margin_adjusted_scaled_logits():
    z, y = random_batch(8, 3, seed=5, scale=0.5)
    loss = build_loss("ldam", COUNTS, N_TRAIN)
    m = torch.tensor(0.5 * (COUNTS / 10.0) ** -0.25, dtype=torch.float32)
    expected = _bce_elem(30.0 * (z - m * y), y).sum(1).mean()
    torch.testing.assert_close(loss(z, y), expected)


# --------------------------------------------------------------------- logit adjustment


def test_logit_adjust_is_bce_on_shifted_logits():
    z, y = random_batch(8, 3, seed=6)
    loss = build_loss("logit_adjust", COUNTS, N_TRAIN, tau=1.0)
    shift = torch.log(torch.tensor(COUNTS / N_TRAIN, dtype=torch.float32))
    assert shift.tolist() == pytest.approx([math.log(10 / 2000), math.log(100 / 2000), math.log(1000 / 2000)], rel=1e-6)
    expected = build_loss("bce", COUNTS, N_TRAIN)(z + shift, y)
    torch.testing.assert_close(loss(z, y), expected)
    half = build_loss("logit_adjust", COUNTS, N_TRAIN, tau=0.5)
    torch.testing.assert_close(half(z, y), build_loss("bce", COUNTS, N_TRAIN)(z + 0.5 * shift, y))


# --------------------------------------------------------------------- all losses


@pytest.mark.parametrize("name,hp", ALL_CONFIGS, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_finite_loss_and_gradients_on_extreme_inputs(name, hp, dtype):
    counts = np.array([0, 1, 5, 50, 500, 2000])  # zero-count and all-rows labels
    loss_fn = build_loss(name, counts, 2000, **hp)
    z, y = random_batch(10, 6, seed=7, scale=3.0)
    z[0] = torch.tensor([50.0, -50.0, 50.0, -50.0, 0.0, 50.0])
    z[1] = torch.tensor([-50.0, 50.0, -50.0, 50.0, 50.0, -50.0])
    z[2] = 200.0
    z[3] = -200.0
    y[0] = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    y[1] = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    y[4] = 0.0  # no positive label
    y[5] = 1.0  # all labels positive
    z = z.to(dtype).requires_grad_(True)
    y = y.to(dtype)
    out = loss_fn(z, y)
    assert out.dim() == 0 and out.dtype == dtype
    assert torch.isfinite(out)
    out.backward()
    assert torch.isfinite(z.grad).all()


@pytest.mark.parametrize("name,hp", ALL_CONFIGS, ids=lambda v: str(v))
def test_reduction_mean_over_rows_of_label_sums(name, hp):
    loss_fn = build_loss(name, COUNTS, N_TRAIN, **hp)
    z, y = random_batch(8, 3, seed=8)
    y[2] = 0.0
    full = loss_fn(z, y)
    first, second = loss_fn(z[:3], y[:3]), loss_fn(z[3:], y[3:])
    torch.testing.assert_close(full, (3 * first + 5 * second) / 8)
    per_row = torch.stack([loss_fn(z[i : i + 1], y[i : i + 1]) for i in range(8)])
    torch.testing.assert_close(full, per_row.mean())
    # a batch of one row is the sum over its labels: doubling K doubles the loss
    twice = build_loss(name, np.concatenate([COUNTS, COUNTS]), N_TRAIN, **hp)
    if name not in ("dbl", "cb"):  # their weights depend on the whole label row
        torch.testing.assert_close(twice(torch.cat([z, z], 1), torch.cat([y, y], 1)), 2 * full)


@pytest.mark.parametrize("name", loss_names())
def test_per_label_constants_are_buffers_that_follow_to(name):
    loss_fn = build_loss(name, COUNTS, N_TRAIN)
    params = list(loss_fn.parameters())
    assert params == []
    loss_fn = loss_fn.to(torch.float64)
    for buf in loss_fn.buffers():
        assert buf.dtype == torch.float64 and buf.shape == (1, 3)
    z, y = random_batch(4, 3, seed=9)
    assert loss_fn(z.double(), y.double()).dtype == torch.float64
