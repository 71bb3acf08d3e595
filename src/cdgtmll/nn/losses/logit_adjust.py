"""The ``logit_adjust`` loss (:class:`LogitAdjustedLoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from cdgtmll.nn.losses.common import bce_terms, check_shapes, label_const, reduce, safe_counts
from cdgtmll.nn.losses.registry import register_loss


@register_loss("logit_adjust")
class LogitAdjustedLoss(nn.Module):
    r"""Logit-adjusted loss, multi-label (sigmoid) form.

    Menon, Jayasumana, Rawat, Jain, Veit, Kumar, "Long-tail learning via logit
    adjustment", ICLR 2021, Sec. 4, Eq. 10 (logit-adjusted softmax cross-entropy
    :math:`-\log \frac{e^{f_y + \tau\log\pi_y}}{\sum_{y'} e^{f_{y'} + \tau\log\pi_{y'}}}`).
    Following the notes, each label's BCE is computed on the shifted logit

    .. math:: L_{ik} = \mathrm{BCE}(z_{ik} + \tau \log \pi_k,\ y_{ik}),\qquad \pi_k = n_k / N,

    ``tau=1``. At test time the model predicts :math:`\sigma(z)` with the
    *unadjusted* logits. ``n_k = 0`` is treated as 1 (:math:`\pi_k = 1/N`).

    Alternative not used here: for a per-label binary problem the Bayes-consistent
    shift is the prior log-odds, :math:`z + \tau\log(\pi_k / (1-\pi_k))`; for rare
    labels (:math:`\pi_k \ll 1`) the two differ little. The softmax form of the
    paper normalises over mutually exclusive classes; here each label is independent.
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {
        # shift tau*log(pi_k): tau = 0 is plain BCE, tau < 0 would favour the head labels
        "tau": {"type": "number", "minimum": 0},
    }

    def __init__(self, label_counts: np.ndarray, n_train: int, tau: float = 1.0) -> None:
        super().__init__()
        if n_train < 1:
            raise ValueError(f"logit_adjust: n_train must be >= 1, got {n_train}")
        counts = np.minimum(safe_counts(label_counts), float(n_train))
        self.n_labels = counts.size
        self.tau = float(tau)
        self.register_buffer("shift", label_const(tau * np.log(counts / float(n_train))), persistent=False)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_shapes(logits, targets, self.n_labels)
        return reduce(bce_terms(logits + self.shift.to(logits), targets))
