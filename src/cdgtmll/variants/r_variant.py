"""Rare-focused training-only "R" variants (VOC-R, COCO-R, Yeast-R, Mediamill-R), App. E.3.

Algorithm (App. E.3 "Steps"), on the training rows only:

1. *Tail set*: ``L_T = cdgtmll.labels.tail_labels(Y_train, q, tie_seed)`` -- the bottom
   ``floor(q L)`` labels by prevalence on the **original** training labels, ties by
   a fixed-seed permutation (the same definition Rare-F1 and CD-GTMLL use).
2. *Positive pools*: ``P_l = {m : y_ml = 1}`` for each ``l in L_T``.
3. *Down-sampling*: draw ``S_l`` of size ``floor(sigma P_l)`` uniformly without
   replacement from ``P_l`` and set only ``y_ml <- 0`` for ``m in S_l``. No instance
   is removed; no other entry changes; nothing ever goes 0 -> 1.
4. *Bookkeeping*: ``sigma_hat_l = |S_l| / P_l`` and the prevalences before/after.

Validation and test rows are never touched (:func:`apply_to_dataset`).

Reproducibility -- exact RNG consumption: one ``rng = np.random.default_rng(sampling_seed)``;
for each tail label ``l`` in **ascending label index** order (including labels with
``P_l = 0``), exactly one call ``rng.choice(P_l, size=floor(sigma P_l), replace=False)``
whose result indexes ``P_l``'s rows listed in **ascending row order**. The size is
``floor(sigma P_l)`` computed exactly with ``sigma`` read as the decimal its
``repr`` shows (``Fraction(repr(sigma))``), so e.g. ``sigma=0.57, P_l=100`` gives 57,
not ``floor(56.99999999999999) = 56``.

CLI::

    python -m cdgtmll.variants.r_variant --in PROCESSED.npz --severity 0.4 --sampling-seed 0 \\
        --out OUT.npz --bookkeeping OUT.json [--q 0.2 --tie-seed 0]
"""

from __future__ import annotations

import argparse
import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.data.processed import ProcessedData
from cdgtmll.labels import TAIL_FRACTION, TIE_SEED, label_counts, prevalence, tail_labels
from cdgtmll.variants.common import variant_main

VARIANT_KIND = "R"


