"""The ``bce`` loss (:class:`cdgtmll.nn.losses.bce.BCELoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.nn.losses.common import reduce
from cdgtmll.nn.losses.registry import register_loss


@register_loss("bce")
class BCELoss(nn.Module):
    r"""Per-label logistic loss.

    .. math:: \ell(z, y) = -[y \log \sigma(z) + (1-y) \log(1-\sigma(z))]

    computed with ``binary_cross_entropy_with_logits`` (log-sum-exp stable).
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, label_counts: np.ndarray, n_train: int) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return reduce(F.binary_cross_entropy_with_logits(logits, targets, reduction="none"))
