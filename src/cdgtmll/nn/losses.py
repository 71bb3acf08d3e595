"""Loss registry: one signature, one reduction convention for every loss-based method.

Signature: ``loss(logits, targets) -> scalar``, ``logits`` and ``targets`` float
tensors of shape ``[B, L]``. Reduction: **sum over labels, mean over the batch**
(the ASL convention), for every loss, so that loss magnitudes and learning
rates are comparable across methods.

Label statistics reach a loss only through its constructor: ``label_counts``
(n_k, positives per label in the training rows) and ``n_train`` (N).
Build a loss by name with :func:`build_loss`.

Every loss class declares the valid values of its own hyper-parameters (the constructor
arguments other than ``label_counts`` and ``n_train``) as JSON-schema fragments in
``hparam_space``, next to its ``__init__``; :func:`build_loss` and the loss-head
methods (:class:`cdgtmll.methods.neural.LossHeadMethod`, checked when the method is
built, i.e. at config validation) reject a value outside them, naming it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

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


def loss_hparam_space(name: str) -> dict[str, dict[str, Any]]:
    """Declared spaces of loss ``name``'s hyper-parameters (``hparam_space`` of its class
    and its bases, the most derived winning)."""
    out: dict[str, dict[str, Any]] = {}
    for klass in LOSSES[name].__mro__:
        for k, frag in vars(klass).get("hparam_space", {}).items():
            out.setdefault(k, frag)
    return out


def build_loss(name: str, label_counts: np.ndarray, n_train: int, **hparams) -> nn.Module:
    """Instantiate a registered loss. Every loss constructor accepts
    ``(label_counts, n_train, **hparams)``; unknown hyper-parameters raise, and so does
    a value outside the loss's declared ``hparam_space``."""
    try:
        cls = LOSSES[name]
    except KeyError:
        raise KeyError(f"unknown loss '{name}'; registered: {', '.join(sorted(LOSSES))}") from None
    params = set(inspect.signature(cls.__init__).parameters) - {"self", "label_counts", "n_train"}
    unknown = sorted(set(hparams) - params)
    if unknown:
        raise ValueError(f"loss '{name}': unknown hyper-parameter(s) {unknown}; allowed: {sorted(params)}")
    from cdgtmll.methods.base import check_values  # lazy: cdgtmll.methods imports this module

    check_values(f"loss '{name}'", loss_hparam_space(name), hparams)
    return cls(label_counts=np.asarray(label_counts), n_train=int(n_train), **hparams)


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


# ---------------------------------------------------------------------------
# helpers shared by the long-tail baselines
# ---------------------------------------------------------------------------


def _safe_counts(label_counts: np.ndarray) -> np.ndarray:
    """Per-label positive counts as float64, clamped to ``>= 1``.

    A label can have ``n_k = 0`` in the training rows (e.g. after down-sampling);
    every count-based loss below treats it as ``n_k = 1`` so that ``1/n_k``,
    ``log n_k`` and ``n_k^{-1/4}`` stay finite. Such a label is then the rarest
    possible label, which is what the rebalancing methods intend for a tail label.
    """
    counts = np.asarray(label_counts, dtype=np.float64).reshape(-1)
    if counts.size == 0:
        raise ValueError("label_counts is empty")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0):
        raise ValueError("label_counts must be finite and non-negative")
    return np.maximum(counts, 1.0)


def _label_const(values: np.ndarray) -> torch.Tensor:
    """A per-label constant as a ``[1, L]`` float32 tensor (registered as a buffer)."""
    return torch.as_tensor(np.asarray(values, dtype=np.float64), dtype=torch.float32).reshape(1, -1)


def _check(logits: torch.Tensor, targets: torch.Tensor, n_labels: int | None = None) -> None:
    if logits.dim() != 2 or logits.shape != targets.shape:
        raise ValueError(f"logits and targets must both be [B, L]; got {tuple(logits.shape)} and {tuple(targets.shape)}")
    if n_labels is not None and logits.shape[1] != n_labels:
        raise ValueError(f"loss was built for {n_labels} labels, got logits with {logits.shape[1]}")


