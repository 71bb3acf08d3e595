"""Evaluation metrics of App. E.4 ("Metrics: formal definitions") of the paper.

Equation numbers refer to the paper's appendix E, whose counter restarts at
E.1 in that appendix:

===========  =================================================  ==========================
Eq.          quantity                                           function
===========  =================================================  ==========================
(E.1)        micro counts TP/FP/FN                              :func:`f1_scores`
(E.2)        micro precision / recall / F1                      :func:`f1_scores`
(E.3)        per-label counts TP_l/FP_l/FN_l                    :func:`confusion_counts`
(E.4)        per-label precision / recall / F1_l                :func:`f1_scores`
(E.5)        macro-F1 = mean of F1_l over *all* L labels        :func:`f1_scores`
(E.6)        Rare-F1 = mean of F1_l over the tail labels        :func:`rare_f1`
(E.7)        AP_l (non-interpolated, all points)                :func:`average_precision`
(E.8)        mAP over labels with P_l > 0                       :func:`mean_average_precision`
(E.9)        P@k, k in {1, 3, 5}                                :func:`precision_at_k`
===========  =================================================  ==========================

Conventions fixed here (the paper leaves them open):

* **Thresholding.** ``yhat = 1{p >= tau_l}`` as in the E.4 setup. The main text
  (Sec. 3 and Alg. 1) writes ``p > tau``; we follow App. E.4. The two only differ
  for scores exactly equal to a threshold.
* **Zero division.** A ratio with a zero denominator is 0 (scikit-learn's
  ``zero_division=0``). In particular a label with no positives and no positive
  predictions has ``F1_l = 0`` and still counts in the macro-F1 denominator ``L``
  (Eq. E.5); micro-F1 is 0 when nothing is positive or predicted. We compute
  ``F1 = 2 TP / (2 TP + FP + FN)``, algebraically equal to Eq. (E.2)/(E.4) whenever
  those are defined.
* **Tied scores in AP.** Instances with equal scores form *one* threshold step:
  every positive in a tie group gets the precision measured after the whole
  group. This is scikit-learn's ``average_precision_score`` convention (and is
  independent of the order of tied items); without ties it is exactly Eq. (E.7).
* **Ties in P@k.** Top-k is by score descending, ties broken by *lower label index*
  first, so results are deterministic and independent of ``chunk``.
* **Undefined values** (AP of a label without positives, mAP when no label has
  positives, Rare-F1 with an empty tail) are ``nan``.

Inputs: ``Y`` is a dense 0/1 array (any integer/bool dtype) or a ``scipy.sparse``
matrix; ``S`` is a dense float array of the same shape with finite scores
(probabilities in [0, 1] in the pipeline, but any real scores work for the ranking
metrics). Everything is processed in row or column blocks so that temporary
memory stays O(block x L) or O(n x block).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np
import scipy.sparse as sp

#: threshold used by the "global@0.5" block and by labels without validation positives
DEFAULT_THRESHOLD = 0.5
#: target number of matrix elements per temporary block
_BLOCK_ELEMS = 1 << 21


# --------------------------------------------------------------------------- helpers


def _check_pair(Y: Any, S: Any) -> np.ndarray:
    S = np.asarray(S)
    if S.ndim != 2:
        raise ValueError(f"scores must be a 2-D array [n, L], got shape {S.shape}")
    if Y.ndim != 2 or tuple(Y.shape) != tuple(S.shape):
        raise ValueError(f"labels shape {tuple(Y.shape)} does not match scores shape {S.shape}")
    if not np.issubdtype(S.dtype, np.number) or np.issubdtype(S.dtype, np.complexfloating):
        raise ValueError(f"scores must be real numbers, got dtype {S.dtype}")
    return S


def _as_labels(Y: Any) -> Any:
    """Dense ndarray or CSR/CSC matrix, checked to hold only 0/1."""
    if sp.issparse(Y):
        vals = Y.data
    else:
        Y = np.asarray(Y)
        vals = Y
    if vals.size and not np.all((vals == 0) | (vals == 1)):
        raise ValueError("labels must be 0/1")
    return Y


def _dense_rows(Y: Any, a: int, b: int) -> np.ndarray:
    if sp.issparse(Y):
        return np.asarray(Y[a:b].toarray(), dtype=np.int64)
    return np.asarray(Y[a:b], dtype=np.int64)


def _dense_cols(Y: Any, a: int, b: int) -> np.ndarray:
    if sp.issparse(Y):
        return np.asarray(Y[:, a:b].toarray(), dtype=np.int64)
    return np.asarray(Y[:, a:b], dtype=np.int64)


def _finite(block: np.ndarray) -> None:
    if not np.all(np.isfinite(block)):
        raise ValueError("scores contain NaN or infinite values")


def _col_block(n: int) -> int:
    return max(1, _BLOCK_ELEMS // max(n, 1))


def _row_block(L: int) -> int:
    return max(1, _BLOCK_ELEMS // max(L, 1))


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _thresholds(thresholds: Any, L: int) -> np.ndarray:
    t = np.asarray(thresholds, dtype=np.float64)
    if t.ndim == 0:
        t = np.full(L, float(t))
    if t.shape != (L,):
        raise ValueError(f"thresholds must be a scalar or shape ({L},), got {t.shape}")
    if np.isnan(t).any():
        raise ValueError("thresholds contain NaN")
    return t


def _sorted_columns(
    y: np.ndarray, s: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sort each column by score descending (stable). Returns (s_sorted, y_sorted,
    tp cumsum, group_end): ``group_end[i, j]`` is True when position ``i`` is the last of its
    tie group in column ``j``, i.e. where a threshold step ends."""
    order = np.argsort(-s, axis=0, kind="stable")
    s_sorted = np.take_along_axis(s, order, axis=0)
    y_sorted = np.take_along_axis(y, order, axis=0)
    tp = np.cumsum(y_sorted, axis=0)
    group_end = np.empty(s.shape, dtype=bool)
    group_end[:-1] = s_sorted[1:] != s_sorted[:-1]
    group_end[-1] = True
    return s_sorted, y_sorted, tp, group_end


