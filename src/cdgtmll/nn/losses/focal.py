"""The ``focal`` loss (:class:`cdgtmll.nn.losses.focal.FocalLoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from cdgtmll.nn.losses.common import bce_terms, check_shapes, reduce
from cdgtmll.nn.losses.registry import register_loss


class _FocalElement(torch.autograd.Function):
    """``f(c) = (1 - e^{-c})^gamma * c`` element-wise, with the derivative
    ``q^gamma * (1 + gamma * (1 - q) * c / q)``, ``q = -expm1(-c)``, ``c / q := 1`` at
    ``q = 0`` (its limit): finite for every ``c >= 0`` and ``gamma >= 0``."""

    @staticmethod
    def forward(ctx, ce: torch.Tensor, gamma: float) -> torch.Tensor:
        q = -torch.expm1(-ce)
        qg = torch.pow(q, gamma)
        ctx.gamma = gamma
        ctx.save_for_backward(ce, q, qg)
        return qg * ce

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        ce, q, qg = ctx.saved_tensors
        pos = q > 0
        ratio = torch.where(pos, ce / torch.where(pos, q, torch.ones_like(q)), torch.ones_like(q))
        return grad * qg * (1.0 + ctx.gamma * (1.0 - q) * ratio), None


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

    Implementation: :math:`c = -\log p_t = y\,\mathrm{softplus}(-z) + (1-y)\,\mathrm{softplus}(z)`
    (the BCE as a sum of two non-negative terms, accurate to the last bit where the
    ``binary_cross_entropy_with_logits`` form rounds e.g. :math:`z=-30, y=0` to 0 in
    float32); :math:`q = 1 - p_t = -\mathrm{expm1}(-c)`, and the element loss
    :math:`f(c) = q^{\gamma} c` is one autograd node (:class:`_FocalElement`) whose
    derivative is written out as
    :math:`f'(c) = q^{\gamma}\,[1 + \gamma (1-q)\, c/q]` with :math:`c/q \to 1` as
    :math:`c \to 0`. Autograd through ``pow(q, gamma) * c`` multiplies
    :math:`\gamma q^{\gamma-1} = \infty` by :math:`dq/dz = 0` at a saturated logit
    (:math:`q = 0` in floating point) and returns NaN for :math:`0 < \gamma < 1`
    (torchvision's and fvcore's ``sigmoid_focal_loss`` do the same: e.g. float32,
    :math:`z = -30, y = 0`); the true derivative there is finite (0), and so is this one,
    for every :math:`\gamma \ge 0`. The values equal the RetinaNet reference
    implementation (facebookresearch/fvcore ``fvcore/nn/focal_loss.py``,
    ``sigmoid_focal_loss``, commit 1c553507c68ee46d171ce81e31a71f232f3ff42d; torchvision
    0.29 ``torchvision/ops/focal_loss.py`` is the same code) on binary targets
    (``tests/unit/nn/test_losses_official.py``). The modulating factor carries gradient,
    as in the paper. For soft targets :math:`y \in (0,1)`, :math:`\log p_t` is the soft
    BCE and :math:`\alpha_t = y\alpha + (1-y)(1-\alpha)` (fvcore instead mixes
    :math:`p_t = p y + (1-p)(1-y)`; the two agree on binary targets). With
    ``gamma=0, alpha=None`` the loss is exactly :class:`cdgtmll.nn.losses.bce.BCELoss`.
    Reduction: sum over labels, mean over batch.
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
        if self.gamma == 0.0:
            loss = bce_terms(logits, targets)  # bit for bit the BCE row's terms
        else:
            ce = targets * F.softplus(-logits) + (1.0 - targets) * F.softplus(logits)  # = -log p_t
            loss = _FocalElement.apply(ce, self.gamma)
        if self.alpha is not None:
            loss = (targets * self.alpha + (1.0 - targets) * (1.0 - self.alpha)) * loss
        return reduce(loss)
