"""Readings of the metric: the paper's F1 columns under each defensible reading of App. E.4.

App. E.4 defines Micro-F1 (Eq. E.1-E.2), Macro-F1 (Eq. E.3-E.5) and Rare-F1 (Eq. E.6) in
full, and the pipeline computes them as written (:mod:`cdgtmll.metrics.definitions`). The
paper's printed numbers may have come from another reading of the same words: a tail chosen
by Sec. 3.1's cumulative rule, a rounding of ``0.2 L`` up, scikit-learn's ``f1_score`` called
on a flattened matrix, per-label F1 averaged over both classes, ... This module measures each
such reading on one run's test labels and scores, at the thresholds of one decision rule, the
way the pipeline measures the method: evidence beside E.4, never a replacement for it (the
claims check's verdict stays E.4's; :mod:`cdgtmll.claims.readings` says which readings would
bring a paper value inside the reproduced interval).

=====================  ===================================================  =====================
reading (key)          what is computed                                     F1 columns it reads
=====================  ===================================================  =====================
``e4``                 App. E.4 as written: Eq. (E.2), (E.5), (E.6) with     micro, macro, rare
                       the project's rule for labels without test
                       positives (:mod:`cdgtmll.metrics.definitions`)
``tail_cumulative``    Eq. (E.6) over the tail of Sec. 3.1's cumulative      rare
                       rule (head = shortest prefix by descending training
                       frequency holding ``head_mass = 10 %`` of the mass)
``tail_ceil``          Eq. (E.6) over the bottom ``ceil(0.2 L)`` labels      rare
                       (E.4 says "bottom 20 %"; the pipeline rounds down)
``both_classes``       per-label F1 averaged over both classes,              macro, rare
                       ``(F1_l + F1_l^neg) / 2`` (scikit-learn's
                       ``f1_score(y_l, yhat_l, average='macro')``), then
                       Eq. (E.5) / (E.6)'s mean
``flat_macro``         ``f1_score(Y.ravel(), Yhat.ravel(), average='macro')``  micro, macro, rare
                       (rare: the tail columns only)
``flat_weighted``      the same with ``average='weighted'``                  micro, macro, rare
``hamming``            Hamming accuracy ``1 - (FP + FN) / (M L)``            micro, macro, rare
``samples``            sample-averaged F1, ``f1_score(Y, Yhat,               micro, macro
                       average='samples')``
=====================  ===================================================  =====================

A reading is listed for a column only where it is meaningful there: the tail readings only
change Rare-F1; per-label F1 over both classes is a per-label quantity (Micro-F1 pools
labels, and pooled over both classes it is the Hamming accuracy); the sample average over the
tail columns is undefined for the many rows without a tail label. Every reading uses the
same predictions ``yhat = 1{p >= tau_l}`` (the E.4 setup) as the column it reads, zero
division gives 0, and labels without test positives are left out of per-label means by the
rule the pipeline applies (``'exclude'`` or ``'zero'``, :mod:`cdgtmll.metrics.evaluation`).

The flattened F1s are scikit-learn's ``f1_score`` on the flattened 0/1 matrices, given as
the four cells of their confusion table with the cell counts as sample weights (the same
number, in constant memory; the tests compare with the call on the flattened matrix);
the sample-averaged F1 is scikit-learn's, in row chunks, averaged with the chunks' sizes.

:func:`readings_record` assembles the ``readings`` block of ``metrics.json``: per threshold
block, the values, every tail label's F1 with its test and training positive counts, and a
bootstrap interval over test rows for Rare-F1 (:func:`rare_f1_bootstrap`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.labels import TAIL_FRACTION, TIE_SEED, ascending_order, label_counts
from cdgtmll.metrics.definitions import (
    DEFAULT_F1_NO_POSITIVE,
    F1Scores,
    _as_labels,
    _check_pair,
    _check_rule,
    _dense_rows,
    _row_block,
    _thresholds,
    f1_from_counts,
    macro_f1,
    rare_f1,
    thresholded_counts,
)

F1_COLUMNS = ("micro_f1", "macro_f1", "rare_f1")
#: Sec. 3.1's example of the cumulative threshold: "top 10 % cumulative frequency"
HEAD_MASS = 0.1
#: the Rare-F1 bootstrap's defaults: resamples and generator seed
BOOTSTRAP_B = 1000
BOOTSTRAP_SEED = 0
BOOTSTRAP_CONF = 0.95
BOOTSTRAP_RESAMPLED = ("test rows (instances), drawn with replacement, M per resample; the run's scores, "
                       "thresholds, tail and trained model fixed; Rare-F1 (E.6) recomputed on each resample, "
                       "labels without positives in the resample treated by the run's rule")


# --------------------------------------------------------------------------- tails


def cumulative_tail(Y_train: Any, head_mass: float = HEAD_MASS, tie_seed: int = TIE_SEED) -> np.ndarray:
    """The tail of Sec. 3.1, read as a cumulative rule: "We sort {freq(l)} in descending order
    and define a threshold (e.g., top 10 % cumulative frequency) to partition labels into the
    head L_H and the tail L_T = L \\ L_H." The head is the shortest prefix of the labels by
    descending training frequency whose frequencies sum to at least ``head_mass`` of the total
    (ties by :func:`cdgtmll.labels.ascending_order`'s fixed-seed order); the tail is every other
    label, sorted by index. The same rule as CD-GTMLL's ``tail_rule='cumulative'``
    (:func:`cdgtmll.methods.cdgtmll.partition.cumulative_tail`, tested equal): written here so
    that the evaluate job's code does not import the methods package."""
    if not 0.0 < head_mass < 1.0:
        raise ValueError(f"head_mass must be in (0, 1), got {head_mass}")
    order = ascending_order(Y_train, tie_seed)[::-1]
    counts = label_counts(Y_train).astype(np.float64)[order]
    total = counts.sum()
    if total <= 0:
        return np.arange(Y_train.shape[1])
    n_head = int(np.searchsorted(np.cumsum(counts) / total, head_mass) + 1)
    return np.sort(order[n_head:])


def ceil_tail(Y_train: Any, q: float = TAIL_FRACTION, tie_seed: int = TIE_SEED) -> np.ndarray:
    """The bottom ``ceil(q L)`` labels by training prevalence, read from App. E.4: "Let L_T be
    the tail set formed by the bottom 20% labels in freq(l)" (Eq. E.6), with ``q L`` rounded
    up (the pipeline rounds down: :func:`cdgtmll.labels.tail_labels`). ``q L`` is rounded to 9
    decimals first, so that ``0.2 * 15 = 3.0000000000000004`` gives 3. Sorted by index."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"tail fraction q must be in [0, 1], got {q}")
    n_tail = math.ceil(round(q * Y_train.shape[1], 9))
    return np.sort(ascending_order(Y_train, tie_seed)[:n_tail])


# --------------------------------------------------------------------------- counts


@dataclass(frozen=True)
class Counts:
    """What every reading needs of one thresholding ``yhat = 1{S >= tau}``: the E.4 counts per
    label (:class:`~cdgtmll.metrics.definitions.F1Scores`, Eq. E.3-E.4), the number of test rows
    ``M``, and (when asked for) the sample-averaged F1 over all labels."""

    f1: F1Scores
    n_rows: int
    samples_f1: float | None

    @property
    def tn(self) -> np.ndarray:
        """``TN_l = M - TP_l - FP_l - FN_l``."""
        return self.n_rows - self.f1.tp - self.f1.fp - self.f1.fn

    @property
    def n_pos(self) -> np.ndarray:
        """``P_l = TP_l + FN_l``: test positives per label."""
        return self.f1.tp + self.f1.fn


def samples_f1(Y: Any, S: Any, thresholds: Any, chunk: int | None = None) -> float:
    """Sample-averaged F1 of ``yhat = 1{S >= tau}``: ``(1/M) sum_m 2 |y_m & yhat_m| / (|y_m| +
    |yhat_m|)``, a row with neither labels nor predictions counting 0 -- the number of
    scikit-learn's ``f1_score(Y, Yhat, average='samples', zero_division=0)`` (tested equal),
    computed on row chunks (memory O(chunk x L)). ``nan`` for ``M = 0``.

    Written with numpy, not by calling scikit-learn: importing ``sklearn.metrics`` took 1.8 s of
    the 2.8 s an evaluate job of three Yeast runs spent on the readings (cProfile, 2026-11-28),
    and this is the whole of the formula."""
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    n, L = S.shape
    if n == 0:
        return float("nan")
    t = _thresholds(thresholds, L)
    if sp.issparse(Y):
        Y = Y.tocsr()
    chunk = chunk or _row_block(L)
    total = 0.0
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        pred = np.asarray(S[a:b]) >= t[None, :]
        y = _dense_rows(Y, a, b).astype(bool)
        both = (y & pred).sum(axis=1, dtype=np.int64)
        size = y.sum(axis=1, dtype=np.int64) + pred.sum(axis=1, dtype=np.int64)
        total += float(np.divide(2.0 * both, size, out=np.zeros(b - a), where=size > 0).sum())
    return total / n


def counts_at(Y: Any, S: Any, thresholds: Any, with_samples: bool = True) -> Counts:
    """:class:`Counts` of ``1{S >= thresholds}`` against ``Y`` (dense or sparse)."""
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    f = f1_from_counts(*thresholded_counts(Y, S, thresholds))
    return Counts(f, int(S.shape[0]), samples_f1(Y, S, thresholds) if with_samples else None)


def _f1(tp: int, fp: int, fn: int) -> float:
    """``2 TP / (2 TP + FP + FN)``, 0 when nothing is true or predicted (``zero_division=0``)."""
    d = 2 * tp + fp + fn
    return 2.0 * tp / d if d else 0.0


def _flat_f1(c: Counts, cols: np.ndarray, average: str) -> float:
    """scikit-learn's ``f1_score(Y[:, cols].ravel(), Yhat[:, cols].ravel(), labels=[0, 1],
    average=average, zero_division=0)`` (tested equal) from the pooled confusion table of the
    columns: the F1 of class 1 (TP, FP, FN) and of class 0 (TN, FN, FP), their mean (``macro``)
    or their mean weighted by support ``TP + FN`` and ``TN + FP`` (``weighted``). Closed form
    rather than a call, for the import time :func:`samples_f1` gives."""
    tp, fp, fn = (int(a[cols].sum()) for a in (c.f1.tp, c.f1.fp, c.f1.fn))
    tn = c.n_rows * int(cols.size) - tp - fp - fn
    total = tp + fp + fn + tn
    if total == 0:
        return float("nan")
    pos, neg = _f1(tp, fp, fn), _f1(tn, fn, fp)
    if average == "macro":
        return (pos + neg) / 2.0
    if average == "weighted":
        return (pos * (tp + fn) + neg * (tn + fp)) / total
    raise ValueError(f"average must be 'macro' or 'weighted', got {average!r}")


# --------------------------------------------------------------------------- the readings


@dataclass(frozen=True)
class Context:
    """The label sets and rule the readings average over: ``tail`` (the pipeline's E.4 tail,
    bottom ``floor(0.2 L)``), ``tail_cumulative``, ``tail_ceil`` (:func:`cumulative_tail`,
    :func:`ceil_tail`), and ``no_positive_labels`` (``'exclude'`` or ``'zero'``)."""

    tail: np.ndarray
    tail_cumulative: np.ndarray
    tail_ceil: np.ndarray
    no_positive_labels: str = DEFAULT_F1_NO_POSITIVE

    def keep_by(self, c: Counts) -> np.ndarray | None:
        """``n_pos`` for :func:`~cdgtmll.metrics.definitions.macro_f1` / ``rare_f1`` (rule
        'exclude'), or None (rule 'zero')."""
        return None if self.no_positive_labels == "zero" else c.n_pos


def _columns(c: Counts, metric: str, ctx: Context) -> np.ndarray:
    """The labels a metric covers: every label for Micro-/Macro-F1, the E.4 tail for Rare-F1."""
    return np.asarray(ctx.tail, dtype=np.int64) if metric == "rare_f1" else np.arange(c.f1.tp.size)


def as_written(c: Counts, metric: str, ctx: Context) -> float:
    """App. E.4 as written and as the pipeline computes it (:mod:`cdgtmll.metrics.definitions`):
    Micro-F1 "F1_micro = 2 Prec_micro Rec_micro / (Prec_micro + Rec_micro)" (Eq. (E.2)), Macro-F1
    "F1_macro = (1/L) sum_l F1_l" (Eq. (E.5)), Rare-F1 "(1/|L_T|) sum_{l in L_T} F1_l" (Eq. (E.6)) with L_T
    "the bottom 20% labels in freq(l)" computed on the training set (``floor(0.2 L)``
    labels). Labels without test positives by the run's rule."""
    if metric == "micro_f1":
        return c.f1.micro
    if metric == "macro_f1":
        return macro_f1(c.f1.per_label, ctx.keep_by(c))
    return rare_f1(c.f1.per_label, ctx.tail, ctx.keep_by(c))


