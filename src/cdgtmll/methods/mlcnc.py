r"""MLC-NC (Tao et al., "MLC-NC: Long-tailed multi-label image classification through the
lens of neural collapse", AAAI 2025) on the shared tabular backbone and trainer.

The MLC-NC row of the paper's Tables ``tab:main_standard`` / ``tab:main_rare`` (Sec. 4.1,
baselines (3) "long-tail specific"). Sources: the project notes
(``shared/notes/baselines.md``, MLC-NC row) and the official repository
``t1neo666/AAAI25_MLC-NC`` (read for the formulas: ``src_files/attention/attention.py``
and ``Proto_Classifiers.py``, ``src_files/loss_functions/{featurelabelloss,prototypeloss,
twowayloss,combinedloss}.py``, ``src_files/data/sampler.py``, ``train.py``). The paper's
own section and equation numbers are *not* cited here because the paper text was not
available to us; every formula below is stated in full instead.

Model (official ``Attention`` head, ``classifier='ETF'``)
-------------------------------------------------------
::

    h = backbone(x)                                  # [B, d'], d' = 512 (App. E.2)
    T = ReLU(FeatureTokens(h))                       # [B, n_tokens, d]   ("embed_standart" + ReLU)
    f = MHA(query = M^T, key = T, value = T)         # [B, K, d]  class-wise features f_k
    z_k = normalize(f_k W_k + b_k)                   # [B, K, p]  per-class projection, p = 20
    logits = tau * vec(z) @ C                        # [B, K]     C: simplex ETF [K p, K]

* ``M = sqrt(K/(K-1)) P (I_K - 1 1^T / K)`` (:func:`simplex_etf`), ``P`` a random
  ``d x K`` matrix with orthonormal columns (QR of a Gaussian matrix drawn from a
  generator seeded by the run seed; the official code QRs ``np.random.random``; any
  orthonormal ``P`` gives the same geometry). Its columns ``m_k`` are unit vectors with
  pairwise cosine exactly ``-1/(K-1)``. ``M^T`` are the **label queries** of the single
  cross-attention layer (``nn.MultiheadAttention``, attention dropout 0.1, no residual,
  no norm, no FFN, as the official head) and the **fixed prototypes** of the alignment
  loss; ``M`` is a buffer, never trained (official: a detached copy).
* ``W_k [d, p]`` (Xavier-normal on the ``[K, d, p]`` tensor, as the official
  ``duplicate_proto``) and ``b_k`` (zeros) project each class feature to ``p = 20`` dims;
  ``z_k`` is L2-normalised.
* Classifier: ``C`` is a second simplex ETF, in ``K p`` dims (``K p >= K`` always), and
  ``tau`` a learnable scalar initialised to 1 (official ``self.temperature``). The official
  ``Proto_Classifier.proto`` is an ``nn.Parameter`` whose ``requires_grad`` ``train.py``
  sets to ``True``, so it is ETF-*initialised* and trained: ``etf_classifier_trainable=True``
  (default) follows that; ``False`` keeps ``C`` fixed (a buffer).
* Prediction: ``sigmoid(logits)`` (official ``validate_multi``). The Two-Way loss is
  invariant to adding one constant to all logits, so these are **scores, not calibrated
  probabilities**; thresholding at 0.5 has no special meaning for this method (rank-based
  metrics are unaffected).

Losses (reductions are the official ones, so that the official weights keep their meaning)
------------------------------------------------------------------------------------------
``y in {0,1}^{B x K}``; ``c_ik = cos(f_ik, m_k)``.

* Alignment to the fixed ETF prototypes (:func:`alignment_loss`, official
  ``FeatureLabelLoss``)::

      L_align = mean_{i,k} -[ y_ik log a+(c_ik) + (1 - y_ik) log a-(c_ik) ]
      a+(c) = (1 + c) / 2,            a-(c) = 1 - (K-1)/K |1/(K-1) + c|

  ``a+ = 1`` iff ``c = 1`` (positive feature on its prototype); ``a- = 1`` iff
  ``c = -1/(K-1)`` (negative feature at the ETF angle, e.g. on another class's
  prototype), ``a- = 0`` at ``c = 1``. As the official code
  (``src_files/loss_functions/featurelabelloss.py``, commit
  0b8ca16f866511c5798a99109f4fc0c4a47b3630: ``S_i_c = (1 + similarities) / 2 + 1e-6``,
  ``torch.log(1 - (C - 1) / C * torch.abs(1 / (C - 1) + similarities) + 1e-6)``), ``1e-6``
  is **added** to both arguments before the log, so the loss is finite (at most
  ``-log 1e-6``); at the optimum it is ``-log(1 + 1e-6)``, not 0. Both arguments are
  ``>= 0`` in exact arithmetic (``|c| <= 1``); a rounded cosine just above 1 can make
  one slightly negative, so it is floored at 0 before the ``+ 1e-6`` (a no-op wherever
  the official value is finite and the argument is not below 0 by rounding).
* Contrastive prototype loss in the 20-d projection, temperature ``t = 0.5``
  (:func:`contrastive_prototype_loss`, official ``ContrastiveProtoLoss``): **for every
  positive pair (i, k) only**, the projected feature ``z_ik`` is contrasted against the
  prototypes of **all** K classes::

      L_proto = mean_{(i,k): y_ik = 1} -log softmax_j( cos(z_ik, q_j) / t )[k]

  ``q_j`` = the running mean of ``z_ij`` over every positive (i, j) seen in training so
  far, accumulated batch by batch and refreshed at the end of each epoch, never reset
  (official ``class_proj_prototype``; no gradient flows into ``q``). Before the first
  refresh ``q = 0`` (uniform softmax, constant ``log K``, no gradient), and a class with no
  positive seen keeps ``q_j = 0``. ``q`` and its sums are model buffers, so they are
  checkpointed.
* Two-Way loss (Kobayashi, "Two-way Multi-Label Loss", CVPR 2023; :func:`two_way_loss`,
  official ``TwoWayLoss``), ``T_p = 4, T_n = 1``, on ``x = logits``. With ``P`` / ``N`` a
  set of positive / negative entries::

      l(P, N) = softplus( T_n log sum_{n in N} exp(x_n / T_n) + T_p log sum_{p in P} exp(-x_p / T_p) )
      L_2way = mean_{k: P_k != {}} l(P_k, N_k)  +  mean_{i: P_i != {}} l(P_i, N_i)

  ``P_k, N_k``: the batch's positive / negative rows of class k (class-wise term, over
  samples); ``P_i, N_i``: sample i's positive / negative classes (sample-wise term, over
  classes). Only classes / samples with at least one positive enter each mean (official
  ``class_mask`` / ``sample_mask``). Entries outside a set are masked with ``-1e4`` in the
  temperature-scaled domain (official: ``-100``): they contribute exactly 0, and an empty
  ``N`` gives ``softplus(~-1e4) = 0`` exactly, with no NaN gradient. An all-empty mean is 0.
* Objective (official ``train.py``): epochs ``1..warmup_epochs`` (5):
  ``L = L_align`` only; afterwards ``L = 0.1 L_proto + 1 L_2way + 0.5 L_align``
  (:meth:`MLCNCMethod.loss_weights`). A term with weight 0 is logged but not
  back-propagated (so AdamW leaves the parameters it alone reaches untouched in warm-up).
  The epoch is read from the trainer's ``progress = global_step / total_steps`` as
  ``floor(progress * epochs)`` (0-based; ``epochs`` = the trainer's, after the
  ``RunContext`` override).

Reductions: the three terms are means (over ``B K`` entries, over positive pairs, over
valid classes + valid samples), as in the official code, not the project's "sum over
labels, mean over batch" convention for element-wise losses (``cdgtmll.nn.losses``): the
Two-Way loss is not element-wise, and keeping the official reductions keeps the official
weights 0.1 / 1 / 0.5 meaningful. AdamW is insensitive to a constant scale of the
objective (up to its ``eps``), so the shared learning rates still apply.

Class-aware sampler
-------------------
``class_aware_sampling=True`` (default; official ``ClassAwareSampler``): through the
trainer's ``epoch_batches`` hook (:meth:`MLCNCMethod.epoch_batches`) each of the trainer's
batches is *replaced* by a class-aware batch of the same size, drawn at the start of the
epoch (so image inputs decode the sampled rows in the DataLoader workers): each row is drawn by picking a class uniformly among the classes
with at least one training positive, then a training row uniformly among that class's
positives (:class:`ClassAwareSampler`, both draws i.i.d. with replacement from the
method's own ``torch.Generator`` seeded by the run seed). The trainer's batch size,
steps per epoch (``ceil(n / B)``, last partial batch kept at its size) and learning-rate
schedule are unchanged; only the rows differ. The generator state is the task's
``extra_state``, so a resumed run draws the same batches. ``False``: the trainer's
uniform shuffle.

Differences from the original
-----------------------------
* Input: tabular feature vectors on the shared 2 x 512 MLP backbone (App. E.2) instead
  of a ResNet-50 feature map (7 x 7 x 2048). The attention memory is ``n_tokens = 8``
  chunk tokens of ``h(x)`` (:class:`cdgtmll.methods.architectures.common.FeatureTokens`, each
  chunk's own affine map, then ReLU) instead of the 49 spatial tokens.
* Size: ``d_model = 128, n_heads = 4`` (official 768 / 8), to stay cheap next to the MLP
  backbone. The ETF needs ``d >= K``: the effective width is ``max(d_model, K)`` rounded
  up to a multiple of ``n_heads`` (:attr:`MLCNCNet.d_model`); memory and time are
  ``O(B K d)``, so very large label sets (XMC) are out of scope for this method.
* Optimisation: the shared trainer (AdamW, cosine decay, B = 256, grad clipping 5, no
  EMA) instead of Adam + OneCycle (lr 1e-4, B = 64) with a model EMA; the official
  ``alpha`` rescaling of positive attention outputs is omitted (its default 1 is the
  identity); mixed precision is not used.
* Sampler: i.i.d. uniform class, then i.i.d. uniform positive instance; the official
  ``RandomCycleIter`` cycles through shuffled permutations (of the classes, and of each
  class's instances), i.e. draws without replacement within a cycle. Both give each
  class the same expected share of the batch.
* Logged terms ``align`` / ``proto`` / ``twoway`` are the unweighted terms.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.methods.architectures.common import FeatureTokens, packed
from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.neural import NeuralMethod
from cdgtmll.nn.backbones.mlp import MLPBackbone

__all__ = [
    "MLCNCMethod",
    "MLCNCNet",
    "ClassAwareSampler",
    "simplex_etf",
    "alignment_loss",
    "contrastive_prototype_loss",
    "two_way_loss",
    "ALIGN_EPS",
    "TWO_WAY_MASK",
]

#: added to the alignment loss's log arguments (official ``FeatureLabelLoss``: ``+ 1e-6``)
ALIGN_EPS = 1e-6
#: value of masked entries (temperature-scaled domain) in the Two-Way log-sum-exps
TWO_WAY_MASK = -1e4
#: offsets that separate the method's generators from the trainer's (seeded with the seed)
_ETF_SEED_OFFSET = 0x4D4C43  # "MLC"
_SAMPLER_SEED_OFFSET = 0x4E43  # "NC"


def _derived_seed(seed: int, offset: int) -> int:
    return (int(seed) * 1_000_003 + offset) % (2**63 - 1)


# ============================================================================ geometry


def simplex_etf(dim: int, n_classes: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Simplex equiangular tight frame ``M = sqrt(K/(K-1)) P (I - 11^T/K)``, float64 ``[dim, K]``.

    ``P [dim, K]`` has orthonormal columns (reduced QR of a Gaussian matrix drawn from
    ``generator``). Columns of ``M`` have unit norm and pairwise inner product ``-1/(K-1)``.
    Needs ``K >= 2`` and ``dim >= K``.
    """
    K, d = int(n_classes), int(dim)
    if K < 2:
        raise ValueError(f"a simplex ETF needs at least 2 classes, got {K}")
    if d < K:
        raise ValueError(f"a simplex ETF of {K} classes from an orthonormal P needs dim >= {K}, got {d}")
    A = torch.randn(d, K, generator=generator, dtype=torch.float64)
    P, _ = torch.linalg.qr(A, mode="reduced")
    center = torch.eye(K, dtype=torch.float64) - torch.full((K, K), 1.0 / K, dtype=torch.float64)
    return math.sqrt(K / (K - 1)) * (P @ center)


