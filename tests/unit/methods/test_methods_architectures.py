"""CC, ML-GCN, C-Tran, ML-Decoder: mechanism checks and short Yeast runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from cdgtmll.methods.architectures.attention import (
    NEGATIVE,
    POSITIVE,
    UNKNOWN,
    CTranMethod,
    MLDecoderMethod,
    sample_label_states,
)
from cdgtmll.methods.architectures.common import PackedAttention
from cdgtmll.methods.architectures.label_graph import (
    ClassifierChainMethod,
    MLGCNMethod,
    chain_orders,
    gen_adj,
    mlgcn_correlation,
    mlgcn_gen_A,
)
from cdgtmll.methods.base import FitData, RunContext, available, build
from cdgtmll.nn.losses.asl import AsymmetricLoss
from cdgtmll.nn.losses.bce import BCELoss
from tests.support.mirror import yeast_fitdata

torch.set_num_threads(1)

NAMES = ["CC", "ML-GCN", "C-Tran", "ML-Decoder"]
SMALL = {"hidden_dim": 64, "batch_size": 64}


def synthetic(n=120, d=12, L=6, seed=0) -> FitData:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    Y = (rng.random((n, L)) < np.linspace(0.1, 0.6, L)).astype(np.uint8)
    return FitData(X[:90], Y[:90], X[90:], Y[90:], [f"l{k}" for k in range(L)])


def build_unfitted(method, data: FitData, seed: int = 0):
    """Method + model as ``fit`` builds them, without training."""
    torch.manual_seed(seed)
    method.prepare(data, RunContext(seed=seed, workdir=Path(".")))
    model = method.build_model(np.asarray(data.X_train, np.float32), np.asarray(data.Y_train))
    return model


@pytest.fixture(scope="module")
def yeast() -> FitData:
    return yeast_fitdata(380, 120)


def test_registered_and_hparams():
    assert set(NAMES) <= set(available())
    for name in NAMES:
        with pytest.raises(ValueError, match="unknown hyper-parameter"):
            build(name, {"no_such_thing": 1})
    with pytest.raises(ValueError):
        build("CC", {"order": "alphabetical"})
    with pytest.raises(ValueError):
        build("CC", {"order": "frequency", "n_chains": 3})
    with pytest.raises(ValueError):
        build("C-Tran", {"hidden_dim": 100, "n_tokens": 8})
    assert build("ML-GCN").hparams()["p"] == 0.25 and build("ML-GCN").hparams()["tau"] == 0.4  # official values
    with pytest.raises(ValueError, match="loss"):
        build("ML-Decoder", {"loss": "focal"})


# ------------------------------------------------------------------------------------ CC


def test_cc_orders():
    Y = np.array([[1, 0, 1], [1, 0, 0], [1, 1, 1], [0, 0, 1]])
    np.testing.assert_array_equal(chain_orders(Y, "frequency", 1, 0), [[0, 2, 1]])
    o = chain_orders(Y, "random", 4, 7)
    assert o.shape == (4, 3) and all(sorted(r) == [0, 1, 2] for r in o.tolist())
    np.testing.assert_array_equal(o, chain_orders(Y, "random", 4, 7))  # the run seed fixes them
    np.testing.assert_array_equal(o[:1], chain_orders(Y, "random", 1, 7))


def test_cc_mask_strictly_lower_triangular_in_chain_order():
    data = synthetic(L=6)
    m = ClassifierChainMethod(n_chains=3, **SMALL)
    model = build_unfitted(m, data, seed=5)
    for c in range(3):
        order = model.orders[c]
        Mc = model.mask[c][order][:, order]  # rows/cols in chain order
        assert torch.equal(Mc, torch.tril(torch.ones(6, 6), diagonal=-1))
    # gradient of logit k w.r.t. input label j is 0 whenever j is not before k in the chain
    x = torch.as_tensor(data.X_train[:4])
    y = torch.as_tensor(data.Y_train[:4], dtype=torch.float32)
    J = torch.autograd.functional.jacobian(lambda yy: model.teacher_forced(x, yy), y)  # [C, B, L, B, L]
    for c in range(3):
        pos = torch.argsort(model.orders[c])
        for k in range(6):
            g = J[c, 0, k, 0]  # d logit_k / d y_j for row 0
            for j in range(6):
                if pos[j] >= pos[k]:
                    assert g[j] == 0
                else:
                    assert g[j] != 0
            assert torch.all(J[c, 0, k, 1:] == 0)  # rows do not mix


def test_cc_teacher_forcing_in_training_and_own_predictions_at_test():
    """Chain 1 -> 0: label 1 is first and predicted negative; label 0 copies label 1
    through a large chain weight. Teacher forcing with y_1 = 1 gives a high label-0
    logit; prediction feeds the chain's own 0 and must give the low one."""
    data = synthetic(L=2)
    m = ClassifierChainMethod(order="frequency", **SMALL)
    m.prepare(data, RunContext(seed=0, workdir=Path(".")))
    m.orders = np.array([[1, 0]])
    torch.manual_seed(0)
    model = m.build_model(np.asarray(data.X_train, np.float32), np.asarray(data.Y_train))
    with torch.no_grad():
        model.feature_head.weight.zero_()
        model.feature_head.bias.copy_(torch.tensor([-3.0, -2.0]))  # b_0 = -3, b_1 = -2 (p_1 < 0.5)
        model.label_weight.zero_()
        model.label_weight[0, 0, 1] = 6.0  # label 0 <- label 1
        model.label_weight[0, 1, 0] = 100.0  # label 1 <- label 0: masked (label 0 comes later)
    x = torch.as_tensor(data.X_train[:5])
    y_true = torch.ones(5, 2)
    z_train = model.teacher_forced(x, y_true)[0]
    torch.testing.assert_close(z_train[:, 0], torch.full((5,), 3.0))  # -3 + 6 * y_1(true = 1)
    torch.testing.assert_close(z_train[:, 1], torch.full((5,), -2.0))  # the masked weight is ignored
    m.model = model.eval()
    P = m.predict_proba(np.asarray(data.X_train[:5]))  # no labels available to predict
    np.testing.assert_allclose(P[:, 1], 1 / (1 + math.exp(2.0)), rtol=1e-6)
    np.testing.assert_allclose(P[:, 0], 1 / (1 + math.exp(3.0)), rtol=1e-6)  # fed its own 0, not y_1 = 1
    # a positive first prediction is fed as a hard 1 (not its probability)
    with torch.no_grad():
        model.feature_head.bias[1] = 0.5
    P = m.predict_proba(np.asarray(data.X_train[:5]))
    np.testing.assert_allclose(P[:, 0], 1 / (1 + math.exp(-3.0)), rtol=1e-6)  # -3 + 6 * 1
    # training uses the true labels: training_step's loss equals BCE of the teacher-forced logits
    loss, _ = m.training_step(model, x, y_true, 0.0)
    ref = model.criterion(model.teacher_forced(x, y_true)[0], y_true)
    torch.testing.assert_close(loss, ref)


