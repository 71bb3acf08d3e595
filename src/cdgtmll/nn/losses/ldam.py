"""The ``ldam`` loss (:class:`LDAMLoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from cdgtmll.nn.losses.common import bce_terms, check_shapes, label_const, reduce, safe_counts
from cdgtmll.nn.losses.registry import register_loss


@register_loss("ldam")
class LDAMLoss(nn.Module):
    r"""Label-distribution-aware margin loss, multi-label (sigmoid) form.

    Cao, Wei, Gaidon, Arechiga, Ma, "Learning Imbalanced Datasets with
    Label-Distribution-Aware Margin Loss", NeurIPS 2019, Sec. 3, Eq. 13:
    margins :math:`\Delta_k = C / n_k^{1/4}`, with C chosen so that
    :math:`\max_k \Delta_k` = ``max_margin`` (0.5, the official code), scale
    ``s = 30``. Here

    .. math:: L_{ik} = \mathrm{BCE}\big(s\,(z_{ik} - \Delta_k\,y_{ik}),\ y_{ik}\big),

    i.e. the margin is subtracted from the positive logits only and the result is
    scaled by s before the loss (the official ``LDAMLoss`` does
    ``cross_entropy(s * where(y, x - m, x), y)``).

    Differences from the original: the original is a softmax cross-entropy over
    mutually exclusive classes in which only the true class's logit gets a margin;
    here each label is a binary problem and every positive label gets its margin,
    negatives none. The original uses cosine logits (normalised features and
    weights, |z| <= 1) so that s = 30 and a margin 0.5 are on a fixed scale; here
    the logits are the model's raw outputs and s only rescales them. The deferred
    re-weighting (DRW) schedule of the paper is not part of this loss. Prediction
    uses the unshifted logits; :math:`\sigma(s z)` and :math:`\sigma(z)` rank and
    threshold at 0 identically. ``n_k = 0`` is treated as 1.
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {
        "max_margin": {"type": "number", "minimum": 0},  # largest margin Delta_k
        "s": {"type": "number", "exclusiveMinimum": 0},  # logit scale
    }

    def __init__(self, label_counts: np.ndarray, n_train: int, max_margin: float = 0.5, s: float = 30.0) -> None:
        super().__init__()
        if max_margin < 0 or s <= 0:
            raise ValueError("ldam: max_margin must be >= 0 and s > 0")
        counts = safe_counts(label_counts)
        m = counts**-0.25
        m = m * (max_margin / m.max())
        self.n_labels = counts.size
        self.s = float(s)
        self.register_buffer("margins", label_const(m), persistent=False)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_shapes(logits, targets, self.n_labels)
        adjusted = self.s * (logits - self.margins.to(logits) * targets)
        return reduce(bce_terms(adjusted, targets))
