"""Generic multi-label architectures (CC, ML-GCN, C-Tran, ML-Decoder): the shared parts.

These are the four "generic multi-label models" of the paper's baselines (Sec. 4.1
"Experimental Setup", paragraph *Baselines*, item (6); rows CC / ML-GCN / C-Tran /
ML-Decoder of Table ``tab:main_standard``). Each is implemented as a *head* on the
shared tabular backbone (:class:`cdgtmll.nn.backbones.mlp.MLPBackbone`, App. E.2: 2 x 512,
ReLU, output ``h(x)`` in R^{d'}, d' = 512) and trained by the shared trainer
(:mod:`cdgtmll.nn.trainer`, App. E.1) with the same epochs / batch size / learning
rates / weight decay / clipping as every other neural method, on a loss of
:mod:`cdgtmll.nn.losses` (sum over labels, mean over the batch): the project's BCE
(``build_loss("bce", ...)``) for CC, ML-GCN and C-Tran, and by default the official
recipe's ASL for ML-Decoder (see :class:`~cdgtmll.methods.architectures.attention.MLDecoderMethod`).
Every head's parameters form the ``head`` parameter group (eta_head), the backbone
the ``backbone`` group (eta_0).

The common adaptation: the originals sit on a CNN feature *map* (ResNet / TResNet
spatial features, C-Tran / ML-Decoder / ML-GCN) or on raw features (CC); our inputs
are tabular feature vectors, so the only feature we have is the vector ``h(x)``.
The two attention models need a *set of feature tokens*: we split ``h`` into
``n_tokens`` contiguous chunks (default 8 chunks of 64 for d' = 512) and map chunk
``t`` by its own affine map ``R^{d'/T} -> R^{d_model}`` (:class:`FeatureTokens`; a
per-chunk map, so tokens are distinguishable without a positional encoding, which
neither original uses by default). Everything else is documented per class.

Layout (split by purpose; each model module imports this one, never the reverse):

* this module: :class:`FeatureTokens` (also used by MLC-NC) and the base class
  :class:`_ArchitectureMethod`;
* :mod:`cdgtmll.methods.architectures.label_graph`: label-chain / label-graph heads, CC and ML-GCN;
* :mod:`cdgtmll.methods.architectures.attention`: attention heads, C-Tran and ML-Decoder.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.methods.base import FitData, RunContext
from cdgtmll.methods.neural import NeuralMethod
from cdgtmll.nn.losses.registry import build_loss

__all__ = ["FeatureTokens", "PackedAttention", "packed"]


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


class PackedAttention(nn.MultiheadAttention):
    """:class:`torch.nn.MultiheadAttention` with the same parameters, initialisation and
    arithmetic, whose training-mode attention splits the packed projection with ``unbind``
    where torch's ``F._in_projection_packed`` selects ``proj[0..2]`` (self-attention,
    ``query is key is value``) or ``kv[0..1]`` (``key is value``) of a contiguous copy. The
    values are the same elements; the backward then stacks the gradients into one buffer
    instead of adding zero-filled buffers of the packed size (one per part): 3-4% of a C-Tran
    step on Yeast. It applies to batch-first calls without masks or returned weights (how
    C-Tran's encoder layers, ML-Decoder's and MLC-NC's cross-attention call it); every other
    call, evaluation included (torch's fast path), goes to :class:`torch.nn.MultiheadAttention`.
    The replica follows ``F.multi_head_attention_forward`` step for step;
    tests/unit/methods/test_methods_architectures.py checks bit-identical training against it."""

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if not (self.training and key is value and query.dim() == 3 and self.batch_first and key_padding_mask is None
                and attn_mask is None and not need_weights and not is_causal and self._qkv_same_embed_dim
                and self.in_proj_bias is not None and self.bias_k is None and self.bias_v is None
                and not self.add_zero_attn):
            return super().forward(query, key, value, key_padding_mask=key_padding_mask, need_weights=need_weights,
                                   attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal)
        E, H = self.embed_dim, self.num_heads
        hd = E // H
        if query is key:  # [T, B, E], as torch's batch-first path
            x = query.transpose(1, 0)
            q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).unflatten(-1, (3, E)).unbind(-2)
        else:
            x, mem = query.transpose(1, 0), key.transpose(1, 0)
            w_q, w_kv = self.in_proj_weight.split([E, E * 2])
            b_q, b_kv = self.in_proj_bias.split([E, E * 2])
            q = F.linear(x, w_q, b_q)
            k, v = F.linear(mem, w_kv, b_kv).unflatten(-1, (2, E)).unbind(-2)
        T, B, S = x.shape[0], x.shape[1], k.shape[0]
        # torch: t.view(len, B * H, hd).transpose(0, 1), then .view(B, H, len, hd) (the same strides)
        q = q.reshape(T, B * H, hd).transpose(0, 1).view(B, H, T, hd)
        k = k.reshape(S, B * H, hd).transpose(0, 1).view(B, H, S, hd)
        v = v.reshape(S, B * H, hd).transpose(0, 1).view(B, H, S, hd)
        out = F.scaled_dot_product_attention(q, k, v, None, self.dropout, False)
        out = out.permute(2, 0, 1, 3).reshape(B * T, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).view(T, B, E)
        return out.transpose(1, 0), None


def packed(module: nn.Module) -> nn.Module:
    """``module`` with every :class:`torch.nn.MultiheadAttention` in it (itself included) made a
    :class:`PackedAttention`: built, and so initialised, exactly as torch builds it."""
    for m in module.modules():
        if type(m) is nn.MultiheadAttention:
            m.__class__ = PackedAttention
    return module


class _ArchitectureMethod(NeuralMethod):
    """Backbone + an architecture head, trained on the registered loss ``loss_name``
    (default ``'bce'``) with the constructor arguments ``loss_hparams`` (default none),
    built in :meth:`prepare` as ``self._criterion``. ``hparams()`` records ``loss`` and,
    when non-empty, ``loss_hparams`` (so both enter the checkpoint fingerprint).

    Subclasses build a ``nn.Module`` with attributes ``backbone`` and ``criterion`` and
    a ``forward(x) -> logits [B, L]`` used for prediction (``sigmoid``); every other
    trainable parameter is a head parameter.
    """

    loss_name = "bce"

    def __init__(self, **trainer: Any) -> None:
        super().__init__(**trainer)
        self.loss_hparams: dict[str, Any] = {}
        self._criterion: nn.Module | None = None

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        self._criterion = build_loss(self.loss_name, data.counts, data.n_train, **self.loss_hparams)

    def hparams(self) -> dict[str, Any]:
        hp = {**super().hparams(), "loss": self.loss_name}
        if self.loss_hparams:
            hp["loss_hparams"] = dict(self.loss_hparams)
        return hp

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
