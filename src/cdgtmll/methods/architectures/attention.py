"""Attention heads: C-Tran and ML-Decoder (the "generic multi-label models" of the
paper's baselines, Sec. 4.1 (6); shared parts, :class:`FeatureTokens` and the common
tabular adaptation in :mod:`cdgtmll.methods.architectures.common`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.methods.architectures.common import FeatureTokens, _ArchitectureMethod, packed
from cdgtmll.methods.base import register
from cdgtmll.nn.backbones.mlp import MLPBackbone

__all__ = [
    "CTranMethod",
    "MLDecoderMethod",
    "MLDECODER_ASL",
    "sample_label_states",
    "UNKNOWN",
    "NEGATIVE",
    "POSITIVE",
]


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


def _encoder_layer(d_model: int, n_heads: int, dropout: float) -> nn.TransformerEncoderLayer:
    """C-Tran's post-norm encoder layer, its self-attention a
    :class:`~cdgtmll.methods.architectures.common.PackedAttention`."""
    layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=d_model, dropout=dropout,
                                       activation="relu", batch_first=True)
    return packed(layer)


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
        self.layers = nn.ModuleList(_encoder_layer(d_model, n_heads, dropout) for _ in range(n_layers))
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

    def __init__(
        self,
        *,
        n_tokens: int,
        d_model: int,
        n_layers: int,
        n_heads: int,
        dropout: float,
        lmt: bool,
        max_known_fraction: float,
        loss_labels: str,
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

#: ML-Decoder's training loss in the official recipe (Alibaba-MIIL/ML_Decoder, ``train.py``:
#: ``AsymmetricLoss(gamma_neg=4, gamma_pos=0, clip=0.05, disable_torch_grad_focal_loss=True)``
#: with the official ``AsymmetricLoss``'s default ``eps=1e-8``), as the arguments of
#: :class:`cdgtmll.nn.losses.asl.AsymmetricLoss` (``focal_grad=False`` is
#: ``disable_torch_grad_focal_loss=True``)
MLDECODER_ASL: dict[str, Any] = {"gamma_neg": 4.0, "gamma_pos": 0.0, "clip": 0.05, "eps": 1e-8, "focal_grad": False}
#: ``loss`` values of ML-Decoder: the official ASL recipe, or the project's BCE
MLDECODER_LOSSES = ("asl", "bce")


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
        self.cross_attn = packed(nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True))
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

    Loss: the official recipe (``train.py``) trains ML-Decoder with ASL,
    ``AsymmetricLoss(gamma_neg=4, gamma_pos=0, clip=0.05,
    disable_torch_grad_focal_loss=True)``; that is the default here (``loss='asl'``:
    the project's registered ``asl`` loss with :data:`MLDECODER_ASL`, in the project
    reduction, sum over labels and mean over the batch, where the official sums over
    the batch too). ``loss='bce'`` trains on the project's BCE like the other
    architecture rows. ``hparams()`` records ``loss`` and, for ASL, ``loss_hparams``;
    ``extra_outputs()`` repeats them under ``loss``. The rest of the official recipe
    (Adam + OneCycle, EMA, 40 epochs, RandAugment/Cutout) is not used: the shared
    trainer's protocol applies, as for every neural method.
    """

    def __init__(
        self,
        *,
        n_groups: int,
        n_tokens: int,
        d_model: int,
        n_heads: int,
        dim_feedforward: int,
        n_layers: int,
        dropout: float,
        learnable_queries: bool,
        loss: str,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if loss not in MLDECODER_LOSSES:
            raise ValueError(f"ML-Decoder: loss must be one of {MLDECODER_LOSSES}, got {loss!r}")
        self.loss_name = loss
        self.loss_hparams = dict(MLDECODER_ASL) if loss == "asl" else {}
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
        out: dict[str, Any] = {"hparams": self.hparams(),
                               "loss": {"name": self.loss_name, **self.loss_hparams}}
        if self.model is not None:
            out.update({"n_queries": self.model.n_groups, "group_size": self.model.group_size})
        return out
