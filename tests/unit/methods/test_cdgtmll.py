"""CD-GTMLL: partition, fusion, curiosity, block-gradient identity, ablations, Yeast run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cdgtmll.labels import ascending_order, prevalence, tail_labels
from cdgtmll.methods.base import FitData, RunContext, build
from cdgtmll.methods.cdgtmll.model import CDGTMLL, PLAYER_ACC_FILE
from cdgtmll.methods.cdgtmll.partition import make_partition
from cdgtmll.methods.cdgtmll.terms import bernoulli_jsd, bernoulli_kl
from tests.support.mirror import yeast_arrays

torch.set_num_threads(1)



def power_law_Y(n: int, L: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    prev = 0.5 * (np.arange(1, L + 1) ** -1.2)
    Y = (rng.random((n, L)) < prev[rng.permutation(L)]).astype(np.uint8)
    Y[rng.integers(n, size=L), np.arange(L)] = 1  # every label has a positive
    return Y


def synthetic(n=96, d=10, L=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    Y = power_law_Y(n, L, seed)
    return FitData(X[: n - 32], Y[: n - 32], X[n - 32 :], Y[n - 32 :], [f"l{k}" for k in range(L)])


def make_model(data: FitData, seed: int = 0, **hp):
    """A CD-GTMLL method + model without training (hidden 16 for speed)."""
    torch.manual_seed(seed)
    m = CDGTMLL(hidden_dim=16, **hp)
    m.prepare(data, RunContext(seed=seed, workdir=Path(".")))
    model = m.build_model(np.asarray(data.X_train, np.float32), np.asarray(data.Y_train))
    with torch.no_grad():  # non-trivial fusion weights
        model.fusion_logits.normal_(0, 0.5)
    return m, model


def make_triple_model(data: FitData, seed: int = 0, **hp):
    """A hand-made partition where one label has three players and one has two
    (exercises the general index_add fusion / peer path)."""
    from cdgtmll.methods.cdgtmll.model import CDGTMLLNet
    from cdgtmll.methods.cdgtmll.partition import Partition
    from cdgtmll.nn.backbones.mlp import MLPBackbone

    L = data.n_labels
    players = [list(range(0, L, 3)), list(range(1, L, 3)), list(range(2, L, 3))]
    players[1].append(0)
    players[2].append(0)  # label 0: players 0, 1, 2
    players[0].append(1)  # label 1: players 1, 0
    part = Partition(tuple(np.array(sorted(p)) for p in players), L, np.array([0, 1]))
    torch.manual_seed(seed)
    m = CDGTMLL(hidden_dim=16, **hp)
    X = np.asarray(data.X_train, np.float32)
    model = CDGTMLLNet(MLPBackbone.from_data(X, 16), part, prevalence(data.Y_train), m.payoff_weights, m.eps,
                       m.ema_decay, m.divergence, m.payoff_scale, m.divergence_form, m.peer_smoothing)  # fmt: skip
    with torch.no_grad():
        model.fusion_logits.normal_(0, 0.5)
    assert not model.pairs_of_two and model.ov_labels.tolist() == [0, 1]
    return m, model


def batch(data: FitData):
    return torch.as_tensor(data.X_train, dtype=torch.float32), torch.as_tensor(data.Y_train, dtype=torch.float32)


# ------------------------------------------------------------------ reference (naive, loops)


def reference_terms(model, x, y, freq, divergence="jsd", eps=1e-6, payoff="uniform", beta=0.3, scale="mean"):
    """R and [E_B C_i] straight from Eqs. 5/6 and Thm 1(3), with per-player/per-label loops:
    ``M = (1/Z) sum_l w_l [...]``, ``Z = sum_l w_l`` (``scale='sum'``: ``Z = 1``, L * M)."""
    h = model.backbone(x)
    z = model.heads(h)
    p = torch.sigmoid(z)
    pl, pp = model.pair_label.tolist(), model.pair_player.tolist()
    P, N, L = len(pl), model.n_players, model.n_labels
    a = torch.cat([torch.zeros(model.n_single), model.fusion_logits])
    r = torch.as_tensor(1.0 / (1.0 + freq), dtype=torch.float32)
    w = r * L / r.sum() if payoff == "rarity" else torch.ones(L)
    if scale == "mean":
        w = w / w.sum()
    R = 0.0
    for lab in range(L):
        rows = [k for k in range(P) if pl[k] == lab]
        om = torch.softmax(a[rows], 0)
        ph = (p[:, rows] * om).sum(1).clamp(eps, 1 - eps)
        R = R + w[lab] * (y[:, lab] * ph.log() + (1 - y[:, lab]) * (1 - ph).log())
    R = R.mean()
    C = []
    for i in range(N):
        ci = torch.zeros(x.shape[0])
        for k in [k for k in range(P) if pp[k] == i]:
            lab, pk = pl[k], p[:, k]
            ci = ci + r[lab] * (y[:, lab] * pk.log() + (1 - y[:, lab]) * (1 - pk).log())
            others = [k2 for k2 in range(P) if pl[k2] == lab and k2 != k]
            if others:
                q = p[:, others].detach().mean(1).clamp(eps, 1 - eps)
                if divergence == "jsd":
                    m = (pk + q) / 2
                    D = 0.5 * (pk * (pk / m).log() + (1 - pk) * ((1 - pk) / (1 - m)).log()) + 0.5 * (
                        q * (q / m).log() + (1 - q) * ((1 - q) / (1 - m)).log()
                    )
                else:
                    D = pk * (pk / q).log() + (1 - pk) * ((1 - pk) / (1 - q)).log()
                ci = ci + beta * D
        C.append(ci.mean())
    return R, C


def hot_phi(method, model, x, y, beta):
    t = model.potential_terms(x, model.target_layout(y))
    return t["R"] + method.alpha * (t["C_loglik"] + beta * t["C_div"]), t


def grads(out, params):
    return torch.autograd.grad(out, params, allow_unused=True, retain_graph=True)


# ---------------------------------------------------------------------------- partition


@pytest.mark.parametrize("L", [14, 50, 101, 983])
@pytest.mark.parametrize("N", [2, 3, 4, 5])
def test_partition_covers_overlaps_tail_twice_balanced(L, N):
    Y = power_law_Y(400, L, seed=L + N)
    tail = tail_labels(Y, 0.2)
    part = make_partition(Y, N, 0.2, tail, seed=1)
    cov = part.coverage
    assert part.n_players == N
    assert (cov >= 1).all(), "every label covered"
    assert set(part.overlap.tolist()) <= set(tail.tolist()), "overlap only on tail labels"
    # q = rho = 0.2: round(0.2 L) >= floor(0.2 L) = |tail| -> every tail label exactly twice
    assert (cov[tail] == 2).all() and (np.delete(cov, tail) == 1).all()
    sizes = np.array([len(p) for p in part.players])
    # round-robin gives spread <= 1; the extra player excludes the owner, so the
    # greedy least-loaded choice can reach 2 (N >= 3); for N = 2 it stays <= 1.
    assert sizes.max() - sizes.min() <= (1 if N == 2 else 2)
    for p in part.players:
        assert len(np.unique(p)) == len(p), "a player holds a label at most once"
    # round-robin over the ascending-frequency order, dealt to the players in the order of a
    # permutation (partition_order 'shuffled', the default) or 0..N-1 ('fixed')
    order = ascending_order(Y)
    deal = part.owner[order[:N]]
    assert sorted(deal.tolist()) == list(range(N))
    for pos, lab in enumerate(order):
        assert part.owner[lab] == deal[pos % N] and lab in part.players[deal[pos % N]]
    fixed = make_partition(Y, N, 0.2, tail, seed=1, order="fixed")
    for pos, lab in enumerate(order):
        assert lab in fixed.players[pos % N]


def test_partition_balance_sweep():
    worst = 0
    for L in range(5, 120, 7):
        for N in range(3, 8):
            if N > L:
                continue
            Y = power_law_Y(200, L, seed=L * N)
            for rho in (0.05, 0.2, 0.4):
                part = make_partition(Y, N, rho, tail_labels(Y), seed=L)
                sizes = [len(p) for p in part.players]
                worst = max(worst, max(sizes) - min(sizes))
    assert worst <= 2


def test_partition_rho_and_tail_interaction_and_ablations():
    L = 100
    Y = power_law_Y(500, L)
    tail = tail_labels(Y, 0.2)  # 20 labels
    order = ascending_order(Y)
    # rho < q: only the round(rho L) rarest tail labels get a second player
    part = make_partition(Y, 3, 0.1, tail, seed=0)
    assert part.overlap.size == 10
    assert set(part.overlap.tolist()) == set(order[:10].tolist())
    assert part.coverage.sum() == L + 10
    # rho > q: capped at |tail|
    part = make_partition(Y, 3, 0.5, tail, seed=0)
    assert np.array_equal(part.overlap, tail)
    # rho = 0: a partition (no overlap); N = 1: one player with every label
    part = make_partition(Y, 3, 0.0, tail, seed=0)
    assert part.overlap.size == 0 and (part.coverage == 1).all()
    part = make_partition(Y, 1, 0.2, tail, seed=0)
    assert part.n_players == 1 and np.array_equal(part.players[0], np.arange(L))
    # seeded: same seed -> same partition
    a, b = make_partition(Y, 4, 0.2, tail, seed=3), make_partition(Y, 4, 0.2, tail, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a.players, b.players))
    with pytest.raises(ValueError):
        make_partition(Y[:, :2], 3, 0.2, tail_labels(Y[:, :2]), seed=0)


# ------------------------------------------------------------------------------- fusion


@pytest.mark.parametrize("layout", ["partition", "triple"])
def test_fusion_weights_sum_to_one_over_active_players(layout):
    data = synthetic(L=15)
    _, model = make_model(data, n_players=4) if layout == "partition" else make_triple_model(data)
    assert model.ov_labels.numel() == (3 if layout == "partition" else 2)  # floor(0.2 * 15) tail labels
    w = model.all_fusion_weights()
    dense = torch.zeros(model.n_players, model.n_labels).index_put_(
        (model.pair_player, model.pair_label), w, accumulate=True
    )
    assert torch.allclose(dense.sum(0), torch.ones(model.n_labels), atol=1e-6)
    covers = torch.zeros_like(dense, dtype=torch.bool)
    covers[model.pair_player, model.pair_label] = True
    assert (dense[~covers] == 0).all() and (dense[covers] > 0).all()
    assert not torch.allclose(w[model.n_single :], torch.full_like(w[model.n_single :], 0.5))
    # forward = clipped fused probability from the dense weights
    x, _ = batch(data)
    with torch.no_grad():
        p = torch.sigmoid(model.pair_logits(x)[1])
        ref = torch.zeros(x.shape[0], model.n_labels).index_add_(1, model.pair_label, p * w)
        assert torch.allclose(model(x), ref.clamp(1e-6, 1 - 1e-6), atol=1e-6)


# ---------------------------------------------------------------------------- divergences


def test_jsd_properties_and_kl_formula():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(1000, generator=g).clamp(1e-4, 1 - 1e-4)
    b = torch.rand(1000, generator=g).clamp(1e-4, 1 - 1e-4)
    logit = lambda t: torch.log(t) - torch.log1p(-t)  # noqa: E731
    jab, jba = bernoulli_jsd(logit(a), b), bernoulli_jsd(logit(b), a)
    assert torch.allclose(bernoulli_jsd(logit(a), a), torch.zeros_like(a), atol=1e-6)
    assert torch.allclose(jab, jba, atol=1e-6)
    assert (jab >= -1e-6).all() and (jab <= math.log(2) + 1e-6).all()
    # extremes approach log 2
    assert abs(float(bernoulli_jsd(torch.tensor(30.0), torch.tensor(1e-6))) - math.log(2)) < 1e-4
    an, bn = a.double().numpy(), b.double().numpy()
    m = (an + bn) / 2
    kl = lambda p, q: p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))  # noqa: E731
    assert np.allclose(jab.double().numpy(), 0.5 * kl(an, m) + 0.5 * kl(bn, m), atol=1e-5)
    assert np.allclose(bernoulli_kl(logit(a), b).double().numpy(), kl(an, bn), rtol=1e-4, atol=1e-5)
    # the training path's fused value+gradient matches autograd on the element-wise forms
    from cdgtmll.methods.cdgtmll.terms import _OverlapCuriosity

    A, Bq = a.view(50, 20), b.view(50, 20)
    y = (torch.rand(50, 20, generator=g) < 0.3).float()
    coef = torch.rand(20, generator=g)
    for kind, fn in (("jsd", bernoulli_jsd), ("kl", bernoulli_kl)):
        z1 = (3 * logit(A)).requires_grad_(True)
        z2 = (3 * logit(A)).requires_grad_(True)
        ll1, d1 = _OverlapCuriosity.apply(z1, y, Bq, logit(Bq), kind)
        ll2 = (y * F.logsigmoid(z2) + (1 - y) * F.logsigmoid(-z2)).sum(0)
        d2 = fn(z2, Bq).sum()
        (ll1 @ coef + 3.0 * d1).backward()
        (ll2 @ coef + 3.0 * d2).backward()
        assert torch.allclose(ll1, ll2, rtol=1e-5, atol=1e-5) and torch.allclose(d1, d2, rtol=1e-5)
        assert torch.allclose(z1.grad, z2.grad, rtol=1e-4, atol=1e-6)
    # saturated logits stay finite (log-sigmoid forms)
    z = torch.tensor([-60.0, 60.0], requires_grad=True)
    out = bernoulli_jsd(z, torch.tensor([0.5, 0.5])).sum() + bernoulli_kl(z, torch.tensor([0.3, 0.3])).sum()
    out.backward()
    assert torch.isfinite(out) and torch.isfinite(z.grad).all()


# -------------------------------------------------------------- objective and gradients


@pytest.mark.parametrize("divergence", ["jsd", "kl"])
@pytest.mark.parametrize("payoff", ["rarity", "uniform"])
@pytest.mark.parametrize("layout", ["partition", "triple"])
def test_hot_path_matches_reference_value_and_gradients(divergence, payoff, layout):
    data = synthetic(L=15)
    maker = make_model if layout == "partition" else make_triple_model
    hp = {"n_players": 4} if layout == "partition" else {}
    m, model = maker(data, divergence=divergence, payoff_weights=payoff, **hp)
    x, y = batch(data)
    beta = 0.3
    phi, t = hot_phi(m, model, x, y, beta)
    R, C = reference_terms(model, x, y, prevalence(data.Y_train), divergence, payoff=payoff, beta=beta)
    phi_ref = R + m.alpha * sum(C)
    assert torch.allclose(t["R"], R, rtol=1e-5, atol=1e-5)
    assert torch.allclose(phi, phi_ref, rtol=1e-5, atol=1e-5)
    assert float(t["C_div"].detach()) > 0
    params = [p for p in model.parameters()]
    for g1, g2 in zip(grads(phi, params), grads(phi_ref, params)):
        assert torch.allclose(g1, g2, rtol=1e-4, atol=1e-6)
    # per-player curiosity sums to the hot path's sum_i C_i
    Ci = model.per_player_curiosity(x, y, beta)
    assert torch.allclose(Ci, torch.stack(C), rtol=1e-5, atol=1e-5)
    assert torch.allclose(Ci.sum(), t["C_loglik"] + beta * t["C_div"], rtol=1e-5, atol=1e-5)


def test_clipped_payoff_on_saturated_logits():
    """R uses p_hat clipped to [eps, 1-eps]: on saturated single-player logits the hot path's
    clamp correction must reproduce the clipped value and its zero gradient."""
    data = synthetic(L=15)
    m, model = make_model(data, n_players=3)
    with torch.no_grad():
        model.heads.bias[:3] += 15.0  # sigmoid(15) > 1 - eps: clipped
        model.heads.bias[3:6] -= 15.0
    model.double()  # float32 cannot resolve 1 - sigmoid(15) well enough for the naive reference
    x, y = (t.double() for t in batch(data))
    t = model.potential_terms(x, model.target_layout(y))
    R, _ = reference_terms(model, x, y, prevalence(data.Y_train))
    assert torch.allclose(t["R"], R, rtol=1e-7, atol=1e-7)
    params = [model.heads.weight, model.heads.bias, model.fusion_logits, *model.backbone.parameters()]
    g_hot, g_ref = grads(t["R"], params), grads(R, params)
    for a, b in zip(g_hot, g_ref):
        assert torch.allclose(a, b, rtol=1e-7, atol=1e-9)
    assert g_hot[1][:6].abs().max() < 1e-12  # clipped entries carry no payoff gradient


def _player_rows(model, i):
    return model.pair_player == i


@pytest.mark.parametrize("ema_decay", [0.99, 0.0])
def test_peers_get_no_gradient_through_curiosity(ema_decay):
    data = synthetic(L=15)
    m, model = make_model(data, n_players=3, ema_decay=ema_decay)
    x, y = batch(data)
    Ci = model.per_player_curiosity(x, y, beta=0.3)
    W, b = model.heads.weight, model.heads.bias
    for i in range(model.n_players):
        gW, gb, gf = torch.autograd.grad(Ci[i], [W, b, model.fusion_logits], retain_graph=True, allow_unused=True)
        mine = _player_rows(model, i)
        assert (gW[~mine] == 0).all() and (gb[~mine] == 0).all(), "peer blocks must get exactly zero"
        assert gW[mine].abs().sum() > 0
        assert gf is None or (gf == 0).all(), "fusion weights are not in C_i"


@pytest.mark.parametrize("ema_decay", [0.99, 0.0])
def test_block_gradient_identity(ema_decay):
    """grad_{theta_i} Phi == grad_{theta_i} J_i with J_i = R + alpha C_i built explicitly."""
    data = synthetic(L=20, n=128)
    m, model = make_model(data, n_players=3, ema_decay=ema_decay)
    x, y = batch(data)
    beta = 0.25
    phi, _ = hot_phi(m, model, x, y, beta)
    R, C = reference_terms(model, x, y, prevalence(data.Y_train), beta=beta)
    W, b = model.heads.weight, model.heads.bias
    gW_phi, gb_phi = grads(phi, [W, b])
    for i in range(model.n_players):
        J_i = R + m.alpha * C[i]
        gW_J, gb_J = grads(J_i, [W, b])
        mine = _player_rows(model, i)
        assert torch.allclose(gW_phi[mine], gW_J[mine], rtol=1e-4, atol=1e-7)
        assert torch.allclose(gb_phi[mine], gb_J[mine], rtol=1e-4, atol=1e-7)


def test_block_clipping_equals_separate_block_steps():
    """One backward of -Phi + per-block clipping gives, block by block, exactly the clipped
    gradient of Alg. 1's separate updates (heads: -J_i on theta_i; then backbone/fusion: -Phi)."""
    data = synthetic(L=20, n=128)
    m, model = make_model(data, n_players=3, clip_scope="block")
    x, y = batch(data)
    beta, max_norm = 0.3, 0.05
    # Alg. 1, literally: R_B once, then per-player objectives on their own blocks
    R, C = reference_terms(model, x, y, prevalence(data.Y_train), beta=beta)
    W, b = model.heads.weight, model.heads.bias
    expect_W, expect_b = torch.zeros_like(W), torch.zeros_like(b)
    for i in range(model.n_players):
        gW, gb = grads(-(R + m.alpha * C[i]), [W, b])
        mine = _player_rows(model, i)
        norm = torch.sqrt(gW[mine].square().sum() + gb[mine].square().sum())
        coef = min(1.0, max_norm / (float(norm) + 1e-6))
        assert coef < 1.0  # ... and so is every player block
        expect_W[mine], expect_b[mine] = gW[mine] * coef, gb[mine] * coef
    bb = list(model.backbone.parameters()) + [model.fusion_logits]
    g_bb = grads(-(R + m.alpha * sum(C)), bb)
    norm = torch.sqrt(sum(g.square().sum() for g in g_bb))
    coef = min(1.0, max_norm / (float(norm) + 1e-6))
    assert float(norm) > max_norm  # the backbone block is clipped ...
    # ours (progress 1.0 -> beta = beta_max = 0.3)
    loss, _ = m.training_step(model, x, model.target_layout(y), progress=1.0)
    model.zero_grad()
    loss.backward()
    m.clip_gradients(model, max_norm)
    assert torch.allclose(W.grad, expect_W, rtol=1e-4, atol=1e-8)
    assert torch.allclose(b.grad, expect_b, rtol=1e-4, atol=1e-8)
    for p, g in zip(bb, g_bb):
        assert torch.allclose(p.grad, g * coef, rtol=1e-4, atol=1e-8)


