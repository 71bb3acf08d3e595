"""What every loss shares: the project-wide reduction and the label-statistics helpers."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def reduce(per_element: torch.Tensor) -> torch.Tensor:
    """The project-wide reduction: sum over labels (dim 1), mean over the batch."""
    return per_element.sum(dim=1).mean()


def safe_counts(label_counts: np.ndarray) -> np.ndarray:
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


def label_const(values: np.ndarray) -> torch.Tensor:
    """A per-label constant as a ``[1, L]`` float32 tensor (registered as a buffer)."""
    return torch.as_tensor(np.asarray(values, dtype=np.float64), dtype=torch.float32).reshape(1, -1)


def check_shapes(logits: torch.Tensor, targets: torch.Tensor, n_labels: int | None = None) -> None:
    if logits.dim() != 2 or logits.shape != targets.shape:
        raise ValueError(f"logits and targets must both be [B, L]; got {tuple(logits.shape)} and {tuple(targets.shape)}")
    if n_labels is not None and logits.shape[1] != n_labels:
        raise ValueError(f"loss was built for {n_labels} labels, got logits with {logits.shape[1]}")


def bce_terms(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Element-wise BCE ``-[y log sigma(z) + (1-y) log sigma(-z)]``.

    Computed by ``binary_cross_entropy_with_logits`` -- the log-sum-exp stable op
    that :class:`cdgtmll.nn.losses.bce.BCELoss` uses, equal to ``-(y*logsigmoid(z) + (1-y)*logsigmoid(-z))``
    -- so that the losses that reduce to BCE do so bit for bit."""
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
