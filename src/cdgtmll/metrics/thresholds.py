"""Threshold tuning on the validation split and the names of the decision rules per F1 column.

* :func:`tune_thresholds` -- label-adaptive thresholds (per-label F1; the ``adaptive`` block
  and the plug-in macro rule),
* :func:`tune_global_threshold` -- one shared threshold (pooled micro-F1; the plug-in micro
  rule),
* :data:`RULE_ADAPTIVE`, :data:`RULE_PLUGIN_MICRO`, :data:`RULE_PLUGIN_MACRO`,
  :data:`RULE_METHOD` and :func:`rule_global` -- the names recorded per F1 column in
  ``decision_rules`` (see "Decision rules per F1 column" in :mod:`cdgtmll.metrics.evaluation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.metrics.definitions import (
    _as_labels,
    _check_pair,
    _col_block,
    _dense_cols,
    _finite,
    _safe_div,
    _sorted_columns,
    f1_from_counts,
    thresholded_counts,
)

#: threshold used by the "global@0.5" block and by labels without validation positives
DEFAULT_THRESHOLD = 0.5
#: the threshold-dependent columns
F1_COLUMNS = ("micro_f1", "macro_f1", "rare_f1")
#: decision-rule names recorded per F1 column in ``decision_rules`` (metrics.json)
RULE_ADAPTIVE = "adaptive: per-label thresholds tuned on validation for per-label F1"
RULE_PLUGIN_MICRO = "plug-in micro: one threshold shared by all labels, tuned on validation for micro-F1"
RULE_PLUGIN_MACRO = "plug-in macro: per-label thresholds tuned on validation for per-label F1"
RULE_METHOD = "method thresholds: the method's own per-label thresholds"


def rule_global(threshold: float) -> str:
    """Name of the fixed global-threshold rule, e.g. ``'global@0.5: ...'``."""
    return f"global@{float(threshold):g}: one fixed threshold for all labels"


# --------------------------------------------------------------------------- thresholds


def tune_thresholds(Y_val: Any, S_val: Any, grid: Sequence[float] | None = None) -> np.ndarray:
    """Label-adaptive thresholds ``tau_l`` tuned on the validation split (and then
    fixed at test), maximising the validation ``F1_l`` of ``1{p >= tau_l}`` per label.

    * ``grid is None`` (default): exact search. The candidates for label l are the
      distinct validation scores of l; predicting with ``tau = s`` marks every
      instance with score ``>= s``, so these candidates realise every achievable
      prediction set except the empty one (F1 = 0). Vectorised by a column sort and
      cumulative TP counts: ``F1 = 2 TP / (#pred + P_l)`` at each tie-group end.
    * ``grid`` given: the candidates are the grid values (same for every label).
    * Ties between candidates with equal F1: the **largest** threshold wins (the
      most conservative decision rule, fewest positive predictions).
    * A label with no validation positives keeps ``0.5`` (F1_l is 0 for every
      threshold, so validation carries no information).

    With the exact search the tuned validation F1_l is >= F1_l at any other
    threshold, in particular at 0.5. Returns float64 ``[L]``.
    """
    Y_val = _as_labels(Y_val)
    S_val = _check_pair(Y_val, S_val)
    n, L = S_val.shape
    tau = np.full(L, DEFAULT_THRESHOLD)
    if n == 0:
        return tau
    if grid is not None:
        return _tune_grid(Y_val, S_val, np.asarray(grid, dtype=np.float64))
    if sp.issparse(Y_val):
        Y_val = Y_val.tocsc()
    npred = np.arange(1, n + 1, dtype=np.int64)[:, None]
    step = _col_block(n)
    for a in range(0, L, step):
        b = min(L, a + step)
        s = np.asarray(S_val[:, a:b], dtype=np.float64)
        _finite(s)
        y = _dense_cols(Y_val, a, b)
        s_sorted, _, tp, group_end = _sorted_columns(y, s)
        P = tp[-1]
        f1 = np.where(group_end, 2.0 * tp / (npred + P[None, :]), -1.0)
        best = np.argmax(f1, axis=0)  # first maximum in descending order = largest threshold
        chosen = s_sorted[best, np.arange(b - a)]
        tau[a:b] = np.where(P > 0, chosen, DEFAULT_THRESHOLD)
    return tau


def _tune_grid(Y_val: Any, S_val: np.ndarray, grid: np.ndarray) -> np.ndarray:
    grid = np.asarray(grid, dtype=np.float64).reshape(-1)
    if grid.size == 0 or np.isnan(grid).any():
        raise ValueError("threshold grid must be a non-empty list of numbers")
    L = S_val.shape[1]
    grid = np.unique(grid)[::-1]  # descending, so the first maximum is the largest threshold
    best_f1 = np.full(L, -1.0)
    tau = np.full(L, DEFAULT_THRESHOLD)
    P = None
    for g in grid:
        tp, fp, fn = thresholded_counts(Y_val, S_val, g)
        P = tp + fn
        f1 = _safe_div(2 * tp, 2 * tp + fp + fn)
        better = f1 > best_f1
        best_f1[better] = f1[better]
        tau[better] = g
    tau[P == 0] = DEFAULT_THRESHOLD
    return tau


def tune_global_threshold(Y_val: Any, S_val: Any, grid: Sequence[float] | None = None) -> float:
    """One shared threshold maximising validation **micro**-F1 (for plug-in baselines).

    Exact search over the distinct validation scores (all labels pooled; memory
    O(n L)) unless ``grid`` is given; ties -> the largest threshold; 0.5 when the
    validation split has no positive at all.
    """
    Y_val = _as_labels(Y_val)
    S_val = _check_pair(Y_val, S_val)
    if grid is not None:
        grid = np.unique(np.asarray(grid, dtype=np.float64).reshape(-1))[::-1]
        if grid.size == 0 or np.isnan(grid).any():
            raise ValueError("threshold grid must be a non-empty list of numbers")
        best, best_f = DEFAULT_THRESHOLD, -1.0
        total_pos = 0
        for g in grid:
            tp, fp, fn = thresholded_counts(Y_val, S_val, g)
            total_pos = int((tp + fn).sum())
            f = f1_from_counts(tp, fp, fn).micro
            if f > best_f:
                best, best_f = float(g), f
        return best if total_pos > 0 else DEFAULT_THRESHOLD
    s = np.asarray(S_val, dtype=np.float64).reshape(-1)
    _finite(s)
    y = (Y_val.toarray() if sp.issparse(Y_val) else np.asarray(Y_val)).reshape(-1).astype(np.int64)
    if s.size == 0 or y.sum() == 0:
        return DEFAULT_THRESHOLD
    s_sorted, _, tp, group_end = _sorted_columns(y[:, None], s[:, None])
    s_sorted, tp, group_end = s_sorted[:, 0], tp[:, 0], group_end[:, 0]
    f1 = np.where(group_end, 2.0 * tp / (np.arange(1, s.size + 1) + tp[-1]), -1.0)
    return float(s_sorted[int(np.argmax(f1))])