# ------------------------------------------------------------------------------ ablations


def test_beta_warmup():
    m = CDGTMLL()
    assert m.beta(0.0) == 0.0
    assert m.beta(0.05) == pytest.approx(0.15)
    assert m.beta(0.1) == pytest.approx(0.3) and m.beta(0.7) == pytest.approx(0.3)
    assert CDGTMLL(beta_max=0.0).beta(0.5) == 0.0


def test_ablation_no_curiosity_alpha0():
    data = synthetic(L=15)
    m, model = make_model(data, alpha=0.0)
    x, y = batch(data)
    loss, t = m.training_step(model, x, model.target_layout(y), progress=1.0)
    assert float(t["C_loglik"].detach()) < 0 and float(t["C_div"].detach()) > 0  # still computed and logged
    params = list(model.parameters())
    g_loss = grads(loss, params)
    g_R = grads(-t["R"], params)
    for a, b in zip(g_loss, g_R):
        assert torch.equal(a, b) if a is not None else b is None


def _single_head_grads(data, alpha, **hp):
    """Gradient of -Phi on the singly-covered head rows [L1, d'+1] (weight | bias)."""
    m, model = make_model(data, alpha=alpha, **hp)
    x, y = batch(data)
    loss, _ = m.training_step(model, x, model.target_layout(y), progress=0.0)
    gw, gb = torch.autograd.grad(loss, [model.heads.weight, model.heads.bias])
    L1 = model.n_single
    return torch.cat([gw[:L1], gb[:L1, None]], 1).double(), model.c_pair[:L1].double()