# --------------------------------------------------------------------------- AP / mAP


def average_precision(y_true_col: Any, scores_col: Any) -> float:
    """AP of one label, Eq. (E.7): ``AP = (1/P) sum_t Prec(t) 1{y_(t) = 1}`` over the
    instances ranked by score descending (non-interpolated, all points -- not the
    VOC07 11-point variant).

    Tied scores are one threshold step (scikit-learn ``average_precision_score``
    convention; the result equals sklearn's to rounding): each positive in a tie
    group is credited with the precision at the end of the group. Returns ``nan``
    when the label has no positives (sklearn returns 0 with a warning; we return
    nan because Eq. (E.8) leaves such labels out of the mean).
    """
    y = np.asarray(y_true_col.toarray() if sp.issparse(y_true_col) else y_true_col).reshape(-1)
    s = np.asarray(scores_col, dtype=np.float64).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"y_true has {y.size} entries but scores has {s.size}")
    return float(average_precision_per_label(y[:, None], s[:, None])[0])


def average_precision_per_label(Y: Any, S: Any) -> np.ndarray:
    """AP_l of every label (Eq. E.7), ``nan`` where ``P_l = 0``. Shape ``[L]``.

    Vectorised over column blocks: one stable column-wise argsort per block,
    cumulative TP counts, and a backward fill that gives every position the
    precision at the end of its tie group.
    """
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    n, L = S.shape
    out = np.full(L, np.nan)
    if n == 0:
        return out
    if sp.issparse(Y):
        Y = Y.tocsc()
    ranks = np.arange(1, n + 1, dtype=np.float64)[:, None]
    step = _col_block(n)
    for a in range(0, L, step):
        b = min(L, a + step)
        s = np.asarray(S[:, a:b], dtype=np.float64)
        _finite(s)
        y = _dense_cols(Y, a, b)
        _, y_sorted, tp, group_end = _sorted_columns(y, s)
        prec = tp / ranks  # precision after position t (1-based)
        # index of the end of each position's tie group: reverse running minimum
        end_idx = np.where(group_end, np.arange(n)[:, None], n - 1)
        end_idx = np.minimum.accumulate(end_idx[::-1], axis=0)[::-1]
        prec_at_end = np.take_along_axis(prec, end_idx, axis=0)
        P = tp[-1]
        num = (y_sorted * prec_at_end).sum(axis=0)
        ap = np.full(b - a, np.nan)
        np.divide(num, P, out=ap, where=P > 0)
        out[a:b] = ap
    return out


