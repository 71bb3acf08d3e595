"""Label-noise training variants "Noise-rho" (paper Sec. 5.3, "Robustness to Noisy Labels").

"For each image we independently flip the ground-truth of every positive label with
probability rho". Implemented on the **training rows only** (models are "evaluated on
the *clean* test split"; validation rows are untouched as well, so thresholds and early
signals are tuned on clean labels):

* every positive entry ``y_ml = 1`` of ``Y_train`` becomes ``0`` independently with
  probability ``rho``; negatives never change (nothing goes 0 -> 1: the paper's
  "symmetric label-flip noise" is described as flipping *positives*, and we follow that
  literal description), no row is removed, ``X`` is unchanged.

Reproducibility -- exact RNG consumption: one ``rng = np.random.default_rng(seed)`` and
exactly one call ``u = rng.random(n_pos)``, ``n_pos`` = number of positive entries, with
the positives enumerated in **row-major order** (row ascending, then label ascending;
the order of ``np.nonzero`` on a dense matrix and of a canonical CSR matrix). Entry k is
flipped iff ``u[k] < rho``. Dense and sparse inputs therefore give identical results.

Variant id used by the pipeline: ``N<rate:.2f>-s<seed>`` (e.g. ``N0.10-s0``).

CLI::

    python -m cdgtmll.variants.noise --in PROCESSED.npz --rate 0.1 --seed 0 \\
        --out OUT.npz --bookkeeping OUT.json
"""

from __future__ import annotations

import argparse
import hashlib
import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.data.processed import ProcessedData
from cdgtmll.labels import label_counts
from cdgtmll.variants.common import variant_main
from cdgtmll.variants.naming import noise_id

VARIANT_KIND = "N"
PAPER_SECTION = "Sec. 5.3 (Robustness to Noisy Labels and Occlusions)"


def variant_id(rate: float, seed: int) -> str:
    """``N0.10-s0`` for rate 0.1, seed 0 (the variant directory name in the run layout)."""
    return noise_id(rate, seed)


def _check_rate(rate: Any) -> float:
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise ValueError(f"rate must be a number in [0, 1], got {rate!r}")
    r = float(rate)
    if not (math.isfinite(r) and 0.0 <= r <= 1.0):
        raise ValueError(f"rate must be in [0, 1], got {rate!r}")
    return r


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    return int(seed)