def tail_by_cumulative_rule(c: Counts, metric: str, ctx: Context) -> float:
    """Rare-F1 (Eq. E.6) over the tail of Sec. 3.1: "We sort {freq(l)} in descending order and
    define a threshold (e.g., top 10 % cumulative frequency) to partition labels into the head
    L_H and the tail L_T = L \\ L_H" (:func:`cumulative_tail`, ``head_mass = 0.1``); Eq. (E.6)'s mean."""
    return rare_f1(c.f1.per_label, ctx.tail_cumulative, ctx.keep_by(c))


def tail_rounded_up(c: Counts, metric: str, ctx: Context) -> float:
    """Rare-F1 (Eq. E.6) over the bottom ``ceil(0.2 L)`` labels: E.4's "the tail set formed by
    the bottom 20% labels in freq(l)" with ``0.2 L`` rounded up (:func:`ceil_tail`); Eq. (E.6)'s mean."""
    return rare_f1(c.f1.per_label, ctx.tail_ceil, ctx.keep_by(c))


def both_classes(c: Counts, metric: str, ctx: Context) -> float:
    """Per-label F1 averaged over both classes, then E.4's mean: Eq. (E.4)'s "F1_l = 2 Prec_l
    Rec_l / (Prec_l + Rec_l)" read for the label's positive *and* its negative class,
    ``(F1_l + F1_l^neg) / 2`` with ``F1_l^neg = 2 TN_l / (2 TN_l + FN_l + FP_l)`` (scikit-learn's
    ``f1_score(y_l, yhat_l, average='macro')``), averaged as in Eq. (E.5) (Macro-F1) or
    (E.6) (Rare-F1, the E.4 tail)."""
    neg = f1_from_counts(c.tn, c.f1.fn, c.f1.fp).per_label  # the negative class as the positive one
    both = (c.f1.per_label + neg) / 2.0
    if metric == "macro_f1":
        return macro_f1(both, ctx.keep_by(c))
    return rare_f1(both, ctx.tail, ctx.keep_by(c))