def mean_average_precision(Y: Any, S: Any) -> float:
    """mAP, Eq. (E.8): mean of AP_l over the labels with ``P_l > 0`` on the evaluated
    split (labels without positives are left out). ``nan`` if no label has positives."""
    ap = average_precision_per_label(Y, S)
    ok = ~np.isnan(ap)
    return float(ap[ok].mean()) if ok.any() else float("nan")


# --------------------------------------------------------------------------- F1


class F1Scores(NamedTuple):
    """Result of :func:`f1_scores`. Arrays have shape ``[L]``."""

    micro: float  # Eq. (E.2)
    macro: float  # Eq. (E.5), mean over all L labels
    per_label: np.ndarray  # F1_l, Eq. (E.4)
    precision: np.ndarray  # Prec_l, Eq. (E.4); 0 when TP_l + FP_l = 0
    recall: np.ndarray  # Rec_l, Eq. (E.4); 0 when TP_l + FN_l = 0
    tp: np.ndarray  # Eq. (E.3)
    fp: np.ndarray
    fn: np.ndarray


def binarize(S: Any, thresholds: Any) -> np.ndarray:
    """``yhat_ml = 1{p_ml >= tau_l}`` (App. E.4 setup; Sec. 3 writes ``>``, we follow E.4).
    ``thresholds`` is a scalar or an array ``[L]``. Returns uint8 ``[n, L]``."""
    S = np.asarray(S)
    t = _thresholds(thresholds, S.shape[1])
    return (S >= t[None, :]).astype(np.uint8)