def _bce_terms(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Element-wise BCE ``-[y log sigma(z) + (1-y) log sigma(-z)]``.

    Computed by ``binary_cross_entropy_with_logits`` -- the log-sum-exp stable op
    that :class:`BCELoss` uses, equal to ``-(y*logsigmoid(z) + (1-y)*logsigmoid(-z))``
    -- so that the losses that reduce to BCE do so bit for bit."""
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none")


# ---------------------------------------------------------------------------
# Focal loss
# ---------------------------------------------------------------------------


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
    loss is exactly :class:`BCELoss`. Reduction: sum over labels, mean over batch.
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
        _check(logits, targets)
        ce = _bce_terms(logits, targets)  # = -log p_t
        loss = ce
        if self.gamma != 0.0:
            loss = torch.pow(-torch.expm1(-ce), self.gamma) * loss
        if self.alpha is not None:
            loss = (targets * self.alpha + (1.0 - targets) * (1.0 - self.alpha)) * loss
        return reduce(loss)


# ---------------------------------------------------------------------------
# Asymmetric loss
# ---------------------------------------------------------------------------


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
        _check(logits, targets)
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


# ---------------------------------------------------------------------------
# Distribution-balanced loss
# ---------------------------------------------------------------------------


@register_loss("dbl")
class DistributionBalancedLoss(nn.Module):
    r"""Distribution-balanced loss (DB loss).

    Wu, Huang, Liu, Wang, Lin, "Distribution-Balanced Loss for Multi-Label
    Classification in Long-Tailed Datasets", ECCV 2020, Sec. 3.2 (re-balanced
    weighting) and Sec. 3.3 (negative-tolerant regularisation, NTR; bias Eq. 9);
    official code wutong16/DistributionBalancedLoss, ``ResampleLoss`` with
    ``reweight_func='rebalance'`` and the DB configs (configs/voc|coco/LT_resnet50_pfc_DB.py).

    **Re-balancing weight** (per instance i, label k; class-level sampling
    frequency :math:`P^C_k \propto 1/n_k`, instance-level :math:`P^I_i \propto
    \sum_{j \in y_i} 1/n_j`):

    .. math::
        r_{ik} = \frac{1/n_k}{\sum_{j:\,y_{ij}=1} 1/n_j},\qquad
        \hat r_{ik} = a + \sigma\big(b\,(r_{ik} - \mu)\big),

    ``a=smooth_a=0.1``, ``b=smooth_b=10``, ``mu=smooth_mu=0.3`` (VOC; 0.2 for COCO).
    As in the official code, :math:`\hat r_{ik}` is computed for *every* label k
    (not only positives) and weights both the positive and the negative term.
    It depends only on the labels and the counts (no gradient).

    **NTR** (class-specific bias, negative logits scaled by :math:`\lambda`):

    .. math::
        s_k = z_k + \kappa\,\hat b_k,\quad \hat b_k = -\log(1/p_k - 1),\ p_k = n_k / N,\\
        L_{ik} = \hat r_{ik}\Big[y\log(1 + e^{-s_k})
                 + \tfrac{1}{\lambda}(1-y)\log(1 + e^{\lambda s_k})\Big],

    ``kappa=0.05``, ``lam=5`` (VOC; 2 for COCO). Sign convention: the paper prints
    :math:`z - \nu` with :math:`\nu = \kappa \hat b`; the official code *adds*
    ``init_bias = -kappa*log(N/n_k - 1)`` = :math:`\kappa\hat b_k` to the logits,
    which lowers the logits of rare labels (:math:`\hat b_k < 0` for
    :math:`p_k < 1/2`) and so tolerates their negatives; we follow the code, i.e.
    :math:`\nu_k = -\kappa\hat b_k` in the paper's notation.
    Scale: the official code divides the bias by :math:`\lambda`
    (``* init_bias / neg_scale``); the authors confirmed this is a bug
    (issue #8 of the official repository: kappa effectively lambda times smaller). We use the paper's
    :math:`\kappa\hat b_k`; ``bias_div_lam=True`` reproduces the official code
    (equivalently, pass ``kappa=0.05/lam``).

    **Focal factor** (official DB configs: ``focal=dict(focal=True,
    balance_param=2.0, gamma=2)``): the element loss is multiplied by
    ``focal_scale * (1 - p_t)^focal_gamma`` with
    :math:`p_t = \exp(-[y\log(1+e^{-s}) + (1-y)\log(1+e^{\lambda s})])` (the
    un-weighted BCE on the official mixed logits; gradient flows through it, as
    in the official code). ``focal_gamma=0, focal_scale=1`` turns it off.

    **Differences from the official code / paper**:
    the paper's 1/C and the official element-wise mean are replaced by the project
    reduction (sum over labels, mean over batch); the ClassAware sampler of the
    official runs is not part of a loss (it belongs to the data loader);
    ``n_k = 0`` is clamped to 1 and ``n_k = N`` to ``N - 1`` so that
    :math:`1/n_k` and :math:`\log(N/n_k - 1)` are finite (the official code gives
    inf/nan); an instance with no positive label has
    :math:`\sum_j 1/n_j = 0`: the official code divides by zero, giving
    :math:`r = \infty` and :math:`\hat r = a + 1` for all its labels; we return that
    limit value explicitly without dividing by zero. Soft targets use a convex
    combination of the two terms (the official code mixes the logits instead);
    for binary targets the two coincide.
    """

    hparam_space: ClassVar[dict[str, dict[str, Any]]] = {
        # r_hat = a + sigmoid(b (r - mu)) is a weight: a >= 0; b >= 0 keeps rarer labels
        # (larger r) weighted more; r = (1/n_k) / sum_j 1/n_j > 0, so mu >= 0
        "smooth_a": {"type": "number", "minimum": 0},
        "smooth_b": {"type": "number", "minimum": 0},
        "smooth_mu": {"type": "number", "minimum": 0},
        "kappa": {"type": "number", "minimum": 0},  # NTR bias scale (>= 0 tolerates rare negatives)
        "lam": {"type": "number", "exclusiveMinimum": 0},  # negative-logit scale, divides the term
        "focal_gamma": {"type": "number", "minimum": 0},
        "focal_scale": {"type": "number", "exclusiveMinimum": 0},
        "bias_div_lam": {"type": "boolean"},
    }

    def __init__(
        self,
        label_counts: np.ndarray,
        n_train: int,
        smooth_a: float = 0.1,
        smooth_b: float = 10.0,
        smooth_mu: float = 0.3,
        kappa: float = 0.05,
        lam: float = 5.0,
        focal_gamma: float = 2.0,
        focal_scale: float = 2.0,
        bias_div_lam: bool = False,
    ) -> None:
        super().__init__()
        if n_train < 2:
            raise ValueError(f"dbl: n_train must be >= 2 for the class prior log-odds, got {n_train}")
        if lam <= 0:
            raise ValueError(f"dbl: lam must be > 0, got {lam}")
        if focal_gamma < 0:
            raise ValueError(f"dbl: focal_gamma must be >= 0, got {focal_gamma}")
        counts = np.minimum(_safe_counts(label_counts), n_train - 1.0)
        prior = counts / float(n_train)
        b_hat = -np.log(1.0 / prior - 1.0)  # log-odds of the label prior
        nu = kappa * b_hat / (lam if bias_div_lam else 1.0)
        self.n_labels = counts.size
        self.smooth_a, self.smooth_b, self.smooth_mu = float(smooth_a), float(smooth_b), float(smooth_mu)
        self.lam = float(lam)
        self.focal_gamma, self.focal_scale = float(focal_gamma), float(focal_scale)
        self.register_buffer("freq_inv", _label_const(1.0 / counts), persistent=False)
        self.register_buffer("logit_bias", _label_const(nu), persistent=False)

    def rebalance_weight(self, targets: torch.Tensor) -> torch.Tensor:
        """Smoothed re-balancing weights :math:`\\hat r_{ik}`, shape ``[B, L]``."""
        freq_inv = self.freq_inv.to(targets)
        repeat_rate = (targets * freq_inv).sum(dim=1, keepdim=True)  # sum_{j in y_i} 1/n_j
        has_pos = repeat_rate > 0
        r = freq_inv / torch.where(has_pos, repeat_rate, torch.ones_like(repeat_rate))
        r_hat = self.smooth_a + torch.sigmoid(self.smooth_b * (r - self.smooth_mu))
        # no positive label: r = +inf in the official code, so r_hat = a + 1
        return torch.where(has_pos, r_hat, torch.full_like(r_hat, self.smooth_a + 1.0))

    def ntr_terms(self, logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Element-wise NTR terms, ``s = z + bias``: returns
        ``(y*log(1+e^{-s}) + (1-y)/lam*log(1+e^{lam s}),  y*log(1+e^{-s}) + (1-y)*log(1+e^{lam s}))``;
        the second (the official un-weighted BCE on the mixed logits) is ``-log p_t``
        for the focal factor."""
        s = logits + self.logit_bias.to(logits)
        pos = -F.logsigmoid(s)
        neg = -F.logsigmoid(-self.lam * s)
        return targets * pos + (1.0 - targets) * neg / self.lam, targets * pos + (1.0 - targets) * neg

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        _check(logits, targets, self.n_labels)
        weight = self.rebalance_weight(targets)
        ntr, ce_unweighted = self.ntr_terms(logits, targets)
        loss = weight * ntr
        if self.focal_gamma != 0.0:
            loss = torch.pow(-torch.expm1(-ce_unweighted), self.focal_gamma) * loss
        return reduce(self.focal_scale * loss)


# ---------------------------------------------------------------------------
# Class-balanced loss
# ---------------------------------------------------------------------------


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
        counts = _safe_counts(label_counts)
        w = (1.0 - beta) / (1.0 - np.power(beta, counts))
        w = w * counts.size / w.sum()
        self.beta = float(beta)
        self.n_labels = counts.size
        self.register_buffer("class_weight", _label_const(w), persistent=False)

    def instance_weight(self, targets: torch.Tensor) -> torch.Tensor:
        """Per-instance weight :math:`\\omega_i`, shape ``[B, 1]``."""
        n_pos = targets.sum(dim=1, keepdim=True)
        wsum = (targets * self.class_weight.to(targets)).sum(dim=1, keepdim=True)
        has_pos = n_pos > 0
        return torch.where(has_pos, wsum / torch.where(has_pos, n_pos, torch.ones_like(n_pos)), torch.ones_like(n_pos))

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        _check(logits, targets, self.n_labels)
        return reduce(self.instance_weight(targets) * _bce_terms(logits, targets))


# ---------------------------------------------------------------------------
# LDAM
# ---------------------------------------------------------------------------


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
        counts = _safe_counts(label_counts)
        m = counts ** -0.25
        m = m * (max_margin / m.max())
        self.n_labels = counts.size
        self.s = float(s)
        self.register_buffer("margins", _label_const(m), persistent=False)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        _check(logits, targets, self.n_labels)
        adjusted = self.s * (logits - self.margins.to(logits) * targets)
        return reduce(_bce_terms(adjusted, targets))


# ---------------------------------------------------------------------------
# Logit adjustment
# ---------------------------------------------------------------------------


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
        counts = np.minimum(_safe_counts(label_counts), float(n_train))
        self.n_labels = counts.size
        self.tau = float(tau)
        self.register_buffer("shift", _label_const(tau * np.log(counts / float(n_train))), persistent=False)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        _check(logits, targets, self.n_labels)
        return reduce(_bce_terms(logits + self.shift.to(logits), targets))