def flattened_macro(c: Counts, metric: str, ctx: Context) -> float:
    """scikit-learn's ``f1_score(Y.ravel(), Yhat.ravel(), average='macro')``: the M x L matrix
    flattened to one binary problem and F1 averaged over its two classes, a reading of Eq.
    (E.1)'s sums over every cell, "TP_micro = sum_{m,l} y_ml yhat_ml" (Micro-F1, Eq. (E.2)), or of
    "the macro-F1" (Eq. (E.5)) as scikit-learn's ``average='macro'`` on the flattened matrix; for
    Rare-F1 over the tail columns (Eq. (E.6)'s L_T)."""
    return _flat_f1(c, _columns(c, metric, ctx), "macro")


def flattened_weighted(c: Counts, metric: str, ctx: Context) -> float:
    """scikit-learn's ``f1_score(Y.ravel(), Yhat.ravel(), average='weighted')``: as
    :func:`flattened_macro`, the two classes' F1 weighted by their support: a reading of Eq.
    (E.1)'s counts "TP_micro = sum_{m,l} y_ml yhat_ml" over the flattened matrix with both of its
    classes counted (Micro-F1, Eq. (E.2); Macro-F1, Eq. (E.5); Rare-F1: the tail columns of Eq.
    (E.6))."""
    return _flat_f1(c, _columns(c, metric, ctx), "weighted")


