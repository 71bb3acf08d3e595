"""Readings of the metric (:mod:`cdgtmll.metrics.readings`): each reading against a case
computed by hand and against scikit-learn; the tails of Sec. 3.1 and ``ceil(0.2 L)``; the
Rare-F1 bootstrap against a plain loop; and on real Yeast (BR-LogReg, 2 seeds, trained and
evaluated as the pipeline does) the ``readings`` block of ``metrics.json`` against plain
scikit-learn on the stored predictions, and its columns in ``all_runs.csv``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import f1_score, hamming_loss

from cdgtmll.labels import tail_labels
from cdgtmll.metrics import readings as R
from tests.support.runs import prepared_yeast, train_seeds

# -------------------------------------------------------------------- a case by hand

#: 4 rows x 3 labels; scores are the predictions themselves (threshold 0.5)
Y_HAND = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1]])
P_HAND = np.array([[1, 0, 0], [0, 1, 1], [0, 1, 0], [1, 0, 0]])
# label 0: TP 1 FP 1 FN 1 TN 1 -> F1 1/2, F1neg 1/2; label 1: TP 2 TN 2 -> 1, 1;
# label 2: TP 0 FP 1 FN 1 TN 2 -> F1 0, F1neg 4/6
# pooled: TP 3 FP 2 FN 2 TN 5 -> F1pos 6/10, F1neg 10/14 (supports 5 and 7)
# rows: F1 1, 2*1/(2+2), 1, 0
HAND = {
    "micro_f1": {"e4": 0.6, "flat_macro": (0.6 + 5 / 7) / 2, "flat_weighted": (5 * 0.6 + 7 * 5 / 7) / 12,
                 "hamming": 8 / 12, "samples": 2.5 / 4},
    "macro_f1": {"e4": 0.5, "both_classes": (0.5 + 1 + 1 / 3) / 3, "flat_macro": (0.6 + 5 / 7) / 2,
                 "flat_weighted": 2 / 3, "hamming": 2 / 3, "samples": 0.625},
    # tail = label 2 only (given by hand; the cumulative / ceil tails: labels 1-2 and 0-2)
    "rare_f1": {"e4": 0.0, "tail_cumulative": 0.5, "tail_ceil": 0.5, "both_classes": 1 / 3,
                "flat_macro": (0 + 2 / 3) / 2, "flat_weighted": (1 * 0 + 3 * 2 / 3) / 4, "hamming": 0.5},
}


def _ctx(rule="exclude"):
    return R.Context(np.array([2]), np.array([1, 2]), np.array([0, 1, 2]), rule)


@pytest.mark.parametrize("sparse", [False, True])
def test_every_reading_matches_the_hand_computed_case(sparse):
    Y = sp.csr_matrix(Y_HAND) if sparse else Y_HAND
    got = R.readings_at(Y, P_HAND.astype(float), 0.5, _ctx())
    assert set(got) == set(HAND)
    for metric, vals in HAND.items():
        assert set(got[metric]) == set(vals), metric
        for key, want in vals.items():
            assert got[metric][key] == pytest.approx(want, abs=1e-12), (metric, key)


def test_readings_table_and_columns():
    assert [r.key for r in R.READINGS] == ["e4", "tail_cumulative", "tail_ceil", "both_classes", "flat_macro",
                                           "flat_weighted", "hamming", "samples"]
    assert R.READING_COLUMNS[0] == "reading:micro_f1:e4" and "reading:rare_f1:samples" not in R.READING_COLUMNS
    assert len(R.READING_COLUMNS) == 5 + 6 + 7
    for r in R.READINGS:  # every reading's docstring quotes the paper and names an equation or section
        doc = r.compute.__doc__
        assert doc and "Eq. (E." in doc and doc.count('"') >= 2, r.key


def _random_case(seed, n=300, L=12):
    rng = np.random.default_rng(seed)
    prev = np.linspace(0.01, 0.6, L)
    Y = (rng.random((n, L)) < prev).astype(np.int64)
    S = np.clip(0.35 * Y + 0.75 * rng.random((n, L)), 0, 1)
    Ytr = (rng.random((2 * n, L)) < prev).astype(np.int64)
    return Y, S, Ytr


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_reading_equals_scikit_learn(seed):
    Y, S, Ytr = _random_case(seed)
    tail = tail_labels(Ytr)
    ctx = R.Context(tail, R.cumulative_tail(Ytr), R.ceil_tail(Ytr), "zero")
    tau = np.linspace(0.3, 0.7, Y.shape[1])
    got = R.readings_at(Y, S, tau, ctx)
    P = (S >= tau).astype(np.int64)
    T = tail
    sk = {
        "micro_f1": {"e4": f1_score(Y, P, average="micro", zero_division=0),
                     "flat_macro": f1_score(Y.ravel(), P.ravel(), average="macro"),
                     "flat_weighted": f1_score(Y.ravel(), P.ravel(), average="weighted"),
                     "hamming": 1 - hamming_loss(Y, P),
                     "samples": f1_score(Y, P, average="samples", zero_division=0)},
        "macro_f1": {"e4": f1_score(Y, P, average="macro", zero_division=0),
                     "both_classes": np.mean([f1_score(Y[:, j], P[:, j], average="macro", labels=[0, 1],
                                                       zero_division=0) for j in range(Y.shape[1])])},
        "rare_f1": {"e4": f1_score(Y[:, T], P[:, T], average="macro", zero_division=0),
                    "tail_cumulative": f1_score(Y[:, ctx.tail_cumulative], P[:, ctx.tail_cumulative],
                                                average="macro", zero_division=0),
                    "tail_ceil": f1_score(Y[:, ctx.tail_ceil], P[:, ctx.tail_ceil], average="macro", zero_division=0),
                    "both_classes": np.mean([f1_score(Y[:, j], P[:, j], average="macro", labels=[0, 1],
                                                      zero_division=0) for j in T]),
                    "flat_macro": f1_score(Y[:, T].ravel(), P[:, T].ravel(), average="macro"),
                    "flat_weighted": f1_score(Y[:, T].ravel(), P[:, T].ravel(), average="weighted"),
                    "hamming": 1 - hamming_loss(Y[:, T], P[:, T])},
    }
    for metric, vals in sk.items():
        for key, want in vals.items():
            assert got[metric][key] == pytest.approx(want, abs=1e-12), (metric, key)
    # row chunks do not change the sample average
    assert R.samples_f1(Y, S, tau, chunk=7) == pytest.approx(sk["micro_f1"]["samples"], abs=1e-12)


def test_exclude_rule_leaves_out_labels_without_test_positives():
    Y = Y_HAND.copy()
    Y[:, 2] = 0  # label 2: no test positive
    got = R.readings_at(Y, P_HAND.astype(float), 0.5, _ctx("exclude"))
    assert got["macro_f1"]["e4"] == pytest.approx((0.5 + 1) / 2)  # labels 0 and 1 only
    assert np.isnan(got["rare_f1"]["e4"]) and np.isnan(got["rare_f1"]["both_classes"])
    zero = R.readings_at(Y, P_HAND.astype(float), 0.5, _ctx("zero"))
    assert zero["rare_f1"]["e4"] == 0.0


def test_per_column_thresholds_are_read_per_column():
    Y, S, Ytr = _random_case(5)
    ctx = R.Context(tail_labels(Ytr), R.cumulative_tail(Ytr), R.ceil_tail(Ytr))
    mixed = R.readings_at(Y, S, {"micro_f1": 0.4, "macro_f1": 0.6, "rare_f1": 0.6}, ctx)
    assert mixed["micro_f1"] == R.readings_at(Y, S, 0.4, ctx)["micro_f1"]
    assert mixed["rare_f1"] == R.readings_at(Y, S, 0.6, ctx)["rare_f1"]
    with pytest.raises(ValueError, match="per-column thresholds"):
        R.readings_at(Y, S, {"micro_f1": 0.4}, ctx)


# -------------------------------------------------------------------- tails


def test_cumulative_tail_by_hand_and_equal_to_cd_gtmll_partition_rule():
    from cdgtmll.methods.cdgtmll.partition import cumulative_tail

    Ytr = np.zeros((70, 5), dtype=int)
    for j, c in enumerate((50, 10, 5, 3, 2)):  # 50 / 70 >= 10 %: the head is label 0 alone
        Ytr[:c, j] = 1
    assert R.cumulative_tail(Ytr).tolist() == [1, 2, 3, 4]
    for seed in range(4):
        _, _, Ytr = _random_case(seed, L=17)
        np.testing.assert_array_equal(R.cumulative_tail(Ytr), cumulative_tail(Ytr, 0.1))


@pytest.mark.parametrize(("L", "n"), [(5, 1), (14, 3), (15, 3), (6, 2), (20, 4), (101, 21)])
def test_ceil_tail_rounds_up_and_not_past_a_whole(L, n):
    Ytr = (np.random.default_rng(L).random((50, L)) < 0.3).astype(int)
    t = R.ceil_tail(Ytr)
    assert t.size == n
    floor = tail_labels(Ytr)  # the pipeline's floor(0.2 L) labels are the rarest of these
    assert set(floor.tolist()) <= set(t.tolist())


# -------------------------------------------------------------------- bootstrap


def test_rare_f1_bootstrap_equals_a_plain_loop_over_resampled_rows():
    Y, S, Ytr = _random_case(3, n=120)
    tail = R.ceil_tail(Ytr)
    B, seed = 200, 7
    got = R.rare_f1_bootstrap(Y, S, 0.5, tail, "exclude", B=B, seed=seed)
    rng = np.random.default_rng(seed)
    P = (S >= 0.5).astype(int)
    reps = []
    for _ in range(B):
        idx = rng.integers(0, Y.shape[0], Y.shape[0])
        y, p = Y[idx][:, tail], P[idx][:, tail]
        kept = y.sum(axis=0) > 0
        reps.append(f1_score(y[:, kept], p[:, kept], average="macro", zero_division=0) if kept.any() else np.nan)
    reps = np.asarray(reps)
    ok = reps[np.isfinite(reps)]
    assert got["lo"] == pytest.approx(np.quantile(ok, 0.025), abs=1e-12)
    assert got["hi"] == pytest.approx(np.quantile(ok, 0.975), abs=1e-12)
    assert got["se"] == pytest.approx(ok.std(ddof=1), abs=1e-12)
    assert got["value"] == pytest.approx(f1_score(Y[:, tail], P[:, tail], average="macro", zero_division=0))
    assert (got["B"], got["seed"], got["n_undefined"]) == (B, seed, B - ok.size)
    assert "test rows" in got["resampled"]
    assert R.rare_f1_bootstrap(sp.csr_matrix(Y), S, 0.5, tail, "exclude", B=B, seed=seed) == got


# -------------------------------------------------------------------- real Yeast

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def yeast_runs(tmp_path_factory, mirror):
    """Real MULAN Yeast (the mirror or its packaged copy), BR-LogReg on 2 seeds, trained with
    :func:`cdgtmll.train.run_seed` and scored by ``cdgtmll.metrics.evaluate_run`` as the
    pipeline does."""
    from cdgtmll.metrics import evaluate_run

    root = tmp_path_factory.mktemp("readings_yeast")
    clean, clean_path = prepared_yeast(root, mirror)
    rundir = train_seeds(clean, clean_path, root / "runs" / "yeast" / "clean" / "BR-LogReg", "BR-LogReg", SEEDS, {})
    assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir),
                              "--seeds", *map(str, SEEDS)]) == 0
    return clean, rundir


def _plain_sklearn(Y, P, tail):
    """The readings with scikit-learn and numpy only (no project code)."""
    return {"micro": f1_score(Y, P, average="micro"), "flat_macro": f1_score(Y.ravel(), P.ravel(), average="macro"),
            "flat_weighted": f1_score(Y.ravel(), P.ravel(), average="weighted"),
            "hamming": 1 - hamming_loss(Y, P), "samples": f1_score(Y, P, average="samples", zero_division=0),
            "rare": f1_score(Y[:, tail], P[:, tail], average="macro", zero_division=0),
            "rare_both": np.mean([f1_score(Y[:, j], P[:, j], average="macro") for j in tail])}


def test_yeast_readings_block_matches_plain_scikit_learn(yeast_runs):
    clean, rundir = yeast_runs
    Y = np.asarray(clean.part("test")[1]).astype(int)
    Ytr = np.asarray(clean.part("train")[1]).astype(int)
    names = list(clean.label_names)
    counts = Ytr.sum(axis=0)
    # Sec. 3.1's cumulative rule, by hand: labels by descending training count, head = shortest
    # prefix holding 10 % of the positives (one label on Yeast: Class12 and Class13 hold ~18 % each)
    order = np.argsort(-counts, kind="stable")
    n_head = int(np.argmax(np.cumsum(counts[order]) >= 0.1 * counts.sum())) + 1
    for seed in SEEDS:
        m = json.loads((rundir / f"seed{seed}" / "metrics.json").read_text())
        z = np.load(rundir / f"seed{seed}" / "predictions.npz")
        S = z["test"]
        rec = m["readings"]
        tail = rec["tails"]["e4"]
        assert [names[j] for j in tail] == ["Class9", "Class14"] == m["tail_label_names"]
        assert len(rec["tails"]["cumulative"]) == 14 - n_head == 13
        assert len(rec["tails"]["ceil"]) == 3 and set(tail) < set(rec["tails"]["ceil"])
        for key, tau in (("global@0.5", 0.5), ("adaptive", np.asarray(m["adaptive_thresholds"]))):
            P = (S >= tau).astype(int)
            want = _plain_sklearn(Y, P, tail)
            block = rec["blocks"][key]
            v = block["values"]
            assert v["micro_f1"]["e4"] == pytest.approx(m[key]["micro_f1"], abs=1e-12)
            assert v["rare_f1"]["e4"] == pytest.approx(m[key]["rare_f1"], abs=1e-12)
            assert v["macro_f1"]["e4"] == pytest.approx(m[key]["macro_f1"], abs=1e-12)
            for ours, theirs in (("e4", "micro"), ("flat_macro", "flat_macro"), ("flat_weighted", "flat_weighted"),
                                 ("hamming", "hamming"), ("samples", "samples")):
                assert v["micro_f1"][ours] == pytest.approx(want[theirs], abs=1e-12), (key, ours)
            assert v["rare_f1"]["e4"] == pytest.approx(want["rare"], abs=1e-12)
            assert v["rare_f1"]["both_classes"] == pytest.approx(want["rare_both"], abs=1e-12)
            assert [t["name"] for t in block["tail_labels"]] == ["Class9", "Class14"]
            for t in block["tail_labels"]:
                j = t["label"]
                assert t["n_pos_test"] == Y[:, j].sum() and t["n_pos_train"] == counts[j]
                assert t["f1"] == pytest.approx(f1_score(Y[:, j], P[:, j], zero_division=0), abs=1e-12)
            boot = block["rare_f1_bootstrap"]
            assert (boot["B"], boot["seed"]) == (R.BOOTSTRAP_B, R.BOOTSTRAP_SEED)
            assert boot["lo"] <= v["rare_f1"]["e4"] <= boot["hi"] or v["rare_f1"]["e4"] == 0.0
        assert m["oracle"]["hamming_accuracy"] == pytest.approx(rec["blocks"]["global@0.5"]["values"]["micro_f1"]["hamming"])


def test_yeast_readings_in_all_runs_and_reevaluated_by_the_audit(yeast_runs):
    from cdgtmll.lineage.seal import read_sealed_json
    from cdgtmll.metrics.evaluate_run import differences, reevaluate
    from cdgtmll.tables.collect import TAIL_DETAIL_COLUMNS, collect

    _, rundir = yeast_runs
    paths = [rundir / f"seed{s}" / "metrics.json" for s in SEEDS]
    df = collect(paths)
    assert set(R.READING_COLUMNS) <= set(df.columns) and set(TAIL_DETAIL_COLUMNS) <= set(df.columns)
    assert df[list(R.READING_COLUMNS)].notna().all().all()
    g = df[df["mode"] == "global"].iloc[0]
    m = json.loads(paths[0].read_text())
    assert g["reading:micro_f1:flat_weighted"] == m["readings"]["blocks"]["global@0.5"]["values"]["micro_f1"]["flat_weighted"]
    assert [t["name"] for t in json.loads(g["tail_labels_f1"])] == ["Class9", "Class14"]
    a = df[df["mode"] == "adaptive"].iloc[0]
    assert a["rare_f1_bootstrap_hi"] == m["readings"]["blocks"]["adaptive"]["rare_f1_bootstrap"]["hi"]
    record, _ = read_sealed_json(paths[0])
    assert differences(record, reevaluate(record, paths[0])) == []  # deterministic: the audit re-makes it
