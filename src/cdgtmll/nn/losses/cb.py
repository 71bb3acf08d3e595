"""The ``cb`` loss (:class:`ClassBalancedLoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from cdgtmll.nn.losses.common import bce_terms, check_shapes, label_const, reduce, safe_counts
from cdgtmll.nn.losses.registry import register_loss


@register_loss("cb")
class ClassBalancedLoss(nn.Module):
    r"""Class-balanced (effective-number) re-weighted BCE.

    Cui, Jia, Lin, Song, Belongie, "Class-Balanced Loss Based on Effective Number
    of Samples", CVPR 2019, Sec. 3 (effective number
    :math:`E_n = (1-\beta^n)/(1-\beta)`) and Sec. 4 (class-balanced loss with the
    sigmoid cross-entropy):

    .. math::
        w_k = \frac{1-\beta}{1-\beta^{n_k}},\qquad
        \tilde w_k = K\,\frac{w_k}{\sum_j w_j}\ \ (\textstyle\sum_k \tilde w_k = K).

    Multi-label use (the notes; official DB repo ``CB_mode='average_w'``): each
    instance gets the average weight of its positive labels,
    :math:`\omega_i = \sum_k y_{ik}\tilde w_k / \sum_k y_{ik}`, and
    :math:`L_i = \omega_i \sum_k \mathrm{BCE}(z_{ik}, y_{ik})` (the weight multiplies
    the instance's whole BCE, positives and negatives; it carries no gradient).
    Decisions: an instance without positive labels gets :math:`\omega_i = 1`, the
    mean of the normalised class weights (the official code would give 0/0 = nan);
    ``n_k = 0`` is treated as ``n_k = 1``. Default ``beta=0.999``.
    The paper's single-label form weights by the class of the single label; the
    per-instance average is the multi-label adaptation.
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {
        # w = (1 - beta) / (1 - beta^n): beta = 1 divides by zero
        "beta": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
    }

    def __init__(self, label_counts: np.ndarray, n_train: int, beta: float = 0.999) -> None:
        super().__init__()
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"cb: beta must be in [0, 1), got {beta}")
        counts = safe_counts(label_counts)
        w = (1.0 - beta) / (1.0 - np.power(beta, counts))
        w = w * counts.size / w.sum()
        self.beta = float(beta)
        self.n_labels = counts.size
        self.register_buffer("class_weight", label_const(w), persistent=False)

    def instance_weight(self, targets: torch.Tensor) -> torch.Tensor:
        """Per-instance weight :math:`\\omega_i`, shape ``[B, 1]``."""
        n_pos = targets.sum(dim=1, keepdim=True)
        wsum = (targets * self.class_weight.to(targets)).sum(dim=1, keepdim=True)
        has_pos = n_pos > 0
        return torch.where(has_pos, wsum / torch.where(has_pos, n_pos, torch.ones_like(n_pos)), torch.ones_like(n_pos))

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_shapes(logits, targets, self.n_labels)
        return reduce(self.instance_weight(targets) * bce_terms(logits, targets))