# -------------------------------------------------------------------------------- ML-GCN


def test_mlgcn_official_gen_A_and_gen_adj_from_counts_hand_computed():
    """Official gen_A / gen_adj (megvii-research/ML-GCN util.py) on hand-written counts;
    every expected number below is worked out by hand (not by the code under test)."""
    # counts as in the official pickle: nums = label counts; cooc = co-occurrence counts
    # (its diagonal, here = nums as Y^T Y has it, must be ignored: the official 'adj' has 0)
    nums = np.array([4, 2, 5, 0])
    cooc = np.array([[4, 2, 1, 0],
                     [2, 2, 2, 0],
                     [1, 2, 5, 0],
                     [0, 0, 0, 0]])
    # P = cooc / nums[:, None], diagonal 0, row 3 = 0/0 -> 0:
    #   row 0: P01 = 2/4 = 0.5, P02 = 1/4 = 0.25
    #   row 1: P10 = 2/2 = 1,   P12 = 2/2 = 1
    #   row 2: P20 = 1/5 = 0.2, P21 = 2/5 = 0.4 (>= tau: the boundary counts)
    # binarised at tau = 0.4: A = [[0,1,0,0],[1,0,1,0],[0,1,0,0],[0,0,0,0]]
    # column sums (in-degrees) = (1, 2, 1, 0); column re-weighting with p = 0.25 and 1e-6:
    #   a = 0.25 / (1 + 1e-6) = 0.24999975000025    (A10, A12: columns 0 and 2)
    #   q = 0.25 / (2 + 1e-6) = 0.124999937500031   (A01, A21: column 1)
    #   column 3: 0 / (0 + 1e-6) = 0;  then + I
    a, q = 0.24999975000025, 0.124999937500031
    gen_A = np.array([[1.0, q, 0.0, 0.0],
                      [a, 1.0, a, 0.0],
                      [0.0, q, 1.0, 0.0],
                      [0.0, 0.0, 0.0, 1.0]])
    A = mlgcn_gen_A(cooc, nums, tau=0.4, p=0.25)
    np.testing.assert_allclose(A, gen_A, rtol=0, atol=1e-12)
    # incoming weights of label j before gen_adj = column j: 1 + a, 1 + 2q, 1 + a, 1
    np.testing.assert_allclose(A.sum(0), [1.24999975000025, 1.24999987500006, 1.24999975000025, 1.0],
                               rtol=0, atol=1e-12)
    # gen_adj: row sums r = (1 + q, 1 + 2a, 1 + q, 1) = (1.1249999375, 1.4999995, 1.1249999375, 1);
    # A_hat[j, i] = A[i, j] / sqrt(r_i r_j):
    #   1 / r0 = 0.888888938271583       a / sqrt(r1 r0) = 0.192449934700766
    #   q / sqrt(r0 r1) = 0.096225015462842    1 / r1 = 0.666666888888741
    A_hat = np.array([
        [0.888888938271583, 0.192449934700766, 0.0, 0.0],
        [0.096225015462842, 0.666666888888741, 0.096225015462842, 0.0],
        [0.0, 0.192449934700766, 0.888888938271583, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ])
    got = gen_adj(torch.as_tensor(A)).numpy()
    np.testing.assert_allclose(got, A_hat, rtol=0, atol=1e-12)
    # incoming weights after gen_adj (what the GCN sums, row j of A_hat):
    #   1/r0 + a/sqrt(r1 r0) = 1.081338872972349,  2 q/sqrt(r0 r1) + 1/r1 = 0.859116919814426
    np.testing.assert_allclose(got.sum(1), [1.081338872972349, 0.859116919814426, 1.081338872972349, 1.0],
                               rtol=0, atol=1e-12)
    # gen_adj of a zero row stays finite (D_ii = 0 instead of inf)
    Z = torch.tensor([[1.0, 0.5], [0.0, 0.0]], dtype=torch.float64)
    assert torch.isfinite(gen_adj(Z)).all() and gen_adj(Z)[1].abs().sum() == 0


def test_mlgcn_adjacency_from_labels_hand_computed():
    # nums = (3, 3, 2); distinct-label co-occurrences M01 = 2, M02 = 1, M12 = 1
    Y = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 1, 0], [0, 0, 1]])
    # P(1|0)=2/3 P(2|0)=1/3 | P(0|1)=2/3 P(2|1)=1/3 | P(0|2)=1/2 P(1|2)=1/2 ; tau = 0.4 ->
    # A = [[0,1,0],[1,0,0],[1,1,0]]; column sums (2, 2, 0); p = 0.25:
    # q = 0.25 / (2 + 1e-6) = 0.124999937500031; + I
    q = 0.124999937500031
    gen_A = np.array([[1.0, q, 0.0], [q, 1.0, 0.0], [q, q, 1.0]])
    A = mlgcn_correlation(Y, 0.4, 0.25)
    np.testing.assert_allclose(A, gen_A, rtol=0, atol=1e-12)
    # incoming (column) sums 1 + 2q, 1 + 2q, 1 (Eq. 8 would give 1 everywhere)
    np.testing.assert_allclose(A.sum(0), [1.24999987500006, 1.24999987500006, 1.0], rtol=0, atol=1e-12)
    # row sums (1 + q, 1 + q, 1 + 2q); A_hat[j, i] = A[i, j] / sqrt(r_i r_j):
    #   1/(1+q) = 0.888888938271583   q/(1+q) = 0.111111061728417
    #   q/sqrt((1+q)(1+2q)) = 0.105409210832835   1/(1+2q) = 0.800000079999968
    A_hat = np.array([
        [0.888888938271583, 0.111111061728417, 0.105409210832835],
        [0.111111061728417, 0.888888938271583, 0.105409210832835],
        [0.0, 0.0, 0.800000079999968],
    ])
    got = gen_adj(torch.as_tensor(A)).numpy()
    np.testing.assert_allclose(got, A_hat, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(1), [1.105409210832835, 1.105409210832835, 0.800000079999968],
                               rtol=0, atol=1e-12)
    # the method builds exactly this graph (float32, as the official Parameter) by default
    data = FitData(np.zeros((5, 4), np.float32), Y, np.zeros((1, 4), np.float32), Y[:1], ["a", "b", "c"])
    m = MLGCNMethod(hidden_dim=8)
    model = build_unfitted(m, data)
    np.testing.assert_allclose(model.adj.numpy(), A_hat, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(m.extra_outputs()["correlation_reweighted"]), gen_A, atol=1e-12)