def _positives(Y: Any) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the positive entries in row-major order; checks 0/1 values."""
    if Y.ndim != 2:
        raise ValueError(f"Y must be a 2-D label matrix, got shape {Y.shape}")
    if sp.issparse(Y):
        C = sp.csr_matrix(Y, copy=True)
        C.sum_duplicates()  # canonical: sorted indices, no duplicates
        C.eliminate_zeros()
        if C.data.size and not np.all(C.data == 1):
            raise ValueError("Y must contain only 0/1 labels")
        rows = np.repeat(np.arange(C.shape[0], dtype=np.int64), np.diff(C.indptr))
        return rows, C.indices.astype(np.int64)
    A = np.asarray(Y)
    if A.size and not np.all((A == 0) | (A == 1)):
        raise ValueError("Y must contain only 0/1 labels")
    r, c = np.nonzero(A)  # C order = row-major
    return r.astype(np.int64), c.astype(np.int64)


def _entries_sha256(rows: np.ndarray, cols: np.ndarray) -> str:
    pairs = np.stack([rows, cols], axis=1).astype("<i8")
    return hashlib.sha256(np.ascontiguousarray(pairs).tobytes()).hexdigest()


def _make_noisy(
    Y_train: Any, rate: float, seed: int, label_names: Sequence[str] | None = None
) -> tuple[Any, dict[str, Any]]:
    """Implementation of :func:`make_noisy`; the bookkeeping also carries ``_flipped`` =
    (rows, labels) of the flipped entries, which the public functions pop."""
    rho = _check_rate(rate)
    seed = _check_seed(seed)
    M, L = (int(d) for d in Y_train.shape)
    if label_names is not None and len(label_names) != L:
        raise ValueError(f"{len(label_names)} label names for {L} labels")
    rows, cols = _positives(Y_train)
    rng = np.random.default_rng(seed)
    flip = rng.random(rows.size) < rho
    fr, fc = rows[flip], cols[flip]

    if sp.issparse(Y_train):
        Y_new = sp.csr_matrix(Y_train, copy=True)
        Y_new.sum_duplicates()
        Y_new.eliminate_zeros()
        # canonical CSR: data is in the same row-major order as (rows, cols)
        Y_new.data[flip] = 0
        Y_new.eliminate_zeros()
        Y_new = Y_new.astype(Y_train.dtype)
    else:
        Y_new = np.array(Y_train, copy=True)
        Y_new[fr, fc] = 0

    before = label_counts(Y_train)
    after = label_counts(Y_new)
    flipped_per_label = np.bincount(fc, minlength=L).astype(np.int64)
    row_pos_before = np.bincount(rows, minlength=M)
    row_pos_after = row_pos_before - np.bincount(fr, minlength=M)
    book: dict[str, Any] = {
        "kind": VARIANT_KIND,
        "variant_id": variant_id(rho, seed),
        "rate": rho,
        "seed": seed,
        "n_train": M,
        "n_labels": L,
        "label_names": None if label_names is None else [str(n) for n in label_names],
        "positives_before": [int(v) for v in before],
        "positives_after": [int(v) for v in after],
        "flipped_per_label": [int(v) for v in flipped_per_label],
        "n_positives_before": int(before.sum()),
        "n_positives_after": int(after.sum()),
        "total_flipped": int(flip.sum()),
        "empirical_flip_fraction": (float(flip.sum()) / rows.size) if rows.size else None,
        "rows_emptied": int(np.sum((row_pos_before > 0) & (row_pos_after == 0))),
        "labels_emptied": [int(l) for l in np.flatnonzero((before > 0) & (after == 0))],
        "flipped_sha256": _entries_sha256(fr, fc),
        "direction": "1->0 only (positives dropped); negatives never change",
        "rng": "numpy.random.default_rng(seed).random(n_pos) over the positives in row-major "
        "order (row, then label ascending); flip iff u < rate",
    }
    book["_flipped"] = (fr, fc)  # popped by the callers below; not JSON
    return Y_new, book


def make_noisy(
    Y_train: Any, rate: float, seed: int, label_names: Sequence[str] | None = None
) -> tuple[Any, dict[str, Any]]:
    """Flip each positive of ``Y_train`` to 0 independently with probability ``rate``.

    ``Y_train``: dense 0/1 array ``[M, L]`` or scipy.sparse matrix; the input is not
    modified. Returns ``(Y_new, bookkeeping)`` with ``Y_new`` of the input's dtype (CSR if
    the input was sparse). The JSON-able bookkeeping holds the spec (rate, seed, RNG
    rule), sizes, per-label positives before/after and flips, totals, the empirical flip
    fraction, the number of rows left without any positive that had one before, and
    ``flipped_sha256`` (sha256 of the flipped ``(row, label)`` pairs as little-endian
    int64 in row-major order) so a regeneration can be checked without storing them.
    """
    Y_new, book = _make_noisy(Y_train, rate, seed, label_names)
    book.pop("_flipped")
    return Y_new, book


def apply_to_dataset(data: ProcessedData, rate: float, seed: int) -> tuple[ProcessedData, dict[str, Any]]:
    """Apply :func:`make_noisy` to the rows ``data.splits['train']`` only.

    Validation and test rows, ``X``, the splits and label names are unchanged. The result
    is named ``<name>-N`` with ``meta['variant']`` recording the spec. A dataset that is
    already a variant (R or N) is refused. The bookkeeping's row indices refer to the
    training split; ``flipped_dataset_sha256`` hashes the flipped pairs with dataset row
    indices.
    """
    if "variant" in data.meta:
        raise ValueError(
            f"{data.name}: already a variant ({data.meta['variant'].get('kind')}); apply noise to the base dataset"
        )
    idx_train = np.asarray(data.splits["train"], dtype=np.int64)
    Y = data.Y
    Y_tr = Y[idx_train]
    _, book = _make_noisy(Y_tr, rate, seed, label_names=data.label_names)
    fr, fc = book.pop("_flipped")
    ds_rows = idx_train[fr]
    if sp.issparse(Y):
        Y_new = sp.csr_matrix(Y, copy=True)
        Y_new.sum_duplicates()
        Y_new[ds_rows, fc] = 0  # existing nonzeros only: no structural insertions
        Y_new.eliminate_zeros()
    else:
        Y_new = np.array(Y, copy=True)
        Y_new[ds_rows, fc] = 0
    order = np.lexsort((fc, ds_rows))
    book["flipped_dataset_sha256"] = _entries_sha256(ds_rows[order], fc[order])
    book["dataset"] = data.name

    spec = {
        "kind": VARIANT_KIND,
        "rate": book["rate"],
        "seed": book["seed"],
        "variant_id": book["variant_id"],
        "base_name": data.name,
        "total_flipped": book["total_flipped"],
        "paper_section": PAPER_SECTION,
    }
    return data.with_labels(Y_new, VARIANT_KIND, spec), book


def main(argv: Sequence[str] | None = None) -> int:
    def add_arguments(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--rate", type=float, required=True, help="flip probability rho in [0, 1]")
        ap.add_argument("--seed", "--sampling-seed", dest="seed", type=int, required=True, help="noise sampling seed")

    return variant_main(argv, prog="python -m cdgtmll.variants.noise", description=__doc__.split("\n")[0],
                        add_arguments=add_arguments, apply=lambda data, a: apply_to_dataset(data, a.rate, a.seed))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
