"""Which backbone a neural method trains on, in one place (App. E.2: "backbone MLP (2 layers,
ReLU, d' = 512)" for tabular data, "TF-IDF (d' = 200k sparse) + linear heads" for XMC, "backbone
ResNet-50 (ImageNet init), d' = 2048" for images).

The dataset's training protocol (``config training.<dataset>``, handed to a method as
``ctx.extra['training']``) names the backbone in ``backbone``; :func:`backbone_kind` reads it
with the training inputs:

* image rows (an :class:`~cdgtmll.images.trainer_input.ImageInput`, i.e. an image dataset
  with ``image_backbone.mode: finetune``): :data:`RESNET50`, which the protocol must name
  (anything else is refused, naming the method and what the protocol says);
  :func:`cdgtmll.nn.backbones.resnet.build_finetune_backbone`;
* ``backbone: tfidf-linear``, or no backbone named (or ``auto``) and a ``scipy.sparse`` X:
  :data:`TFIDF_LINEAR`, :class:`cdgtmll.nn.backbones.tfidf.SparseLinearBackbone` with
  ``d' = hidden_dim`` (sparse X is then never densified);
* otherwise (``backbone: mlp`` included, which keeps the MLP, densifying a sparse X):
  :data:`MLP`, :class:`cdgtmll.nn.backbones.mlp.MLPBackbone` with ``d' = hidden_dim``.

:func:`build_backbone` builds the chosen one; :class:`cdgtmll.methods.neural.NeuralMethod`
calls both (every neural method's ``backbone(X_train)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import scipy.sparse as sp
import torch
from torch import nn

from cdgtmll.images.trainer_input import ImageInput
from cdgtmll.nn.backbones.mlp import MLPBackbone
from cdgtmll.nn.backbones.resnet import build_finetune_backbone
from cdgtmll.nn.backbones.tfidf import SparseLinearBackbone

MLP = "mlp"
TFIDF_LINEAR = "tfidf-linear"
RESNET50 = "resnet50"


def use_sparse_backbone(X: Any, kind: str | None) -> bool:
    """Whether a neural method uses the TF-IDF linear backbone (module docstring)."""
    if kind == TFIDF_LINEAR:
        return True
    return kind in (None, "auto") and sp.issparse(X)


def backbone_kind(X_train: Any, kind: str | None, method: str = "a neural method", images: bool | None = None) -> str:
    """:data:`RESNET50`, :data:`TFIDF_LINEAR` or :data:`MLP` for training inputs ``X_train``
    under the protocol's ``backbone`` ``kind`` (module docstring); a ``ValueError`` naming
    ``method`` for image rows under a protocol that does not name ``resnet50``. ``images``:
    whether ``X_train`` are image rows (default: whether it is an ``ImageInput``; a method
    passes True to check the protocol before it wraps the row ids)."""
    if isinstance(X_train, ImageInput) if images is None else images:
        if kind != RESNET50:
            raise ValueError(f"{method}: image rows need the training protocol's backbone {RESNET50!r}, got {kind!r}")
        return RESNET50
    return TFIDF_LINEAR if use_sparse_backbone(X_train, kind) else MLP


def build_backbone(kind: str, X_train: Any, hidden_dim: int, image_cfg: Mapping[str, Any] | None = None,
                   device: torch.device | None = None) -> nn.Module:
    """The backbone ``kind`` (from :func:`backbone_kind`) for ``X_train``: the MLP standardises
    with ``X_train``'s statistics, the TF-IDF backbone takes its width, the ResNet-50 is built
    from ``image_cfg`` (config ``image_backbone``) for ``device``. Parameters are drawn from the
    seeded global torch RNG (the ResNet-50's random init from its own seeded RNG)."""
    if kind == RESNET50:
        return build_finetune_backbone(image_cfg or {}, device if device is not None else torch.device("cpu"))
    if kind == TFIDF_LINEAR:
        return SparseLinearBackbone(int(X_train.shape[1]), hidden_dim=hidden_dim)
    if kind == MLP:
        return MLPBackbone.from_data(X_train, hidden_dim=hidden_dim)
    raise ValueError(f"unknown backbone {kind!r}; known: {[MLP, TFIDF_LINEAR, RESNET50]}")
