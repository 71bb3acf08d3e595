"""What the data-side baselines (:mod:`cdgtmll.methods.data_side`) share: the BCE row
they change the data path of, and their seeding helpers."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.methods.neural import LossHeadMethod

_BACKBONE = "MLP backbone (2x512, ReLU) + linear head, BCE (as the BCE row)"


def _derived_seed(seed: int, tag: int) -> int:
    """A seed for one of a method's own RNG streams, distinct from the trainer's shuffle
    generator (which is seeded with ``seed`` itself)."""
    return int((int(seed) * 1_000_003 + int(tag) * 7_919 + 0x5EED) % (2**63 - 1))


def _dense_labels(Y: Any) -> np.ndarray:
    if sp.issparse(Y):
        Y = Y.toarray()
    return np.asarray(Y)


class _BCEDataSide(LossHeadMethod):
    """The BCE row (loss 'bce', same model/trainer); subclasses change the data path."""

    loss_name = "bce"

    def __init__(
        self,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
