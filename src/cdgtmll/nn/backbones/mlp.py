"""Shared tabular backbone (App. E.2: "backbone MLP (2 layers, ReLU, d' = 512)").

Exact layout of :class:`MLPBackbone` with the defaults (``hidden_dim=512, n_layers=2``)::

    x -> Standardize(mean, std)            # train-set statistics, stored as buffers
      -> Linear(d, 512) -> ReLU
      -> Linear(512, 512) -> ReLU          # output h(x), d' = 512

i.e. two hidden Linear+ReLU layers; every method's heads (one Linear for BCE, the
pair-Linear of CD-GTMLL) sit on ``h(x)``. Linear layers use PyTorch's default
initialisation (drawn from the seeded global torch RNG). Features whose training
standard deviation is below ``1e-8`` (constant columns) are centred but not scaled.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

STD_FLOOR = 1e-8


class Standardize(nn.Module):
    """``(x - mean) / std`` with train-set statistics kept as (checkpointed) buffers."""

    def __init__(self, mean: np.ndarray, std: np.ndarray) -> None:
        super().__init__()
        std = np.where(np.asarray(std) < STD_FLOOR, 1.0, std)
        self.register_buffer("mean", torch.as_tensor(np.asarray(mean), dtype=torch.float32))
        self.register_buffer("inv_std", torch.as_tensor(1.0 / np.asarray(std), dtype=torch.float32))

    @classmethod
    def from_data(cls, X: np.ndarray) -> Standardize:
        X = np.asarray(X, dtype=np.float64)
        return cls(X.mean(axis=0), X.std(axis=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) * self.inv_std


class MLPBackbone(nn.Module):
    """Standardize -> [Linear -> ReLU] x n_layers; ``out_dim`` = ``hidden_dim`` (d')."""

    def __init__(self, mean: np.ndarray, std: np.ndarray, hidden_dim: int = 512, n_layers: int = 2) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError("n_layers must be >= 1")
        d_in = int(np.asarray(mean).shape[0])
        self.standardize = Standardize(mean, std)
        layers: list[nn.Module] = []
        for k in range(n_layers):
            layers += [nn.Linear(d_in if k == 0 else hidden_dim, hidden_dim), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.out_dim = int(hidden_dim)

    @classmethod
    def from_data(cls, X: np.ndarray, hidden_dim: int = 512, n_layers: int = 2) -> MLPBackbone:
        X = np.asarray(X, dtype=np.float64)
        return cls(X.mean(axis=0), X.std(axis=0), hidden_dim=hidden_dim, n_layers=n_layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.standardize(x))