def test_mlgcn_incoming_weights_on_yeast(yeast):
    """The reviewer's check: a label's incoming weights (column of gen_A) sum to 1 + p
    (1 + 0.25 * deg / (deg + 1e-6)) or to 1 for a label without in-edges; Eq. 8 rows with
    the gen_adj transpose would give 0.80 .. 1.49 on Yeast."""
    A = mlgcn_correlation(yeast.Y_train)
    col = A.sum(0)
    offdiag = A - np.diag(np.diag(A))
    deg = (offdiag > 0).sum(0)
    np.testing.assert_allclose(np.diag(A), 1.0)
    np.testing.assert_allclose(col, 1.0 + 0.25 * deg / (deg + 1e-6), rtol=0, atol=1e-12)
    assert (deg > 0).sum() >= 10 and np.all((np.abs(col - 1.25) < 1e-6) | (col == 1.0))


def test_mlgcn_zero_count_label_no_nan():
    data = synthetic(L=5)
    Y = data.Y_train.copy()
    Y[:, 3] = 0
    data = FitData(data.X_train, Y, data.X_val, data.Y_val, data.label_names)
    A = mlgcn_correlation(Y)
    assert np.all(np.isfinite(A)) and A[3, 3] == 1.0  # gen_A: + I
    assert np.all(A[3, [0, 1, 2, 4]] == 0) and np.all(A[[0, 1, 2, 4], 3] == 0)
    m = MLGCNMethod(**SMALL)
    model = build_unfitted(m, data)
    assert torch.isfinite(model.adj).all() and model.adj[3, 3] == pytest.approx(1.0)
    out = model(torch.as_tensor(data.X_train[:8]))
    assert out.shape == (8, 5) and torch.isfinite(out).all()


