"""Label statistics and batches shared by the loss tests (CPU and CUDA)."""

from __future__ import annotations

import numpy as np
import torch

from cdgtmll.nn.losses.registry import loss_names

COUNTS = np.array([10, 100, 1000])
N_TRAIN = 2000

#: every loss with its defaults, plus the two options that change the computation
ALL_CONFIGS = [(name, {}) for name in loss_names()] + [("asl", {"focal_grad": True}), ("dbl", {"bias_div_lam": False})]


def random_batch(b: int = 8, k: int = 3, seed: int = 0, scale: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    z = scale * torch.randn(b, k, generator=g)
    y = (torch.rand(b, k, generator=g) < 0.4).float()
    return z, y
