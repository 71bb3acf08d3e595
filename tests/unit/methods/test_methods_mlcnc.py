"""MLC-NC: ETF geometry, the three losses, the warm-up schedule, the class-aware sampler
and short Yeast runs (determinism and exact resume)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from cdgtmll.methods.base import FitData, RunContext, available, build
from cdgtmll.methods.mlcnc import (
    ClassAwareSampler,
    MLCNCMethod,
    alignment_loss,
    contrastive_prototype_loss,
    simplex_etf,
    two_way_loss,
)
from cdgtmll.nn.trainer import TrainingInterrupted
from tests.support.mirror import yeast_fitdata

torch.set_num_threads(1)

SMALL = {"hidden_dim": 64, "batch_size": 64, "d_model": 32, "n_heads": 4, "n_tokens": 8}


@pytest.fixture(scope="module")
def yeast() -> FitData:
    return yeast_fitdata(300, 100)


def synthetic(n=120, d=12, L=6, seed=0) -> FitData:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    Y = (rng.random((n, L)) < np.linspace(0.1, 0.6, L)).astype(np.uint8)
    Y[np.arange(n), rng.integers(0, L, n)] = 1
    return FitData(X[:90], Y[:90], X[90:], Y[90:], [f"l{k}" for k in range(L)])


# ------------------------------------------------------------------------------ registry


def test_registered_and_hparams():
    assert "MLC-NC" in available()
    m = build("MLC-NC")
    assert isinstance(m, MLCNCMethod)
    hp = m.hparams()
    assert (hp["tp"], hp["tn"], hp["proj_dim"], hp["proto_temperature"], hp["warmup_epochs"]) == (4.0, 1.0, 20, 0.5, 5)
    assert (hp["weight_proto"], hp["weight_twoway"], hp["weight_align"]) == (0.1, 1.0, 0.5)
    assert hp["class_aware_sampling"] is True
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        build("MLC-NC", {"no_such_thing": 1})
    with pytest.raises(ValueError):
        build("MLC-NC", {"d_model": 30, "n_heads": 4})
    assert m.effective_d_model(14) == 128 and m.effective_d_model(130) == 132


# ------------------------------------------------------------------------------ ETF


@pytest.mark.parametrize("d,K", [(14, 14), (32, 14), (280, 14), (7, 3)])
def test_simplex_etf_geometry(d, K):
    M = simplex_etf(d, K, torch.Generator().manual_seed(1))
    assert M.shape == (d, K)
    G = M.T @ M
    assert torch.allclose(torch.diagonal(G), torch.ones(K, dtype=torch.float64), atol=1e-12)
    off = G[~torch.eye(K, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -1.0 / (K - 1)), atol=1e-12)
    assert torch.allclose(M.sum(dim=1), torch.zeros(d, dtype=torch.float64), atol=1e-12)  # centred simplex
    # seeded: same generator seed -> same frame; another seed -> another frame
    assert torch.equal(M, simplex_etf(d, K, torch.Generator().manual_seed(1)))
    assert not torch.allclose(M, simplex_etf(d, K, torch.Generator().manual_seed(2)))
    with pytest.raises(ValueError):
        simplex_etf(K - 1, K)
    with pytest.raises(ValueError):
        simplex_etf(4, 1)


def test_model_prototypes_are_fixed_etf():
    data = synthetic()
    m = build("MLC-NC", SMALL)
    m.prepare(data, RunContext(seed=5, workdir=Path(".")))
    model = m.build_model(np.asarray(data.X_train, np.float32), np.asarray(data.Y_train))
    P = model.prototypes.double()
    K = data.n_labels
    G = P @ P.T
    assert torch.allclose(torch.diagonal(G), torch.ones(K, dtype=torch.float64), atol=1e-6)
    off = G[~torch.eye(K, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -1.0 / (K - 1)), atol=1e-6)
    names = {n for n, _ in model.named_parameters()}
    assert "prototypes" not in names and "prototypes" in dict(model.named_buffers())
    assert "classifier" in names  # official: ETF-initialised, trained
    C = model.classifier.detach().double()
    assert torch.allclose(C.T @ C, torch.full((K, K), -1.0 / (K - 1), dtype=torch.float64)
                          + torch.eye(K, dtype=torch.float64) * (1 + 1.0 / (K - 1)), atol=1e-6)
    m2 = build("MLC-NC", {**SMALL, "etf_classifier_trainable": False})
    m2.prepare(data, RunContext(seed=5, workdir=Path(".")))
    model2 = m2.build_model(np.asarray(data.X_train, np.float32), np.asarray(data.Y_train))
    assert "classifier" not in {n for n, _ in model2.named_parameters()}
    assert torch.equal(model2.prototypes, model.prototypes)  # ETF drawn from the run seed


# ------------------------------------------------------------------------------ losses


def _features_with_cos(m: torch.Tensor, cos: float, B: int = 1) -> torch.Tensor:
    """Features [B, K, d] whose cosine with m_k is ``cos`` for every k."""
    K, d = m.shape
    g = torch.Generator().manual_seed(0)
    u = torch.randn(K, d, generator=g, dtype=torch.float64)
    u = u - (u * m).sum(-1, keepdim=True) * m  # orthogonal to m_k (rows of m are unit)
    u = u / u.norm(dim=-1, keepdim=True)
    f = cos * m + math.sqrt(max(0.0, 1 - cos**2)) * u
    return (2.5 * f).unsqueeze(0).expand(B, K, d)  # norm does not matter


def test_alignment_loss_optima():
    K, d = 6, 16
    m = simplex_etf(d, K, torch.Generator().manual_seed(0)).T.contiguous()  # rows m_k
    ones, zeros = torch.ones(2, K, dtype=torch.float64), torch.zeros(2, K, dtype=torch.float64)
    # positives on their prototype: loss -log(1 + 1e-6) (the official "+ 1e-6"); a wrong direction costs
    opt = -math.log1p(1e-6)
    f = (3.0 * m).unsqueeze(0).expand(2, K, d)
    assert alignment_loss(f, m, ones).item() == pytest.approx(opt, abs=1e-12)
    assert alignment_loss(-f, m, ones).item() > 5.0  # clamped, finite
    assert math.isfinite(alignment_loss(-f, m, ones).item())
    # negatives: on another class's prototype (cos = -1/(K-1)) -> 0
    f_other = m.roll(1, dims=0).unsqueeze(0).expand(2, K, d)
    assert alignment_loss(f_other, m, zeros).item() == pytest.approx(opt, abs=1e-12)
    # sweep cos: the negatives' loss is minimal at -1/(K-1); positives' decreasing in cos
    grid = np.linspace(-1.0, 1.0, 201).tolist() + [-1.0 / (K - 1)]
    neg = [alignment_loss(_features_with_cos(m, c), m, zeros[:1]).item() for c in grid]
    pos = [alignment_loss(_features_with_cos(m, c), m, ones[:1]).item() for c in grid[:-1]]
    assert grid[int(np.argmin(neg))] == pytest.approx(-1.0 / (K - 1))
    assert min(neg) == pytest.approx(opt, abs=1e-9)
    assert np.all(np.diff(pos) < 0)
    # formula check at one point
    c = 0.3
    val_neg = -math.log(1 - (K - 1) / K * abs(1 / (K - 1) + c) + 1e-6)
    val_pos = -math.log((1 + c) / 2 + 1e-6)
    assert alignment_loss(_features_with_cos(m, c), m, zeros[:1]).item() == pytest.approx(val_neg, rel=1e-9)
    assert alignment_loss(_features_with_cos(m, c), m, ones[:1]).item() == pytest.approx(val_pos, rel=1e-9)
    # at cos = 1 the negative argument is 0: + 1e-6 -> -log(1e-6)
    assert alignment_loss(f, m, zeros).item() == pytest.approx(-math.log(1e-6), rel=1e-6)


def _softplus(v: float) -> float:
    return math.log1p(math.exp(v)) if v < 30 else v + math.log1p(math.exp(-v))


def hand_two_way(x: list[list[float]], y: list[list[int]], Tp: float = 4.0, Tn: float = 1.0) -> float:
    """Two-Way loss by the formula, with Python loops: an empty negative set gives 0."""

    def term(P, N):
        if not N:
            return 0.0
        n = Tn * math.log(sum(math.exp(v / Tn) for v in N))
        p = Tp * math.log(sum(math.exp(-v / Tp) for v in P))
        return _softplus(n + p)

    B, K = len(x), len(x[0])
    cls = [term([x[i][k] for i in range(B) if y[i][k]], [x[i][k] for i in range(B) if not y[i][k]])
           for k in range(K) if any(y[i][k] for i in range(B))]
    smp = [term([x[i][k] for k in range(K) if y[i][k]], [x[i][k] for k in range(K) if not y[i][k]])
           for i in range(B) if any(y[i])]
    return sum(cls) / len(cls) + sum(smp) / len(smp)


def test_two_way_loss_hand_computation():
    x = [[2.0, -1.0, 0.5], [0.0, 1.0, -2.0]]
    y = [[1, 0, 1], [0, 1, 0]]
    # written out: class terms softplus(Tn lse(neg) + Tp lse(-pos/Tp)), Tp = 4, Tn = 1
    c0 = _softplus(0.0 + 4 * (-2.0 / 4))  # P = {2}, N = {0}
    c1 = _softplus(-1.0 + 4 * (-1.0 / 4))  # P = {1}, N = {-1}
    c2 = _softplus(-2.0 + 4 * (-0.5 / 4))  # P = {0.5}, N = {-2}
    s0 = _softplus(-1.0 + 4 * math.log(math.exp(-2.0 / 4) + math.exp(-0.5 / 4)))  # P = {2, .5}, N = {-1}
    s1 = _softplus(math.log(math.exp(0.0) + math.exp(-2.0)) + 4 * (-1.0 / 4))  # P = {1}, N = {0, -2}
    expected = (c0 + c1 + c2) / 3 + (s0 + s1) / 2
    assert hand_two_way(x, y) == pytest.approx(expected, rel=1e-12)
    got = two_way_loss(torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64), 4.0, 1.0).item()
    assert got == pytest.approx(expected, rel=1e-12)

    yt = torch.tensor(y, dtype=torch.float64)
    good = torch.where(yt > 0, torch.tensor(3.0, dtype=torch.float64), torch.tensor(-3.0, dtype=torch.float64))
    assert two_way_loss(good, yt).item() < two_way_loss(torch.tensor(x, dtype=torch.float64), yt).item() \
        < two_way_loss(-good, yt).item()
    # invariant to one global shift of the logits (scores, not calibrated probabilities)
    assert two_way_loss(good + 5.0, yt).item() == pytest.approx(two_way_loss(good, yt).item(), rel=1e-12)


def test_two_way_loss_empty_sets():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    y = [[1, 0, 0], [1, 0, 1], [1, 0, 0], [1, 1, 0]]  # class 0: no negative in the batch
    loss = two_way_loss(x, torch.tensor(y, dtype=torch.float64))
    assert loss.item() == pytest.approx(hand_two_way(x.tolist(), y), rel=1e-12)
    loss.backward()
    assert torch.isfinite(x.grad).all() and torch.all(x.grad[:, 0] <= 0)
    z = torch.zeros(2, 3, requires_grad=True)
    assert two_way_loss(z, torch.zeros(2, 3)).item() == 0.0  # no positive anywhere


def test_contrastive_prototype_loss():
    K, p = 4, 5
    q = simplex_etf(p, K, torch.Generator().manual_seed(0)).T.float()  # [K, p]
    y = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 0.0]])
    z_good = q.unsqueeze(0).expand(2, K, p).clone()
    z_bad = q.roll(1, dims=0).unsqueeze(0).expand(2, K, p).clone()
    t = 0.5
    # hand value for z_ik = q_k: cos = 1 on the diagonal, -1/(K-1) elsewhere
    expected = -math.log(math.exp(1 / t) / (math.exp(1 / t) + (K - 1) * math.exp(-1 / (K - 1) / t)))
    assert contrastive_prototype_loss(z_good, q, y, t).item() == pytest.approx(expected, rel=1e-5)
    assert contrastive_prototype_loss(z_bad, q, y, t).item() > contrastive_prototype_loss(z_good, q, y, t).item()
    # only positives count: changing a negative's feature changes nothing
    z2 = z_good.clone()
    z2[0, 1] = -z2[0, 1]
    assert contrastive_prototype_loss(z2, q, y, t).item() == pytest.approx(expected, rel=1e-5)
    # zero prototypes (before the first refresh): uniform softmax, log K
    assert contrastive_prototype_loss(z_good, torch.zeros(K, p), y, t).item() == pytest.approx(math.log(K), rel=1e-6)


# ------------------------------------------------------------------------------ schedule


def test_warmup_schedule_and_objective():
    data = synthetic()
    m = build("MLC-NC", {**SMALL, "epochs": 8, "class_aware_sampling": False})
    m.prepare(data, RunContext(seed=0, workdir=Path(".")))
    E, S = 8, 3  # epochs, steps per epoch
    for e in range(E):
        for b in range(S):
            progress = (e * S + b) / (E * S)  # the trainer's definition
            assert m.epoch_index(progress) == e
            w = m.loss_weights(m.epoch_index(progress))
            if e < 5:
                assert w == {"align": 1.0, "proto": 0.0, "twoway": 0.0}
            else:
                assert w == {"align": 0.5, "proto": 0.1, "twoway": 1.0}
    torch.manual_seed(0)
    model = m.build_model(np.asarray(data.X_train, np.float32), np.asarray(data.Y_train))
    model.eval()  # no dropout: the objective can be recomputed
    xb = torch.as_tensor(data.X_train[:16], dtype=torch.float32)
    yb = torch.as_tensor(data.Y_train[:16], dtype=torch.float32)
    obj, terms = m.training_step(model, xb, yb, 4.9 / E)  # epoch index 4: still warm-up
    assert set(terms) == {"align", "proto", "twoway"}
    assert obj.item() == pytest.approx(terms["align"].item(), rel=1e-6)
    obj.backward()
    assert model.proj_weight.grad is None and model.classifier.grad is None  # only alignment in the graph
    assert model.attn.in_proj_weight.grad is not None
    model.zero_grad(set_to_none=True)
    obj, terms = m.training_step(model, xb, yb, 5.0 / E)  # epoch index 5
    expected = 0.5 * terms["align"] + 0.1 * terms["proto"] + 1.0 * terms["twoway"]
    assert obj.item() == pytest.approx(expected.item(), rel=1e-6)
    # the prototype bank accumulates positives' projected features and refreshes at epoch end
    assert model.proto_count.sum().item() == pytest.approx(2 * float(yb.sum()))
    m.epoch_end(model, 1, None, None, Path("."))
    cnt = model.proto_count
    assert torch.allclose(model.proto_bank[cnt > 0], (model.proto_sum / cnt.clamp_min(1)[:, None])[cnt > 0])


# ------------------------------------------------------------------------------ sampler


def test_class_aware_sampler_uniform_and_resumable():
    rng = np.random.default_rng(0)
    n, K = 2000, 6
    prev = np.array([0.6, 0.3, 0.1, 0.03, 0.01, 0.005])  # skewed label frequencies
    Y = (rng.random((n, K)) < prev).astype(np.uint8)
    Y[:3, 5] = 1  # ensure every class has a positive
    s = ClassAwareSampler(Y, seed=7)
    draws = 30_000
    rows, cls = s.sample(draws)
    assert bool((torch.as_tensor(Y)[rows, cls] == 1).all())  # each row holds its drawn class
    obs = np.bincount(cls.numpy(), minlength=K)
    exp = draws / K
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    assert chi2 < 20.5  # chi-square df=5, p = 0.001
    # the rows' labels are far less skewed than the data's
    lab = Y[rows.numpy()].mean(axis=0)
    assert lab[5] > 0.1 and lab[5] / lab[0] > 20 * (Y[:, 5].mean() / Y[:, 0].mean())
    # a class without positives is never drawn
    Y0 = Y.copy()
    Y0[:, 4] = 0
    assert 4 not in set(ClassAwareSampler(Y0, seed=1).sample(5000)[1].tolist())
    # exact resume from the generator state; seeded
    a = ClassAwareSampler(Y, seed=3)
    a.sample(100)
    state = a.get_state()
    cont = a.sample(50)[0]
    b = ClassAwareSampler(Y, seed=3)
    b.set_state(state)
    assert torch.equal(b.sample(50)[0], cont)
    assert torch.equal(ClassAwareSampler(Y, seed=3).sample(64)[0], ClassAwareSampler(Y, seed=3).sample(64)[0])
    assert not torch.equal(ClassAwareSampler(Y, seed=3).sample(64)[0], ClassAwareSampler(Y, seed=4).sample(64)[0])


def test_epoch_batches_are_class_aware_sized_and_resumable():
    data = synthetic()
    m = build("MLC-NC", SMALL)
    m.prepare(data, RunContext(seed=0, workdir=Path(".")))
    perm = torch.randperm(101, generator=torch.Generator().manual_seed(0))
    plan = m.epoch_batches(perm, 37)
    assert [b.numel() for b in plan] == [37, 37, 27]  # the trainer's batch sizes, last one partial
    Y = torch.as_tensor(np.asarray(data.Y_train))
    assert all(bool((Y[b].sum(1) > 0).all()) for b in plan)  # every sampled row has a positive
    st = m.extra_state()
    nxt = m.epoch_batches(perm, 37)
    m.load_extra_state(st)
    assert all(torch.equal(a, b) for a, b in zip(m.epoch_batches(perm, 37), nxt))
    off = build("MLC-NC", {**SMALL, "class_aware_sampling": False})
    off.prepare(data, RunContext(seed=0, workdir=Path(".")))
    assert off.epoch_batches(perm, 37) is None  # the trainer's own shuffle


# ------------------------------------------------------------------------------ Yeast


HP_YEAST = {**SMALL, "epochs": 2, "warmup_epochs": 1}  # both phases within 2 epochs


def test_yeast_two_epochs_deterministic_and_resumable(yeast, tmp_path):
    m1 = build("MLC-NC", HP_YEAST).fit(yeast, RunContext(seed=11, workdir=tmp_path / "a"))
    P1 = m1.predict_proba(yeast.X_val)
    assert P1.shape == (yeast.X_val.shape[0], 14)
    assert np.isfinite(P1).all() and (P1 >= 0).all() and (P1 <= 1).all()
    assert len(m1.train_log) == 2
    for row in m1.train_log:
        assert all(math.isfinite(row[k]) for k in ("loss", "align", "proto", "twoway"))
    # epoch 1 = warm-up (loss = align), epoch 2 = full objective
    r1, r2 = m1.train_log
    assert r1["loss"] == pytest.approx(r1["align"], rel=1e-5)
    assert r2["loss"] == pytest.approx(0.5 * r2["align"] + 0.1 * r2["proto"] + r2["twoway"], rel=1e-4)
    assert m1.model.proto_count.sum().item() > 0 and m1.model.proto_bank.abs().sum().item() > 0

    # same seed -> identical predictions
    m2 = build("MLC-NC", HP_YEAST).fit(yeast, RunContext(seed=11, workdir=tmp_path / "b"))
    assert np.array_equal(P1, m2.predict_proba(yeast.X_val))

    # interrupted after epoch 1 and resumed -> bit-identical to the uninterrupted run
    wd = tmp_path / "c"
    with pytest.raises(TrainingInterrupted):
        build("MLC-NC", HP_YEAST).fit(yeast, RunContext(seed=11, workdir=wd, extra={"_stop_after_epoch": 1}))
    m3 = build("MLC-NC", HP_YEAST).fit(yeast, RunContext(seed=11, workdir=wd))
    assert np.array_equal(P1, m3.predict_proba(yeast.X_val))
    assert m3.train_log[1]["loss"] == m1.train_log[1]["loss"]
