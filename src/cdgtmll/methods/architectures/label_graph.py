"""Label-chain and label-graph heads: CC and ML-GCN (the "generic multi-label
models" of the paper's baselines, Sec. 4.1 (6); shared parts and the common tabular
adaptation in :mod:`cdgtmll.methods.architectures.common`)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from cdgtmll.methods.architectures.common import _ArchitectureMethod, _dense_labels
from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.nn.backbones.mlp import MLPBackbone

__all__ = [
    "ClassifierChainMethod",
    "MLGCNMethod",
    "chain_orders",
    "mlgcn_gen_A",
    "mlgcn_correlation",
    "gen_adj",
]


# ============================================================================ CC


def chain_orders(Y: Any, order: str, n_chains: int, seed: int) -> np.ndarray:
    """Chain orders ``[n_chains, L]`` (``orders[c, t]`` = the label at position ``t`` of
    chain ``c``). ``'random'``: ``n_chains`` permutations drawn one after the other from
    ``numpy.random.default_rng(seed)``. ``'frequency'``: one chain, labels by
    descending training frequency (ties by label index)."""
    L = int(Y.shape[1])
    if order == "random":
        rng = np.random.default_rng(seed)
        return np.stack([rng.permutation(L) for _ in range(n_chains)]).astype(np.int64)
    if order == "frequency":
        if n_chains != 1:
            raise ValueError("order='frequency' defines a single chain; use order='random' for n_chains > 1 (ECC)")
        counts = np.asarray(Y.sum(axis=0)).ravel()
        return np.argsort(-counts, kind="stable")[None, :].astype(np.int64)
    raise ValueError(f"order must be 'random' or 'frequency', got {order!r}")


class ClassifierChainNet(nn.Module):
    """``n_chains`` classifier chains on one backbone.

    Chain ``c``'s logit of label ``k``::

        z_ck(x, y) = w_ck . h(x) + b_ck + sum_j (V_c * M_c)[k, j] y_j

    with ``M_c[k, j] = 1`` iff label ``j`` precedes label ``k`` in chain ``c``'s order
    (``M_c`` permuted to chain order is strictly lower triangular, i.e. ``tril(-1)``).
    Training (teacher forcing) evaluates all labels of all chains at once with the true
    ``y``; :meth:`greedy` runs the chain sequentially over positions with the chain's
    own hard predictions, vectorised over the batch and the chains.
    """

    def __init__(self, backbone: MLPBackbone, orders: np.ndarray, criterion: nn.Module) -> None:
        super().__init__()
        C, L = orders.shape
        self.backbone = backbone
        self.criterion = criterion
        self.n_chains, self.n_labels = int(C), int(L)
        self.feature_head = nn.Linear(backbone.out_dim, C * L)
        bound = 1.0 / math.sqrt(L)  # nn.Linear(L, L) initialisation of the label weights
        self.label_weight = nn.Parameter(torch.empty(C, L, L).uniform_(-bound, bound))
        pos = np.argsort(orders, axis=1)  # pos[c, k] = position of label k in chain c
        mask = pos[:, None, :] < pos[:, :, None]  # mask[c, k, j] = pos[c, j] < pos[c, k]
        self.register_buffer("orders", torch.as_tensor(orders, dtype=torch.long))
        self.register_buffer("mask", torch.as_tensor(mask, dtype=torch.float32))

    def masked_label_weight(self) -> torch.Tensor:
        return self.label_weight * self.mask

    def base_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The feature part ``w_ck . h(x) + b_ck``: ``[C, B, L]``."""
        z = self.feature_head(self.backbone(x))
        return z.view(x.shape[0], self.n_chains, self.n_labels).transpose(0, 1)

    def teacher_forced(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Training logits ``[C, B, L]`` given the true labels ``y [B, L]`` (one batched op)."""
        return self.base_logits(x) + torch.einsum("bj,ckj->cbk", y, self.masked_label_weight())

    def greedy(self, x: torch.Tensor) -> torch.Tensor:
        """Test-time probabilities ``[C, B, L]``: position by position, label ``k``'s
        probability given the chain's *hard* predictions (``z > 0`` i.e. ``p > 0.5``) of
        the labels before it. Reads no labels."""
        base = self.base_logits(x)
        W = self.masked_label_weight()
        C, B, L = base.shape
        yhat = base.new_zeros(C, B, L)
        prob = base.new_zeros(C, B, L)
        ar = torch.arange(C, device=base.device)
        for t in range(L):
            k = self.orders[:, t]
            z = base[ar, :, k] + torch.einsum("cbj,cj->cb", yhat, W[ar, k])
            prob[ar, :, k] = torch.sigmoid(z)
            yhat[ar, :, k] = (z > 0).to(base.dtype)
        return prob

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Prediction: ensemble mean of the chains' probabilities ``[B, L]``."""
        return self.greedy(x).mean(dim=0)


@register("CC")
class ClassifierChainMethod(_ArchitectureMethod):
    """Classifier chains, CC (Read, Pfahringer, Holmes, Frank, "Classifier chains for
    multi-label classification", Machine Learning 85(3):333-359, 2011: the sections on
    classifier chains (CC) and ensembles of classifier chains (ECC)); the CC row of the
    paper's Table ``tab:main_standard`` (baselines, Sec. 4.1 (6)).

    Mechanism kept: label ``k``'s binary classifier sees the input plus the labels
    before it in a chain order; in training those are the *true* labels (teacher
    forcing); at test time the chain is run in order and each classifier sees the
    chain's own *hard* 0/1 predictions of the earlier labels (``p > 0.5``), as in the
    original (which appends binary predictions to the feature vector, not
    probabilities). The score reported for label ``k`` is its probability
    ``sigma(z_k)`` given those hard predictions. ``n_chains > 1`` gives ECC with
    different random orders (the first chain's order is the one ``n_chains=1`` uses).

    Differences from the original, because inputs are tabular vectors on the shared
    backbone:

    * the "input" of every link is the backbone feature ``h(x)`` (512-d), not ``x``; all
      links (and all chains) share the backbone and are trained jointly end-to-end on
      the BCE of the teacher-forced logits (mean over chains), instead of L independent
      base classifiers (SVMs in the paper) fitted one after another;
    * each link is linear in ``[h(x), y_<k]`` (one ``Linear`` over ``h`` plus a
      strictly lower-triangular masked linear map over the earlier labels,
      ``V * tril(-1)`` in chain order), so training is one batched op per batch;
    * ECC: no bagging (each chain of the original sees a bootstrap sample; ours all see
      every row) and the ensemble *averages probabilities* instead of thresholding the
      average of the chains' 0/1 votes; chain orders are drawn with the run seed.

    Hyper-parameters: ``order`` ('random' [default]: a permutation from the run seed;
    'frequency': labels by descending training frequency, one chain), ``n_chains``
    (1). Test-time inference is sequential over the L positions (inherent to CC),
    vectorised over rows and chains.
    """

    def __init__(
        self,
        *,
        order: str,
        n_chains: int,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if order not in ("random", "frequency"):
            raise ValueError(f"CC: order must be 'random' or 'frequency', got {order!r}")
        if int(n_chains) < 1:
            raise ValueError("CC: n_chains must be >= 1")
        if order == "frequency" and int(n_chains) != 1:
            raise ValueError("CC: order='frequency' defines one chain; use order='random' for an ensemble")
        self.order = order
        self.n_chains = int(n_chains)
        self.orders: np.ndarray | None = None

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        super().prepare(data, ctx)
        self.orders = chain_orders(_dense_labels(data.Y_train), self.order, self.n_chains, ctx.seed)

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> ClassifierChainNet:
        if self.orders is None:
            raise RuntimeError("CC: prepare() must run before build_model()")
        return ClassifierChainNet(self.backbone(X_train), self.orders, self._criterion)

    def training_step(self, model, xb, yb, progress):
        logits = model.teacher_forced(xb, yb)  # true labels feed the chain
        loss = torch.stack([model.criterion(logits[c], yb) for c in range(logits.shape[0])]).mean()
        return loss, {}

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return model(x)  # already probabilities (greedy chain, chain mean)

    def extra_outputs(self) -> dict[str, Any]:
        if self.orders is None:
            return {}
        return {"chain_orders": self.orders.tolist(), "test_time_chain_input": "hard predictions (p > 0.5)",
                "hparams": self.hparams()}


# ============================================================================ ML-GCN


#: the official ``gen_A``'s constant added to column sums (``_adj.sum(0) + 1e-6``)
GEN_A_EPS = 1e-6


def mlgcn_gen_A(cooc: np.ndarray, nums: np.ndarray, tau: float = 0.4, p: float = 0.25) -> np.ndarray:
    """The official ``gen_A`` of ML-GCN (megvii-research/ML-GCN, ``util.py``), from counts.

    ``cooc [L, L]`` = the official pickle's ``adj``: co-occurrence counts of *distinct*
    labels (the diagonal is ignored, i.e. taken as 0); ``nums [L]`` = its ``nums``: the
    number of training rows with each label. Step by step as the official code:

    * ``P = cooc / nums[:, None]`` (``P_ij = P(L_j | L_i)``; a row with ``nums_i = 0``
      would be 0/0 = NaN there; here it is 0, so such a label has no edges);
    * binarise: ``A_ij = 1`` if ``P_ij >= tau`` else 0 (the zero diagonal stays 0);
    * *column* re-weighting: ``A_ij <- p * A_ij / (sum_i' A_i'j + 1e-6)``;
    * ``A <- A + I`` (self weight 1).

    So column ``j`` (label ``j``'s incoming weights) sums to ``1 + p * deg_j / (deg_j +
    1e-6)`` with ``deg_j`` its number of in-edges (about ``1 + p``; 1 without in-edges). Returns float64 ``[L, L]``, finite for any counts.
    """
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    M = np.array(cooc, dtype=np.float64)
    N = np.asarray(nums, dtype=np.float64).ravel()
    L = N.shape[0]
    if M.shape != (L, L):
        raise ValueError(f"cooc has shape {M.shape}; expected ({L}, {L})")
    np.fill_diagonal(M, 0.0)
    P = np.divide(M, N[:, None], out=np.zeros_like(M), where=N[:, None] > 0)
    A = (P >= tau).astype(np.float64)
    A = A * p / (A.sum(axis=0, keepdims=True) + GEN_A_EPS)
    return A + np.identity(L)


def mlgcn_correlation(Y: Any, tau: float = 0.4, p: float = 0.25) -> np.ndarray:
    """ML-GCN's re-weighted correlation matrix ``A`` (before :func:`gen_adj`) from the
    training labels ``Y [n, L]``, as the official code: :func:`mlgcn_gen_A` of the
    distinct-label co-occurrence counts ``Y^T Y - diag`` and the label counts
    ``nums = diag(Y^T Y)`` (rows with a label). See :class:`MLGCNMethod` for how this
    differs from the paper's Eq. 8."""
    Yd = _dense_labels(Y).astype(np.float64)
    M = Yd.T @ Yd
    return mlgcn_gen_A(M, np.diag(M).copy(), tau, p)


def gen_adj(A: torch.Tensor) -> torch.Tensor:
    """Normalisation of the official ML-GCN code (megvii-research/ML-GCN, ``util.py``,
    ``gen_adj``): ``D = diag(A.sum(1))^{-1/2}``, ``A_hat = (A D)^T D = D A^T D``, i.e.
    ``A_hat[j, i] = A[i, j] / sqrt(rowsum_i * rowsum_j)``; the GCN computes
    ``A_hat @ H``, so label ``j`` aggregates column ``j`` of ``A``. A zero row sum
    (impossible for :func:`mlgcn_gen_A`'s output, which contains ``I``; the official
    code would give ``inf`` and NaN) gets ``D_ii = 0`` instead: that label's row and
    column of ``A_hat`` are 0."""
    s = A.sum(1)
    d = torch.where(s > 0, s.clamp(min=torch.finfo(s.dtype).tiny).pow(-0.5), torch.zeros_like(s))
    D = torch.diag(d)
    return torch.matmul(torch.matmul(A, D).t(), D)


class GraphConvolution(nn.Module):
    """``adj @ (X W)``, no bias, ``W ~ U(+-1/sqrt(out))`` (official ``GraphConvolution``)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        stdv = 1.0 / math.sqrt(out_features)
        self.weight = nn.Parameter(torch.empty(in_features, out_features).uniform_(-stdv, stdv))

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return adj @ (x @ self.weight)


class MLGCNNet(nn.Module):
    """``logits = h(x) W^T`` with ``W = GC2(LeakyReLU_0.2(GC1(E, A_hat)), A_hat)  [L, d']``."""

    def __init__(
        self,
        backbone: MLPBackbone,
        adj_hat: np.ndarray,
        label_embeddings: np.ndarray | None,
        embedding_dim: int,
        gcn_hidden: int,
        criterion: nn.Module,
    ) -> None:
        super().__init__()
        L = adj_hat.shape[0]
        self.backbone = backbone
        self.criterion = criterion
        self.register_buffer("adj", torch.as_tensor(adj_hat, dtype=torch.float32))
        if label_embeddings is None:  # learnable, N(0, 1) initialisation
            self.label_embedding = nn.Parameter(torch.randn(L, embedding_dim))
        else:  # fixed inputs, as the word vectors of the original
            self.register_buffer("label_embedding", torch.as_tensor(label_embeddings, dtype=torch.float32))
        in_dim = self.label_embedding.shape[1]
        self.gc1 = GraphConvolution(in_dim, gcn_hidden)
        self.gc2 = GraphConvolution(gcn_hidden, backbone.out_dim)
        self.act = nn.LeakyReLU(0.2)

    def classifiers(self) -> torch.Tensor:
        return self.gc2(self.act(self.gc1(self.label_embedding, self.adj)), self.adj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x) @ self.classifiers().t()


@register("ML-GCN")
class MLGCNMethod(_ArchitectureMethod):
    """ML-GCN (Chen, Wei, Wang, Guo, "Multi-Label Image Recognition with Graph
    Convolutional Networks", CVPR 2019, Sec. 3.2-3.4); the ML-GCN row of the paper's
    Table ``tab:main_standard`` (baselines, Sec. 4.1 (6)).

    Mechanism kept: a 2-layer GCN (LeakyReLU 0.2 between the layers, Sec. 3.3) over a
    label graph maps label embeddings ``E [L, d_e]`` to per-label classifiers
    ``W [L, d']``; logits ``= h(x) W^T`` (Eq. 4, no bias, as the official model). The
    graph is fixed (a buffer; the official ``self.A`` Parameter is only used through
    ``gen_adj(self.A).detach()`` and is in no optimiser group).

    Graph: **the official code is followed exactly**, not the paper's Eq. 8
    (megvii-research/ML-GCN, ``util.py``: ``gen_A`` then ``gen_adj``):

    * :func:`mlgcn_correlation` = ``gen_A`` on the *training* labels: ``nums`` = label
      counts, ``adj`` = co-occurrence counts of distinct labels (zero diagonal);
      ``P = adj / nums[:, None]``; binarised at ``tau`` (``>= tau`` -> 1, Eq. 7);
      ``A = A * p / (A.sum(0) + 1e-6) + I`` (``p = 0.25``, the official constant);
    * :func:`gen_adj`: ``A_hat = D^{-1/2} A^T D^{-1/2}`` with ``D = diag(A.sum(1))``
      (row sums of ``A``, although the GCN aggregates its columns); the GCN layers
      compute ``A_hat @ H``, so label ``j`` aggregates the labels ``i`` with
      ``P(L_j | L_i) >= tau`` with weights ``A_ij / sqrt(d_i d_j)``.

    Differences of that official graph from the paper's Eq. 8 (``A'_ij = p A_ij /
    sum_j' A_ij'`` for ``i != j``, ``A'_ii = 1 - p``, ``p = 0.2``): the official code
    normalises the binary ``A`` by *column* (the in-edges of a label share ``p``, not
    the out-edges), keeps a self weight of 1 instead of ``1 - p`` (so a label's
    incoming weights before ``gen_adj`` sum to ``1 + p = 1.25``, against 1 under
    Eq. 8; 1 for a label without in-edges), uses ``p = 0.25`` and adds 1e-6 to the
    column sums; ``gen_adj`` then rescales by the row sums. ``p`` stays a
    hyper-parameter (default 0.25), ``tau = 0.4`` as in the paper and the code.
    ``extra_outputs()`` records ``A`` (``correlation_reweighted``) and ``A_hat``
    (``adj_normalised``).

    Labels with zero training count: the official ``adj / nums`` is 0/0 = NaN there;
    here that row is 0, so such a label has no edges, ``A_hat`` has 1 on its diagonal
    and 0 elsewhere in its row and column, and its classifier is finite (no NaN).

    Differences from the original, because inputs are tabular:

    * classifiers are applied to the backbone feature ``h(x)`` (d' = 512), not to the
      max-pooled ResNet-101 map (2048), so GC2 outputs 512 (GC1 hidden: ``gcn_hidden``
      = 1024 as in the official code);
    * label embeddings: the original feeds fixed 300-d GloVe vectors of the label
      *names*; tabular label names have no word vectors available offline, so by
      default ``E`` is a *learnable* ``[L, embedding_dim=300]`` matrix (N(0, 1) init,
      seeded). ``label_embeddings`` = path to a ``.npy`` ``[L, d_e]`` file uses those
      vectors instead, fixed (not trained), as in the original; ``extra_outputs()``
      says which was used (``label_embeddings`` key).

    The dense ``L x L`` graph suits conventional MLC (L <= a few thousand).
    """

    def __init__(
        self,
        *,
        tau: float,
        p: float,
        label_embeddings: str | None,
        embedding_dim: int,
        gcn_hidden: int,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if not 0.0 < float(tau) <= 1.0:
            raise ValueError(f"ML-GCN: tau must be in (0, 1], got {tau}")
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"ML-GCN: p must be in [0, 1], got {p}")
        self.tau, self.p = float(tau), float(p)
        self.label_embeddings = None if label_embeddings in (None, "") else str(label_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.gcn_hidden = int(gcn_hidden)
        self.correlation: np.ndarray | None = None
        self.adj_hat: np.ndarray | None = None
        self._emb: np.ndarray | None = None
        self._emb_sha256: str | None = None

    def fingerprint(self) -> dict[str, Any]:
        return {**super().fingerprint(), "label_embeddings_sha256": self._emb_sha256}

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        super().prepare(data, ctx)
        self.correlation = mlgcn_correlation(data.Y_train, self.tau, self.p)
        # the official model holds A as float32 (``Parameter(torch.from_numpy(_adj).float())``)
        self.adj_hat = gen_adj(torch.as_tensor(self.correlation, dtype=torch.float32)).numpy()
        self._emb, self._emb_sha256 = None, None
        if self.label_embeddings is not None:
            path = Path(self.label_embeddings)
            emb = np.load(path, allow_pickle=False)
            if emb.ndim != 2 or emb.shape[0] != data.n_labels:
                raise ValueError(
                    f"ML-GCN: label_embeddings {path} has shape {emb.shape}; expected [{data.n_labels}, d]"
                )
            if not np.all(np.isfinite(emb)):
                raise ValueError(f"ML-GCN: label_embeddings {path} has non-finite values")
            self._emb = emb.astype(np.float32)
            self._emb_sha256 = hashlib.sha256(np.ascontiguousarray(self._emb).tobytes()).hexdigest()

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> MLGCNNet:
        if self.adj_hat is None:
            raise RuntimeError("ML-GCN: prepare() must run before build_model()")
        return MLGCNNet(self.backbone(X_train), self.adj_hat, self._emb, self.embedding_dim, self.gcn_hidden,
                        self._criterion)

    def extra_outputs(self) -> dict[str, Any]:
        if self.correlation is None:
            return {}
        if self.label_embeddings is None:
            emb = {"source": "learnable", "dim": self.embedding_dim, "init": "N(0,1), run seed"}
        else:
            emb = {"source": "file", "path": self.label_embeddings, "dim": int(self._emb.shape[1]),
                   "sha256": self._emb_sha256, "trainable": False}
        return {"label_embeddings": emb, "correlation_reweighted": self.correlation.tolist(),
                "adj_normalised": self.adj_hat.tolist(), "hparams": self.hparams()}