def test_default_payoff_uniform_curiosity_reweights_labels():
    """Under a rarity-weighted payoff R, alpha would only rescale the singly-covered head
    gradients by one constant, so No-Curiosity and the alpha sweep would measure nothing. The
    default is the uniform payoff as a mean over labels (Eq. 5, payoff_scale 'mean'): row l's
    gradient is scaled by exactly 1 + alpha L r_l (r_l = 1/(1 + freq)), i.e. alpha re-weights
    labels; under a sum over labels ('sum') the factor is 1 + alpha r_l, alpha reading as
    alpha / L."""
    assert CDGTMLL().payoff_weights == "uniform" and CDGTMLL().payoff_scale == "mean"
    X, Y = yeast_arrays(600)
    data = FitData(X[:512], Y[:512], X[512:], Y[512:], [f"Class{k + 1}" for k in range(14)])
    g0, r = _single_head_grads(data, 0.0)
    g1, _ = _single_head_grads(data, 0.4)
    ratio = g1.norm(dim=1) / g0.norm(dim=1)
    assert torch.allclose(ratio, 1 + 0.4 * 14 * r, rtol=1e-4)  # no clipped entries at init
    s0, _ = _single_head_grads(data, 0.0, payoff_scale="sum")
    s1, _ = _single_head_grads(data, 0.4, payoff_scale="sum")
    assert torch.allclose(s1.norm(dim=1) / s0.norm(dim=1), 1 + 0.4 * r, rtol=1e-4)
    assert float(ratio.max() - ratio.min()) > 0.05  # labels re-weighted, not one common scale
    cos = F.cosine_similarity(g0.flatten(), g1.flatten(), dim=0)
    assert float(cos) < 1 - 1e-5
    # the rarity payoff stays available and reproduces the reviewer's finding (cosine 1)
    h0, _ = _single_head_grads(data, 0.0, payoff_weights="rarity")
    h1, _ = _single_head_grads(data, 0.4, payoff_weights="rarity")
    assert float(F.cosine_similarity(h0.flatten(), h1.flatten(), dim=0)) > 1 - 1e-6