def n_to_flip(severity: float, n_pos: int) -> int:
    """``floor(sigma * P_l)`` computed exactly on the decimal value of ``sigma`` (App. E.3 step 3)."""
    frac = Fraction(repr(float(severity)))
    return int((frac.numerator * int(n_pos)) // frac.denominator)


def _check_severity(severity: Any) -> float:
    if isinstance(severity, bool) or not isinstance(severity, numbers.Real):
        raise ValueError(f"severity must be a number in (0, 1), got {severity!r}")
    s = float(severity)
    if not (math.isfinite(s) and 0.0 < s < 1.0):
        raise ValueError(f"severity must be in the open interval (0, 1), got {severity!r}")
    return s


def _check_binary(Y: Any) -> None:
    if Y.ndim != 2:
        raise ValueError(f"Y must be a 2-D label matrix, got shape {Y.shape}")
    vals = Y.data if sp.issparse(Y) else np.asarray(Y)
    if vals.size and not np.all((vals == 0) | (vals == 1)):
        raise ValueError("Y must contain only 0/1 labels")


def make_r_variant(
    Y_train: Any,
    severity: float,
    sampling_seed: int,
    q: float = TAIL_FRACTION,
    tie_seed: int = TIE_SEED,
    label_names: Sequence[str] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Down-sample tail-label positives of a training label matrix (App. E.3 steps 1-4).

    ``Y_train``: dense 0/1 array ``[M, L]`` (normally uint8) or a scipy.sparse matrix.
    Returns ``(Y_new, bookkeeping)``: ``Y_new`` is a copy with the input's dtype (and
    CSR format if the input was sparse); the input is not modified. ``bookkeeping``
    is JSON-able: the spec (severity, q, tail_fraction = |L_T|/L, tie_seed,
    sampling_seed), sizes, the tail labels, per tail label ``P_l``, ``n_flipped``,
    ``sigma_hat`` (= ``n_flipped / P_l``, ``None`` when ``P_l = 0``), prevalences
    before/after and ``flipped_rows`` (row indices of ``Y_train``), plus all labels'
    prevalences before/after and the total number of flipped entries.
    """
    sigma = _check_severity(severity)
    if isinstance(sampling_seed, bool) or not isinstance(sampling_seed, numbers.Integral):
        raise ValueError(f"sampling_seed must be an integer, got {sampling_seed!r}")
    _check_binary(Y_train)
    M, L = (int(d) for d in Y_train.shape)
    if label_names is not None and len(label_names) != L:
        raise ValueError(f"{len(label_names)} label names for {L} labels")

    # Step 1: tail on the ORIGINAL training labels (single shared definition).
    tail = tail_labels(Y_train, q, tie_seed)
    prev_before = prevalence(Y_train)

    sparse = sp.issparse(Y_train)
    if sparse:
        Y_csc = sp.csc_matrix(Y_train, copy=True)
        Y_csc.sum_duplicates()
        Y_csc.eliminate_zeros()
    else:
        Y_new = np.array(Y_train, copy=True)

    rng = np.random.default_rng(int(sampling_seed))
    per_label: list[dict[str, Any]] = []
    total = 0
    for l in tail.tolist():  # ascending label index; one rng.choice per tail label
        # Step 2: positive pool, rows in ascending order.
        if sparse:
            lo, hi = Y_csc.indptr[l], Y_csc.indptr[l + 1]
            pos = np.sort(Y_csc.indices[lo:hi])
        else:
            pos = np.flatnonzero(Y_new[:, l])
        P = int(pos.size)
        # Step 3: uniform sample without replacement of size floor(sigma P_l).
        k = n_to_flip(sigma, P)
        pick = rng.choice(P, size=k, replace=False)
        rows = np.sort(pos[pick])
        if sparse:
            col = Y_csc.indices[lo:hi]
            Y_csc.data[lo:hi][np.isin(col, rows)] = 0
        else:
            Y_new[rows, l] = 0
        total += k
        # Step 4: bookkeeping.
        entry: dict[str, Any] = {
            "label": int(l),
            "P": P,
            "n_flipped": int(k),
            "sigma_hat": (k / P) if P else None,
            "prevalence_before": float(prev_before[l]),
            "prevalence_after": float((P - k) / M) if M else 0.0,
            "flipped_rows": [int(r) for r in rows],
        }
        if label_names is not None:
            entry["name"] = str(label_names[l])
        per_label.append(entry)

    if sparse:
        Y_csc.eliminate_zeros()
        Y_new = Y_csc.tocsr().astype(Y_train.dtype)
    prev_after = prevalence(Y_new)
    book: dict[str, Any] = {
        "kind": VARIANT_KIND,
        "severity": sigma,
        "q": float(q),
        "n_tail": int(tail.size),
        "tail_fraction": (tail.size / L) if L else 0.0,
        "tie_seed": int(tie_seed),
        "sampling_seed": int(sampling_seed),
        "n_train": M,
        "n_labels": L,
        "tail_labels": [int(t) for t in tail],
        "tail_label_names": None if label_names is None else [str(label_names[t]) for t in tail],
        "per_tail_label": per_label,
        "prevalence_before": [float(p) for p in prev_before],
        "prevalence_after": [float(p) for p in prev_after],
        "n_positives_before": int(label_counts(Y_train).sum()),
        "n_positives_after": int(label_counts(Y_new).sum()),
        "total_flipped": int(total),
        "rng": "numpy.random.default_rng(sampling_seed); per tail label in ascending index: "
        "choice(P_l, size=floor(sigma*P_l), replace=False) over positives in ascending row order",
    }
    return Y_new, book


def apply_to_dataset(
    data: ProcessedData,
    severity: float,
    sampling_seed: int,
    q: float = TAIL_FRACTION,
    tie_seed: int = TIE_SEED,
) -> tuple[ProcessedData, dict[str, Any]]:
    """Apply :func:`make_r_variant` to the training rows ``data.splits['train']`` only.

    The tail is computed on the training rows only; validation and test rows (and
    ``X``, the splits and label names) are unchanged. The returned dataset is named
    ``<name>-R`` and ``meta['variant']`` records the spec. Applying it to a dataset
    that already is an R-variant is refused (its tail would come from down-sampled
    labels). The bookkeeping additionally maps ``flipped_rows`` to dataset row
    indices (``flipped_dataset_rows``).
    """
    if "variant" in data.meta:
        raise ValueError(f"{data.name}: already a variant ({data.meta['variant'].get('kind')}); apply R to the base dataset")
    idx_train = np.asarray(data.splits["train"], dtype=np.int64)
    Y = data.Y
    Y_tr_new, book = make_r_variant(
        Y[idx_train], severity, sampling_seed, q=q, tie_seed=tie_seed, label_names=data.label_names
    )
    rows, cols = [], []
    for entry in book["per_tail_label"]:
        ds_rows = idx_train[np.asarray(entry["flipped_rows"], dtype=np.int64)]
        entry["flipped_dataset_rows"] = [int(r) for r in ds_rows]
        rows.append(ds_rows)
        cols.append(np.full(ds_rows.size, entry["label"], dtype=np.int64))
    rows_a = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    cols_a = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    if sp.issparse(Y):
        Y_new = sp.csr_matrix(Y, copy=True)
        Y_new[rows_a, cols_a] = 0  # existing nonzeros only: no structural insertions
        Y_new.eliminate_zeros()
    else:
        Y_new = np.array(Y, copy=True)
        Y_new[rows_a, cols_a] = 0

    spec = {
        "kind": VARIANT_KIND,
        "severity": book["severity"],
        "sampling_seed": book["sampling_seed"],
        "q": book["q"],
        "tie_seed": book["tie_seed"],
        "base_name": data.name,
        "tail_labels": book["tail_labels"],
        "total_flipped": book["total_flipped"],
        "paper_section": "App. E.3",
    }
    book["dataset"] = data.name
    return data.with_labels(Y_new, VARIANT_KIND, spec), book


def main(argv: Sequence[str] | None = None) -> int:
    def add_arguments(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--severity", type=float, required=True, help="sigma in (0, 1)")
        ap.add_argument("--sampling-seed", type=int, required=True)
        ap.add_argument("--q", type=float, default=TAIL_FRACTION, help="tail fraction (default 0.2)")
        ap.add_argument("--tie-seed", type=int, default=TIE_SEED)

    return variant_main(argv, prog="python -m cdgtmll.variants.r_variant", description=__doc__.split("\n")[0],
                        add_arguments=add_arguments,
                        apply=lambda data, a: apply_to_dataset(data, a.severity, a.sampling_seed, q=a.q,
                                                               tie_seed=a.tie_seed))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
