"""The ``bce`` loss (:class:`cdgtmll.nn.losses.bce.BCELoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from cdgtmll.nn.losses.common import bce_terms, reduce
from cdgtmll.nn.losses.registry import register_loss


@register_loss("bce")
class BCELoss(nn.Module):
    r"""Per-label logistic loss.

    .. math:: \ell(z, y) = -[y \log \sigma(z) + (1-y) \log(1-\sigma(z))]

    computed by :func:`cdgtmll.nn.losses.common.bce_terms` (log-sum-exp stable; on CPU
    vectorised, with torch's gradient bit for bit).
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, label_counts: np.ndarray, n_train: int) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return reduce(bce_terms(logits, targets))
