"""Oracle bounds (cdgtmll.metrics.oracle): what the E.4 metrics can reach on a test split,
on hand-computed cases, against brute force over every threshold vector, and as bounds of
the metrics the pipeline reports."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp

from cdgtmll.metrics import oracle
from cdgtmll.metrics.definitions import f1_from_counts, precision_at_k, thresholded_counts
from cdgtmll.metrics.evaluation import evaluate_all

# label 0: every row positive; label 1: one positive, ranked last; label 2: no positive
Y3 = np.array([[1, 1, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0]])
S3 = np.array([[0.6, 0.1, 0.3], [0.7, 0.9, 0.2], [0.8, 0.8, 0.1], [0.9, 0.7, 0.0]])


def test_best_f1_per_label_hand_computed():
    # one label, ranking 1 0 1 0: top-1 F1 2/3, top-2 1/2, top-3 4/5, top-4 2/3 -> 4/5
    best, P = oracle.best_f1_per_label(np.array([[1], [0], [1], [0]]), np.array([[0.9], [0.8], [0.7], [0.1]]))
    assert best.tolist() == [pytest.approx(0.8)] and P.tolist() == [2]
    # a tie is one threshold step: the positive cannot be taken without the tied negative
    best, _ = oracle.best_f1_per_label(np.array([[1], [0]]), np.array([[0.5], [0.5]]))
    assert best[0] == pytest.approx(2 / 3)
    best, P = oracle.best_f1_per_label(Y3, S3)
    assert best.tolist() == pytest.approx([1.0, 0.4, 0.0]) and P.tolist() == [4, 1, 0]


def test_oracle_micro_f1_is_the_exact_maximum_not_the_per_label_optimum():
    """Label 0 predicted on all rows (4 TP). Label 1's best F1 alone is predicting all 4 rows
    (F1 2/5), but pooled that adds 1 TP and 3 FP: Micro-F1 10/13; predicting nothing on it gives
    8/9 -- the maximum."""
    micro, iters = oracle.oracle_micro_f1(Y3, S3)
    assert micro == pytest.approx(8 / 9) and iters >= 1
    per_label_tau = np.array([0.6, 0.1, 1.0])  # each label at its F1-optimal threshold
    assert f1_from_counts(*thresholded_counts(Y3, S3, per_label_tau)).micro == pytest.approx(10 / 13)
    assert oracle.oracle_micro_f1(np.zeros((3, 2)), np.ones((3, 2)))[0] == 0.0  # no positive: 0 by convention


def test_oracle_micro_f1_equals_brute_force_over_every_threshold_vector():
    rng = np.random.default_rng(7)
    for _ in range(40):
        n, L = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        Y = (rng.random((n, L)) < 0.4).astype(int)
        S = np.round(rng.random((n, L)), 1)  # rounded: ties occur
        cands = [sorted(set(S[:, j])) + [np.inf] for j in range(L)]
        best = max(f1_from_counts(*thresholded_counts(Y, S, np.array(t))).micro for t in itertools.product(*cands))
        assert oracle.oracle_micro_f1(Y, S)[0] == pytest.approx(best, abs=1e-12)
        per_label = [max(f1_from_counts(*thresholded_counts(Y[:, [j]], S[:, [j]], t)).per_label[0] for t in cands[j])
                     for j in range(L)]
        np.testing.assert_allclose(oracle.best_f1_per_label(Y, S)[0], per_label, atol=1e-12)


def test_perfect_ranking_bounds_hand_computed():
    Y = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])  # |y_m| = 3, 1, 0
    got = oracle.perfect_precision_at_k(Y)
    assert got == {"p@1": pytest.approx(2 / 3), "p@3": pytest.approx(4 / 9), "p@5": pytest.approx(4 / 15)}
    # exactly what P@k (E.9) gives a perfect ranking; the row without labels stays in M
    assert precision_at_k(Y, Y.astype(float)) == pytest.approx(got)
    assert oracle.perfect_precision_at_k(sp.csr_matrix(Y)) == pytest.approx(got)
    assert oracle.perfect_map(Y) == 1.0 and math.isnan(oracle.perfect_map(np.zeros((2, 2))))
    assert math.isnan(oracle.perfect_precision_at_k(np.zeros((0, 3)))["p@1"])


def test_hamming_accuracy_hand_computed():
    Y = np.array([[1, 0], [0, 1]])
    S = np.array([[0.9, 0.6], [0.4, 0.2]])  # at 0.5: one FP (0, 1), one FN (1, 1)
    assert oracle.hamming_accuracy(Y, S, 0.5) == pytest.approx(0.5)
    assert oracle.hamming_accuracy(Y, S, 0.3) == pytest.approx(0.25)  # 2 FP + 1 FN


def test_oracle_block_rules_and_tail():
    blk = oracle.oracle_block(Y3, S3, tail=[1, 2], global_threshold=0.5)
    assert blk["micro_f1"] == pytest.approx(8 / 9)
    assert blk["macro_f1"] == pytest.approx(0.7)  # label 2 (no test positive) left out, as mAP
    assert blk["rare_f1"] == pytest.approx(0.4) and blk["n_labels_in_rare_f1"] == 1
    assert blk["mAP"] == 1.0 and blk["p@1"] == 1.0 and blk["p@3"] == pytest.approx((2 / 3 + 3 * 1 / 3) / 4)
    assert blk["hamming_accuracy"] == pytest.approx(1 - 4 / 12)  # label 1: 3 FP + 1 FN at 0.5
    zero = oracle.oracle_block(Y3, S3, tail=[1, 2], global_threshold=0.5, no_positive_labels="zero")
    assert zero["macro_f1"] == pytest.approx(1.4 / 3) and zero["rare_f1"] == pytest.approx(0.2)
    assert set(oracle.BOUND_KEYS) <= set(blk) and "method" in blk


def test_oracle_bounds_every_reported_threshold_metric():
    rng = np.random.default_rng(3)
    n, L = 200, 9
    Y = (rng.random((n, L)) < np.linspace(0.05, 0.5, L)).astype(np.uint8)
    S = np.clip(0.3 * Y + rng.random((n, L)) * 0.8, 0, 1)
    res = evaluate_all(Y[:100], S[:100], Y[100:], S[100:], tail=[0, 1])
    blk = oracle.oracle_block(Y[:100], S[:100], [0, 1], 0.5)
    for mode in ("global@0.5", "adaptive"):
        for m in ("micro_f1", "macro_f1", "rare_f1", "mAP", "p@1", "p@3", "p@5"):
            assert res[mode][m] <= blk[m] + 1e-12, (mode, m)
    sparse = oracle.oracle_block(sp.csr_matrix(Y[:100]), S[:100], [0, 1], 0.5)
    assert {k: sparse[k] for k in oracle.BOUND_KEYS} == pytest.approx({k: blk[k] for k in oracle.BOUND_KEYS})
