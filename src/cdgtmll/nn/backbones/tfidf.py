r"""The TF-IDF linear backbone (App. E.2, XMC: "TF-IDF (d' = 200k sparse) + linear heads").

:class:`SparseLinearBackbone` maps a sparse TF-IDF row ``x`` (``D`` features, l2
normalised by :mod:`cdgtmll.data.xmc`) to a dense ``h(x) = x W + b`` of size ``d'``
(``hidden_dim``, default 512, the methods' ``hidden_dim``) with **one** sparse-dense
matmul (``torch.sparse.mm`` on a coalesced COO batch; its backward gives ``W`` a dense
gradient). No standardisation (it would destroy sparsity; rows are already l2 normalised)
and no non-linearity by default, so every method's heads (BCE's ``Linear(d', L)``,
CD-GTMLL's pair-Linear) stay linear in the TF-IDF features: "TF-IDF + linear heads".
Reading of the paper: its ``d' = 200k`` is the TF-IDF dimension itself, i.e. heads
directly on ``x``; ``W`` here is a rank-``d'`` factorisation of those heads, needed
because the heads of the shared code act on a dense ``h`` (and ``L x D`` head weights,
13,330 x 203,882 for AmazonCat, would not fit). ``hidden_dim`` is configurable;
``activation='relu'`` gives a one-hidden-layer network instead. Initialisation: as
``nn.Linear`` (``U(-1/sqrt(D), 1/sqrt(D))`` for weight and bias, from the seeded global
torch RNG; weight drawn first, then bias). Dense input tensors are accepted too
(``x @ W + b``).

The sparse batches it reads come from the trainer's sparse rows (:mod:`cdgtmll.nn.sparse`);
which methods and datasets get it: :mod:`cdgtmll.nn.backbones.selection`.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def is_sparse_tensor(x: torch.Tensor) -> bool:
    return x.layout in (torch.sparse_coo, torch.sparse_csr)


class SparseLinearBackbone(nn.Module):
    """``h(x) = act(x W + b)``, ``W`` ``[D, d']``; ``x`` sparse (COO/CSR) or dense."""

    def __init__(self, in_dim: int, hidden_dim: int = 512, bias: bool = True, activation: str | None = None) -> None:
        super().__init__()
        if in_dim < 1 or hidden_dim < 1:
            raise ValueError(f"in_dim and hidden_dim must be >= 1, got {in_dim}, {hidden_dim}")
        if activation not in (None, "relu"):
            raise ValueError(f"activation must be None or 'relu', got {activation!r}")
        bound = 1.0 / math.sqrt(in_dim)
        self.weight = nn.Parameter(torch.empty(in_dim, hidden_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(hidden_dim).uniform_(-bound, bound)) if bias else None
        self.activation = activation
        self.in_dim, self.out_dim = int(in_dim), int(hidden_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if is_sparse_tensor(x):
            h = torch.sparse.mm(x if x.layout == torch.sparse_coo else x.to_sparse_coo(), self.weight)
        else:
            h = x @ self.weight
        if self.bias is not None:
            h = h + self.bias
        return torch.relu(h) if self.activation == "relu" else h

    def extra_repr(self) -> str:
        return f"in_dim={self.in_dim}, out_dim={self.out_dim}, bias={self.bias is not None}, activation={self.activation}"
