"""Average ranks, Friedman / Iman-Davenport, Holm and the Wilcoxon pairs of
:mod:`cdgtmll.claims.ranks` against scipy (and statsmodels where installed) on fixed numbers,
and against Demšar's worked examples (JMLR 7:1-30, 2006, Sec. 3.1.3 and 3.2.2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cdgtmll.claims import ranks, verdict
from cdgtmll.claims.compare import normalise_runs

# Demšar 2006, Table 2: AUC of C4.5 and C4.5+m on 14 data sets (thousandths, exact integers)
C45 = [763, 599, 954, 628, 882, 936, 661, 583, 775, 1000, 940, 619, 972, 957]
C45M = [768, 591, 971, 661, 888, 931, 668, 583, 838, 1000, 962, 666, 981, 978]


def test_wilcoxon_reproduces_demsar_table_2():
    # zero differences split between the signs: R+ = 93, R- = 12, T = min = 12 (Demšar, Sec. 3.1.3)
    stat, p = ranks.wilcoxon_p(C45M, C45)
    assert stat == 12.0
    assert p < 0.05  # Demšar: T = 12 <= 21, the critical value for N = 14 at alpha 0.05
    # N = 14 > EXACT_MAX_N: the normal approximation
    ref = stats.wilcoxon(np.subtract(C45M, C45), zero_method="zsplit", method="asymptotic")
    assert (stat, p) == (ref.statistic, pytest.approx(ref.pvalue))
    # N <= 13: exact, every sign flip enumerated (a permutation test over all 2^13)
    d = np.subtract(C45M, C45)[:13]
    ref = stats.wilcoxon(d, zero_method="zsplit", method=stats.PermutationMethod(n_resamples=2**13))
    assert ranks.wilcoxon_p(C45M[:13], C45[:13])[1] == pytest.approx(ref.pvalue)


def test_iman_davenport_reproduces_demsar_section_3_2_2():
    # four algorithms on 14 data sets, average ranks 3.143, 2.000, 2.893, 1.964 (Demšar, Table 6)
    n, k = 14, 4
    r = np.array([3.143, 2.000, 2.893, 1.964])
    chi2 = 12 * n / (k * (k + 1)) * (np.sum(r**2) - k * (k + 1) ** 2 / 4)
    assert chi2 == pytest.approx(9.28, abs=0.01)
    f, p = ranks.iman_davenport(chi2, n, k)
    assert f == pytest.approx(3.69, abs=0.01)
    assert stats.f.ppf(0.95, 3, 39) == pytest.approx(2.85, abs=0.01) and p < 0.05


def test_iman_davenport_at_perfect_agreement():
    assert ranks.iman_davenport(10.0, 5, 3) == (math.inf, 0.0)  # chi2 = N (k - 1)


def test_ranks_ties_averaged_and_lower_better():
    v = pd.DataFrame({"A": [90.0, 50.0], "B": [80.0, 50.0], "C": [80.0, 40.0]}, index=["d1", "d2"])
    r = ranks.ranks_within(v)
    assert r.loc["d1"].tolist() == [1.0, 2.5, 2.5] and r.loc["d2"].tolist() == [1.5, 1.5, 3.0]
    assert ranks.ranks_within(v, higher_better=False).loc["d1"].tolist() == [3.0, 1.5, 1.5]


def test_friedman_matches_scipy():
    rng = np.random.default_rng(1)
    v = pd.DataFrame(rng.random((6, 4)), columns=list("ABCD"))
    fr = ranks.friedman(v)
    ref = stats.friedmanchisquare(*(v[c] for c in v))
    assert fr["chi2"] == pytest.approx(ref.statistic) and fr["chi2_p"] == pytest.approx(ref.pvalue)
    assert fr["f_f"] == pytest.approx(5 * ref.statistic / (6 * 3 - ref.statistic))
    assert (fr["df1"], fr["df2"]) == (3, 15)
    assert math.isnan(ranks.friedman(v[["A", "B"]])["chi2"])  # fewer than 3 methods


def test_min_wilcoxon_p():
    assert ranks.min_wilcoxon_p(5) == 0.0625
    stat, p = ranks.wilcoxon_p([5, 4, 3, 2, 1], [0, 0, 0, 0, 0])
    assert (stat, p) == (0.0, 0.0625)


def test_bars_are_maximal_runs_of_non_significant_neighbours():
    order = ["A", "B", "C", "D"]
    sig = {frozenset(("A", "C")), frozenset(("A", "D")), frozenset(("B", "D"))}
    assert ranks.nonsignificant_bars(order, sig) == [["A", "B"], ["B", "C"], ["C", "D"]]
    assert ranks.nonsignificant_bars(order, set()) == [order]
    assert ranks.nonsignificant_bars(order, {frozenset(p) for p in [("A", "B"), ("A", "C"), ("A", "D"),
                                                                   ("B", "C"), ("B", "D"), ("C", "D")]}) == []


def _runs(table: dict[str, dict[str, list[float]]], metric: str = "mAP") -> pd.DataFrame:
    rows = []
    for d, per_method in table.items():
        for m, vals in per_method.items():
            for s, v in enumerate(vals):
                for mode in ("global", "adaptive"):
                    rows.append({"dataset": d, "variant": "clean", "method": m, "seed": s, "mode": mode,
                                 "mAP": v, "micro_f1": v, "macro_f1": v, "rare_f1": v})
    return normalise_runs(pd.DataFrame(rows))


def test_rank_metric_hand_computed_case():
    # three methods on four datasets, two seeds; seed means (fractions -> percent)
    runs = _runs({
        "d1": {"A": [0.50, 0.60], "B": [0.40, 0.40], "C": [0.30, 0.30]},   # A 55, B 40, C 30 -> 1 2 3
        "d2": {"A": [0.70, 0.70], "B": [0.70, 0.70], "C": [0.10, 0.20]},   # A = B 70, C 15 -> 1.5 1.5 3
        "d3": {"A": [0.20, 0.20], "B": [0.30, 0.30], "C": [0.25, 0.25]},   # B, C, A -> 3 1 2
        "d4": {"A": [0.90, 0.80], "B": [0.60, 0.60], "C": [0.50, 0.50]},   # 1 2 3
        "d5": {"A": [0.9, 0.9], "B": [0.9, 0.9]},                          # C not run here
    })
    r = ranks.rank_metric(runs, "mAP", ["d1", "d2", "d3", "d4"], ["A", "B", "C", "D"])
    assert r.values.loc["d1", "A"] == pytest.approx(55.0)
    assert r.average_ranks.to_dict() == pytest.approx({"A": (1 + 1.5 + 3 + 1) / 4, "B": (2 + 1.5 + 1 + 2) / 4,
                                                        "C": (3 + 3 + 2 + 3) / 4})
    assert list(r.average_ranks.index) == ["A", "B", "C"]
    assert r.left_out == [("D", "no run on d1, d2, d3, d4")]
    assert r.n_seeds == {"A": 2, "B": 2, "C": 2}
    ref = stats.friedmanchisquare(*(r.values[m] for m in "ABC"))
    assert r.friedman["chi2"] == pytest.approx(ref.statistic)
    assert len(r.pairs) == 3 and r.pairs["p_holm"].tolist() == pytest.approx(verdict.holm(r.pairs["p"]))
    assert not r.pairs["significant"].any() and r.bars == [["A", "B", "C"]]  # 4 datasets: min p 0.125
    # d5 joins: C has no run there and is left out, with the reason
    r5 = ranks.rank_metric(runs, "mAP", ["d1", "d2", "d3", "d4", "d5"], ["A", "B", "C"],
                           not_run={("d5", "C"): "needs a GPU"})
    assert r5.methods == ["A", "B"] and r5.left_out == [("C", "no run on d5: needs a GPU")]


def test_fewer_than_two_datasets_no_ranking(tmp_path):
    runs = _runs({"d1": {"A": [0.5], "B": [0.4], "C": [0.3]}})
    assert ranks.rank_all(runs) == []
    csv, md = ranks.write([], tmp_path / "ranks", ["d1"])
    assert "No ranking is made" in md.read_text()
    assert pd.read_csv(csv).empty


def test_cli_writes_csv_and_md(tmp_path):
    rows = []
    for i, d in enumerate(["d1", "d2", "d3", "d4", "d5", "d6", "d7"]):
        for m, base in (("A", 0.6), ("B", 0.5), ("C", 0.4)):
            rows.append({"dataset": d, "variant": "clean", "method": m, "seed": 0, "mode": "global",
                         "mAP": base + 0.01 * i, "micro_f1": base, "macro_f1": base, "rare_f1": 0.0})
    pd.DataFrame(rows).to_csv(tmp_path / "all_runs.csv", index=False)
    assert ranks.main(["--runs", str(tmp_path / "all_runs.csv"), "--out", str(tmp_path / "ranks")]) == 0
    df = pd.read_csv(tmp_path / "ranks.csv")
    assert set(df["kind"]) == {"rank", "friedman", "pair"}
    pairs = df[(df["kind"] == "pair") & (df["metric"] == "mAP")]
    # 7 datasets, A > B > C everywhere: each raw p = 2/128, Holm x3, x2, x1
    assert pairs["p"].tolist() == pytest.approx([2 / 128] * 3)
    assert sorted(pairs["p_holm"]) == pytest.approx([3 * 2 / 128] * 3) and pairs["significant"].all()
    md = (tmp_path / "ranks.md").read_text()
    assert "### mAP" in md and "Every method has the same value on d1" in md
    assert ranks.nonsignificant_bars(["A", "B", "C"], {frozenset(p) for p in [("A", "B"), ("A", "C"), ("B", "C")]}) == []
