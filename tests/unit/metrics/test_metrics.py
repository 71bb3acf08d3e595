"""Metrics of App. E.4 cross-checked against scikit-learn and brute-force references."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import average_precision_score, f1_score

from cdgtmll.metrics import definitions, evaluation, thresholds
from cdgtmll.metrics import definitions as metrics_core

CASES = [(0, 50, 7), (1, 200, 30), (2, 31, 3), (3, 500, 64), (4, 1, 5)]


def random_case(seed: int, n: int, L: int, p: float = 0.15, decimals: int | None = None):
    rng = np.random.default_rng(seed)
    Y = (rng.random((n, L)) < p).astype(np.uint8)
    S = rng.random((n, L))
    if decimals is not None:
        S = np.round(S, decimals)
    return Y, S


def sk_ap(y, s) -> float:
    return float(average_precision_score(y, s))


def brute_ap(y, s) -> float:
    """Eq. (E.7) with tie groups as one step, written as a plain loop over thresholds."""
    P = int(y.sum())
    total = 0.0
    for thr in np.unique(s)[::-1]:
        pred = s >= thr
        prec = (y[pred] == 1).sum() / pred.sum()
        new_pos = ((s == thr) & (y == 1)).sum()
        total += prec * new_pos
    return total / P


# --------------------------------------------------------------------------- AP / mAP


@pytest.mark.parametrize("seed,n,L", CASES)
@pytest.mark.parametrize("decimals", [None, 1])
def test_ap_matches_sklearn(seed, n, L, decimals):
    Y, S = random_case(seed, n, L, decimals=decimals)
    ap = definitions.average_precision_per_label(Y, S)
    for j in range(L):
        if Y[:, j].sum() == 0:
            assert math.isnan(ap[j])
            continue
        ref = sk_ap(Y[:, j], S[:, j])
        assert ap[j] == pytest.approx(ref, abs=1e-12)
        assert definitions.average_precision(Y[:, j], S[:, j]) == pytest.approx(ref, abs=1e-12)
        assert ap[j] == pytest.approx(brute_ap(Y[:, j], S[:, j]), abs=1e-12)


def test_ap_without_ties_is_eq_e7_literal():
    rng = np.random.default_rng(7)
    y = (rng.random(300) < 0.2).astype(int)
    s = rng.permutation(300) / 300.0  # distinct scores
    order = np.argsort(-s)
    ys = y[order]
    prec_t = np.cumsum(ys) / np.arange(1, 301)
    literal = (prec_t * ys).sum() / ys.sum()
    assert definitions.average_precision(y, s) == pytest.approx(literal, abs=1e-12)


def test_ap_all_tied_scores():
    rng = np.random.default_rng(3)
    y = (rng.random(40) < 0.3).astype(int)
    s = np.full(40, 0.42)
    # one threshold step: precision of predicting everything
    assert definitions.average_precision(y, s) == pytest.approx(y.mean(), abs=1e-12)
    assert definitions.average_precision(y, s) == pytest.approx(sk_ap(y, s), abs=1e-12)


def test_ap_independent_of_order_within_ties():
    Y, S = random_case(11, 120, 8, p=0.3, decimals=1)
    perm = np.random.default_rng(0).permutation(120)
    np.testing.assert_allclose(
        definitions.average_precision_per_label(Y, S), definitions.average_precision_per_label(Y[perm], S[perm]), atol=1e-12
    )


def test_map_leaves_out_labels_without_positives():
    Y, S = random_case(5, 100, 10, p=0.2)
    Y[:, 3] = 0
    Y[:, 7] = 0
    kept = [j for j in range(10) if j not in (3, 7)]
    ref = np.mean([sk_ap(Y[:, j], S[:, j]) for j in kept])
    assert definitions.mean_average_precision(Y, S) == pytest.approx(ref, abs=1e-12)
    out = evaluation.evaluate(Y, S, tail=[3, 7], thresholds=0.5)
    assert out["n_labels_in_map"] == 8
    assert out["mAP"] == pytest.approx(ref, abs=1e-12)


def test_map_nan_when_no_positives():
    S = np.random.default_rng(0).random((10, 4))
    assert math.isnan(definitions.mean_average_precision(np.zeros((10, 4), np.uint8), S))


def test_ap_sparse_equals_dense_and_blocks(monkeypatch):
    Y, S = random_case(9, 150, 40, decimals=2)
    dense = definitions.average_precision_per_label(Y, S)
    np.testing.assert_array_equal(definitions.average_precision_per_label(sp.csr_matrix(Y), S), dense)
    monkeypatch.setattr(metrics_core, "_BLOCK_ELEMS", 150 * 3)  # 3 columns per block
    np.testing.assert_allclose(definitions.average_precision_per_label(Y, S), dense, atol=1e-15, equal_nan=True)


def test_bad_inputs_raise():
    Y, S = random_case(0, 10, 3)
    with pytest.raises(ValueError, match="shape"):
        definitions.mean_average_precision(Y, S[:, :2])
    S2 = S.copy()
    S2[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        definitions.mean_average_precision(Y, S2)
    Y2 = Y.copy()
    Y2[0, 0] = 2
    with pytest.raises(ValueError, match="0/1"):
        definitions.f1_scores(Y2, Y)


# --------------------------------------------------------------------------- F1


@pytest.mark.parametrize("seed,n,L", CASES)
@pytest.mark.parametrize("tau", [0.5, 0.2, 0.9])
def test_f1_matches_sklearn(seed, n, L, tau):
    Y, S = random_case(seed, n, L, decimals=1)  # scores equal to tau exercise ">="
    Yhat = definitions.binarize(S, tau)
    np.testing.assert_array_equal(Yhat, (S >= tau).astype(np.uint8))
    f = definitions.f1_scores(Y, Yhat)
    assert f.micro == pytest.approx(f1_score(Y, Yhat, average="micro", zero_division=0), abs=1e-12)
    assert f.macro == pytest.approx(f1_score(Y, Yhat, average="macro", zero_division=0), abs=1e-12)
    np.testing.assert_allclose(f.per_label, f1_score(Y, Yhat, average=None, zero_division=0), atol=1e-12)
    # sparse inputs give the same counts
    fs = definitions.f1_scores(sp.csr_matrix(Y), sp.csr_matrix(Yhat))
    np.testing.assert_array_equal(fs.per_label, f.per_label)
    # the chunked thresholded path used by evaluate() gives the same counts
    for chunk in (1, 7, None):
        tp, fp, fn = definitions.thresholded_counts(Y, S, tau, chunk=chunk)
        np.testing.assert_array_equal(tp, f.tp)
        np.testing.assert_array_equal(fp, f.fp)
        np.testing.assert_array_equal(fn, f.fn)


def test_f1_label_without_positives_counts_as_zero_in_macro():
    Y, S = random_case(2, 80, 6, p=0.3)
    Y[:, 2] = 0
    S[:, 2] = 0.1  # never predicted at 0.5 -> TP+FP+FN = 0 for label 2
    Yhat = definitions.binarize(S, 0.5)
    f = definitions.f1_scores(Y, Yhat)
    assert f.per_label[2] == 0.0
    assert f.macro == pytest.approx(f.per_label.sum() / 6)
    assert f.macro == pytest.approx(f1_score(Y, Yhat, average="macro", zero_division=0), abs=1e-12)


def test_f1_all_zero_predictions():
    Y, _ = random_case(4, 60, 5)
    Yhat = np.zeros_like(Y)
    f = definitions.f1_scores(Y, Yhat)
    assert f.micro == 0.0 and f.macro == 0.0
    assert f.micro == f1_score(Y, Yhat, average="micro", zero_division=0)
    assert f.macro == f1_score(Y, Yhat, average="macro", zero_division=0)
    np.testing.assert_array_equal(f.fn, Y.sum(axis=0))


def test_f1_all_zero_everything():
    Z = np.zeros((5, 3), np.uint8)
    f = definitions.f1_scores(Z, Z)
    assert f.micro == 0.0 and f.macro == 0.0
    assert f.macro == f1_score(Z, Z, average="macro", zero_division=0)


def test_rare_f1_is_macro_over_tail():
    Y, S = random_case(8, 100, 10, p=0.25)
    Yhat = definitions.binarize(S, 0.4)
    f = definitions.f1_scores(Y, Yhat)
    tail = np.array([1, 4, 9])
    ref = f1_score(Y[:, tail], Yhat[:, tail], average="macro", zero_division=0)
    assert definitions.rare_f1(f.per_label, tail) == pytest.approx(ref, abs=1e-12)
    assert math.isnan(definitions.rare_f1(f.per_label, []))
    with pytest.raises(ValueError):
        definitions.rare_f1(f.per_label, [10])


# --------------------------------------------------------------------------- P@k


def brute_p_at_k(Y, S, k):
    """Full sort per row by (score desc, label index asc)."""
    n, L = S.shape
    total = 0.0
    for m in range(n):
        order = sorted(range(L), key=lambda j: (-S[m, j], j))[:k]
        total += sum(Y[m, j] for j in order) / k
    return total / n


@pytest.mark.parametrize("seed,n,L", [(0, 40, 12), (1, 25, 6), (2, 60, 30), (3, 10, 3)])
@pytest.mark.parametrize("decimals", [None, 1])
def test_p_at_k_brute_force_sparse_and_chunks(seed, n, L, decimals):
    Y, S = random_case(seed, n, L, p=0.3, decimals=decimals)
    ref = {f"p@{k}": brute_p_at_k(Y, S, k) for k in (1, 3, 5)}
    full = definitions.precision_at_k(Y, S, chunk=n)
    for key in ref:
        assert full[key] == pytest.approx(ref[key], abs=1e-12)
    assert definitions.precision_at_k(sp.csr_matrix(Y), S, chunk=n) == full
    for chunk in (1, 3, 7):
        assert definitions.precision_at_k(Y, S, chunk=chunk) == full
        assert definitions.precision_at_k(sp.csr_matrix(Y), S, chunk=chunk) == full


def test_p_at_k_ties_break_by_lower_label_index():
    S = np.full((2, 6), 0.5)
    S[1, 5] = 0.9
    Y = np.zeros((2, 6), np.uint8)
    Y[0, [0, 1]] = 1  # lower indices win the ties
    Y[1, 5] = 1
    out = definitions.precision_at_k(Y, S, ks=(1, 2, 3))
    assert out["p@1"] == pytest.approx((1 + 1) / 2)
    assert out["p@2"] == pytest.approx((1 + 0.5) / 2)
    assert out["p@3"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert definitions._topk_rows(S, 3).tolist() == [[0, 1, 2], [5, 0, 1]]


def test_p_at_k_larger_than_L():
    Y, S = random_case(1, 20, 3, p=0.5)
    out = definitions.precision_at_k(Y, S, ks=(5,))
    assert out["p@5"] == pytest.approx(Y.sum() / (20 * 5))


# --------------------------------------------------------------------------- thresholds


def brute_tune(y, s):
    """Exhaustive search over the distinct scores, ties -> largest threshold. scikit-learn
    scores every candidate in one call: column k of the predictions is ``s >= t_k``."""
    if y.sum() == 0:
        return 0.5, None
    cands = np.unique(s)[::-1]
    f = f1_score(np.repeat(y[:, None], len(cands), axis=1), (s[:, None] >= cands[None, :]).astype(int),
                 average=None, zero_division=0)
    best = int(np.flatnonzero(f > f.max() - 1e-15)[0])  # the first (largest) candidate within 1e-15 of the best
    return cands[best], f[best]


@pytest.mark.parametrize("seed,n,L", [(0, 60, 10), (1, 200, 25), (2, 15, 4)])
@pytest.mark.parametrize("decimals", [None, 1, 2])
def test_tune_thresholds_exact(seed, n, L, decimals):
    Y, S = random_case(seed, n, L, p=0.2, decimals=decimals)
    Y[:, 0] = 0  # a label without validation positives keeps 0.5
    tau = thresholds.tune_thresholds(Y, S)
    assert tau.shape == (L,) and tau[0] == 0.5
    f_tuned = f1_score(Y, definitions.binarize(S, tau), average=None, zero_division=0)
    f_half = f1_score(Y, definitions.binarize(S, 0.5), average=None, zero_division=0)
    assert np.all(f_tuned >= f_half - 1e-12)
    for j in range(L):
        t_ref, f_ref = brute_tune(Y[:, j], S[:, j])
        assert tau[j] == t_ref
        if f_ref is not None:
            assert f_tuned[j] == pytest.approx(f_ref, abs=1e-12)
            # candidates are the label's own distinct scores
            assert tau[j] in set(S[:, j].tolist())


def test_tune_thresholds_sparse_and_blocks(monkeypatch):
    Y, S = random_case(4, 90, 17, decimals=1)
    tau = thresholds.tune_thresholds(Y, S)
    np.testing.assert_array_equal(thresholds.tune_thresholds(sp.csr_matrix(Y), S), tau)
    monkeypatch.setattr(metrics_core, "_BLOCK_ELEMS", 90 * 2)
    np.testing.assert_array_equal(thresholds.tune_thresholds(Y, S), tau)


def test_tune_thresholds_grid():
    Y, S = random_case(6, 100, 8, p=0.25)
    grid = np.linspace(0.05, 0.95, 19)
    tau = thresholds.tune_thresholds(Y, S, grid=grid)
    for j in range(8):
        fs = [f1_score(Y[:, j], (S[:, j] >= g).astype(int), zero_division=0) for g in grid]
        best = max(fs)
        expect = max(g for g, f in zip(grid, fs) if f == best)
        assert tau[j] == pytest.approx(expect)


def test_tune_global_threshold_exact():
    Y, S = random_case(2, 50, 6, p=0.2, decimals=2)
    t = thresholds.tune_global_threshold(Y, S)
    best_f, best_t = -1.0, None
    for c in sorted(np.unique(S), reverse=True):
        f = f1_score(Y, (S >= c).astype(int), average="micro", zero_division=0)
        if f > best_f + 1e-15:
            best_f, best_t = f, c
    assert t == best_t
    grid_t = thresholds.tune_global_threshold(Y, S, grid=np.unique(S))
    assert grid_t == pytest.approx(best_t)
    assert thresholds.tune_global_threshold(np.zeros_like(Y), S) == 0.5


# --------------------------------------------------------------------------- reports


def test_evaluate_and_evaluate_all():
    Yv, Sv = random_case(1, 120, 12, p=0.2)
    Yt, St = random_case(2, 150, 12, p=0.2, decimals=2)
    Yt[:, 5] = 0
    tail = np.array([2, 5, 8])
    res = evaluation.evaluate_all(Yt, St, Yv, Sv, tail)
    assert set(res) == {"global@0.5", "adaptive", "adaptive_thresholds", "f1_no_positive_labels"}
    keys = {"mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5", "n_labels_in_map",
            "n_labels_in_macro_f1", "n_labels_in_rare_f1", "n_left_out_with_false_positives", "decision_rules"}
    tau = np.asarray(res["adaptive_thresholds"])
    np.testing.assert_array_equal(tau, thresholds.tune_thresholds(Yv, Sv))
    kept = np.array([j for j in range(12) if j != 5])  # label 5 has no test positive
    for block, thr, rule in (("global@0.5", 0.5, thresholds.rule_global(0.5)), ("adaptive", tau, thresholds.RULE_ADAPTIVE)):
        out = res[block]
        assert set(out) == keys
        assert out == evaluation.evaluate(Yt, St, tail, thr, decision_rule=rule)
        assert out["decision_rules"] == {"micro_f1": rule, "macro_f1": rule, "rare_f1": rule}
        for k in ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5"):
            assert type(out[k]) is float and 0.0 <= out[k] <= 1.0
        Yhat = definitions.binarize(St, thr)
        assert out["micro_f1"] == pytest.approx(f1_score(Yt, Yhat, average="micro", zero_division=0))
        # default rule 'exclude': label 5 (no test positive) left out, as from mAP
        assert out["macro_f1"] == pytest.approx(f1_score(Yt, Yhat, labels=kept, average="macro", zero_division=0))
        assert out["rare_f1"] == pytest.approx(f1_score(Yt, Yhat, labels=[2, 8], average="macro", zero_division=0))
        assert out["n_labels_in_map"] == out["n_labels_in_macro_f1"] == 11 and out["n_labels_in_rare_f1"] == 2
        assert out["n_left_out_with_false_positives"] == int(Yhat[:, 5].any())
        # rule 'zero': every label counts, as scikit-learn's zero_division=0 over all columns
        zero = evaluation.evaluate(Yt, St, tail, thr, no_positive_labels="zero")
        assert zero["macro_f1"] == pytest.approx(f1_score(Yt, Yhat, average="macro", zero_division=0))
        assert zero["rare_f1"] == pytest.approx(f1_score(Yt, Yhat, labels=tail, average="macro", zero_division=0))
        assert zero["micro_f1"] == out["micro_f1"] and zero["mAP"] == out["mAP"]
        assert zero["n_labels_in_macro_f1"] == 12 and zero["n_labels_in_rare_f1"] == 3
    rec = res["f1_no_positive_labels"]
    assert rec["rule"] == "exclude" and rec["left_out"] == {"macro_f1": 1, "rare_f1": 1}
    assert rec["of"] == {"macro_f1": 12, "rare_f1": 3} and rec["left_out_labels"] == [5]
    json.dumps(res)  # JSON-able
    res3 = evaluation.evaluate_all(Yt, St, Yv, Sv, tail, global_threshold=0.3)
    assert set(res3) == {"global@0.3", "adaptive", "adaptive_thresholds", "f1_no_positive_labels"}
    assert res3["global@0.3"] == evaluation.evaluate(Yt, St, tail, 0.3, decision_rule=thresholds.rule_global(0.3))
    assert res3["adaptive"] == res["adaptive"]
    resz = evaluation.evaluate_all(Yt, St, Yv, Sv, tail, no_positive_labels="zero")
    assert resz["f1_no_positive_labels"]["left_out"] == {"macro_f1": 0, "rare_f1": 0}
    assert resz["f1_no_positive_labels"]["labels_without_positives"] == {"all": 1, "tail": 1}
    with pytest.raises(ValueError, match="no_positive_labels"):
        evaluation.evaluate_all(Yt, St, Yv, Sv, tail, no_positive_labels="drop")


@pytest.mark.parametrize("seed,n,L", [(0, 60, 20), (1, 25, 9), (2, 200, 40), (3, 8, 12)])
@pytest.mark.parametrize("tau", [0.3, 0.5, 0.8])
def test_f1_no_positive_rules_match_sklearn(seed, n, L, tau):
    """'exclude' = scikit-learn macro F1 (zero_division=0) on the columns with test positives
    (the labels mAP keeps); 'zero' = the same over all columns. A label without positives but
    with false positives is left out too (same exclusion set as mAP)."""
    Y, S = random_case(seed, n, L, p=0.1, decimals=1)
    Y[:, 0] = 0
    S[:, 0] = 0.95  # no positive, predicted everywhere: false positives only
    Y[:, 1] = 0
    S[:, 1] = 0.0  # no positive, never predicted
    tail = np.arange(0, L, 3)
    Yhat = definitions.binarize(S, tau)
    keep = Y.sum(axis=0) > 0
    ex = evaluation.evaluate(Y, S, tail, tau)
    zero = evaluation.evaluate(Y, S, tail, tau, no_positive_labels="zero")
    assert ex["n_labels_in_macro_f1"] == ex["n_labels_in_map"] == int(keep.sum())
    # labels= selects columns of a multilabel indicator (a single sliced column would be read as binary)
    assert ex["macro_f1"] == pytest.approx(
        f1_score(Y, Yhat, labels=np.flatnonzero(keep), average="macro", zero_division=0), abs=1e-12)
    assert zero["macro_f1"] == pytest.approx(f1_score(Y, Yhat, average="macro", zero_division=0), abs=1e-12)
    tk = tail[keep[tail]]
    assert ex["n_labels_in_rare_f1"] == tk.size
    if tk.size:
        assert ex["rare_f1"] == pytest.approx(f1_score(Y, Yhat, labels=tk, average="macro", zero_division=0),
                                              abs=1e-12)
    else:  # no tail label has a test positive: undefined, as mAP over no label
        assert math.isnan(ex["rare_f1"])
    assert zero["rare_f1"] == pytest.approx(f1_score(Y, Yhat, labels=tail, average="macro", zero_division=0),
                                            abs=1e-12)
    assert ex["micro_f1"] == zero["micro_f1"] == pytest.approx(f1_score(Y, Yhat, average="micro", zero_division=0))
    assert ex["n_left_out_with_false_positives"] == int(((~keep) & (Yhat.sum(axis=0) > 0)).sum()) >= 1
    # the low-level pieces: rare_f1 / macro_f1 with and without the positive counts
    f = definitions.f1_scores(Y, Yhat)
    P = evaluation.positives_per_label(Y)
    assert definitions.macro_f1(f.per_label) == pytest.approx(f.macro)
    assert definitions.macro_f1(f.per_label, P) == pytest.approx(ex["macro_f1"])
    assert definitions.rare_f1(f.per_label, tail, P) == pytest.approx(ex["rare_f1"], nan_ok=True)
    assert definitions.rare_f1(f.per_label, tail) == pytest.approx(zero["rare_f1"])


def test_oracle_rare_f1_not_pinned_by_tail_labels_without_test_positives():
    """On a long tail most tail labels can have no test positive; counting them
    as F1 = 0 caps Rare-F1 of a perfect predictor at the share of tail labels that have
    positives. By default they are left out, as from mAP, and a perfect predictor scores 1."""
    rng = np.random.default_rng(7)
    n, L = 300, 40
    Y = (rng.random((n, L)) < 0.2).astype(np.uint8)
    tail = np.arange(30, 40)
    Y[:, 30:37] = 0  # 7 of 10 tail labels without a test positive
    S = Y.astype(np.float64)  # oracle scores
    res = evaluation.evaluate(Y, S, tail, 0.5)
    assert res["mAP"] == 1.0 and res["n_labels_in_map"] == 33
    assert res["rare_f1"] == 1.0 and res["macro_f1"] == 1.0
    assert res["n_labels_in_rare_f1"] == 3 and res["n_labels_in_macro_f1"] == 33
    zero = evaluation.evaluate(Y, S, tail, 0.5, no_positive_labels="zero")
    assert zero["rare_f1"] == pytest.approx(3 / 10) and zero["macro_f1"] == pytest.approx(33 / 40)
    # every tail label without positives: undefined (nan), not 0
    Y[:, 30:40] = 0
    assert math.isnan(evaluation.evaluate(Y, Y.astype(float), tail, 0.5)["rare_f1"])


def test_evaluate_per_column_decision_rules():
    """One threshold vector per F1 column (the plug-in rows): each column equals the metric
    computed alone at its own thresholds, and the rules are recorded per column."""
    Yv, Sv = random_case(5, 150, 10, p=0.25)
    Yt, St = random_case(6, 160, 10, p=0.25)
    tail = np.array([1, 6])
    shared = np.full(10, thresholds.tune_global_threshold(Yv, Sv))
    per = thresholds.tune_thresholds(Yv, Sv)
    rules = {"micro_f1": thresholds.RULE_PLUGIN_MICRO, "macro_f1": thresholds.RULE_PLUGIN_MACRO, "rare_f1": thresholds.RULE_PLUGIN_MACRO}
    out = evaluation.evaluate(Yt, St, tail, {"micro_f1": shared, "macro_f1": per, "rare_f1": per}, decision_rule=rules)
    assert out["micro_f1"] == evaluation.evaluate(Yt, St, tail, shared)["micro_f1"]
    assert out["macro_f1"] == evaluation.evaluate(Yt, St, tail, per)["macro_f1"]
    assert out["rare_f1"] == evaluation.evaluate(Yt, St, tail, per)["rare_f1"]
    assert out["micro_f1"] != evaluation.evaluate(Yt, St, tail, per)["micro_f1"]  # the rules differ here
    assert out["decision_rules"] == rules
    with pytest.raises(ValueError, match="keys"):
        evaluation.evaluate(Yt, St, tail, {"micro_f1": shared})


def test_per_label_report():
    Yt, St = random_case(3, 100, 7, p=0.2)
    Yt[:, 1] = 0
    counts = np.arange(7) * 10
    tau = np.full(7, 0.4)
    rows = evaluation.per_label_report(Yt, St, tau, counts, label_names=list("abcdefg"), tail=[1, 3])
    Yhat = definitions.binarize(St, tau)
    f = f1_score(Yt, Yhat, average=None, zero_division=0)
    assert [r["label"] for r in rows] == list(range(7))
    for j, r in enumerate(rows):
        assert r["f1"] == pytest.approx(f[j])
        assert r["n_pos_test"] == int(Yt[:, j].sum())
        assert r["n_pos_train"] == counts[j]
        assert r["name"] == "abcdefg"[j]
        assert r["is_tail"] == (j in (1, 3))
        if j == 1:
            assert r["ap"] is None
        else:
            assert r["ap"] == pytest.approx(sk_ap(Yt[:, j], St[:, j]))
    json.dumps(rows)


def test_ranking_metrics_identical_in_both_blocks():
    """mAP and P@k are identical in both evaluate_all blocks."""
    Y, S = random_case(12, 80, 9)
    res = evaluation.evaluate_all(Y, S, Y, S, [0])
    for k in ("mAP", "n_labels_in_map", "p@1", "p@3", "p@5"):
        assert res["adaptive"][k] == res["global@0.5"][k]
