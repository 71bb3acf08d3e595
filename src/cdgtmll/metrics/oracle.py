"""What the metrics of App. E.4 can reach on a run's test split: oracle bounds.

A reproduced F1 below the paper's can be a weaker model or a decision rule the paper did not
state; a paper value *above what any decision rule can reach* with the run's scores is a
different finding. This module computes, on the **test** split itself (never used to choose
anything in the pipeline; these are bounds, not results):

=====================  ============================================================  =======
quantity               what is computed (exact, not a heuristic)                      Eq.
=====================  ============================================================  =======
``micro_f1``           max of Micro-F1 over **all** per-label threshold vectors       (E.2)
                       ``tau`` (one threshold per label, chosen on the test set):
                       :func:`oracle_micro_f1`, Dinkelbach's method, exact
``macro_f1``           mean over labels of ``max_tau F1_l(tau)``: per-label          (E.4-E.5)
                       F1-optimal test thresholds: :func:`best_f1_per_label`
``rare_f1``            the same mean over the tail labels ``L_T``                     (E.6)
``mAP``                mAP of a perfect ranking: 1 over the labels with ``P_l > 0``   (E.7-E.8)
                       (data only, no scores): :func:`perfect_map`
``p@k``                P@k of a perfect ranking: ``(1/M) sum_m min(k, |y_m|) / k``,   (E.9)
                       rows without labels counted with 0 (data only):
                       :func:`perfect_precision_at_k`
``hamming_accuracy``   ``1 - (sum_l FP_l + FN_l) / (M L)`` at the run's global        --
                       threshold (not an E.4 metric; recorded for a measured
                       comparison with the paper's Micro-F1 only)
=====================  ============================================================  =======

Each F1 bound is the **maximum over every thresholding of the run's own scores** with the
E.4 decision rule ``yhat = 1{p >= tau_l}`` (ties in a score move together; predicting nothing
is allowed): an attained value (the thresholds that reach it exist), and no thresholding of
these scores scores higher. It is a bound for *these scores*, not for the method: another
model could rank better. The mAP and P@k bounds depend on the test labels only and hold for
any scores.

Conventions are those of :mod:`cdgtmll.metrics.evaluation`: zero division gives 0; labels
without test positives are left out of Macro-F1 / Rare-F1 under the rule ``'exclude'`` (the
mAP rule) or count with ``F1_l = 0`` under ``'zero'`` (their best F1 is 0 either way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.metrics.definitions import (
    DEFAULT_F1_NO_POSITIVE,
    _as_labels,
    _check_pair,
    _check_rule,
    _col_block,
    _dense_cols,
    _finite,
    _kept,
    _sorted_columns,
    macro_f1,
    rare_f1,
    thresholded_counts,
)

#: how each bound was computed (recorded in metrics.json under ``oracle.method``)
ORACLE_METHOD = {
    "micro_f1": "exact maximum of Micro-F1 (E.2) over per-label thresholds chosen on the test set (Dinkelbach)",
    "macro_f1": "mean of per-label F1-optimal test thresholds' F1_l (E.4-E.5): exact maximum",
    "rare_f1": "mean over the tail of per-label F1-optimal test thresholds' F1_l (E.6): exact maximum",
    "mAP": "perfect ranking: AP_l = 1 for every label with test positives (E.7-E.8); data only",
    "p@k": "perfect ranking: mean over test rows of min(k, |y_m|) / k, rows without labels count 0 (E.9); data only",
    "hamming_accuracy": "1 - (FP + FN) / (M L) at the global threshold; not an E.4 metric",
}
#: the keys of the ``oracle`` block that are bounds (``hamming_accuracy`` is not)
BOUND_KEYS = ("micro_f1", "macro_f1", "rare_f1", "mAP", "p@1", "p@3", "p@5")


# --------------------------------------------------------------------------- candidates


def _candidates(Y: Any, S: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per label, every prediction set a threshold ``1{s >= tau}`` can produce on these
    scores: ``(tp, valid, n_pos)`` with ``tp[i, l]`` the true positives among the ``i`` top-scored
    rows of label ``l`` (row 0: predict nothing), ``valid[i, l]`` True where ``i`` rows are a
    threshold's prediction set (``i = 0`` or the end of a tie group) and ``n_pos`` = ``P_l``.
    Shapes ``[n + 1, L]``; the number predicted is the row index ``i``."""
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    n, L = S.shape
    if sp.issparse(Y):
        Y = Y.tocsc()
    tp = np.zeros((n + 1, L), dtype=np.int64)
    valid = np.zeros((n + 1, L), dtype=bool)
    valid[0] = True
    step = _col_block(n)
    for a in range(0, L, step):
        b = min(L, a + step)
        s = np.asarray(S[:, a:b], dtype=np.float64)
        _finite(s)
        if n:
            _, _, cum, group_end = _sorted_columns(_dense_cols(Y, a, b), s)
            tp[1:, a:b] = cum
            valid[1:, a:b] = group_end
    return tp, valid, tp[-1].copy()


