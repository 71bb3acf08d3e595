"""Evaluation metrics of App. E.4 ("Metrics: formal definitions") of the paper.

Equation numbers refer to the paper's appendix E, whose counter restarts at
E.1 in that appendix:

===========  =================================================  ===========================================
Eq.          quantity                                           function (in :mod:`cdgtmll.metrics.definitions`)
===========  =================================================  ===========================================
(E.1)        micro counts TP/FP/FN                              :func:`~cdgtmll.metrics.definitions.f1_scores`
(E.2)        micro precision / recall / F1                      :func:`~cdgtmll.metrics.definitions.f1_scores`
(E.3)        per-label counts TP_l/FP_l/FN_l                    :func:`~cdgtmll.metrics.definitions.confusion_counts`
(E.4)        per-label precision / recall / F1_l                :func:`~cdgtmll.metrics.definitions.f1_scores`
(E.5)        macro-F1 = mean of F1_l over the labels            :func:`~cdgtmll.metrics.definitions.macro_f1`,
                                                                :func:`~cdgtmll.metrics.definitions.f1_scores`
(E.6)        Rare-F1 = mean of F1_l over the tail labels        :func:`~cdgtmll.metrics.definitions.rare_f1`
(E.7)        AP_l (non-interpolated, all points)                :func:`~cdgtmll.metrics.definitions.average_precision`
(E.8)        mAP over labels with P_l > 0                       :func:`~cdgtmll.metrics.definitions.mean_average_precision`
(E.9)        P@k, k in {1, 3, 5}                                :func:`~cdgtmll.metrics.definitions.precision_at_k`
===========  =================================================  ===========================================

Layout: the metric functions above, the rule for labels without positives and the
block-wise input handling are in :mod:`cdgtmll.metrics.definitions`; threshold tuning and the
decision-rule names in :mod:`cdgtmll.metrics.thresholds`; this module assembles the
metrics blocks (:func:`evaluate`, :func:`evaluate_all`, :func:`per_label_report`); what these
metrics can reach on a test split (thresholds chosen on the test set, a perfect ranking) in
:mod:`cdgtmll.metrics.oracle`.

Conventions fixed here (the paper leaves them open):

* **Thresholding.** ``yhat = 1{p >= tau_l}`` as in the E.4 setup. The main text
  (Sec. 3 and Alg. 1) writes ``p > tau``; we follow App. E.4. The two only differ
  for scores exactly equal to a threshold.
* **Zero division.** A ratio with a zero denominator is 0 (scikit-learn's
  ``zero_division=0``): a label with no positives and no positive predictions has
  ``F1_l = 0``; micro-F1 is 0 when nothing is positive or predicted. We compute
  ``F1 = 2 TP / (2 TP + FP + FN)``, algebraically equal to Eq. (E.2)/(E.4) whenever
  those are defined.
* **Labels without test positives in Macro-F1 and Rare-F1** (E.4 leaves the case
  open). Two rules (:data:`~cdgtmll.metrics.definitions.F1_NO_POSITIVE_RULES`, config
  ``evaluation.f1_no_positive_labels``):

  - ``'exclude'`` (the pipeline default, :data:`~cdgtmll.metrics.definitions.DEFAULT_F1_NO_POSITIVE`): the mAP rule of
    Eq. (E.8). A label with no positive in the evaluated split (``P_l = TP_l + FN_l = 0``)
    is left out of the Macro-F1 mean and, if it is a tail label, of the Rare-F1 mean.
    The left-out set depends on the test labels only -- it is exactly the set mAP leaves
    out, the same for every method and decision rule. A left-out label on which a method
    predicts positives (false positives only) is still left out: its ``F1_l`` is 0
    whatever is predicted, so it cannot tell methods apart; its false positives count in
    Micro-F1 (pooled FP), and the number of such labels is reported
    (``n_left_out_with_false_positives``). A mean over an empty set is ``nan``.
  - ``'zero'``: every label counts, with ``F1_l = 0`` for a label without positives
    (scikit-learn's ``f1_score(average='macro', zero_division=0)``; Eq. (E.5) read
    literally, denominator ``L``). On a long tail this makes Rare-F1 ~0 for every
    method by construction when most tail labels have no test positive.

  :func:`~cdgtmll.metrics.definitions.f1_scores` / :func:`~cdgtmll.metrics.definitions.f1_from_counts`
  (``F1Scores.macro``) always average over all L labels (the ``'zero'`` rule);
  :func:`~cdgtmll.metrics.definitions.macro_f1` and :func:`~cdgtmll.metrics.definitions.rare_f1` apply the
  ``'exclude'`` rule when given the per-label positive counts.
* **Decision rules per F1 column.** :func:`evaluate` takes one threshold vector for
  all F1 columns, or one per column (``{"micro_f1": tau, "macro_f1": tau', ...}``),
  and records the rule's name per column in ``decision_rules``. The two-step plug-in
  rows (PE, SRB) are scored with the rule that is optimal for each metric (Koyejo et
  al., NeurIPS 2015): one threshold shared by all labels for Micro-F1
  (:data:`~cdgtmll.metrics.thresholds.RULE_PLUGIN_MICRO`), one per label for Macro-F1 and
  Rare-F1 (:data:`~cdgtmll.metrics.thresholds.RULE_PLUGIN_MACRO`).
* **Tied scores in AP.** Instances with equal scores form *one* threshold step:
  every positive in a tie group gets the precision measured after the whole
  group. This is scikit-learn's ``average_precision_score`` convention (and is
  independent of the order of tied items); without ties it is exactly Eq. (E.7).
* **Ties in P@k.** Top-k is by score descending, ties broken by *lower label index*
  first, so results are deterministic and independent of ``chunk``.
* **Undefined values** (AP of a label without positives, mAP when no label has
  positives, Rare-F1 with an empty tail -- or, under ``'exclude'``, with no tail label
  that has test positives) are ``nan``.

Inputs: ``Y`` is a dense 0/1 array (any integer/bool dtype) or a ``scipy.sparse``
matrix; ``S`` is a dense float array of the same shape with finite scores
(probabilities in [0, 1] in the pipeline, but any real scores work for the ranking
metrics). Everything is processed in row or column blocks so that temporary
memory stays O(block x L) or O(n x block).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.metrics.definitions import (
    DEFAULT_F1_NO_POSITIVE,
    F1Scores,
    _as_labels,
    _check_pair,
    _check_rule,
    _kept,
    average_precision_per_label,
    f1_exclusion,
    f1_from_counts,
    macro_f1,
    precision_at_k,
    rare_f1,
    thresholded_counts,
)
from cdgtmll.metrics.thresholds import DEFAULT_THRESHOLD, F1_COLUMNS, RULE_ADAPTIVE, rule_global, tune_thresholds

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


def _threshold_metrics(Y: Any, S: Any, tail: Any, thresholds: Any,
                       no_positive_labels: str = DEFAULT_F1_NO_POSITIVE) -> dict[str, Any]:
    """Micro-, Macro- and Rare-F1 at ``thresholds``: one scalar/``[L]`` for all three columns,
    or a mapping ``{"micro_f1": t, "macro_f1": t', "rare_f1": t''}`` (one decision rule per
    column); plus the number of labels in each mean and of left-out labels with false
    positives (at the Macro-F1 column's thresholds)."""
    _check_rule(no_positive_labels)
    if isinstance(thresholds, Mapping):
        if set(thresholds) != set(F1_COLUMNS):
            raise ValueError(f"per-column thresholds need exactly the keys {list(F1_COLUMNS)}, got {sorted(thresholds)}")
        per_col = dict(thresholds)
    else:
        per_col = {c: thresholds for c in F1_COLUMNS}
    cache: list[tuple[Any, F1Scores]] = []

    def scores(t: Any) -> F1Scores:
        for key, f in cache:  # identical threshold vectors share one pass over the data
            if key is t or np.array_equal(np.asarray(key), np.asarray(t)):
                return f
        f = f1_from_counts(*thresholded_counts(Y, S, t))
        cache.append((t, f))
        return f

    f_mi, f_ma, f_ra = (scores(per_col[c]) for c in F1_COLUMNS)
    n_pos = f_ma.tp + f_ma.fn  # test positives per label (threshold-independent)
    keep_by = None if no_positive_labels == "zero" else n_pos
    keep = _kept(n_pos.size, keep_by)
    tail_arr = np.asarray(tail, dtype=np.int64).reshape(-1)
    return {
        "micro_f1": f_mi.micro,
        "macro_f1": macro_f1(f_ma.per_label, keep_by),
        "rare_f1": rare_f1(f_ra.per_label, tail_arr, keep_by),
        "n_labels_in_macro_f1": int(keep.sum()),
        "n_labels_in_rare_f1": int(keep[tail_arr].sum()) if tail_arr.size else 0,
        "n_left_out_with_false_positives": int(((~keep) & (f_ma.fp > 0)).sum()),
    }


def _rule_names(decision_rule: str | Mapping[str, str]) -> dict[str, str]:
    if isinstance(decision_rule, Mapping):
        if set(decision_rule) != set(F1_COLUMNS):
            raise ValueError(f"decision_rule needs exactly the keys {list(F1_COLUMNS)}, got {sorted(decision_rule)}")
        return {c: str(decision_rule[c]) for c in F1_COLUMNS}
    return {c: str(decision_rule) for c in F1_COLUMNS}


def evaluate(Y_true: Any, S: Any, tail: Any, thresholds: Any,
             no_positive_labels: str = DEFAULT_F1_NO_POSITIVE,
             decision_rule: str | Mapping[str, str] | None = None) -> dict[str, Any]:
    """All App. E.4 metrics of scores ``S`` against ``Y_true``: ``mAP`` (E.8),
    ``micro_f1`` (E.2), ``macro_f1`` (E.5), ``rare_f1`` (E.6, over ``tail`` =
    training-split tail), ``p@1``, ``p@3``, ``p@5`` (E.9) as Python floats in [0, 1]
    (nan where undefined), plus the counts ``n_labels_in_map``, ``n_labels_in_macro_f1``,
    ``n_labels_in_rare_f1`` and ``n_left_out_with_false_positives`` (ints).

    ``thresholds``: scalar or ``[L]`` for all F1 columns, or a mapping with keys
    ``micro_f1``, ``macro_f1``, ``rare_f1`` (one decision rule per column).
    ``no_positive_labels``: ``'exclude'`` (default; labels without positives in
    ``Y_true`` are left out of Macro-/Rare-F1, as of mAP) or ``'zero'`` (they count with
    ``F1_l = 0``). ``decision_rule``: the name(s) recorded under ``decision_rules``
    (one string for all columns or a mapping per column); omitted when None."""
    out = _ranking_metrics(Y_true, S)
    out.update(_threshold_metrics(Y_true, S, tail, thresholds, no_positive_labels))
    if decision_rule is not None:
        out["decision_rules"] = _rule_names(decision_rule)
    return out


def evaluate_all(
    Y_test: Any,
    S_test: Any,
    Y_val: Any,
    S_val: Any,
    tail: Any,
    global_threshold: float = DEFAULT_THRESHOLD,
    no_positive_labels: str = DEFAULT_F1_NO_POSITIVE,
) -> dict[str, Any]:
    """Test metrics under both decision rules used in the tables.

    Returns ``{"global@<tau>": {...}, "adaptive": {...}, "adaptive_thresholds": [L floats],
    "f1_no_positive_labels": {...}}`` where ``<tau>`` is ``global_threshold`` formatted
    with ``:g`` (``"global@0.5"`` by default), ``adaptive`` uses :func:`tune_thresholds`
    on the validation split (fixed at test), each block records its ``decision_rules``
    per F1 column, and ``f1_no_positive_labels`` is :func:`f1_exclusion` (which labels
    Macro-/Rare-F1 leave out, and how many). mAP and P@k do not depend on thresholds and
    are repeated in both blocks.
    """
    _check_rule(no_positive_labels)
    g = float(global_threshold)
    if not math.isfinite(g):
        raise ValueError(f"global_threshold must be finite, got {global_threshold!r}")
    rank = _ranking_metrics(Y_test, S_test)
    tau = tune_thresholds(Y_val, S_val)
    glob = dict(rank, **_threshold_metrics(Y_test, S_test, tail, g, no_positive_labels),
                decision_rules=_rule_names(rule_global(g)))
    adap = dict(rank, **_threshold_metrics(Y_test, S_test, tail, tau, no_positive_labels),
                decision_rules=_rule_names(RULE_ADAPTIVE))
    return {f"global@{g:g}": glob, "adaptive": adap, "adaptive_thresholds": [float(t) for t in tau],
            "f1_no_positive_labels": f1_exclusion(positives_per_label(Y_test), tail, no_positive_labels)}


def positives_per_label(Y: Any) -> np.ndarray:
    """``P_l``: number of positives of each label, int64 ``[L]`` (dense or sparse ``Y``)."""
    Y = _as_labels(Y)
    if sp.issparse(Y):
        return np.asarray(Y.sum(axis=0), dtype=np.int64).ravel()
    return np.asarray(Y, dtype=np.int64).sum(axis=0)


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