def test_predictions_unclipped_no_ties():
    """Predictions are the raw fused sigmoids (no clip to [eps, 1-eps]),
    so saturated logits keep their order; the training objective still clips."""
    data = synthetic(L=15)
    m, model = make_model(data, n_players=3)
    with torch.no_grad():
        model.heads.weight.mul_(5.0)
        model.heads.bias[:2] -= 25.0  # logits far below logit(1e-6) = -13.8
    x, _ = batch(data)
    with torch.no_grad():
        z = model.pair_logits(x)[1]
        S = model(x)
    L1 = model.n_single
    single = model.single_labels
    assert float(z[:, :L1].min()) < model.logit_lo  # the old clip would have bitten
    assert torch.equal(S[:, single], torch.sigmoid(z[:, :L1]))  # exactly the baselines' sigmoid
    assert not bool(((S == model.eps) | (S == 1 - model.eps)).any())
    for k in range(L1):  # no ties beyond those of float32 sigmoid itself
        assert torch.unique(S[:, single[k]]).numel() == torch.unique(torch.sigmoid(z[:, k])).numel()
    for k in range(2):  # the saturated labels: clipping would have tied their scores
        clipped = torch.sigmoid(z[:, k]).clamp(1e-6, 1 - 1e-6)
        assert torch.unique(S[:, single[k]]).numel() > torch.unique(clipped).numel() + 10
    ov = model.ov_labels
    for k, lab in enumerate(ov.tolist()):  # overlap labels: the omega-weighted mean of sigmoids
        w = model.fusion_weights()[model.ov_group == k]
        ref = (torch.sigmoid(z[:, L1:][:, model.ov_group == k]) * w).sum(1)
        assert torch.allclose(S[:, lab], ref, rtol=1e-6, atol=0)