def hamming(c: Counts, metric: str, ctx: Context) -> float:
    """Hamming accuracy ``1 - (sum_l FP_l + FN_l) / (M L)`` (``1 - sklearn.metrics.hamming_loss``),
    the share of correct cells of the M x L matrix: Eq. (E.1)'s counts "FP_micro = sum_{m,l}
    (1 - y_ml) yhat_ml" and "FN_micro = sum_{m,l} y_ml (1 - yhat_ml)" taken as the errors of
    every cell, the true negatives counted correct (read for Micro-F1, Eq. (E.2), and Macro-F1,
    Eq. (E.5)); for Rare-F1 over the tail columns (Eq. (E.6)'s L_T). Not an F1."""
    cols = _columns(c, metric, ctx)
    cells = c.n_rows * int(cols.size)
    if cells == 0:
        return float("nan")
    return float(1.0 - (int(c.f1.fp[cols].sum()) + int(c.f1.fn[cols].sum())) / cells)


def sample_averaged(c: Counts, metric: str, ctx: Context) -> float:
    """Sample-averaged F1 (scikit-learn ``average='samples'``): Eq. (E.4)'s "F1_l = 2 Prec_l Rec_l /
    (Prec_l + Rec_l)" read per instance m of "the test set {(x_m, y_m)}" (Setup) instead of per
    label, then averaged over the M rows as Eq. (E.5) averages over labels -- a reading of
    Micro-F1 (Eq. (E.2)) or Macro-F1 (Eq. (E.5)) over instances."""
    if c.samples_f1 is None:
        raise ValueError("sample-averaged F1 needs Counts computed with with_samples=True")
    return float(c.samples_f1)