def test_mlgcn_uses_embedding_file(tmp_path):
    data = synthetic(L=6)
    E = np.random.default_rng(3).normal(size=(6, 16)).astype(np.float32)
    np.save(tmp_path / "emb.npy", E)
    m = build("ML-GCN", {"label_embeddings": str(tmp_path / "emb.npy"), **SMALL})
    model = build_unfitted(m, data)
    assert "label_embedding" in dict(model.named_buffers())  # fixed input, not trained
    assert all("label_embedding" not in n for n, _ in model.named_parameters())
    np.testing.assert_array_equal(model.label_embedding.numpy(), E)
    assert model.gc1.weight.shape[0] == 16
    info = m.extra_outputs()["label_embeddings"]
    assert info["source"] == "file" and info["path"] == str(tmp_path / "emb.npy") and info["dim"] == 16
    # classifiers change when the file changes
    W1 = model.classifiers().detach()
    with torch.no_grad():
        model.label_embedding.mul_(2.0)
    assert not torch.allclose(W1, model.classifiers())
    # default: learnable 300-d embeddings, reported as such
    m2 = build("ML-GCN", SMALL)
    model2 = build_unfitted(m2, data)
    assert model2.label_embedding.requires_grad and model2.label_embedding.shape == (6, 300)
    assert m2.extra_outputs()["label_embeddings"]["source"] == "learnable"
    np.save(tmp_path / "bad.npy", E[:5])
    with pytest.raises(ValueError, match="shape"):
        build_unfitted(build("ML-GCN", {"label_embeddings": str(tmp_path / "bad.npy"), **SMALL}), data)


