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
    epoch at L ~ 1000. Equality with scikit-learn is tested."""
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