@dataclass(frozen=True)
class Reading:
    """One named reading: ``key`` (column suffix in ``all_runs.csv``), ``label`` (as the claims
    check prints it), ``compute(counts, metric, context)`` and the F1 columns it reads."""

    key: str
    label: str
    compute: Callable[[Counts, str, Context], float]
    metrics: tuple[str, ...]


READINGS: tuple[Reading, ...] = (
    Reading("e4", "as written (E.4)", as_written, F1_COLUMNS),
    Reading("tail_cumulative", "cumulative tail of Sec. 3.1", tail_by_cumulative_rule, ("rare_f1",)),
    Reading("tail_ceil", "tail = ceil(0.2 L)", tail_rounded_up, ("rare_f1",)),
    Reading("both_classes", "per-label F1 averaged over both classes", both_classes, ("macro_f1", "rare_f1")),
    Reading("flat_macro", "flattened macro F1", flattened_macro, F1_COLUMNS),
    Reading("flat_weighted", "flattened weighted F1", flattened_weighted, F1_COLUMNS),
    Reading("hamming", "Hamming accuracy", hamming, F1_COLUMNS),
    Reading("samples", "sample-averaged F1", sample_averaged, ("micro_f1", "macro_f1")),
)
READING_BY_KEY = {r.key: r for r in READINGS}
#: ``all_runs.csv`` columns of the readings: ``reading:<metric>:<reading key>``
READING_COLUMNS = tuple(f"reading:{m}:{r.key}" for m in F1_COLUMNS for r in READINGS if m in r.metrics)


def reading_column(metric: str, key: str) -> str:
    """The ``all_runs.csv`` column of one reading of one F1 column."""
    return f"reading:{metric}:{key}"