# -------------------------------------------------------------------------------- C-Tran


def test_ctran_all_unknown_output_independent_of_labels():
    data = synthetic(L=6)
    m = CTranMethod(**SMALL)
    model = build_unfitted(m, data).eval()
    x = torch.as_tensor(data.X_val[:10])
    with torch.no_grad():
        p_pred = m.predict(model, x)
        unk = torch.zeros(10, 6, dtype=torch.long)
        torch.testing.assert_close(p_pred, torch.sigmoid(model(x, unk)))
        # revealing labels does change the output (the label path is live) ...
        y = torch.as_tensor(data.Y_val[:10]).float()
        assert not torch.allclose(model(x, y.long() + 1), model(x, unk))
        # ... but with every label unknown (states sampled with no label revealed), the true
        # labels cannot matter: y and its complement give the same output
        s1, s0 = sample_label_states(y, 0.0), sample_label_states(1 - y, 0.0)
        assert (s1 == UNKNOWN).all() and (s0 == UNKNOWN).all()
        torch.testing.assert_close(model(x, s1), model(x, s0), rtol=0, atol=0)
        torch.testing.assert_close(torch.sigmoid(model(x, s1)), p_pred)


@pytest.mark.parametrize("name", ["C-Tran", "ML-Decoder", "MLC-NC"])
def test_packed_attention_trains_bitwise_as_torchs(yeast, name):
    """PackedAttention (unbind instead of select of the packed projection: C-Tran's
    self-attention, ML-Decoder's and MLC-NC's cross-attention) trains exactly as torch's
    nn.MultiheadAttention: the same model, seed, Yeast batches, label states / sampler and
    dropout give bit-identical losses, gradients and weights over 5 AdamW steps at the
    default size (batch 64), and the same evaluation output."""
    torch.set_num_threads(1)

    def run(torch_attention: bool):
        m = build(name, {"batch_size": 64})
        model = build_unfitted(m, yeast, seed=3)
        attn = [a for a in model.modules() if isinstance(a, torch.nn.MultiheadAttention)]
        assert attn and all(type(a) is PackedAttention for a in attn)
        if torch_attention:
            for a in attn:
                a.__class__ = torch.nn.MultiheadAttention
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
        torch.manual_seed(11)  # states and dropout draw from the global generator
        X = torch.as_tensor(np.asarray(yeast.X_train[:320], np.float32))
        Y = torch.as_tensor(np.asarray(yeast.Y_train[:320])).float()
        losses, grads = [], []
        model.train()
        for s in range(0, 320, 64):
            loss, _ = m.training_step(model, X[s:s + 64], Y[s:s + 64], 0.5)
            opt.zero_grad()
            loss.backward()
            grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
            opt.step()
            losses.append(loss.detach())
        model.eval()
        with torch.no_grad():
            out = m.predict(model, torch.as_tensor(np.asarray(yeast.X_val, np.float32)))
        return losses, grads, [p.detach().clone() for p in model.parameters()], out

    a, b = run(False), run(True)
    assert torch.isfinite(torch.stack(a[0])).all() and len(a[0]) == 5
    assert torch.equal(torch.stack(a[0]), torch.stack(b[0]))
    for ga, gb in zip(a[1], b[1]):
        assert len(ga) == len(gb) and all(torch.equal(x, y) for x, y in zip(ga, gb))
    assert all(torch.equal(x, y) for x, y in zip(a[2], b[2]))
    assert torch.equal(a[3], b[3])