# ============================================================================ losses


def alignment_loss(features: torch.Tensor, prototypes: torch.Tensor, targets: torch.Tensor,
                   eps: float = ALIGN_EPS) -> torch.Tensor:
    """``mean_{i,k} -[y log((1+c)/2) + (1-y) log(1 - (K-1)/K |1/(K-1) + c|)]``, ``c = cos(f_ik, m_k)``.

    ``features [B, K, d]``, ``prototypes [K, d]`` (rows ``m_k``), ``targets [B, K]``;
    ``eps`` is added to the log arguments (floored at 0 first), as the official
    ``FeatureLabelLoss`` adds ``1e-6``."""
    K = prototypes.shape[0]
    cos = F.cosine_similarity(features, prototypes.unsqueeze(0).to(features.dtype), dim=-1)
    pos_arg = ((1.0 + cos) / 2.0).clamp_min(0.0) + eps
    neg_arg = (1.0 - (K - 1) / K * (1.0 / (K - 1) + cos).abs()).clamp_min(0.0) + eps
    y = (targets > 0.5).to(cos.dtype)
    return -(y * pos_arg.log() + (1.0 - y) * neg_arg.log()).mean()


def contrastive_prototype_loss(z: torch.Tensor, prototypes: torch.Tensor, targets: torch.Tensor,
                               temperature: float = 0.5) -> torch.Tensor:
    """``mean_{(i,k): y_ik=1} -log softmax_j(cos(z_ik, q_j) / t)[k]``: each positive
    per-class feature against the prototypes of all classes. ``z [B, K, p]``,
    ``prototypes [K, p]`` (no gradient), ``targets [B, K]``; 0 when the batch has no
    positive. A zero prototype has cosine 0 with everything."""
    pos = targets > 0.5
    if not bool(pos.any()):
        return z.sum() * 0.0
    rows, cls = pos.nonzero(as_tuple=True)
    zp = F.normalize(z[rows, cls], dim=-1)  # [P, p]
    q = F.normalize(prototypes.detach().to(z.dtype), dim=-1)  # [K, p]
    logp = F.log_softmax(zp @ q.T / temperature, dim=-1)  # [P, K]
    return -logp.gather(1, cls[:, None]).mean()