def _per_column(thresholds: Any) -> dict[str, Any]:
    if isinstance(thresholds, Mapping):
        if set(thresholds) != set(F1_COLUMNS):
            raise ValueError(f"per-column thresholds need exactly the keys {list(F1_COLUMNS)}, got {sorted(thresholds)}")
        return dict(thresholds)
    return {m: thresholds for m in F1_COLUMNS}


def readings_at(Y: Any, S: Any, thresholds: Any, ctx: Context) -> dict[str, dict[str, float]]:
    """``{metric: {reading key: value}}`` for the three F1 columns at ``thresholds`` (a scalar or
    ``[L]`` for every column, or a mapping ``{"micro_f1": t, "macro_f1": t', "rare_f1": t''}``,
    one decision rule per column as in :func:`cdgtmll.metrics.evaluation.evaluate`). Values are
    fractions in [0, 1] (nan where undefined)."""
    _check_rule(ctx.no_positive_labels)
    per_col = _per_column(thresholds)
    cache: list[tuple[Any, Counts]] = []

    def counts(t: Any) -> Counts:
        for key, c in cache:
            if key is t or np.array_equal(np.asarray(key), np.asarray(t)):
                return c
        c = counts_at(Y, S, t)
        cache.append((t, c))
        return c

    return {m: {r.key: float(r.compute(counts(per_col[m]), m, ctx)) for r in READINGS if m in r.metrics}
            for m in F1_COLUMNS}


# --------------------------------------------------------------------------- tail detail, bootstrap


def tail_label_report(Y: Any, S: Any, thresholds: Any, tail: Any, train_counts: Any,
                      label_names: Sequence[str]) -> list[dict[str, Any]]:
    """Every tail label at ``thresholds``: ``label`` (index), ``name``, ``f1`` (Eq. E.4),
    ``n_pos_test`` (``P_l``), ``n_pos_train`` (from ``train_counts``: the clean training split)."""
    f = f1_from_counts(*thresholded_counts(Y, S, thresholds))
    train_counts = np.asarray(train_counts, dtype=np.int64).reshape(-1)
    return [{"label": int(j), "name": str(label_names[j]), "f1": float(f.per_label[j]),
             "n_pos_test": int(f.tp[j] + f.fn[j]), "n_pos_train": int(train_counts[j])}
            for j in np.asarray(tail, dtype=np.int64).reshape(-1)]