def test_ctran_label_mask_training_reveals_subset():
    torch.manual_seed(0)
    L = 14
    y = (torch.rand(4000, L) < 0.3).float()
    s = sample_label_states(y, 0.75)
    assert s.dtype == torch.long and set(s.unique().tolist()) <= {UNKNOWN, NEGATIVE, POSITIVE}
    known = s != UNKNOWN
    assert torch.equal(s[known], y[known].long() + 1)  # revealed state = true label
    n_known = known.sum(1)
    k_max = int(0.75 * L)  # 10
    assert n_known.max() <= k_max and n_known.min() == 0
    counts = torch.bincount(n_known, minlength=k_max + 1).float()
    assert counts.numel() == k_max + 1 and (counts > 0).all()  # every count 0..10 occurs
    assert counts.max() / counts.min() < 1.5  # ~uniform over {0, ..., 10}
    assert (known.float().mean(0) - known.float().mean()).abs().max() < 0.05  # no label favoured

    # the training step uses such states, and the loss counts only the unknown labels
    data = synthetic(L=6)
    m = CTranMethod(**SMALL)
    model = build_unfitted(m, data)
    seen = []
    orig = m.sample_states
    m.sample_states = lambda yb: seen.append(orig(yb)) or seen[-1]
    xb = torch.as_tensor(data.X_train[:32])
    yb = torch.as_tensor(data.Y_train[:32]).float()
    torch.manual_seed(1)
    loss, _ = m.training_step(model.eval(), xb, yb, 0.0)
    st = seen[-1]
    assert (st == UNKNOWN).any() and (st != UNKNOWN).any() and ((st != UNKNOWN).sum(1) <= int(0.75 * 6)).all()
    logits = model(xb, st)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, yb, reduction="none")
    torch.testing.assert_close(loss, (bce * (st == UNKNOWN)).sum(1).mean())
    # lmt=False: every label unknown in training too
    assert (CTranMethod(lmt=False, **SMALL).sample_states(yb) == UNKNOWN).all()


# ---------------------------------------------------------------------------- ML-Decoder


def test_mldecoder_no_query_self_attention():
    data = synthetic(L=6)
    m = MLDecoderMethod(**SMALL)
    model = build_unfitted(m, data).eval()
    assert model.n_groups == 6 and model.group_size == 1  # L <= n_groups: one query per label
    assert not model.queries.requires_grad  # official: non-learnable queries
    x = torch.as_tensor(data.X_val[:7])
    with torch.no_grad():
        mem = model.memory(x)
        Q = model.queries
        full = model.decode(mem, Q)
        perm = torch.tensor([3, 0, 5, 1, 4, 2])
        torch.testing.assert_close(model.decode(mem, Q[perm]), full[:, perm], rtol=0, atol=1e-6)
        for i in range(6):
            alone = model.decode(mem, Q[i : i + 1])[:, 0]
            torch.testing.assert_close(alone, full[:, i], rtol=0, atol=1e-6)
        other = Q.clone()
        other[1:] = torch.randn(5, Q.shape[1])  # change every other query
        torch.testing.assert_close(model.decode(mem, other)[:, 0], full[:, 0], rtol=0, atol=1e-6)
        torch.testing.assert_close(model(x), model.group_fc(full))


