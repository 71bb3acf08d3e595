"""The ``asl`` loss (:class:`AsymmetricLoss`)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.nn.losses.common import check_shapes, reduce
from cdgtmll.nn.losses.registry import register_loss


@register_loss("asl")
class AsymmetricLoss(nn.Module):
    r"""Asymmetric loss (ASL).

    Ridnik et al., "Asymmetric Loss For Multi-Label Classification", ICCV 2021,
    Sec. 3 (asymmetric focusing and probability shifting, Eq. 1-4), following the
    official ``AsymmetricLoss`` (Alibaba-MIIL/ASL, src/loss_functions/losses.py):

    .. math::
        p = \sigma(z),\quad p_m = \max(p - m, 0),\\
        L = -\big[\, y\,(1-p)^{\gamma_+} \log p
              + (1-y)\, p_m^{\gamma_-} \log(1 - p_m) \,\big].

    Defaults (every official training script): ``gamma_neg=4``, ``gamma_pos=0``,
    ``clip=m=0.05``, ``eps=1e-8``. The focusing weights
    :math:`(1-p)^{\gamma_+}`, :math:`p_m^{\gamma_-}` are detached
    (``focal_grad=False``, the official ``disable_torch_grad_focal_loss=True``);
    ``focal_grad=True`` lets gradient flow through them.

    Implementation: the official code clamps the probabilities at ``eps`` inside
    the logs, ``log(max(p, eps))``; here the clamp is applied in log space,
    ``max(logsigmoid(z), log eps)``, which is the same function (log is monotone)
    with the same zero gradient below the clamp but without forming ``log(sigmoid)``.
    :math:`1 - p_m = \min(\sigma(-z) + m, 1)`. Soft targets follow the official code:
    weight :math:`(y(1-p) + (1-y)p_m)^{\gamma_+ y + \gamma_-(1-y)}`.
    The official ``AsymmetricLoss`` returns a sum over the batch; here the
    project reduction (sum over labels, mean over batch) is used.
    With ``gamma_neg=gamma_pos=0, clip=0`` the loss equals BCE up to the eps clamp
    (i.e. exactly where :math:`|z| < -\log \varepsilon \approx 18.4`).
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {
        "gamma_neg": {"type": "number", "minimum": 0},  # focusing exponents
        "gamma_pos": {"type": "number", "minimum": 0},
        "clip": {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 1},  # margin m of p_m = max(p - m, 0)
        "eps": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},  # log clamp
        "focal_grad": {"type": "boolean"},
    }

    def __init__(
        self,
        label_counts: np.ndarray,
        n_train: int,
        gamma_neg: float = 4.0,
        gamma_pos: float = 0.0,
        clip: float | None = 0.05,
        eps: float = 1e-8,
        focal_grad: bool = False,
    ) -> None:
        super().__init__()
        if gamma_neg < 0 or gamma_pos < 0:
            raise ValueError("asl: gamma_neg and gamma_pos must be >= 0")
        if clip is not None and not 0.0 <= clip < 1.0:
            raise ValueError(f"asl: clip must be in [0, 1) or None, got {clip}")
        if not 0.0 < eps < 1.0:
            raise ValueError(f"asl: eps must be in (0, 1), got {eps}")
        self.gamma_neg = float(gamma_neg)
        self.gamma_pos = float(gamma_pos)
        self.clip = 0.0 if clip is None else float(clip)
        self.eps = float(eps)
        self.focal_grad = bool(focal_grad)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_shapes(logits, targets)
        log_eps = float(np.log(self.eps))
        y = targets
        log_p = F.logsigmoid(logits).clamp(min=log_eps)
        if self.clip > 0:
            one_minus_pm = (torch.sigmoid(-logits) + self.clip).clamp(max=1.0)  # 1 - p_m
            log_1m_pm = torch.log(one_minus_pm.clamp(min=self.eps))
            p_m = (torch.sigmoid(logits) - self.clip).clamp(min=0.0)
        else:
            log_1m_pm = F.logsigmoid(-logits).clamp(min=log_eps)
            p_m = torch.sigmoid(logits)
        loss = y * log_p + (1.0 - y) * log_1m_pm
        if self.gamma_neg > 0 or self.gamma_pos > 0:
            base = y * torch.sigmoid(-logits) + (1.0 - y) * p_m  # 1 - p_t
            expo = self.gamma_pos * y + self.gamma_neg * (1.0 - y)
            if not self.focal_grad:
                base = base.detach()
            loss = loss * torch.pow(base, expo)
        return reduce(-loss)