def confusion_counts(Y: Any, Yhat: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-label ``(TP_l, FP_l, FN_l)``, Eq. (E.3), int64 arrays ``[L]``. ``Y`` and
    ``Yhat`` may each be dense or sparse 0/1 matrices."""
    Y = _as_labels(Y)
    Yhat = _as_labels(Yhat)
    if tuple(Y.shape) != tuple(Yhat.shape):
        raise ValueError(f"labels shape {tuple(Y.shape)} does not match predictions shape {tuple(Yhat.shape)}")

    def colsum(M: Any) -> np.ndarray:
        if sp.issparse(M):
            return np.asarray(M.sum(axis=0), dtype=np.int64).ravel()
        return np.asarray(M, dtype=np.int64).sum(axis=0)

    if sp.issparse(Y):
        tp = colsum(Y.multiply(Yhat))
    elif sp.issparse(Yhat):
        tp = colsum(Yhat.multiply(Y))
    else:
        tp = np.einsum("ij,ij->j", np.asarray(Y, dtype=np.int64), np.asarray(Yhat, dtype=np.int64))
    tp = np.asarray(tp, dtype=np.int64).ravel()
    return tp, colsum(Yhat) - tp, colsum(Y) - tp


def thresholded_counts(
    Y: Any, S: Any, thresholds: Any, chunk: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(TP_l, FP_l, FN_l)`` of ``1{S >= tau_l}`` against ``Y``, computed in row
    chunks (memory O(chunk x L)) without materialising the full prediction matrix."""
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    n, L = S.shape
    t = _thresholds(thresholds, L)
    if sp.issparse(Y):
        Y = Y.tocsr()
    chunk = chunk or _row_block(L)
    tp = np.zeros(L, dtype=np.int64)
    npred = np.zeros(L, dtype=np.int64)
    npos = np.zeros(L, dtype=np.int64)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        s = np.asarray(S[a:b])
        _finite(s)
        pred = s >= t[None, :]
        y = _dense_rows(Y, a, b).astype(bool)
        tp += (pred & y).sum(axis=0)
        npred += pred.sum(axis=0)
        npos += y.sum(axis=0)
    return tp, npred - tp, npos - tp


def f1_from_counts(tp: Any, fp: Any, fn: Any) -> F1Scores:
    """Micro-F1 (E.1-E.2), per-label F1 (E.3-E.4) and macro-F1 (E.5) from per-label
    counts, with the zero-division-to-0 convention of this module."""
    tp = np.asarray(tp, dtype=np.int64)
    fp = np.asarray(fp, dtype=np.int64)
    fn = np.asarray(fn, dtype=np.int64)
    per_label = _safe_div(2 * tp, 2 * tp + fp + fn)
    TP, FP, FN = int(tp.sum()), int(fp.sum()), int(fn.sum())
    den = 2 * TP + FP + FN
    micro = 2 * TP / den if den > 0 else 0.0
    macro = float(per_label.mean()) if per_label.size else float("nan")
    return F1Scores(
        micro=float(micro),
        macro=macro,
        per_label=per_label,
        precision=_safe_div(tp, tp + fp),
        recall=_safe_div(tp, tp + fn),
        tp=tp,
        fp=fp,
        fn=fn,
    )


def f1_scores(Y: Any, Yhat: Any) -> F1Scores:
    """Micro-F1 (Eq. E.1-E.2), macro-F1 over **all** L labels (Eq. E.5) and the
    per-label F1 array (Eq. E.3-E.4) of binary predictions ``Yhat``.

    Zero division gives 0 (a label with no positives and no predictions has
    ``F1_l = 0`` and still counts in macro-F1) -- identical to scikit-learn's
    ``f1_score(..., average='micro'|'macro', zero_division=0)``.
    """
    return f1_from_counts(*confusion_counts(Y, Yhat))


def rare_f1(per_label_f1: Any, tail: Any) -> float:
    """Rare-F1, Eq. (E.6): macro-F1 over the tail labels ``L_T``.

    ``tail`` must be the tail computed on the **training** split,
    ``cdgtmll.labels.tail_labels(Y_train)`` (for an R-variant: on the original,
    not down-sampled, training labels). ``nan`` for an empty tail.
    """
    f = np.asarray(per_label_f1, dtype=np.float64)
    tail = np.asarray(tail, dtype=np.int64).reshape(-1)
    if tail.size == 0:
        return float("nan")
    if tail.min() < 0 or tail.max() >= f.shape[0]:
        raise ValueError(f"tail label indices outside [0, {f.shape[0]})")
    if np.unique(tail).size != tail.size:
        raise ValueError("tail label indices contain duplicates")
    return float(f[tail].mean())


# --------------------------------------------------------------------------- P@k


def _topk_rows(s: np.ndarray, k: int) -> np.ndarray:
    """Indices ``[rows, k]`` of the top-k labels of each row, ordered by score
    descending then label index ascending (ties broken by lower label index)."""
    m, L = s.shape
    if k >= L:
        idx = np.broadcast_to(np.arange(L), (m, L))
    else:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        # k-th largest value per row; every label above it is in the top-k,
        # labels equal to it fill the remaining slots by ascending index.
        kth = np.take_along_axis(s, part, axis=1).min(axis=1, keepdims=True)
        above = s > kth
        equal = s == kth
        need = k - above.sum(axis=1, keepdims=True)
        chosen = above | (equal & (np.cumsum(equal, axis=1) <= need))
        idx = np.nonzero(chosen)[1].reshape(m, k)  # ascending label index per row
    vals = np.take_along_axis(s, idx, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")  # stable keeps lower index first on ties
    return np.take_along_axis(idx, order, axis=1)


def precision_at_k(Y: Any, S: Any, ks: Sequence[int] = (1, 3, 5), chunk: int = 4096) -> dict[str, float]:
    """P@k, Eq. (E.9): ``(1/M) sum_m |top_k(p_m) & {l : y_ml = 1}| / k``.

    Computed in row chunks of ``chunk`` rows (memory O(chunk x L)); ``Y`` may be
    dense or ``scipy.sparse``. Top-k uses ``np.argpartition`` and breaks ties by
    lower label index, so results do not depend on ``chunk``. If ``k > L`` all L
    labels are selected and the denominator stays ``k`` (Eq. E.9 literally).
    Returns ``{"p@1": ..., "p@3": ..., "p@5": ...}`` (nan when M = 0).
    """
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive integers, got {ks}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    n, L = S.shape
    if sp.issparse(Y):
        Y = Y.tocsr()
    kmax = min(max(ks), L)
    hits = {k: 0 for k in ks}
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        s = np.asarray(S[a:b])
        _finite(s)
        if kmax == 0:
            continue
        top = _topk_rows(s, kmax)
        y = _dense_rows(Y, a, b)
        rel = np.take_along_axis(y, top, axis=1)
        csum = np.cumsum(rel, axis=1)
        for k in ks:
            hits[k] += int(csum[:, min(k, kmax) - 1].sum())
    return {f"p@{k}": (hits[k] / (n * k) if n else float("nan")) for k in ks}


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


# --------------------------------------------------------------------------- reports


def _ranking_metrics(Y: Any, S: Any) -> dict[str, Any]:
    ap = average_precision_per_label(Y, S)
    ok = ~np.isnan(ap)
    out: dict[str, Any] = {
        "mAP": float(ap[ok].mean()) if ok.any() else float("nan"),
        "n_labels_in_map": int(ok.sum()),
    }
    out.update(precision_at_k(Y, S, ks=(1, 3, 5)))
    return out


def _threshold_metrics(Y: Any, S: Any, tail: Any, thresholds: Any) -> dict[str, float]:
    f = f1_from_counts(*thresholded_counts(Y, S, thresholds))
    return {"micro_f1": f.micro, "macro_f1": f.macro, "rare_f1": rare_f1(f.per_label, tail)}


def evaluate(Y_true: Any, S: Any, tail: Any, thresholds: Any) -> dict[str, Any]:
    """All App. E.4 metrics of scores ``S`` against ``Y_true`` with thresholds
    ``thresholds`` (scalar or ``[L]``): ``mAP`` (E.8), ``micro_f1`` (E.2),
    ``macro_f1`` (E.5), ``rare_f1`` (E.6, over ``tail`` = training-split tail),
    ``p@1``, ``p@3``, ``p@5`` (E.9) as Python floats in [0, 1] (nan where
    undefined), plus ``n_labels_in_map`` (int)."""
    out = _ranking_metrics(Y_true, S)
    out.update(_threshold_metrics(Y_true, S, tail, thresholds))
    return out


def evaluate_all(
    Y_test: Any,
    S_test: Any,
    Y_val: Any,
    S_val: Any,
    tail: Any,
    global_threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """Test metrics under both decision rules used in the tables.

    Returns ``{"global@<tau>": {...}, "adaptive": {...}, "adaptive_thresholds": [L floats]}``
    where ``<tau>`` is ``global_threshold`` formatted with ``:g`` (``"global@0.5"``
    by default) and ``adaptive`` uses :func:`tune_thresholds` on the validation split
    (fixed at test). mAP and P@k do not depend on thresholds and are repeated in
    both blocks.
    """
    g = float(global_threshold)
    if not math.isfinite(g):
        raise ValueError(f"global_threshold must be finite, got {global_threshold!r}")
    rank = _ranking_metrics(Y_test, S_test)
    tau = tune_thresholds(Y_val, S_val)
    glob = dict(rank, **_threshold_metrics(Y_test, S_test, tail, g))
    adap = dict(rank, **_threshold_metrics(Y_test, S_test, tail, tau))
    return {f"global@{g:g}": glob, "adaptive": adap, "adaptive_thresholds": [float(t) for t in tau]}


def per_label_report(
    Y_true: Any,
    S: Any,
    thresholds: Any,
    train_counts: Any,
    label_names: Sequence[str] | None = None,
    tail: Any = None,
) -> list[dict[str, Any]]:
    """One JSON-able dict per label: ``label`` (index), ``ap`` (Eq. E.7; None when the
    label has no test positives), ``f1``, ``precision``, ``recall`` (Eq. E.4 at
    ``thresholds``), ``n_pos_test``, ``n_pos_train`` (from ``train_counts``, e.g.
    ``cdgtmll.labels.label_counts(Y_train)``), and optionally ``name`` and ``is_tail``."""
    Y_true = _as_labels(Y_true)
    S = _check_pair(Y_true, S)
    L = S.shape[1]
    train_counts = np.asarray(train_counts, dtype=np.int64).reshape(-1)
    if train_counts.shape != (L,):
        raise ValueError(f"train_counts must have shape ({L},), got {train_counts.shape}")
    if label_names is not None and len(label_names) != L:
        raise ValueError(f"{len(label_names)} label names for {L} labels")
    ap = average_precision_per_label(Y_true, S)
    f = f1_from_counts(*thresholded_counts(Y_true, S, thresholds))
    tail_set = None if tail is None else {int(t) for t in np.asarray(tail).reshape(-1)}
    rows = []
    for j in range(L):
        row: dict[str, Any] = {
            "label": j,
            "ap": None if math.isnan(ap[j]) else float(ap[j]),
            "f1": float(f.per_label[j]),
            "precision": float(f.precision[j]),
            "recall": float(f.recall[j]),
            "n_pos_test": int(f.tp[j] + f.fn[j]),
            "n_pos_train": int(train_counts[j]),
        }
        if label_names is not None:
            row["name"] = str(label_names[j])
        if tail_set is not None:
            row["is_tail"] = j in tail_set
        rows.append(row)
    return rows