def test_ablation_single_predictor_N1():
    data = synthetic(L=15)
    m, model = make_model(data, n_players=1)
    assert model.n_players == 1 and np.array_equal(m.partition.players[0], np.arange(15))
    assert model.fusion_logits.numel() == 0 and torch.equal(model.all_fusion_weights(), torch.ones(15))
    x, y = batch(data)
    loss, t = m.training_step(model, x, model.target_layout(y), progress=1.0)
    assert float(t["C_div"].detach()) == 0.0
    with torch.no_grad():  # fused = the single player's own probability
        p = torch.sigmoid(model.pair_logits(x)[1])[:, torch.argsort(model.pair_label)]
        assert torch.allclose(model(x), p.clamp(1e-6, 1 - 1e-6))


def test_ablation_no_overlap_rho0():
    data = synthetic(L=15)
    m, model = make_model(data, rho=0.0)
    assert m.partition.overlap.size == 0 and model.n_pairs == 15 and model.fusion_logits.numel() == 0
    x, y = batch(data)
    _, t = m.training_step(model, x, model.target_layout(y), progress=1.0)
    assert float(t["C_div"].detach()) == 0.0 and float(t["C_loglik"].detach()) < 0


def test_ablation_no_disagreement_beta0():
    data = synthetic(L=15)
    m, model = make_model(data, beta_max=0.0)
    x, y = batch(data)
    loss, t = m.training_step(model, x, model.target_layout(y), progress=1.0)
    assert float(t["beta"]) == 0.0 and float(t["C_div"].detach()) > 0 and float(t["C_loglik"].detach()) < 0
    params = list(model.parameters())
    for a, b in zip(grads(loss, params), grads(-(t["R"] + m.alpha * t["C_loglik"]), params)):
        assert torch.allclose(a, b, atol=1e-7)


def test_ema_peer_average():
    data = synthetic(L=15)
    _, model = make_model(data)
    assert torch.equal(model.ema_weight, model.heads.weight[model.n_single :])  # starts as a copy
    with torch.no_grad():
        model.heads.weight.add_(1.0)
        model.update_ema()  # t = 0 -> decay 0: copy
        assert torch.equal(model.ema_weight, model.heads.weight[model.n_single :])
        old = model.ema_weight.clone()
        model.heads.weight.add_(1.0)
        model.update_ema()  # t = 1 -> decay 0.5
        assert torch.allclose(model.ema_weight, 0.5 * old + 0.5 * model.heads.weight[model.n_single :])
    _, m0 = make_model(data, ema_decay=0.0)
    assert m0.ema_weight is None


# ------------------------------------------------------------------------- Yeast, short


def test_yeast_short_run(tmp_path):
    X, Y = yeast_arrays()
    data = FitData(X[:1200], Y[:1200], X[1200:], Y[1200:], [f"Class{k + 1}" for k in range(14)])
    m = build("CD-GTMLL", {"epochs": 5})
    m.fit(data, RunContext(seed=0, workdir=tmp_path))
    log = m.train_log
    assert len(log) == 5
    assert log[-1]["Phi"] > log[0]["Phi"], "training objective Phi must improve"
    for row in log:
        assert row["Phi"] == pytest.approx(-row["loss"])
    S = m.predict_proba(X[1200:])
    assert S.shape == (300, 14) and S.min() >= 0.0 and S.max() <= 1.0
    from sklearn.metrics import average_precision_score

    Yv = Y[1200:]
    keep = Yv.any(0)
    mAP = average_precision_score(Yv[:, keep], S[:, keep], average="macro")
    const = Yv[:, keep].mean(0).mean()  # AP of a constant score = prevalence
    assert mAP == pytest.approx(log[-1]["val_mAP"])
    assert mAP > const + 0.1
    acc = np.load(tmp_path / PLAYER_ACC_FILE)
    assert acc["accuracy"].shape == (5, m.model.n_pairs) and ((acc["accuracy"] >= 0) & (acc["accuracy"] <= 1)).all()
    assert np.array_equal(acc["label"], m.model.pair_label.numpy())
    out = json.loads(json.dumps(m.extra_outputs()))
    assert sorted(out["partition"]["overlap_labels"]) == sorted(tail_labels(Y[:1200]).tolist())
    header = (tmp_path / "train_log.csv").read_text().splitlines()[0].split(",")
    for col in ("epoch", "loss", "R", "C_loglik", "C_div", "Phi", "beta", "lr_backbone", "val_mAP", "val_microF1"):
        assert col in header


