"""Label-frequency helpers shared by R-variants (App. E.3), Rare-F1 (App. E.4) and the
CD-GTMLL label-space partition (App. E.1).

All three use *one* definition of the tail so that the labels down-sampled in an
R-variant are exactly the labels Rare-F1 averages over and the labels that get
an extra player.
"""

from __future__ import annotations

import math
import sys

import numpy as np

TAIL_FRACTION = 0.2
TIE_SEED = 0


def label_counts(Y) -> np.ndarray:
    """Positive count per label of a dense or sparse 0/1 matrix (int64, shape [L]).

    scipy.sparse is not imported here: a sparse ``Y`` means it already is, and planning (the
    Snakefile's config checks import this module) then needs no scipy."""
    sparse = sys.modules.get("scipy.sparse")
    if sparse is not None and sparse.issparse(Y):
        return np.asarray(Y.sum(axis=0)).ravel().astype(np.int64)
    return np.asarray(Y, dtype=np.int64).sum(axis=0)


def prevalence(Y) -> np.ndarray:
    """freq(l) = (1/M) sum_m y_ml  (App. E.3 step 1, App. E.4 Rare-F1)."""
    return label_counts(Y) / max(Y.shape[0], 1)


def ascending_order(Y, tie_seed: int = TIE_SEED) -> np.ndarray:
    """Labels sorted by training prevalence ascending; ties broken by a fixed-seed
    random permutation ("ties resolved by fixed-seed randomness", App. E.3 step 1)."""
    counts = label_counts(Y)
    tiebreak = np.random.default_rng(tie_seed).permutation(counts.shape[0])
    # lexsort: last key is primary
    return np.lexsort((tiebreak, counts))


def tail_labels(Y, q: float = TAIL_FRACTION, tie_seed: int = TIE_SEED) -> np.ndarray:
    """Bottom floor(q L) labels by training prevalence, sorted by label index."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"tail fraction q must be in [0, 1], got {q}")
    n_tail = math.floor(q * Y.shape[1])
    return np.sort(ascending_order(Y, tie_seed)[:n_tail])