def best_f1_per_label(Y: Any, S: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(max_tau F1_l(tau), P_l)`` per label on this split: the best F1_l (Eq. E.4,
    ``F1_l = 2 TP_l / (2 TP_l + FP_l + FN_l) = 2 TP_l / (#pred_l + P_l)``) of any threshold,
    over every prediction set ``1{s >= tau}`` the scores allow (each tie group is one step;
    predicting nothing included). 0 for a label without positives. float64 / int64 ``[L]``."""
    tp, valid, P = _candidates(Y, S)
    npred = np.arange(tp.shape[0], dtype=np.float64)[:, None]
    den = npred + P[None, :]
    f1 = np.zeros(tp.shape, dtype=np.float64)
    np.divide(2.0 * tp, den, out=f1, where=den > 0)
    f1[~valid] = -1.0
    best = f1.max(axis=0) if tp.shape[1] else np.zeros(0)
    return np.maximum(best, 0.0), P


def oracle_micro_f1(Y: Any, S: Any, max_iter: int = 200) -> tuple[float, int]:
    """``(max_tau Micro-F1, iterations)``: the exact maximum of Micro-F1 (Eq. E.2,
    ``2 TP / (2 TP + FP + FN) = 2 sum_l TP_l / (sum_l #pred_l + P)``, ``P`` all test positives)
    over all per-label threshold vectors ``tau`` -- the best any thresholding of these scores
    reaches, thresholds chosen on this split.

    Micro-F1 is a ratio of sums over labels, so it is maximised exactly by Dinkelbach's method:
    for a value ``lam`` each label independently picks the prediction set maximising
    ``2 TP_l - lam #pred_l`` (separable), ``lam`` becomes the Micro-F1 of those choices, and the
    iteration stops when it no longer increases; then ``max sum_l (2 TP_l - lam #pred_l) - lam P
    = 0``, which proves no choice of thresholds exceeds ``lam``. ``lam`` increases strictly at
    every step over a finite set, so it ends (in a few steps in practice). 0 when the split has no
    positive (zero-division rule)."""
    tp, valid, P = _candidates(Y, S)
    total = int(P.sum())
    if total == 0:
        return 0.0, 0
    npred = np.arange(tp.shape[0], dtype=np.float64)[:, None]
    cols = np.arange(tp.shape[1])
    lam = 0.0
    for it in range(1, max_iter + 1):
        gain = np.where(valid, 2.0 * tp - lam * npred, -np.inf)
        pick = np.argmax(gain, axis=0)
        TP = float(tp[pick, cols].sum())
        NP = float(pick.sum())
        new = 2.0 * TP / (NP + total)
        if new <= lam * (1 + 1e-12):
            return float(max(new, lam)), it
        lam = new
    raise RuntimeError(f"oracle Micro-F1 did not converge in {max_iter} iterations")


# --------------------------------------------------------------------------- data-only bounds


def perfect_map(Y: Any) -> float:
    """mAP (Eq. E.8) of a perfect ranking: every positive of a label ranked above its negatives
    gives ``Prec(t) = 1`` at each positive, so ``AP_l = 1`` (Eq. E.7) for each label with
    ``P_l > 0`` and mAP = 1; ``nan`` when no label has a positive (E.8 leaves labels without
    positives out, as :func:`cdgtmll.metrics.definitions.mean_average_precision`)."""
    Y = _as_labels(Y)
    n_pos = np.asarray(Y.sum(axis=0)).ravel()
    return 1.0 if (n_pos > 0).any() else float("nan")


def perfect_precision_at_k(Y: Any, ks: Sequence[int] = (1, 3, 5)) -> dict[str, float]:
    """P@k (Eq. E.9) of a perfect ranking: row ``m`` can have at most ``min(k, |y_m|)`` positives
    among its top ``k``, so ``P@k* = (1/M) sum_m min(k, |y_m|) / k``. Rows without labels count
    with 0 hits and stay in ``M`` (as :func:`cdgtmll.metrics.definitions.precision_at_k`, whose
    denominator is ``M k``); ``k > L`` keeps the denominator ``k``. ``nan`` when ``M = 0``."""
    Y = _as_labels(Y)
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive integers, got {ks}")
    sizes = np.asarray(Y.sum(axis=1)).ravel().astype(np.int64)
    n = sizes.size
    return {f"p@{k}": (float(np.minimum(sizes, k).sum()) / (n * k) if n else float("nan")) for k in ks}


def hamming_accuracy(Y: Any, S: Any, threshold: Any) -> float:
    """Share of correct label decisions ``1 - sum_l (FP_l + FN_l) / (M L)`` of
    ``1{s >= threshold}`` (FP_l, FN_l as in Eq. E.3). Not a metric of App. E.4: recorded only to
    set beside Micro-F1 (:mod:`cdgtmll.claims.report`). ``nan`` for an empty split."""
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    n, L = S.shape
    if n * L == 0:
        return float("nan")
    _, fp, fn = thresholded_counts(Y, S, threshold)
    return float(1.0 - (int(fp.sum()) + int(fn.sum())) / (n * L))


# --------------------------------------------------------------------------- the metrics.json block


def data_bounds(Y_test: Any, ks: Sequence[int] = (1, 3, 5)) -> dict[str, float]:
    """The bounds that need no scores: ``mAP`` and ``p@k`` of a perfect ranking."""
    return {"mAP": perfect_map(Y_test), **perfect_precision_at_k(Y_test, ks)}


def oracle_block(Y_test: Any, S_test: Any, tail: Any, global_threshold: float,
                 no_positive_labels: str = DEFAULT_F1_NO_POSITIVE) -> dict[str, Any]:
    """The ``oracle`` block of ``metrics.json`` (module docstring): the F1 bounds of these test
    scores (``micro_f1`` exact over per-label thresholds; ``macro_f1`` / ``rare_f1`` from the
    per-label F1-optimal thresholds, labels without test positives treated by
    ``no_positive_labels`` as in the metrics), the perfect-ranking ``mAP`` / ``p@k``,
    ``hamming_accuracy`` at ``global_threshold``, and how each was computed (``method``)."""
    _check_rule(no_positive_labels)
    best, P = best_f1_per_label(Y_test, S_test)
    keep_by = None if no_positive_labels == "zero" else P
    micro, iters = oracle_micro_f1(Y_test, S_test)
    tail_arr = np.asarray(tail, dtype=np.int64).reshape(-1)
    keep = _kept(P.size, keep_by)
    return {
        "micro_f1": micro,
        "macro_f1": macro_f1(best, keep_by),
        "rare_f1": rare_f1(best, tail_arr, keep_by),
        **data_bounds(Y_test),
        "hamming_accuracy": hamming_accuracy(Y_test, S_test, global_threshold),
        "hamming_threshold": float(global_threshold),
        "n_labels_in_macro_f1": int(keep.sum()),
        "n_labels_in_rare_f1": int(keep[tail_arr].sum()) if tail_arr.size else 0,
        "micro_f1_iterations": int(iters),
        "split": "test (thresholds chosen on the test split itself: bounds, not results)",
        "method": {**ORACLE_METHOD, "f1_no_positive_labels": no_positive_labels},
    }


def topk_oracle_block(Y_test: Any, note: str) -> dict[str, Any]:
    """The ``oracle`` block for top-K predictions: the data-only bounds; the F1 bounds and
    Hamming accuracy need every score and are ``None`` with ``note``."""
    return {"micro_f1": None, "macro_f1": None, "rare_f1": None, **data_bounds(Y_test),
            "hamming_accuracy": None, "note": note,
            "split": "test", "method": {k: ORACLE_METHOD[k] for k in ("mAP", "p@k")}}