def test_cpu_determinism(tmp_path):
    data = synthetic(n=300, L=15)

    def run(seed, wd):
        m = CDGTMLL(hidden_dim=32, epochs=3, batch_size=64)
        return m.fit(data, RunContext(seed=seed, workdir=tmp_path / wd)).predict_proba(data.X_val)

    a, b, c = run(0, "a"), run(0, "b"), run(1, "c")
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_player_count_reaches_the_model_only_through_block_clipping(tmp_path):
    """docs/methods.md, "What the number of players N changes": under E.1, Phi is a sum of
    per-(player, label) terms and every tail label gets one extra player whatever N >= 2 is, so
    with one global clip norm N = 2, 3, 5 train byte-identical models; per-player (block)
    clipping, engaged here by a small norm, is what makes N matter."""
    X, Y = yeast_arrays(600)
    data = FitData(X[:400], Y[:400], X[400:500], Y[400:500], [f"Class{k + 1}" for k in range(Y.shape[1])])

    def fit(n_players: int, clip_scope: str) -> np.ndarray:
        m = build("CD-GTMLL", {"epochs": 3, "batch_size": 128, "hidden_dim": 32, "grad_clip": 0.05,
                               "n_players": n_players, "clip_scope": clip_scope})
        m.fit(data, RunContext(seed=0, workdir=tmp_path / f"{n_players}-{clip_scope}"))
        return m.predict_proba(X[500:])

    glob = {n: fit(n, "global") for n in (2, 3, 5)}
    np.testing.assert_array_equal(glob[2], glob[3])
    np.testing.assert_array_equal(glob[2], glob[5])
    assert not np.array_equal(fit(2, "block"), fit(5, "block"))


# ------------------------------------------------------------------ readings of the paper


def test_vector_divergence_form_equals_its_definition():
    """divergence_form 'vector' (E.1: "D as Jensen-Shannon divergence over the overlap set O_i"):
    per player and row, JSD between its overlap probabilities and its peers', each normalised
    over O_i; checked against a loop over players."""
    data = synthetic(L=20, n=64)
    m, model = make_model(data, n_players=3, divergence_form="vector")
    x, y = batch(data)
    t = model.potential_terms(x, model.target_layout(y))
    h, z = model.pair_logits(x)
    L1 = model.n_single
    q, _ = model.peer_mean(h.detach(), z[:, L1:].detach())
    p = torch.sigmoid(z[:, L1:]).double()
    q = q.double()
    players = model.pair_player[L1:]
    total = 0.0
    for i in range(model.n_players):
        cols = players == i
        if not cols.any():
            continue
        P = p[:, cols] / p[:, cols].sum(1, keepdim=True)
        Q = q[:, cols] / q[:, cols].sum(1, keepdim=True)
        M = (P + Q) / 2
        total += float(0.5 * (P * (P / M).log()).sum() + 0.5 * (Q * (Q / M).log()).sum())
    assert float(t["C_div"]) == pytest.approx(total / x.shape[0], rel=1e-4)
    per_label = make_model(data, n_players=3)[1].potential_terms(x, model.target_layout(y))["C_div"]
    assert abs(float(per_label) - float(t["C_div"])) > 1e-4  # the two readings differ


def test_peer_smoothing_of_predictions_is_a_per_label_ema():
    """peer_smoothing 'predictions' (E.1: the peer average "optionally smoothed by an EMA with
    decay 0.99"): the peer is one value per overlap pair, the EMA of its batch means."""
    data = synthetic(L=20, n=64)
    m, model = make_model(data, n_players=3, peer_smoothing="predictions")
    assert model.ema_weight is None and model.ema_peer is not None
    x, y = batch(data)
    h, z = model.pair_logits(x)
    q, zq = model.peer_mean(h.detach(), z[:, model.n_single:].detach())
    qs, _ = model.smooth_peers(q, zq, update=True)  # first update: decay ramp 0 -> the batch mean
    assert torch.allclose(qs[0], q.mean(0), atol=1e-6) and torch.equal(qs[0], qs[-1])
    qs2, _ = model.smooth_peers(q * 0.5, zq, update=True)  # second: decay min(0.99, 1 - 1/2) = 0.5
    assert torch.allclose(qs2[0], 0.5 * q.mean(0) + 0.5 * (q * 0.5).mean(0), atol=1e-6)


def test_cumulative_tail_rule_reads_section_3_1():
    """tail_rule 'cumulative': the head is the shortest prefix by descending frequency holding
    at least head_mass of all positives; every other label is tail."""
    from cdgtmll.methods.cdgtmll.partition import cumulative_tail

    Y = np.zeros((100, 5), dtype=np.uint8)
    for lab, n in enumerate([50, 30, 10, 6, 4]):  # 100 positives
        Y[:n, lab] = 1
    assert cumulative_tail(Y, 0.1).tolist() == [1, 2, 3, 4]  # label 0 alone holds 50% >= 10%
    assert cumulative_tail(Y, 0.6).tolist() == [2, 3, 4]  # 50% + 30% >= 60%
    data = synthetic(L=20)
    m, _ = make_model(data, n_players=3, tail_rule="cumulative")
    assert m.partition.tail.tolist() == cumulative_tail(data.Y_train, 0.1).tolist()


