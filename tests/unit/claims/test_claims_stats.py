"""The statistics of the claims check on fixed numbers -- TOST, the detectable
effect and Holm's correction against statsmodels' computations (statsmodels 0.15.0, run once
on these numbers; it is not a dependency of the package), each status and the equivalence
verdict on hand-built runs tables, the nested R-variant interval and the panel ceiling."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cdgtmll.claims import compare, report, verdict

A = np.array([64.2, 64.9, 65.3])
B = np.array([63.8, 64.1, 65.0])


def test_tost_matches_statsmodels_ttost_paired():
    pt = verdict.paired_test(A, B)
    # statsmodels.stats.weightstats.ttost_paired(A, B, -1, 1)[0]
    assert verdict.tost(pt["mean"], pt["se"], pt["dof"], 1.0) == pytest.approx(0.04100745397842402, rel=1e-10)
    a2, b2 = np.array([50.1, 50.3, 50.2, 50.4, 50.0]), np.array([50.0, 50.2, 50.3, 50.1, 50.1])
    pt2 = verdict.paired_test(a2, b2)
    assert verdict.tost(pt2["mean"], pt2["se"], pt2["dof"], 1.0) == pytest.approx(0.0001155727947397497, rel=1e-10)
    # the two one-sided t-tests by hand: the larger one-sided p
    d = A - B
    se = d.std(ddof=1) / math.sqrt(3)
    lo = stats.t.sf((d.mean() + 1) / se, 2)
    hi = stats.t.cdf((d.mean() - 1) / se, 2)
    assert verdict.tost(d.mean(), se, 2, 1.0) == pytest.approx(max(lo, hi))
    assert verdict.tost(0.5, 0.0, 2, 1.0) == 0.0 and verdict.tost(1.5, 0.0, 2, 1.0) == 1.0


def test_detectable_effect_matches_statsmodels_power():
    pt = verdict.paired_test(A, B)
    # statsmodels.stats.power.TTestPower().solve_power(nobs=3, alpha=0.05, power=0.8) = 3.264043552819638
    assert verdict.detectable_effect(pt["se"], pt["dof"]) == pytest.approx(3.264043552819638 * pt["std"], rel=1e-7)
    assert verdict.detectable_effect(pt["se"], pt["dof"]) == pytest.approx(0.8635847509244693, rel=1e-7)
    # at that effect the two-sided test has power 0.8 (noncentral t)
    nc = verdict.detectable_effect(1.0, 2)
    crit = stats.t.ppf(0.975, 2)
    assert stats.nct.sf(crit, 2, nc) + stats.nct.cdf(-crit, 2, nc) == pytest.approx(0.8, abs=1e-8)
    assert math.isnan(verdict.detectable_effect(math.nan, 2))


def test_detectable_effect_with_two_pairs():
    """2 pairs (1 degree of freedom): scipy's noncentral t returns NaN on the way (nc = 8); the
    power is then integrated directly, and the effect is where a Monte Carlo of the t-test has
    power 0.8."""
    c = stats.t.ppf(0.975, 1)
    assert math.isnan(stats.nct.sf(c, 1, 8.0) + stats.nct.cdf(-c, 1, 8.0))  # why the fallback exists
    x = verdict.detectable_effect(1.0, 1)
    assert math.isfinite(x)
    rng = np.random.default_rng(0)
    z, v = rng.standard_normal(400_000), rng.chisquare(1, 400_000)
    t = (z + x) / np.sqrt(v)
    assert np.mean(np.abs(t) > stats.t.ppf(0.975, 1)) == pytest.approx(0.8, abs=0.005)


def test_holm_matches_statsmodels_multipletests():
    # statsmodels.stats.multitest.multipletests([0.01, 0.04, 0.03, 0.2], method='holm')[1]
    out = verdict.holm([0.01, 0.04, 0.03, 0.2, math.nan])
    assert out[:4] == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert math.isnan(out[4])
    assert verdict.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_comparison_verdicts():
    s = verdict.ClaimSettings()
    assert verdict.comparison_verdict(2.0, 1.0, 3.0, 0.9, 1.0, 3, s) == "better"
    assert verdict.comparison_verdict(2.0, 1.0, 3.0, 0.9, 1.0, 3, s, higher_is_better=False) == "worse"
    assert verdict.comparison_verdict(-2.0, -3.0, -1.0, 0.9, 1.0, 3, s) == "worse"
    assert verdict.comparison_verdict(0.1, -0.2, 0.4, 0.01, 0.5, 5, s) == "equivalent within ±1"
    assert verdict.comparison_verdict(0.3, -1.5, 2.1, 0.4, 1.94, 3, s) == "undecided (3 seeds detect >= 1.9 points)"
    assert verdict.comparison_verdict(0.3, math.nan, math.nan, 0.4, 1.9, 1, s) == ""
    assert verdict.ClaimSettings.from_config({"equivalence_margin": 2}).equivalence_margin == 2.0
    # the flags rule claims_check writes from the config's claims: section reach the settings
    import argparse

    ap = argparse.ArgumentParser()
    verdict.ClaimSettings.add_arguments(ap)
    got = verdict.ClaimSettings.from_args(ap.parse_args(["--alpha", "0.01", "--equivalence-margin", "0.5"]))
    assert got == verdict.ClaimSettings(equivalence_margin=0.5, alpha=0.01)


def test_judge_tolerance_beats_and_bounds():
    est = {"n": 3, "mean": 50.0, "lo": 49.0, "hi": 51.0}
    j = verdict.judge("value", "=", 51.5, math.nan, est, tolerance=1.0)
    assert j["status"] == verdict.CONSISTENT and j["within_tolerance"] and not j["paper_in_ci"]
    assert verdict.judge("value", "=", 52.5, math.nan, est, tolerance=1.0)["status"] == verdict.INCONSISTENT
    assert verdict.judge("value", "=", 51.5, math.nan, est)["status"] == verdict.INCONSISTENT  # no tolerance
    # beats: the interval, not the sign
    assert verdict.judge("beats", "", math.nan, math.nan, {"n": 3, "mean": 0.5, "lo": 0.1, "hi": 0.9})["status"] \
        == verdict.CONSISTENT
    assert verdict.judge("beats", "", math.nan, math.nan, {"n": 3, "mean": 0.5, "lo": -0.4, "hi": 1.4})["status"] \
        == verdict.UNDECIDED
    assert verdict.judge("beats", "", math.nan, math.nan, {"n": 3, "mean": -0.5, "lo": -0.9, "hi": -0.1})["status"] \
        == verdict.INCONSISTENT
    # bound "< 2.3": mean 2.5, interval [2.4, 2.6]: violated, but within the tolerance -> undecided
    b = {"n": 3, "mean": 2.5, "lo": 2.4, "hi": 2.6}
    assert verdict.judge("bound", "<", 2.3, math.nan, b, tolerance=1.0)["status"] == verdict.UNDECIDED
    assert verdict.judge("bound", "<", 2.3, math.nan, b, tolerance=0.05)["status"] == verdict.INCONSISTENT


METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")


def _runs(rows: list[tuple]) -> pd.DataFrame:
    """(method, variant, seed, micro_f1, oracle_rare_f1) -> an all_runs.csv frame (global mode)."""
    out = []
    for method, variant, seed, micro, orare in rows:
        r = {"dataset": "yeast", "variant": variant, "method": method, "seed": seed, "mode": "global",
             **{m: 0.5 for m in METRICS}, "micro_f1": micro, "rare_f1": 0.1,
             "oracle_rare_f1": orare, "oracle_micro_f1": 0.7, "oracle_macro_f1": 0.6, "oracle_mAP": 1.0,
             "oracle_p@1": 1.0, "oracle_p@3": 0.9, "oracle_p@5": 0.6}
        out.append(r)
    return pd.DataFrame(out)


def _claim(cid, kind="value", metric="micro_f1", value=64.0, method="CD-GTMLL", other="", setting="clean",
           comparator="="):
    return {"claim_id": cid, "location": "", "line": 1, "quote": "", "kind": kind, "dataset": "yeast",
            "setting": setting, "metric": metric, "method": method, "other_method": other, "paper_value": value,
            "paper_value_hi": math.nan, "comparator": comparator, "mode": "global", "in_comment": False, "notes": ""}


PANEL = _runs([(m, "clean", s, base + 0.002 * s, orare) for m, base, orare in
               (("BCE", 0.640, 0.153), ("CD-GTMLL", 0.645, 0.151), ("BR-LogReg", 0.62, 0.171),
                ("kNN-15", 0.63, 0.103), ("RF-300", 0.62, 0.133)) for s in (0, 1, 2)])


def test_each_status_and_the_panel_ceiling():
    claims = pd.DataFrame([
        _claim("T1:ok", value=64.7),                                   # consistent
        _claim("T1:tol", value=66.0),                                  # outside the CI, within ±1: consistent
        _claim("T1:bad", value=68.0),                                  # inconsistent
        _claim("T1:rare", metric="rare_f1", value=20.0),               # above every model run here
        _claim("T1:p5", metric="p@5", value=70.0),                     # above any predictor
        _claim("T1:beats", kind="beats", other="BCE"),                 # interval > 0
        _claim("T1:beats-und", kind="beats", other="BCE", method="BCE", metric="mAP"),  # diff 0 exactly
    ])
    res = compare.check_claims(claims, PANEL).set_index("claim_id")
    assert res.loc["T1:ok", "status"] == verdict.CONSISTENT and res.loc["T1:ok", "paper_in_ci"]
    assert res.loc["T1:tol", "status"] == verdict.CONSISTENT and res.loc["T1:tol", "within_tolerance"]
    assert res.loc["T1:bad", "status"] == verdict.INCONSISTENT
    rare = res.loc["T1:rare"]
    assert rare["status"] == verdict.ABOVE_PANEL
    assert rare["ceiling"] == pytest.approx(17.1)  # BR-LogReg's, the best of the panel
    assert rare["ceiling_panel"] == "BCE, BR-LogReg, CD-GTMLL, RF-300, kNN-15"
    assert "best: BR-LogReg 17.10" in rare["ceiling_basis"]
    assert res.loc["T1:p5", "status"] == verdict.ABOVE_ANY and res.loc["T1:p5", "ceiling"] == pytest.approx(60)
    assert res.loc["T1:p5", "ceiling_panel"] == "any predictor"
    b = res.loc["T1:beats"]
    assert b["status"] == verdict.CONSISTENT and b["equivalence"] == "better"
    # a difference of exactly 0 with std 0: equivalent within the margin, and `beats` not shown
    assert res.loc["T1:beats-und", "status"] == verdict.INCONSISTENT
    assert res.loc["T1:beats-und", "equivalence"] == "equivalent within ±1"
    # Holm within the family, beside the raw p
    fam = res[res["family"] == res.loc["T1:ok", "family"]]
    assert fam["p_holm"].dropna().to_numpy() == pytest.approx(verdict.holm(fam["p"].dropna().to_numpy()))
    assert (fam["p_holm"].dropna() >= fam["p"].dropna() - 1e-12).all()
    # the value claim's raw p is the one-sample t-test of the paper's value
    vals = 100 * PANEL[PANEL["method"] == "CD-GTMLL"]["micro_f1"].to_numpy()
    assert res.loc["T1:bad", "p"] == pytest.approx(stats.ttest_1samp(vals, 68.0).pvalue)


def test_undecided_comparison_prints_the_detectable_effect():
    runs = PANEL.copy()
    noisy = {0: 0.630, 1: 0.652, 2: 0.645}
    for s, v in noisy.items():
        runs.loc[(runs["method"] == "CD-GTMLL") & (runs["seed"] == s), "micro_f1"] = v
    res = compare.check_claims(pd.DataFrame([_claim("S5:b", kind="beats", other="BCE")]), runs).iloc[0]
    assert res["status"] == verdict.UNDECIDED
    d = 100 * (np.array(list(noisy.values())) - np.array([0.640, 0.642, 0.644]))
    x = verdict.detectable_effect(d.std(ddof=1) / math.sqrt(3), 2)
    assert res["detectable"] == pytest.approx(x)
    assert res["equivalence"] == f"undecided (3 seeds detect >= {x:.1f} points)"


def test_r_variant_interval_is_nested_over_sampling_seeds():
    rows = []
    for skey, shift in ((0, 0.0), (1, 0.02), (2, -0.01)):
        for seed in (0, 1, 2):
            rows.append(("CD-GTMLL", f"R0.50-s{skey}", seed, 0.60 + shift + 0.001 * seed, 0.15))
    runs = _runs(rows)
    r = compare.check_claims(pd.DataFrame([_claim("T2:x", setting="R@0.50", value=60.0)]), runs).iloc[0]
    means = 100 * np.array([0.601, 0.621, 0.591])  # per sampling seed, the mean over training seeds
    assert r["n"] == 3 and r["reproduced_mean"] == pytest.approx(means.mean())
    assert r["reproduced_std"] == pytest.approx(means.std(ddof=1))
    assert "nested" in r["test"] and "3 sampling seeds' means" in r["test"]


def test_page_renders_the_new_columns(tmp_path):
    claims = pd.DataFrame([_claim("T1:rare", metric="rare_f1", value=20.0), _claim("T1:beats", kind="beats", other="BCE")])
    res = compare.check_claims(claims, PANEL)
    res["readings_that_fit"] = ["flattened weighted, Hamming accuracy", ""]
    res["tail_detail"] = ["label 13: F1 0.0 (13 test positives)", ""]
    md = report.render_markdown(res, "all_runs.csv", "claims.csv", len(PANEL), ["yeast"], [])
    verdict_block = md.split("## How this check was made", 1)[0]
    assert "No model here reaches: 1 (above every model run here, the panel: BCE, BR-LogReg, CD-GTMLL, RF-300, " \
           "kNN-15" in verdict_block
    assert "T1:rare: flattened weighted, Hamming accuracy" in verdict_block
    head = next(ln for ln in md.splitlines() if ln.startswith("| claim | what | paper |"))
    assert head.split(" | ")[3] == "ceiling" and "readings that fit" in head and "tail detail" in head
    assert "equivalence" in head and "p (Holm)" in head
    how = md.split("## How this check was made", 1)[1]
    assert "implementation tolerance of ±1 point" in how and "equivalent within ±1" in how
    assert "unattainable" not in md.lower()
    html = report.render_html(res, "all_runs.csv", "claims.csv", len(PANEL), ["yeast"], [])
    assert "status-above" in html and "unattainable" not in html.lower()
