"""Loss registry: one signature, one reduction convention for every loss-based method.

Signature: ``loss(logits, targets) -> scalar``, ``logits`` and ``targets`` float
tensors of shape ``[B, L]``. Reduction: **sum over labels, mean over the batch**
(the ASL convention), for every loss, so that loss magnitudes and learning
rates are comparable across methods.

Label statistics reach a loss only through its constructor: ``label_counts``
(n_k, positives per label in the training rows) and ``n_train`` (N).
Build a loss by name with :func:`build_loss`.
"""

from __future__ import annotations

import inspect
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

LOSSES: dict[str, type[nn.Module]] = {}


def register_loss(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        if name in LOSSES:
            raise ValueError(f"loss '{name}' registered twice")
        LOSSES[name] = cls
        return cls

    return deco


def reduce(per_element: torch.Tensor) -> torch.Tensor:
    """The project-wide reduction: sum over labels (dim 1), mean over the batch."""
    return per_element.sum(dim=1).mean()


def build_loss(name: str, label_counts: np.ndarray, n_train: int, **hparams) -> nn.Module:
    """Instantiate a registered loss. Every loss constructor accepts
    ``(label_counts, n_train, **hparams)``; unknown hyper-parameters raise."""
    try:
        cls = LOSSES[name]
    except KeyError:
        raise KeyError(f"unknown loss '{name}'; registered: {', '.join(sorted(LOSSES))}") from None
    params = set(inspect.signature(cls.__init__).parameters) - {"self", "label_counts", "n_train"}
    unknown = sorted(set(hparams) - params)
    if unknown:
        raise ValueError(f"loss '{name}': unknown hyper-parameter(s) {unknown}; allowed: {sorted(params)}")
    return cls(label_counts=np.asarray(label_counts), n_train=int(n_train), **hparams)


@register_loss("bce")
class BCELoss(nn.Module):
    r"""Per-label logistic loss.

    .. math:: \ell(z, y) = -[y \log \sigma(z) + (1-y) \log(1-\sigma(z))]

    computed with ``binary_cross_entropy_with_logits`` (log-sum-exp stable).
    """

    def __init__(self, label_counts: np.ndarray, n_train: int) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return reduce(F.binary_cross_entropy_with_logits(logits, targets, reduction="none"))