def test_defaults_are_the_papers_objective():
    m = CDGTMLL()
    assert (m.payoff_scale, m.clip_scope, m.divergence_form, m.peer_smoothing, m.tail_rule, m.player_backbones) == (
        "mean", "global", "per_label", "parameters", "bottom_fraction", "shared")


@pytest.mark.parametrize("ema_decay", [0.99, 0.0])
def test_separate_backbones_read_each_players_own_features(ema_decay):
    """player_backbones 'separate' (Conclusion: "an extra forward pass per player"): every pair
    row's logit is its player's own backbone features times the row's head, the EMA peers use
    the peer's own features, and the objective equals the reference of Eqs. 5/6 evaluated
    with per-player features (a loop over players)."""
    data = synthetic(L=20, n=64)
    m, model = make_model(data, n_players=3, player_backbones="separate", ema_decay=ema_decay)
    assert len(model.backbone) == 3
    x, y = batch(data)
    h, z = model.pair_logits(x)
    assert h.shape == (3, x.shape[0], 16)
    for r, i in enumerate(model.pair_player.tolist()):
        want = model.backbone[i](x) @ model.heads.weight[r] + model.heads.bias[r]
        torch.testing.assert_close(z[:, r], want, rtol=1e-5, atol=1e-6)
    # the players' backbones are distinct modules with distinct initialisations
    w0 = [b.mlp[0].weight for b in model.backbone]
    assert not torch.equal(w0[0], w0[1]) and not torch.equal(w0[1], w0[2])
    if ema_decay:
        with torch.no_grad():  # move the EMA heads away from the live ones, then check the peers
            model.ema_weight.add_(0.1)
        q, _ = model.peer_mean(h, z[:, model.n_single:])
        part = model.ov_partner.tolist()
        for k in range(model.n_pairs - model.n_single):
            j = model.pair_player[model.n_single + part[k]].item()
            zq = model.backbone[j](x) @ model.ema_weight[part[k]] + model.ema_bias[part[k]]
            lim = -model.logit_lo
            torch.testing.assert_close(q[:, k], torch.sigmoid(zq.clamp(-lim, lim)), rtol=1e-5, atol=1e-6)


def test_separate_backbones_get_only_their_players_gradient():
    """With separate backbones, player i's backbone receives gradient from R through the fusion
    and from its own C_i; a player's C_i sends no gradient into another player's backbone."""
    data = synthetic(L=20, n=64)
    m, model = make_model(data, n_players=3, player_backbones="separate", ema_decay=0.0)
    x, y = batch(data)
    C = model.per_player_curiosity(x, y, beta=0.3)
    for i in range(3):
        g = grads(C[i], [p for j in range(3) for p in model.backbone[j].parameters()])
        per = [g[k * 4:(k + 1) * 4] for k in range(3)]  # 2 Linear layers: 4 tensors per backbone
        for j in range(3):
            nonzero = any(t is not None and bool(t.abs().sum() > 0) for t in per[j])
            assert nonzero == (i == j), (i, j)


def test_separate_backbones_train_on_yeast_and_are_deterministic(tmp_path):
    X, Y = yeast_arrays(600)
    data = FitData(X[:400], Y[:400], X[400:500], Y[400:500], [f"Class{k + 1}" for k in range(Y.shape[1])])

    def fit(name: str, **hp) -> tuple[np.ndarray, CDGTMLL]:
        m = build("CD-GTMLL", {"epochs": 3, "batch_size": 128, "hidden_dim": 32, **hp})
        m.fit(data, RunContext(seed=0, workdir=tmp_path / name))
        return m.predict_proba(X[500:]), m

    a, ma = fit("a", player_backbones="separate")
    b, _ = fit("b", player_backbones="separate")
    shared, ms = fit("shared")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, shared)
    n_bb = sum(p.numel() for p in ma.model.backbone.parameters())
    assert n_bb == 3 * sum(p.numel() for p in ms.model.backbone.parameters())
    assert ma.hparams()["player_backbones"] == "separate"
    assert "one backbone per player" in CDGTMLL.table_note(ma.hparams())


# ------------------------------------------------------------ the objective's fast kernels


class _DirectOverlapCuriosity(torch.autograd.Function):
    """The overlap-pair curiosity in its direct form (``F.softplus`` and ``torch.log1p``): the
    reference the fast form must equal to float32 tolerance."""

    @staticmethod
    def forward(ctx, z, y, q, zq, kind):
        p = torch.sigmoid(z)
        sp_sum = F.softplus(z).sum(0)
        ll = (y * z).sum(0) - sp_sum
        neg_h_p = torch.sum(p * z) - sp_sum.sum()
        l1q = torch.log1p(-q)
        if kind == "jsd":
            m = torch.lerp(p, q, 0.5)
            l1m = torch.log1p(-m)
            logit_m = torch.log(m).sub_(l1m)
            neg_h_q = torch.sum(q * zq) + l1q.sum()
            div = 0.5 * (neg_h_p + neg_h_q) - (torch.sum(m * logit_m) + l1m.sum())
            dp = (z - logit_m).mul_(0.5)
        else:
            div = neg_h_p - torch.sum(p * zq) - l1q.sum()
            dp = z - zq
        ctx.save_for_backward(y - p, dp.mul_(p).mul_(1 - p))
        return ll, div

    @staticmethod
    def backward(ctx, g_ll, g_div):
        r, d_div = ctx.saved_tensors
        return torch.addcmul(r * g_ll, d_div, g_div), None, None, None, None


def test_neg_softplus_value_is_log_sigmoid_to_float32_epsilon():
    """The value-only form of -softplus(z): log(sigmoid(-z)), within 1.2e-7 absolute (float32's
    epsilon: sigmoid(-z) = 1/(1 + e^z) rounds 1 + e^z) plus two ulps of the value, against
    float64, over the logits' range, as torch's own kernel; exact past the underflow guard
    (z > 80) and at |z| = 1e4."""
    from cdgtmll.methods.cdgtmll.terms import neg_softplus_value

    z = torch.cat([torch.linspace(-100, 100, 200001), torch.tensor([0.0, -0.0, 87.5, 88.7, 1e4, -1e4])])
    got = neg_softplus_value(z, torch.sigmoid(-z)).double()
    ref = -F.softplus(z.double())
    assert torch.isfinite(got).all()
    err = (got - ref).abs()
    assert (err <= 1.2e-7 + 2.4e-7 * ref.abs()).all(), err.max()
    assert err.max() <= 4 * (-F.softplus(z).double() - ref).abs().max()  # torch's kernel's own error, within 4x
    past = z > 80
    assert torch.equal(got[past].float(), -F.softplus(z[past]))
    assert got[-2] == -1e4 and got[-1] == 0.0


