"""The ``focal`` loss (:class:`cdgtmll.nn.losses.focal.FocalLoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from cdgtmll.nn.losses.common import bce_terms, check_shapes, reduce
from cdgtmll.nn.losses.registry import register_loss


@register_loss("focal")
class FocalLoss(nn.Module):
    r"""Sigmoid focal loss, per label.

    Lin, Goyal, Girshick, He, Dollar, "Focal Loss for Dense Object Detection",
    ICCV 2017 (RetinaNet), Sec. 3.2, Eq. 5:

    .. math:: \mathrm{FL}(p_t) = -\alpha_t (1 - p_t)^{\gamma} \log p_t,

    with :math:`p = \sigma(z)`, :math:`p_t = p` for a positive and :math:`1-p` for a
    negative, :math:`\alpha_t = \alpha` for positives and :math:`1-\alpha` for negatives.
    Defaults: ``gamma=2``, ``alpha=0.25`` (the paper's RetinaNet setting);
    ``alpha=None`` disables the balancing.

    Implementation: :math:`-\log p_t` is the BCE computed with ``F.logsigmoid``;
    :math:`1 - p_t = -\mathrm{expm1}(\log p_t)` (exact, and stable when
    :math:`p_t \to 1`). The modulating factor carries gradient, as in the paper.
    For soft targets :math:`y \in (0,1)`, :math:`\log p_t` is the soft BCE and
    :math:`\alpha_t = y\alpha + (1-y)(1-\alpha)`. With ``gamma=0, alpha=None`` the
    loss is exactly :class:`cdgtmll.nn.losses.bce.BCELoss`. Reduction: sum over labels, mean over batch.
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {
        "gamma": {"type": "number", "minimum": 0},  # focusing exponent of (1 - p_t)
        "alpha": {"type": ["number", "null"], "minimum": 0, "maximum": 1},  # alpha_t weights; None: off
    }

    def __init__(self, label_counts: np.ndarray, n_train: int, gamma: float = 2.0, alpha: float | None = 0.25) -> None:
        super().__init__()
        if gamma < 0:
            raise ValueError(f"focal: gamma must be >= 0, got {gamma}")
        if alpha is not None and not 0.0 <= alpha <= 1.0:
            raise ValueError(f"focal: alpha must be in [0, 1] or None, got {alpha}")
        self.gamma = float(gamma)
        self.alpha = None if alpha is None else float(alpha)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_shapes(logits, targets)
        ce = bce_terms(logits, targets)  # = -log p_t
        loss = ce
        if self.gamma != 0.0:
            loss = torch.pow(-torch.expm1(-ce), self.gamma) * loss
        if self.alpha is not None:
            loss = (targets * self.alpha + (1.0 - targets) * (1.0 - self.alpha)) * loss
        return reduce(loss)
