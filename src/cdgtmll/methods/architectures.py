"""Generic multi-label architectures: CC, ML-GCN, C-Tran and ML-Decoder.

These are the four "generic multi-label models" of the paper's baselines (Sec. 4.1
"Experimental Setup", paragraph *Baselines*, item (6); rows CC / ML-GCN / C-Tran /
ML-Decoder of Table ``tab:main_standard``). Each is implemented as a *head* on the
shared tabular backbone (:class:`cdgtmll.nn.backbone.MLPBackbone`, App. E.2: 2 x 512,
ReLU, output ``h(x)`` in R^{d'}, d' = 512) and trained by the shared trainer
(:mod:`cdgtmll.nn.trainer`, App. E.1) with the same epochs / batch size / learning
rates / weight decay / clipping as every other neural method, on the project's BCE
(``build_loss("bce", ...)``: sum over labels, mean over the batch). Only the head
differs between these rows and the BCE row. Every head's parameters form the
``head`` parameter group (eta_head), the backbone the ``backbone`` group (eta_0).

The common adaptation: the originals sit on a CNN feature *map* (ResNet / TResNet
spatial features, C-Tran / ML-Decoder / ML-GCN) or on raw features (CC); our inputs
are tabular feature vectors, so the only feature we have is the vector ``h(x)``.
The two attention models need a *set of feature tokens*: we split ``h`` into
``n_tokens`` contiguous chunks (default 8 chunks of 64 for d' = 512) and map chunk
``t`` by its own affine map ``R^{d'/T} -> R^{d_model}`` (:class:`FeatureTokens`; a
per-chunk map, so tokens are distinguishable without a positional encoding, which
neither original uses by default). Everything else is documented per class.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.losses import build_loss
from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.neural import NeuralMethod
from cdgtmll.nn.backbone import MLPBackbone

__all__ = [
    "ClassifierChainMethod",
    "MLGCNMethod",
    "CTranMethod",
    "MLDecoderMethod",
    "FeatureTokens",
    "mlgcn_correlation",
    "gen_adj",
    "chain_orders",
    "sample_label_states",
]


# ============================================================================ shared parts


class FeatureTokens(nn.Module):
    """``h [B, D] -> tokens [B, T, d_model]``: split ``h`` into ``T`` contiguous chunks of
    ``D / T`` and apply chunk ``t``'s own affine map (weights ``[T, D/T, d_model]``,
    PyTorch-Linear initialisation U(+-1/sqrt(D/T))). This stands in for the spatial
    feature map of the image originals (see the module docstring)."""

    def __init__(self, in_dim: int, n_tokens: int, d_model: int) -> None:
        super().__init__()
        if n_tokens < 1 or in_dim % n_tokens:
            raise ValueError(f"n_tokens={n_tokens} must divide the backbone width {in_dim}")
        self.n_tokens, self.chunk = int(n_tokens), in_dim // n_tokens
        bound = 1.0 / math.sqrt(self.chunk)
        self.weight = nn.Parameter(torch.empty(self.n_tokens, self.chunk, d_model).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(self.n_tokens, d_model).uniform_(-bound, bound))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        t = h.reshape(h.shape[0], self.n_tokens, self.chunk)
        return torch.einsum("btc,tcd->btd", t, self.weight) + self.bias


class _ArchitectureMethod(NeuralMethod):
    """Backbone + an architecture head, BCE loss (``build_loss('bce')``).

    Subclasses build a ``nn.Module`` with attributes ``backbone`` and ``criterion`` and
    a ``forward(x) -> logits [B, L]`` used for prediction (``sigmoid``); every other
    trainable parameter is a head parameter.
    """

    loss_name = "bce"

    def __init__(self, **trainer: Any) -> None:
        super().__init__(**trainer)
        self._criterion: nn.Module | None = None

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        self._criterion = build_loss(self.loss_name, data.counts, data.n_train)

    def hparams(self) -> dict[str, Any]:
        return {**super().hparams(), "loss": self.loss_name}

    def param_groups(self, model: nn.Module) -> dict[str, list[nn.Parameter]]:
        backbone = [p for p in model.backbone.parameters() if p.requires_grad]
        ids = {id(p) for p in backbone}
        head = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
        return {"backbone": backbone, "head": head}

    def training_step(self, model, xb, yb, progress):
        return model.criterion(model(xb), yb), {}

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(model(x))


def _dense_labels(Y: Any) -> np.ndarray:
    return np.asarray(Y.toarray() if sp.issparse(Y) else Y)


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
    classifier chains (CC) and ensembles of classifier chains (ECC)); the CC row of the paper's Table ``tab:main_standard`` (baselines, Sec. 4.1 (6)).

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

    description = "classifier chains (Read 2011) on the MLP backbone: teacher forcing, greedy hard-prediction chain"

    def __init__(
        self,
        order: str = "random",
        n_chains: int = 1,
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

    def hparams(self) -> dict[str, Any]:
        return {**super().hparams(), "order": self.order, "n_chains": self.n_chains}

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


def mlgcn_correlation(Y: Any, tau: float = 0.4, p: float = 0.2) -> np.ndarray:
    """Re-weighted label correlation matrix ``A'`` of ML-GCN (Chen et al. 2019, Sec. 3.4).

    * conditional probabilities ``P_ij = P(L_j | L_i) = M_ij / N_i`` from the training
      co-occurrence counts ``M = Y^T Y`` and ``N_i = M_ii`` (a label with ``N_i = 0``
      gets an all-zero row: ``0/0 := 0``);
    * Eq. 7, binarisation: ``A_ij = 1`` if ``P_ij >= tau`` else 0, for ``i != j``;
    * Eq. 8, re-weighting: ``A'_ij = p A_ij / sum_{j' != i} A_ij'`` for ``i != j`` and
      ``A'_ii = 1 - p``. A label without neighbours (e.g. zero training count) keeps
      only ``A'_ii = 1 - p`` (the ratio 0/0 is taken as 0), so no NaN arises.

    Returns float64 ``[L, L]``; rows sum to 1, or ``1 - p`` for a label without neighbours.
    """
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}")
    Yd = _dense_labels(Y).astype(np.float64)
    M = Yd.T @ Yd
    N = np.diag(M).copy()
    P = np.divide(M, N[:, None], out=np.zeros_like(M), where=N[:, None] > 0)
    A = (P >= tau).astype(np.float64)
    np.fill_diagonal(A, 0.0)
    deg = A.sum(axis=1, keepdims=True)
    Ar = np.divide(p * A, deg, out=np.zeros_like(A), where=deg > 0)
    np.fill_diagonal(Ar, 1.0 - p)
    return Ar


def gen_adj(A: torch.Tensor) -> torch.Tensor:
    """Normalisation of the official ML-GCN code (megvii-research/ML-GCN, ``util.py``,
    ``gen_adj``): ``D = diag(A.sum(1))^{-1/2}``, ``A_hat = (A D)^T D = D A^T D``."""
    D = torch.diag(torch.pow(A.sum(1), -0.5))
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
    graph (:func:`mlgcn_correlation`): conditional probabilities from the *training*
    co-occurrences, binarised at ``tau`` (Eq. 7) and re-weighted with ``p`` (Eq. 8),
    then normalised with the official ``gen_adj`` (:func:`gen_adj`):
    ``A_hat = D^{-1/2} A'^T D^{-1/2}``, ``D = diag(row sums of A')``. Since every row of
    Eq. 8's ``A'`` sums to 1, ``D`` only rescales labels without neighbours (row sum
    ``1 - p``); the transpose (kept from the official code) makes label ``j`` aggregate
    the labels ``i`` with ``P(L_j | L_i) >= tau``. The graph is fixed (a buffer; the
    official ``self.A`` Parameter is only used through ``gen_adj(self.A).detach()``).

    Differences from the original, because inputs are tabular:

    * classifiers are applied to the backbone feature ``h(x)`` (d' = 512), not to the
      max-pooled ResNet-101 map (2048), so GC2 outputs 512 (GC1 hidden: ``gcn_hidden``
      = 1024 as in the official code);
    * label embeddings: the original feeds fixed 300-d GloVe vectors of the label
      *names*; tabular label names have no word vectors available offline, so by
      default ``E`` is a *learnable* ``[L, embedding_dim=300]`` matrix (N(0, 1) init,
      seeded). ``label_embeddings`` = path to a ``.npy`` ``[L, d_e]`` file uses those
      vectors instead, fixed (not trained), as in the original; ``extra_outputs()``
      says which was used (``label_embeddings`` key);
    * Eq. 8 as printed in the paper with ``p = 0.2`` and ``tau = 0.4`` (the paper's
      setting); the official ``gen_A`` instead normalises *columns*, uses ``p = 0.25``
      and a self weight of 1 (``A + I``).

    Labels with zero training count have no edges and a finite classifier (no NaN).
    The dense ``L x L`` graph suits conventional MLC (L <= a few thousand).
    """

    description = "ML-GCN (Chen 2019): 2-layer GCN over the co-occurrence label graph -> per-label classifiers on h(x)"

    def __init__(
        self,
        tau: float = 0.4,
        p: float = 0.2,
        label_embeddings: str | None = None,
        embedding_dim: int = 300,
        gcn_hidden: int = 1024,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if not 0.0 < float(tau) <= 1.0:
            raise ValueError(f"ML-GCN: tau must be in (0, 1], got {tau}")
        if not 0.0 <= float(p) < 1.0:
            raise ValueError(f"ML-GCN: p must be in [0, 1), got {p}")
        self.tau, self.p = float(tau), float(p)
        self.label_embeddings = None if label_embeddings in (None, "") else str(label_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.gcn_hidden = int(gcn_hidden)
        self.correlation: np.ndarray | None = None
        self.adj_hat: np.ndarray | None = None
        self._emb: np.ndarray | None = None
        self._emb_sha256: str | None = None

    def hparams(self) -> dict[str, Any]:
        return {
            **super().hparams(), "tau": self.tau, "p": self.p, "label_embeddings": self.label_embeddings,
            "embedding_dim": self.embedding_dim, "gcn_hidden": self.gcn_hidden,
        }

    def fingerprint(self) -> dict[str, Any]:
        return {**super().fingerprint(), "label_embeddings_sha256": self._emb_sha256}

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        super().prepare(data, ctx)
        self.correlation = mlgcn_correlation(data.Y_train, self.tau, self.p)
        self.adj_hat = gen_adj(torch.as_tensor(self.correlation)).numpy()
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


# ============================================================================ C-Tran

#: state ids of C-Tran's state embedding (official ``custom_replace(mask, 0, 1, 2)``:
#: unknown (-1) -> 0 [padding_idx], negative (0) -> 1, positive (1) -> 2)
UNKNOWN, NEGATIVE, POSITIVE = 0, 1, 2


def sample_label_states(y: torch.Tensor, max_known_fraction: float = 0.75) -> torch.Tensor:
    """Label-mask training states ``[B, L]`` (long) for targets ``y [B, L]``.

    Per row, as the official ``get_unk_mask_indices`` (QData/C-Tran,
    ``dataloaders/data_utils.py``): the number of known labels is drawn uniformly from
    ``{0, ..., floor(max_known_fraction * L)}`` (``random.randint(0, int(0.75 L))``), and
    that many labels, chosen uniformly at random, are revealed (state = ``y + 1``); the
    others are unknown (0). Uses the global torch RNG (seeded and checkpointed by the
    trainer)."""
    B, L = y.shape
    k_max = int(max_known_fraction * L)
    n_known = torch.randint(0, k_max + 1, (B, 1), device=y.device)
    rank = torch.rand(B, L, device=y.device).argsort(dim=1).argsort(dim=1)
    known = rank < n_known
    return torch.where(known, y.long() + 1, torch.zeros_like(y, dtype=torch.long))


def _ctran_weights_init(module: nn.Module) -> None:
    """Official C-Tran ``weights_init``: Linear/Embedding weights (and Linear biases)
    ~ U(+-1/sqrt(fan)) with fan = weight.size(1); LayerNorm to (1, 0)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        stdv = 1.0 / math.sqrt(module.weight.size(1))
        module.weight.data.uniform_(-stdv, stdv)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.uniform_(-stdv, stdv)
    elif isinstance(module, nn.LayerNorm):
        module.bias.data.zero_()
        module.weight.data.fill_(1.0)


class CTranNet(nn.Module):
    """Feature tokens ``[B, T, d]`` ++ label tokens ``label_emb_k + state_emb(s_k)``
    -> LayerNorm -> ``n_layers`` post-norm transformer encoder layers (self-attention
    over all T + L tokens, feed-forward width ``d_model``, ReLU, dropout; the official
    ``SelfAttnLayer``) -> per-label linear read-out of label token ``k``."""

    def __init__(
        self, backbone: MLPBackbone, n_labels: int, n_tokens: int, d_model: int, n_layers: int, n_heads: int,
        dropout: float, criterion: nn.Module,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.criterion = criterion
        self.n_labels = int(n_labels)
        self.tokens = FeatureTokens(backbone.out_dim, n_tokens, d_model)
        self.label_emb = nn.Embedding(n_labels, d_model)
        self.state_emb = nn.Embedding(3, d_model, padding_idx=UNKNOWN)
        self.norm = nn.LayerNorm(d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=d_model, dropout=dropout,
                                       activation="relu", batch_first=True)
            for _ in range(n_layers)
        )
        self.out_weight = nn.Parameter(torch.empty(n_labels, d_model))
        self.out_bias = nn.Parameter(torch.empty(n_labels))
        for m in (self.label_emb, self.state_emb, self.norm, self.layers):
            m.apply(_ctran_weights_init)
        stdv = 1.0 / math.sqrt(d_model)  # official output_linear(hidden, L), diagonal read-out
        self.out_weight.data.uniform_(-stdv, stdv)
        self.out_bias.data.uniform_(-stdv, stdv)
        with torch.no_grad():
            self.state_emb.weight[UNKNOWN].zero_()  # 'unknown' adds nothing (padding row, never trained)

    def forward(self, x: torch.Tensor, states: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[B, L]``; ``states`` ``[B, L]`` in {0 unknown, 1 neg, 2 pos}; ``None`` =
        all unknown (test time)."""
        feats = self.tokens(self.backbone(x))
        B = feats.shape[0]
        if states is None:
            states = torch.zeros(B, self.n_labels, dtype=torch.long, device=feats.device)
        labels = self.label_emb.weight.unsqueeze(0) + self.state_emb(states)
        e = self.norm(torch.cat([feats, labels], dim=1))
        for layer in self.layers:
            e = layer(e)
        out = e[:, feats.shape[1]:, :]
        return (out * self.out_weight).sum(-1) + self.out_bias


@register("C-Tran")
class CTranMethod(_ArchitectureMethod):
    """C-Tran (Lanchantin, Wang, Ordonez, Qi, "General Multi-label Image Classification
    with Transformers", CVPR 2021, Sec. 3: label embeddings, state embeddings, label
    mask training); the C-Tran row of the paper's Table ``tab:main_standard``
    (baselines, Sec. 4.1 (6)).

    Mechanism kept: a transformer encoder over feature tokens plus one token per label;
    label token ``k`` = label embedding + state embedding of ``s_k`` in {unknown,
    negative, positive} (ids 0/1/2, unknown = padding index, as the official
    ``custom_replace(mask, 0, 1, 2)``); the logit of label ``k`` is a per-label linear
    read-out of label token ``k``'s output (the official ``output_linear`` + diagonal
    mask). Label mask training (LMT, :func:`sample_label_states`): per training row
    the number of revealed labels is uniform on ``{0, ..., floor(0.75 L)}`` and a
    uniformly random subset of that size is revealed with its true state (the official
    ``get_unk_mask_indices``; so at least 25% of the labels are always unknown). With
    LMT the official config sets ``loss_labels='unk'`` (loss on the unknown labels
    only), the default here: revealed entries are replaced by a logit of
    ``+-100`` matching their target, whose BCE is exactly 0 in float32 and carries no
    gradient, so the shared BCE (sum over labels, mean over rows) only counts the
    unknown labels. At test time every label is unknown (no label is read). Layers
    are post-norm with feed-forward width = ``d_model``, ReLU, dropout 0.1, input
    LayerNorm and the official uniform initialisation.

    Differences from the original, because inputs are tabular:

    * feature tokens: the original uses the 18 x 18 ResNet-101 map (2048-d tokens,
      d_model = 2048); we split ``h(x)`` (512) into ``n_tokens`` = 8 chunks of 64, each
      mapped by its own affine map to ``d_model`` (:class:`FeatureTokens`);
    * size: ``d_model=128, n_layers=2, n_heads=4`` (official 2048 / 3 / 4) to stay
      cheap next to a 2 x 512 MLP backbone;
    * the 'unknown' state vector is zero (the padding row; the official init overwrites
      it with a random, equally untrained vector), and no partial-label inference mode
      (``test_known``) is exposed: at test time all labels are unknown.

    Hyper-parameters: ``n_tokens=8, d_model=128, n_layers=2, n_heads=4, dropout=0.1,
    lmt=True, max_known_fraction=0.75, loss_labels='unk'`` ('all': BCE on every label,
    the official default without LMT). ``lmt=False`` trains with every label unknown.
    """

    description = "C-Tran (Lanchantin 2021): transformer over h(x)-tokens + label/state tokens, label mask training"

    def __init__(
        self,
        n_tokens: int = 8,
        d_model: int = 128,
        n_layers: int = 2,
        n_heads: int = 4,
        dropout: float = 0.1,
        lmt: bool = True,
        max_known_fraction: float = 0.75,
        loss_labels: str = "unk",
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if self.hidden_dim % int(n_tokens):
            raise ValueError(f"C-Tran: n_tokens={n_tokens} must divide hidden_dim={self.hidden_dim}")
        if int(d_model) % int(n_heads):
            raise ValueError(f"C-Tran: n_heads={n_heads} must divide d_model={d_model}")
        if not 0.0 <= float(max_known_fraction) < 1.0:
            raise ValueError("C-Tran: max_known_fraction must be in [0, 1)")
        if loss_labels not in ("unk", "all"):
            raise ValueError(f"C-Tran: loss_labels must be 'unk' or 'all', got {loss_labels!r}")
        self.n_tokens, self.d_model = int(n_tokens), int(d_model)
        self.n_layers, self.n_heads, self.dropout = int(n_layers), int(n_heads), float(dropout)
        self.lmt, self.max_known_fraction, self.loss_labels = bool(lmt), float(max_known_fraction), loss_labels

    def hparams(self) -> dict[str, Any]:
        return {
            **super().hparams(), "n_tokens": self.n_tokens, "d_model": self.d_model, "n_layers": self.n_layers,
            "n_heads": self.n_heads, "dropout": self.dropout, "lmt": self.lmt,
            "max_known_fraction": self.max_known_fraction, "loss_labels": self.loss_labels,
        }

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> CTranNet:
        return CTranNet(self.backbone(X_train), Y_train.shape[1], self.n_tokens, self.d_model, self.n_layers,
                        self.n_heads, self.dropout, self._criterion)

    def sample_states(self, yb: torch.Tensor) -> torch.Tensor:
        if not self.lmt:
            return torch.zeros_like(yb, dtype=torch.long)
        return sample_label_states(yb, self.max_known_fraction)

    def training_step(self, model, xb, yb, progress):
        states = self.sample_states(yb)
        logits = model(xb, states)
        if self.loss_labels == "unk":
            known = states != UNKNOWN
            logits = torch.where(known, (2.0 * yb - 1.0) * 100.0, logits)  # BCE exactly 0, no gradient
        return model.criterion(logits, yb), {}

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(model(x, None))  # every label unknown

    def extra_outputs(self) -> dict[str, Any]:
        return {"test_time_states": "all unknown", "hparams": self.hparams()}


# ============================================================================ ML-Decoder


class MLDecoderLayer(nn.Module):
    """The official ``TransformerDecoderLayerOptimal`` (Alibaba-MIIL/ML_Decoder,
    ``src_files/ml_decoder/ml_decoder.py``): the decoder layer *without* query
    self-attention: ``q = LN(q + drop(q)); q = LN(q + drop(CrossAttn(q, mem, mem)));
    q = LN(q + drop(FFN(q)))``. Each query is processed independently of the others."""

    def __init__(self, d_model: int, n_heads: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.cross_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        tgt = self.norm1(tgt + self.dropout1(tgt))
        tgt2 = self.cross_attn(tgt, memory, memory, need_weights=False)[0]
        tgt = self.norm2(tgt + self.dropout2(tgt2))
        tgt2 = self.linear2(self.dropout(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout3(tgt2))


class MLDecoderNet(nn.Module):
    """``h`` -> tokens -> ReLU (``embed_standart``) = memory; ``K`` queries -> decoder
    layers (cross-attention only) -> group fully-connected pooling: query ``g`` gives
    outputs ``g*f .. g*f+f-1`` (``f = ceil(L/K)``) through its own ``[d, f]`` matrix;
    the first ``L`` outputs + a per-label bias are the logits (official ``GroupFC``)."""

    def __init__(
        self, backbone: MLPBackbone, n_labels: int, n_groups: int, n_tokens: int, d_model: int, n_heads: int,
        dim_feedforward: int, n_layers: int, dropout: float, learnable_queries: bool, criterion: nn.Module,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.criterion = criterion
        self.n_labels = int(n_labels)
        self.n_groups = min(int(n_groups), self.n_labels)
        self.group_size = int(math.ceil(self.n_labels / self.n_groups))
        self.tokens = FeatureTokens(backbone.out_dim, n_tokens, d_model)
        queries = torch.randn(self.n_groups, d_model)  # nn.Embedding's N(0, 1) initialisation
        if learnable_queries:
            self.queries = nn.Parameter(queries)
        else:
            self.register_buffer("queries", queries)
        self.layers = nn.ModuleList(
            MLDecoderLayer(d_model, n_heads, dim_feedforward, dropout) for _ in range(n_layers)
        )
        self.duplicate_pooling = nn.Parameter(torch.empty(self.n_groups, d_model, self.group_size))
        nn.init.xavier_normal_(self.duplicate_pooling)
        self.duplicate_pooling_bias = nn.Parameter(torch.zeros(self.n_labels))

    def memory(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.tokens(self.backbone(x)))

    def decode(self, memory: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        """Query outputs ``[B, K', d]`` for any query set ``[K', d]``."""
        tgt = queries.unsqueeze(0).expand(memory.shape[0], -1, -1)
        for layer in self.layers:
            tgt = layer(tgt, memory)
        return tgt

    def group_fc(self, q: torch.Tensor) -> torch.Tensor:
        out = torch.einsum("bkd,kdf->bkf", q, self.duplicate_pooling).flatten(1)[:, : self.n_labels]
        return out + self.duplicate_pooling_bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group_fc(self.decode(self.memory(x), self.queries))


@register("ML-Decoder")
class MLDecoderMethod(_ArchitectureMethod):
    """ML-Decoder (Ridnik, Sharir, Ben-Cohen, Ben-Baruch, Noy, "ML-Decoder: Scalable and
    Versatile Classification Head", WACV 2023, Sec. 3: removing self-attention,
    group decoding, non-learnable queries); the ML-Decoder row of the paper's Table
    ``tab:main_standard`` (baselines, Sec. 4.1 (6)).

    Mechanism kept (following the official ``MLDecoder``): feature tokens -> Linear
    + ReLU (``embed_standart``) as the memory; ``K = min(n_groups, L)`` queries
    (``n_groups`` default 100, the official ``embed_len_decoder``) go through decoder
    layers with cross-attention and feed-forward but *no self-attention between
    queries* (:class:`MLDecoderLayer`, the official ``TransformerDecoderLayerOptimal``,
    1 layer, dropout 0.1); group fully-connected pooling maps query ``g`` to the
    ``f = ceil(L / K)`` logits ``g*f .. g*f+f-1`` (``duplicate_pooling [K, d, f]``,
    Xavier-normal, + a zero-initialised per-label bias; the first ``L`` are kept). For
    ``L <= n_groups`` this is one query per label with its own ``d -> 1`` read-out.

    Queries: the official code uses *non-learnable* queries for ordinary (non-ZSL)
    training (``query_embed.requires_grad_(False)``, commented "non-learnable
    queries"; the ZSL variant instead feeds word-vector queries through a learnable
    projection). We follow that by default (``learnable_queries=False``: fixed N(0, 1)
    queries drawn with the run seed, a buffer); ``learnable_queries=True`` trains them.

    Differences from the original, because inputs are tabular: the memory is the
    ``n_tokens`` = 8 chunk tokens of ``h(x)`` (:class:`FeatureTokens`, each chunk's own
    affine map, then ReLU) instead of the 7 x 7 / 14 x 14 CNN map; size
    ``d_model=128, n_heads=4, dim_feedforward=512`` (official 768 / 8 / 2048) to stay
    cheap next to the 2 x 512 MLP backbone.
    """

    description = "ML-Decoder (Ridnik 2023): query cross-attention over h(x)-tokens, no self-attention, group FC"

    def __init__(
        self,
        n_groups: int = 100,
        n_tokens: int = 8,
        d_model: int = 128,
        n_heads: int = 4,
        dim_feedforward: int = 512,
        n_layers: int = 1,
        dropout: float = 0.1,
        learnable_queries: bool = False,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if int(n_groups) < 1:
            raise ValueError("ML-Decoder: n_groups must be >= 1")
        if self.hidden_dim % int(n_tokens):
            raise ValueError(f"ML-Decoder: n_tokens={n_tokens} must divide hidden_dim={self.hidden_dim}")
        if int(d_model) % int(n_heads):
            raise ValueError(f"ML-Decoder: n_heads={n_heads} must divide d_model={d_model}")
        self.n_groups, self.n_tokens, self.d_model = int(n_groups), int(n_tokens), int(d_model)
        self.n_heads, self.dim_feedforward, self.n_layers = int(n_heads), int(dim_feedforward), int(n_layers)
        self.dropout, self.learnable_queries = float(dropout), bool(learnable_queries)

    def hparams(self) -> dict[str, Any]:
        return {
            **super().hparams(), "n_groups": self.n_groups, "n_tokens": self.n_tokens, "d_model": self.d_model,
            "n_heads": self.n_heads, "dim_feedforward": self.dim_feedforward, "n_layers": self.n_layers,
            "dropout": self.dropout, "learnable_queries": self.learnable_queries,
        }

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> MLDecoderNet:
        return MLDecoderNet(
            self.backbone(X_train), Y_train.shape[1], self.n_groups, self.n_tokens, self.d_model, self.n_heads,
            self.dim_feedforward, self.n_layers, self.dropout, self.learnable_queries, self._criterion,
        )

    def extra_outputs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hparams": self.hparams()}
        if self.model is not None:
            out.update({"n_queries": self.model.n_groups, "group_size": self.model.group_size})
        return out