def test_loglik_columns_value_only_form_keeps_the_gradient_bit_for_bit():
    """On Delicious-sized blocks (256 x 787, above FAST_MIN_ELEMENTS) the per-label
    log-likelihood sums read log(sigmoid(-z)) instead of the 12-pass softplus; the sums agree to
    float32 rounding of a 256-term sum, the clipped sums too, and the gradient (closed form, y - s)
    is the same tensor bit for bit, so training is unchanged."""
    from cdgtmll.methods.cdgtmll import terms

    g = torch.Generator().manual_seed(7)
    hi = math.log(1 - 1e-6) - math.log(1e-6)
    z0 = torch.randn(256, 787, generator=g) * 6 - 4
    z0[3, 5], z0[10, 700] = 95.0, -40.0  # past the underflow guard; clipped entries
    y = (torch.rand(256, 787, generator=g) < 0.05).float()
    assert z0.numel() >= terms.FAST_MIN_ELEMENTS
    outs = []
    for threshold in (terms.FAST_MIN_ELEMENTS, 10**9):  # the value-only form, then the direct one
        z = z0.clone().requires_grad_()
        old, terms.FAST_MIN_ELEMENTS = terms.FAST_MIN_ELEMENTS, threshold
        try:
            ll, llc = terms._LogLikColumns.apply(z, y, hi)
        finally:
            terms.FAST_MIN_ELEMENTS = old
        (grad,) = torch.autograd.grad(0.3 * ll.sum() + 0.7 * llc.sum(), z)
        outs.append((ll.detach().double(), llc.detach().double(), grad))
    (ll1, llc1, g1), (ll0, llc0, g0) = outs
    exact = ((y.double() * z0.double()) - F.softplus(z0.double())).sum(0)
    assert torch.allclose(ll1, exact, rtol=1e-6, atol=256 * 1.2e-7)
    assert torch.allclose(ll1, ll0, rtol=1e-6, atol=256 * 1.2e-7) and torch.allclose(llc1, llc0, rtol=1e-6, atol=256 * 1.2e-7)
    assert torch.equal(g1, g0)


@pytest.mark.parametrize("kind", ["jsd", "kl"])
def test_overlap_curiosity_equals_the_direct_log1p_form(kind):
    """The fast curiosity terms (no log1p/softplus kernels): the log-likelihood sums and the
    gradient equal the direct form's to float32 tolerance, on
    Delicious-sized overlap logits (256 x 394) over the range the clip allows; the divergence (a
    float32 sum of 100k terms with cancellation) is at least as close to its float64 definition
    as the direct form's (JSD: 5e-8 relative, the direct form 3.7e-6)."""
    from cdgtmll.methods.cdgtmll.terms import DIVERGENCE_FNS, _OverlapCuriosity

    g = torch.Generator().manual_seed(5)
    hi = math.log(1 - 1e-6) - math.log(1e-6)
    z = (torch.randn(256, 394, generator=g) * 4 - 3).requires_grad_()
    y = (torch.rand(256, 394, generator=g) < 0.05).float()
    zq = (torch.randn(256, 394, generator=g) * 4 - 3).clamp(-hi, hi)
    q = torch.sigmoid(zq)
    outs = []
    for fn in (_DirectOverlapCuriosity, _OverlapCuriosity):
        ll, div = fn.apply(z, y, q, zq, kind)
        (grad,) = torch.autograd.grad(0.3 * ll.sum() + 0.7 * div, z)
        outs.append((ll.detach().double(), div.detach().double(), grad.double()))
    (ll0, d0, g0), (ll1, d1, g1) = outs
    assert torch.allclose(ll1, ll0, rtol=1e-6, atol=0)
    exact = DIVERGENCE_FNS[kind](z.detach().double(), q.double()).sum()
    assert abs(d1 - exact) / exact <= max(abs(d0 - exact) / exact, 1e-6)
    # gradients up to 0.3 in size; where p ~ m, z - logit(m) cancels in both forms alike
    assert torch.allclose(g1, g0, rtol=0, atol=1e-6)


def test_short_run_equals_the_reference_predictions(tmp_path):
    """A 4-epoch CD-GTMLL run on Yeast (seed 3) against its predictions and log computed once by
    the reference trainer (tests/fixtures/yeast_reference_runs.json). Yeast's pair blocks are below
    terms.FAST_MIN_ELEMENTS, so the arithmetic is the direct form (measured: identical); the check
    allows float tolerance, which is what the fast forms on larger label sets guarantee. BCE's are
    bit-identical (tests/unit/nn/test_trainer.py)."""
    from tests.support.reference_runs import reference_data, reference_outputs

    ref, data = reference_outputs(), reference_data()
    for sel in ("last", "best_val"):  # the reference deals the players in fixed order
        m = build("CD-GTMLL", {"epochs": 4, "hidden_dim": 64, "batch_size": 64, "select_epoch": sel,
                               "partition_order": "fixed"})
        m.fit(data, RunContext(seed=3, workdir=tmp_path / sel))
        want = ref[f"CD-GTMLL/{sel}"]
        np.testing.assert_allclose(m.predict_proba(data.X_val), np.asarray(want["predictions"]), rtol=0, atol=1e-5)
        for got, old in zip(m.train_log, want["log"], strict=True):
            for k, v in old.items():
                assert math.isclose(float(got[k]), float(v), rel_tol=1e-5, abs_tol=1e-7), (sel, got["epoch"], k)