def rare_f1_bootstrap(Y: Any, S: Any, thresholds: Any, tail: Any,
                      no_positive_labels: str = DEFAULT_F1_NO_POSITIVE, B: int = BOOTSTRAP_B,
                      seed: int = BOOTSTRAP_SEED, conf: float = BOOTSTRAP_CONF) -> dict[str, Any]:
    """Percentile bootstrap interval of Rare-F1 (Eq. E.6) over **test rows**.

    What is resampled: the M test rows (instances), with replacement, M per resample, ``B``
    resamples from ``numpy.random.default_rng(seed)``; each resample's row multiplicities weight
    the tail columns' E.3 counts ``TP_l, FP_l, FN_l`` (the predictions ``1{p >= tau_l}`` of the
    one trained model are fixed: this is the test split's sampling error, not the training
    seed's), and Rare-F1 is recomputed with :func:`~cdgtmll.metrics.definitions.rare_f1` (labels
    without positives *in the resample* treated by ``no_positive_labels``). A resample without
    any kept tail label is undefined (``n_undefined``) and left out. The interval is the
    ``(1 - conf)/2`` and ``(1 + conf)/2`` quantiles of the defined resamples (numpy's linear
    rule); ``se`` their sample std. Returns ``{"value", "lo", "hi", "se", "B", "seed", "conf",
    "n_undefined", "method", "resampled"}``."""
    _check_rule(no_positive_labels)
    if B < 1:
        raise ValueError(f"B must be >= 1, got {B}")
    Y = _as_labels(Y)
    S = _check_pair(Y, S)
    n, L = S.shape
    tail = np.asarray(tail, dtype=np.int64).reshape(-1)
    t = _thresholds(thresholds, L)[tail]
    y = (Y[:, tail].toarray() if sp.issparse(Y) else np.asarray(Y)[:, tail]).astype(bool)
    pred = np.asarray(S)[:, tail] >= t[None, :]
    # TP, FP, FN per row; float32 sums of 0/1 cells are exact below 2**24 rows
    cells = np.stack([(y & pred), (~y & pred), (y & ~pred)]).astype(np.float32)
    point = rare_f1(f1_from_counts(*cells.sum(axis=1).astype(np.int64)).per_label, np.arange(tail.size),
                    None if no_positive_labels == "zero" else y.sum(axis=0))
    rng = np.random.default_rng(seed)
    reps = np.full(B, np.nan)
    step = max(1, min(B, (1 << 22) // max(n, 1)))
    for a in range(0, B, step):
        b = min(B, a + step)
        W = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(b - a)]).astype(np.float32)
        tp, fp, fn = (np.rint(W @ cells[k]).astype(np.int64) for k in range(3))  # [resamples, |T|]
        for i in range(b - a):
            keep = None if no_positive_labels == "zero" else tp[i] + fn[i]
            reps[a + i] = rare_f1(f1_from_counts(tp[i], fp[i], fn[i]).per_label, np.arange(tail.size), keep)
    ok = reps[np.isfinite(reps)] if n and tail.size else np.empty(0)
    lo, hi = (np.quantile(ok, [(1 - conf) / 2, (1 + conf) / 2]) if ok.size else (math.nan, math.nan))
    return {"value": float(point) if n and tail.size else float("nan"), "lo": float(lo), "hi": float(hi),
            "se": float(ok.std(ddof=1)) if ok.size > 1 else float("nan"), "B": int(B), "seed": int(seed),
            "conf": float(conf), "n_undefined": int(B - ok.size), "method": "percentile", "resampled": BOOTSTRAP_RESAMPLED}


# --------------------------------------------------------------------------- the metrics.json block


def readings_record(Y_test: Any, S_test: Any, Y_train: Any, label_names: Sequence[str], tail: Any,
                    blocks: Mapping[str, Any], no_positive_labels: str = DEFAULT_F1_NO_POSITIVE,
                    tail_fraction: float = TAIL_FRACTION, tie_seed: int = TIE_SEED,
                    head_mass: float = HEAD_MASS, B: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The ``readings`` block of ``metrics.json``. ``blocks`` maps a metrics block's key
    (``global@0.5``, ``adaptive``, ``method``) to its thresholds (as :func:`readings_at` takes
    them). Returns ``{"tails": {"e4", "cumulative", "ceil"}: label indices, "head_mass",
    "readings": {key: label}, "blocks": {block key: {"values": {metric: {reading: value}},
    "tail_labels": [...] (:func:`tail_label_report` at the Rare-F1 column's thresholds),
    "rare_f1_bootstrap": {...} (:func:`rare_f1_bootstrap`)}}}``."""
    tail = np.asarray(tail, dtype=np.int64).reshape(-1)
    ctx = Context(tail, cumulative_tail(Y_train, head_mass, tie_seed), ceil_tail(Y_train, tail_fraction, tie_seed),
                  no_positive_labels)
    train_counts = label_counts(Y_train)
    out: dict[str, Any] = {
        "tails": {"e4": [int(j) for j in ctx.tail], "cumulative": [int(j) for j in ctx.tail_cumulative],
                  "ceil": [int(j) for j in ctx.tail_ceil]},
        "head_mass": float(head_mass),
        "readings": {r.key: r.label for r in READINGS},
        "blocks": {},
    }
    for key, thresholds in blocks.items():
        t_rare = _per_column(thresholds)["rare_f1"]
        out["blocks"][key] = {
            "values": readings_at(Y_test, S_test, thresholds, ctx),
            "tail_labels": tail_label_report(Y_test, S_test, t_rare, tail, train_counts, label_names),
            "rare_f1_bootstrap": rare_f1_bootstrap(Y_test, S_test, t_rare, tail, no_positive_labels, B, seed),
        }
    return out