def test_mldecoder_group_decoding():
    data = synthetic(L=14, n=200)
    m = MLDecoderMethod(n_groups=4, learnable_queries=True, **SMALL)
    model = build_unfitted(m, data).eval()
    assert model.n_groups == 4 and model.group_size == 4  # ceil(14 / 4)
    assert model.duplicate_pooling.shape == (4, m.d_model, 4) and model.queries.requires_grad
    x = torch.as_tensor(data.X_val[:3])
    out = model(x)
    assert out.shape == (3, 14)
    for k in (0, 5, 13):
        g = torch.autograd.grad(out[:, k].sum(), model.queries, retain_graph=True)[0]
        nz = (g.abs().sum(1) > 0).nonzero().ravel().tolist()
        assert nz == [k // 4]  # label k is read from query k // f only


def test_mldecoder_default_loss_is_official_asl_and_bce_selectable():
    """Official recipe (Alibaba-MIIL/ML_Decoder train.py): AsymmetricLoss(gamma_neg=4,
    gamma_pos=0, clip=0.05, disable_torch_grad_focal_loss=True); BCE stays an option."""
    data = synthetic(L=6)
    m = build("ML-Decoder", SMALL)
    model = build_unfitted(m, data)
    crit = model.criterion
    assert isinstance(crit, AsymmetricLoss) and crit is m._criterion
    assert (crit.gamma_neg, crit.gamma_pos, crit.clip, crit.eps, crit.focal_grad) == (4.0, 0.0, 0.05, 1e-8, False)
    hp = m.hparams()  # enters the checkpoint fingerprint
    assert hp["loss"] == "asl"
    assert hp["loss_hparams"] == {"gamma_neg": 4.0, "gamma_pos": 0.0, "clip": 0.05, "eps": 1e-8, "focal_grad": False}
    assert m.extra_outputs()["loss"] == {"name": "asl", **hp["loss_hparams"]}
    # the training step is that ASL on the model's logits
    xb = torch.as_tensor(data.X_train[:16])
    yb = torch.as_tensor(data.Y_train[:16]).float()
    model.eval()
    loss, _ = m.training_step(model, xb, yb, 0.0)
    torch.testing.assert_close(loss, AsymmetricLoss(np.ones(6), 90, 4.0, 0.0, 0.05)(model(xb), yb))
    # loss='bce': the project's BCE, recorded as such, and a different fingerprint
    mb = build("ML-Decoder", {"loss": "bce", **SMALL})
    modelb = build_unfitted(mb, data)
    assert isinstance(modelb.criterion, BCELoss)
    assert mb.hparams()["loss"] == "bce" and "loss_hparams" not in mb.hparams()
    assert mb.extra_outputs()["loss"] == {"name": "bce"}
    assert mb.fingerprint() != m.fingerprint()
    # the other architecture rows keep the BCE
    for name in ("CC", "ML-GCN", "C-Tran"):
        other = build(name, SMALL)
        assert isinstance(build_unfitted(other, data).criterion, BCELoss) and other.hparams()["loss"] == "bce"


# ------------------------------------------------------------------------------ Yeast runs


@pytest.mark.parametrize("name", NAMES)
def test_yeast_two_epochs_deterministic(yeast, tmp_path, name):
    hp = {"epochs": 2, **SMALL}
    a = build(name, hp).fit(yeast, RunContext(seed=11, workdir=tmp_path / "a"))
    Pa = a.predict_proba(yeast.X_val)
    assert Pa.shape == (yeast.X_val.shape[0], 14) and Pa.dtype == np.float64
    assert np.all(np.isfinite(Pa)) and Pa.min() >= 0 and Pa.max() <= 1
    assert len(a.train_log) == 2 and np.isfinite(a.train_log[-1]["loss"])
    assert a.train_log[-1]["loss"] < a.train_log[0]["loss"] * 1.5
    b = build(name, hp).fit(yeast, RunContext(seed=11, workdir=tmp_path / "b"))
    np.testing.assert_array_equal(Pa, b.predict_proba(yeast.X_val))
    assert a.extra_outputs()
