"""What every loss shares: the project-wide reduction and the label-statistics helpers."""

from __future__ import annotations

from typing import Any

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


class _BCEWithLogitsCPU(torch.autograd.Function):
    r"""Element-wise BCE on CPU in vectorised passes, with torch's own gradient.

    Forward: :math:`\max(z, 0) - yz - \log \sigma(|z|)` (:math:`-\log \sigma(|z|) = \log(1 +
    e^{-|z|})`), which equals torch's ``(1-y)z - \mathrm{logsigmoid}(z)``, in five vectorised
    passes (clamp, addcmul, abs, sigmoid, log). On this project's CPUs torch's ``log_sigmoid``
    forward is a scalar loop (about 10 ns an element, 9% of a BCE fit on Delicious:
    ``benchmarks/bench_floor.py``, docs/benchmarks.md "Floor"); ``sigmoid`` and ``log`` are
    vectorised. The values differ from torch's in the last bits (both within 6e-7 of the
    float64 result on logits of scale 3); where :math:`\sigma(|z|)` rounds to 1 (|z| above about
    17 in float32) the term's last part reads 0 instead of :math:`e^{-|z|} < 5 \cdot 10^{-8}`.

    Backward: ``(sigmoid(z) - y) * grad``, the expression and order of PyTorch's
    ``binary_cross_entropy_with_logits_backward`` (``torch/csrc/autograd/FunctionsManual.cpp``,
    the formula ``tools/autograd/derivatives.yaml`` names; no weight, no ``pos_weight``,
    reduction none), in place unless grad mode is on (a double backward), as there. So the
    gradient, and hence every update and metric, is bit for bit torch's (tested on the locked
    torch: ``tests/unit/nn/test_losses.py``, ``tests/unit/nn/test_trainer.py``)."""

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(z, y)
        return torch.clamp(z, min=0).addcmul_(y, z, value=-1).sub_(z.abs().sigmoid_().log_())

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        z, y = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: out of place, so autograd can differentiate it
            return z.sigmoid().sub(y).mul(grad), None
        return z.sigmoid().sub_(y).mul_(grad), None


#: below this many elements :func:`bce_terms` keeps torch's op: the vectorised form's extra passes
#: cost more in per-op overhead than the scalar loop they avoid (one thread, forward and backward
#: through :func:`reduce` of a 256-row batch, median of 5 interleaved rounds, 2026-11-27, 2 cores,
#: quiet: 1.13x torch's at 8 labels, 1.07x at 14, 0.80x at 16, 0.83x at 22, 0.69x at 45, 0.40x at
#: 983; ``benchmarks/bench_bce_terms.py`` measures a batch and a fit)
BCE_FAST_MIN_ELEMENTS = 4096


def bce_terms(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Element-wise BCE ``-[y log sigma(z) + (1-y) log sigma(-z)]``, the terms of
    :class:`cdgtmll.nn.losses.bce.BCELoss` and of every loss that reduces to it.

    Float32/float64 CPU tensors of one shape and dtype with at least
    :data:`BCE_FAST_MIN_ELEMENTS` elements, targets without gradient and no autocast:
    :class:`_BCEWithLogitsCPU` (vectorised forward, torch's gradient bit for bit). Otherwise
    (small batches, GPU, autocast, soft targets that carry gradient) torch's
    ``binary_cross_entropy_with_logits``, the log-sum-exp stable op. Either way the gradient,
    hence every update, is torch's; only the loss values' last bits depend on the path."""
    if (logits.numel() >= BCE_FAST_MIN_ELEMENTS and logits.device.type == "cpu"
            and logits.dtype in (torch.float32, torch.float64)
            and targets.dtype == logits.dtype and targets.shape == logits.shape and not targets.requires_grad
            and not torch.is_autocast_enabled("cpu")):
        return _BCEWithLogitsCPU.apply(logits, targets)
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
