"""Validation columns of the trainer's per-epoch log (``val_mAP``, ``val_microF1``),
for dense label matrices; :func:`cdgtmll.nn.sparse.validation_metrics_sparse` uses them
for CSR ones. numpy only: imported by :mod:`cdgtmll.nn.trainer` and
:mod:`cdgtmll.nn.sparse` (neither imports the other for it).

These are the training-time numbers (``train_log.csv``); the reported metrics are
:mod:`cdgtmll.metrics.evaluation` on the stored predictions.
"""

from __future__ import annotations

import numpy as np


def average_precision_per_label(Y: np.ndarray, S: np.ndarray) -> np.ndarray:
    """Per-label average precision ``[L]`` (NaN where a label has no positive), the same
    quantity as ``sklearn.metrics.average_precision_score`` column by column
    (``AP = sum_k (R_k - R_{k-1}) P_k`` over distinct score thresholds, tied scores
    grouped), vectorised over labels: scikit-learn's per-label loop takes seconds per
    epoch at L ~ 1000. Equality with scikit-learn is tested.

    One pass, without an argsort: a positive with score ``s`` contributes the precision at the
    end of its tie group, ``#{positives with score >= s} / #{rows with score >= s}``; both
    counts come from a binary search in each label's sorted scores (one value sort of the
    transposed, contiguous score matrix: numpy's SIMD sort) and from the tie groups of its
    positives' sorted scores. The contributions are summed in descending-score order, row by row as
    :func:`average_precision_per_label_argsort` (the direct argsort form, kept as the reference) sums
    them, so the result is bit-identical to it (tested); on Delicious' validation split
    (2,584 x 983) it is about 10x faster."""
    Yb = np.asarray(Y) > 0.5
    S = np.asarray(S)
    n, L = S.shape
    n_pos = Yb.sum(axis=0)
    out = np.full(L, np.nan)
    if n == 0 or not n_pos.any():
        return out
    St = np.ascontiguousarray(S.T)  # [L, n]: one label per row
    asc = np.sort(St, axis=1)
    lab, row = np.nonzero(Yb.T)  # the positives, label-major
    score = St[lab, row]
    order = np.lexsort((-score, lab))  # within each label: descending score
    lab, score = lab[order], score[order]
    starts = np.concatenate([[0], np.cumsum(n_pos)[:-1]])
    # positives with score >= s: the end of s's tie group among its label's positives
    k = np.arange(lab.size)
    is_end = np.ones(lab.size, dtype=bool)
    is_end[:-1] = (lab[:-1] != lab[1:]) | (score[:-1] != score[1:])
    group_end = np.minimum.accumulate(np.where(is_end, k, lab.size)[::-1])[::-1]
    tp_ge = group_end - starts[lab] + 1
    # rows with score >= s: n - (rows with score < s), a binary search in the label's sorted scores
    lo, hi = np.zeros(lab.size, dtype=np.int64), np.full(lab.size, n, dtype=np.int64)
    for _ in range(max(1, int(n).bit_length())):
        mid = (lo + hi) >> 1
        below = asc[lab, np.minimum(mid, n - 1)] < score
        below &= mid < hi
        lo = np.where(below, mid + 1, lo)
        hi = np.where(below, hi, mid)
    n_ge = n - lo
    prec = np.zeros((int(n_pos.max()), L))  # [rank among the label's positives, label]
    prec[k - starts[lab], lab] = tp_ge / n_ge
    num = prec.sum(axis=0)  # row by row: each label's positives in descending-score order
    has = n_pos > 0
    out[has] = num[has] / n_pos[has]
    return out


def average_precision_per_label_argsort(Y: np.ndarray, S: np.ndarray) -> np.ndarray:
    """The argsort form of :func:`average_precision_per_label`: one argsort per label, each
    positive's precision at its rank. The reference the faster form's equality test runs against."""
    Y = np.asarray(Y) > 0.5
    S = np.asarray(S, dtype=np.float64)
    n = S.shape[0]
    order = np.argsort(-S, axis=0, kind="stable")
    s_sorted = np.take_along_axis(S, order, axis=0)
    y_sorted = np.take_along_axis(Y, order, axis=0)
    tp = np.cumsum(y_sorted, axis=0)
    # position of the last row of each tie group (a threshold of the PR curve)
    is_end = np.ones_like(s_sorted, dtype=bool)
    is_end[:-1] = s_sorted[:-1] != s_sorted[1:]
    pos = np.where(is_end, np.arange(n)[:, None], n)
    group_end = np.minimum.accumulate(pos[::-1], axis=0)[::-1]
    precision_at_end = np.take_along_axis(tp, group_end, axis=0) / (group_end + 1)
    n_pos = Y.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = (y_sorted * precision_at_end).sum(axis=0) / n_pos
    return np.where(n_pos > 0, ap, np.nan)


def validation_metrics(Y: np.ndarray, S: np.ndarray) -> dict[str, float]:
    """val mAP (average precision per label, macro over labels with >= 1 validation
    positive) and micro-F1 of ``S > 0.5``."""
    Yb = np.asarray(Y) > 0.5
    ap = average_precision_per_label(Yb, S)
    mAP = float(np.nanmean(ap)) if Yb.any() else float("nan")
    pred = np.asarray(S) > 0.5
    tp = float(np.logical_and(pred, Yb).sum())
    denom = float(pred.sum() + Yb.sum())
    return {"val_mAP": mAP, "val_microF1": 2.0 * tp / denom if denom > 0 else 0.0}