def _masked_mean(v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(v.dtype)
    return (v * m).sum() / m.sum().clamp_min(1.0)


def two_way_loss(logits: torch.Tensor, targets: torch.Tensor, tp: float = 4.0, tn: float = 1.0) -> torch.Tensor:
    """Two-Way loss (Kobayashi 2023)::

        l(P, N) = softplus(T_n log sum_{n in N} exp(x_n/T_n) + T_p log sum_{p in P} exp(-x_p/T_p))
        L = mean_{k: P_k != {}} l(P_k, N_k) + mean_{i: P_i != {}} l(P_i, N_i)

    class-wise sets over the batch's rows (dim 0), sample-wise sets over classes (dim 1).
    ``logits``, ``targets`` ``[B, K]``."""
    pos = targets > 0.5
    neg = ~pos
    x = logits
    p_in = torch.where(pos, -x / tp, torch.full_like(x, TWO_WAY_MASK))
    n_in = torch.where(neg, x / tn, torch.full_like(x, TWO_WAY_MASK))
    cls_term = F.softplus(tn * torch.logsumexp(n_in, dim=0) + tp * torch.logsumexp(p_in, dim=0))
    smp_term = F.softplus(tn * torch.logsumexp(n_in, dim=1) + tp * torch.logsumexp(p_in, dim=1))
    return _masked_mean(cls_term, pos.any(dim=0)) + _masked_mean(smp_term, pos.any(dim=1))


# ============================================================================ sampler


class ClassAwareSampler:
    """Class-aware rows: a class uniformly among those with >= 1 positive, then a row
    uniformly among its positives; i.i.d. draws from an own seeded ``torch.Generator``."""

    def __init__(self, Y: Any, seed: int) -> None:
        Yd = np.asarray(Y.toarray() if sp.issparse(Y) else Y) > 0.5
        cls, rows = np.nonzero(Yd.T)  # sorted by class, then row
        counts = np.bincount(cls, minlength=Yd.shape[1])
        self.classes = torch.as_tensor(np.flatnonzero(counts > 0), dtype=torch.long)
        if self.classes.numel() == 0:
            raise ValueError("class-aware sampling needs at least one positive training label")
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.rows = torch.as_tensor(rows, dtype=torch.long)
        self.counts = torch.as_tensor(counts, dtype=torch.long)
        self.offsets = torch.as_tensor(offsets, dtype=torch.long)
        self.generator = torch.Generator().manual_seed(_derived_seed(seed, _SAMPLER_SEED_OFFSET))

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(row indices [n], drawn classes [n])`` (CPU long tensors)."""
        c = self.classes[torch.randint(self.classes.numel(), (int(n),), generator=self.generator)]
        cnt = self.counts[c]
        u = torch.rand(int(n), generator=self.generator, dtype=torch.float64)
        j = torch.minimum((u * cnt.to(torch.float64)).long(), cnt - 1)
        return self.rows[self.offsets[c] + j], c

    def get_state(self) -> torch.Tensor:
        return self.generator.get_state()

    def set_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)


# ============================================================================ model


class MLCNCNet(nn.Module):
    """Backbone -> feature tokens -> ETF-query cross-attention -> per-class projection
    -> ETF classifier (see the module docstring). ``forward(x) -> (logits, f, z)``."""

    def __init__(
        self, backbone: MLPBackbone, n_labels: int, n_tokens: int, d_model: int, n_heads: int, dropout: float,
        proj_dim: int, etf_queries: torch.Tensor, etf_classifier: torch.Tensor, classifier_trainable: bool,
    ) -> None:
        super().__init__()
        K, d, p = int(n_labels), int(d_model), int(proj_dim)
        if tuple(etf_queries.shape) != (d, K) or tuple(etf_classifier.shape) != (K * p, K):
            raise ValueError("ETF shapes do not match (d_model, K) / (K * proj_dim, K)")
        self.backbone = backbone
        self.n_labels, self.d_model, self.proj_dim = K, d, p
        self.tokens = FeatureTokens(backbone.out_dim, n_tokens, d)
        self.register_buffer("prototypes", etf_queries.T.contiguous().float())  # [K, d], rows m_k
        self.attn = packed(nn.MultiheadAttention(d, n_heads, dropout=dropout, batch_first=True))
        self.proj_weight = nn.Parameter(torch.empty(K, d, p))
        nn.init.xavier_normal_(self.proj_weight)
        self.proj_bias = nn.Parameter(torch.zeros(K, p))
        C = etf_classifier.float().clone()
        if classifier_trainable:
            self.classifier = nn.Parameter(C)
        else:
            self.register_buffer("classifier", C)
        self.logit_scale = nn.Parameter(torch.ones(()))
        # contrastive prototypes q_j: running sums over positives, refreshed per epoch
        self.register_buffer("proto_sum", torch.zeros(K, p))
        self.register_buffer("proto_count", torch.zeros(K))
        self.register_buffer("proto_bank", torch.zeros(K, p))

    def class_features(self, x: torch.Tensor) -> torch.Tensor:
        """``f [B, K, d]``: the ETF label queries attend to ReLU(feature tokens of h(x))."""
        mem = F.relu(self.tokens(self.backbone(x)))
        q = self.prototypes.unsqueeze(0).expand(x.shape[0], -1, -1)
        return self.attn(q, mem, mem, need_weights=False)[0]

    def project(self, f: torch.Tensor) -> torch.Tensor:
        """``z [B, K, p]``: per-class affine map, L2-normalised."""
        return F.normalize(torch.einsum("bkd,kdp->bkp", f, self.proj_weight) + self.proj_bias, dim=-1, eps=1e-12)

    def logits_from(self, z: torch.Tensor) -> torch.Tensor:
        return self.logit_scale * (z.flatten(1) @ self.classifier)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        f = self.class_features(x)
        z = self.project(f)
        return self.logits_from(z), f, z

    @torch.no_grad()
    def accumulate(self, z: torch.Tensor, targets: torch.Tensor) -> None:
        y = (targets > 0.5).to(z.dtype)
        self.proto_sum += torch.einsum("bk,bkp->kp", y, z.detach())
        self.proto_count += y.sum(dim=0)

    @torch.no_grad()
    def refresh_prototypes(self) -> None:
        cnt = self.proto_count[:, None]
        mean = self.proto_sum / cnt.clamp_min(1.0)
        self.proto_bank.copy_(torch.where(cnt > 0, mean, torch.zeros_like(mean)))


# ============================================================================ method


@register("MLC-NC")
class MLCNCMethod(NeuralMethod):
    """MLC-NC (Tao et al., AAAI 2025): ETF-query cross-attention class features, alignment to
    fixed simplex-ETF prototypes, contrastive prototype loss, Two-Way loss, class-aware
    sampling. See the module docstring for the formulas and the differences.

    Hyper-parameters (beyond the shared trainer ones): ``n_tokens=8, d_model=128,
    n_heads=4, dropout=0.1, proj_dim=20, proto_temperature=0.5, tp=4.0, tn=1.0,
    warmup_epochs=5, weight_proto=0.1, weight_twoway=1.0, weight_align=0.5,
    class_aware_sampling=True, etf_classifier_trainable=True``.
    """

    def __init__(
        self,
        *,
        n_tokens: int,
        d_model: int,
        n_heads: int,
        dropout: float,
        proj_dim: int,
        proto_temperature: float,
        tp: float,
        tn: float,
        warmup_epochs: int,
        weight_proto: float,
        weight_twoway: float,
        weight_align: float,
        class_aware_sampling: bool,
        etf_classifier_trainable: bool,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if int(n_tokens) < 1 or self.hidden_dim % int(n_tokens):
            raise ValueError(f"MLC-NC: n_tokens={n_tokens} must divide hidden_dim={self.hidden_dim}")
        if int(d_model) < 1 or int(n_heads) < 1 or int(d_model) % int(n_heads):
            raise ValueError(f"MLC-NC: n_heads={n_heads} must divide d_model={d_model}")
        if int(proj_dim) < 1:
            raise ValueError("MLC-NC: proj_dim must be >= 1")
        if float(proto_temperature) <= 0 or float(tp) <= 0 or float(tn) <= 0:
            raise ValueError("MLC-NC: temperatures must be > 0")
        if int(warmup_epochs) < 0:
            raise ValueError("MLC-NC: warmup_epochs must be >= 0")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError("MLC-NC: dropout must be in [0, 1)")
        self.n_tokens, self.d_model = int(n_tokens), int(d_model)
        self.n_heads, self.dropout = int(n_heads), float(dropout)
        self.proj_dim, self.proto_temperature = int(proj_dim), float(proto_temperature)
        self.tp, self.tn = float(tp), float(tn)
        self.warmup_epochs = int(warmup_epochs)
        self.weight_proto = float(weight_proto)
        self.weight_twoway = float(weight_twoway)
        self.weight_align = float(weight_align)
        self.class_aware_sampling = bool(class_aware_sampling)
        self.etf_classifier_trainable = bool(etf_classifier_trainable)
        self._seed = 0
        self._n_epochs = self.epochs
        self.sampler: ClassAwareSampler | None = None

    # -- schedule ------------------------------------------------------------------------
    def epoch_index(self, progress: float) -> int:
        """0-based epoch of a step from the trainer's ``progress = step / total_steps``."""
        return int(math.floor(float(progress) * self._n_epochs + 1e-9))

    def loss_weights(self, epoch_index: int) -> dict[str, float]:
        """``{'align', 'proto', 'twoway'}`` weights: alignment only (weight 1) during the
        first ``warmup_epochs`` epochs (0-based ``epoch_index < warmup_epochs``), then
        ``weight_align / weight_proto / weight_twoway`` (0.5 / 0.1 / 1)."""
        if epoch_index < self.warmup_epochs:
            return {"align": 1.0, "proto": 0.0, "twoway": 0.0}
        return {"align": self.weight_align, "proto": self.weight_proto, "twoway": self.weight_twoway}

    def effective_d_model(self, n_labels: int) -> int:
        """``max(d_model, K)`` rounded up to a multiple of ``n_heads`` (the ETF needs d >= K)."""
        d = max(self.d_model, int(n_labels))
        return int(math.ceil(d / self.n_heads) * self.n_heads)

    # -- TrainTask ---------------------------------------------------------------------------
    def prepare(self, data: FitData, ctx: RunContext) -> None:
        self._seed = int(ctx.seed)
        self._n_epochs = self.train_config(ctx).epochs
        if self.class_aware_sampling:
            Y = data.Y_train.toarray() if sp.issparse(data.Y_train) else data.Y_train
            self.sampler = ClassAwareSampler(Y, self._seed)
        else:
            self.sampler = None

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> MLCNCNet:
        K = int(Y_train.shape[1])
        d = self.effective_d_model(K)
        gen = torch.Generator().manual_seed(_derived_seed(self._seed, _ETF_SEED_OFFSET))
        queries = simplex_etf(d, K, gen)
        classifier = simplex_etf(K * self.proj_dim, K, gen)
        return MLCNCNet(self.backbone(X_train), K, self.n_tokens, d, self.n_heads, self.dropout, self.proj_dim,
                        queries, classifier, self.etf_classifier_trainable)

    def param_groups(self, model: nn.Module) -> dict[str, list[nn.Parameter]]:
        backbone = [p for p in model.backbone.parameters() if p.requires_grad]
        ids = {id(p) for p in backbone}
        head = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
        return {"backbone": backbone, "head": head}

    def epoch_batches(self, perm: torch.Tensor, batch_size: int) -> list[torch.Tensor] | None:
        """Class-aware sampling (trainer hook): the epoch's batches are drawn from the
        sampler, with the sizes the trainer's own batches would have (its seeded
        permutation is drawn and not used), so the trainer gathers, or for images decodes
        in its workers, exactly the sampled rows."""
        if not self.class_aware_sampling:
            return None
        if self.sampler is None:
            raise RuntimeError("MLC-NC: class-aware sampling needs prepare() first")
        n = perm.numel()
        return [self.sampler.sample(min(batch_size, n - s))[0].to(perm.device) for s in range(0, n, batch_size)]

    def training_step(self, model, xb, yb, progress):
        w = self.loss_weights(self.epoch_index(progress))
        logits, f, z = model(xb)
        terms = {
            "align": alignment_loss(f, model.prototypes, yb),
            "proto": contrastive_prototype_loss(z, model.proto_bank, yb, self.proto_temperature),
            "twoway": two_way_loss(logits, yb, self.tp, self.tn),
        }
        objective = sum(w[k] * v for k, v in terms.items() if w[k] != 0.0)
        if not torch.is_tensor(objective):  # every weight 0
            objective = logits.sum() * 0.0
        model.accumulate(z, yb)
        return objective, {k: v.detach() for k, v in terms.items()}

    def epoch_end(self, model, epoch, X_val, Y_val, workdir) -> dict[str, float]:
        model.refresh_prototypes()
        return {}

    def extra_state(self) -> dict[str, Any]:
        return {"sampler_generator": self.sampler.get_state()} if self.sampler is not None else {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if self.sampler is not None and "sampler_generator" in state:
            self.sampler.set_state(state["sampler_generator"])

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(model(x)[0])

    def extra_outputs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"hparams": self.hparams(),
                               "scores": "sigmoid(logits) of a Two-Way-trained model: not calibrated probabilities"}
        if self.model is not None:
            out["d_model_effective"] = int(self.model.d_model)
        return out
