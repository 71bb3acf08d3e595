"""Paper claims: the claims table against the LaTeX source, and the checker's arithmetic and statuses."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cdgtmll.claims import check, compare, paper, report, verdict
from tests.support.claims import claim_record
from tests.support.paths import SHARED

TEX = Path(os.environ.get("CDGTMLL_PAPER_TEX", SHARED / "paper" / "cd-gtmll.tex"))
METRICS = compare.RUN_METRICS


@pytest.fixture(scope="module")
def tex() -> Path:
    if not TEX.is_file():
        pytest.skip(f"paper source not found at {TEX}: set CDGTMLL_PAPER_TEX")
    return TEX


@pytest.fixture(scope="module")
def claims() -> pd.DataFrame:
    return paper.read_claims()


def _runs(records: list[dict]) -> pd.DataFrame:
    """An all_runs.csv-shaped table; each record gives dataset, variant, method, seed, mode and metrics."""
    rows = []
    for r in records:
        row = {"dataset": r.get("dataset", "yeast"), "variant": r.get("variant", "clean"), "severity": None,
               "sampling_seed": None, "method": r["method"], "seed": r["seed"], "mode": r.get("mode", "global"),
               "own_thresholds": False, "metrics_path": "x", "metrics_sha256": "0"}
        row.update({m: r.get(m, 0.5) for m in METRICS})
        rows.append(row)
    return pd.DataFrame(rows)


def _claim(**kw) -> dict:
    return claim_record(**kw)


def _check(claim: dict, runs: pd.DataFrame, **kw) -> dict:
    return compare.check_claims(pd.DataFrame([claim]), runs, **kw).iloc[0].to_dict()


# ------------------------------------------------------------------ claims table vs the paper source

def test_table_cells_equal_the_latex_source(tex, claims):
    cells = paper.extract_table_cells(tex)
    by_table = pd.Series([c["table"] for c in cells]).value_counts().to_dict()
    assert by_table == {"tab:main_standard": 15 * 8, "tab:main_rare": 12 * 8, "tab:xmc": 7 * 9}
    expected = paper.table_claims(tex)
    got = claims[claims["claim_id"].str.match(r"T[123]:")]
    key = ["claim_id", "line", "dataset", "setting", "metric", "method", "kind", "mode"]
    exp = expected[key + ["paper_value", "quote"]].sort_values("claim_id").reset_index(drop=True)
    act = got[key + ["paper_value", "quote"]].sort_values("claim_id").reset_index(drop=True)
    assert len(act) == len(exp) == 279
    pd.testing.assert_frame_equal(act[key].astype(str), exp[key].astype(str))
    np.testing.assert_array_equal(act["paper_value"].to_numpy(), exp["paper_value"].to_numpy())
    assert (act["quote"] == exp["quote"]).all()
    # spot checks against the printed tables
    one = {(c["table"], c["method"], c["dataset"], c["setting"], c["metric"]): c for c in cells}
    assert one[("tab:main_standard", "CD-GTMLL", "voc2007", "clean", "mAP")]["value"] == 92.7
    assert one[("tab:main_standard", "MLC-NC", "yeast", "clean", "micro_f1")]["mark"] == "second"
    assert one[("tab:main_rare", "MLC-NC", "voc2007", "R@0.50", "rare_f1")]["value"] == 62.8
    assert one[("tab:xmc", "ETU", "eurlex-4k", "clean", "p@1")]["printed"] == "87.90"  # printed 'EUT'
    assert one[("tab:main_standard", "CD-GTMLL", "mediamill", "clean", "rare_f1")]["line"] == 625


def test_text_claims_quote_their_source_line(tex, claims):
    src = tex.read_text(encoding="utf-8").splitlines()
    text = claims[~claims["claim_id"].str.match(r"T[123]:")]
    assert len(text) > 50
    for r in text.to_dict("records"):
        line = src[int(r["line"]) - 1]
        assert r["quote"] in line, r["claim_id"]
        assert str(r["line"]) in r["location"]
        commented = line.lstrip().startswith("%")
        assert commented == r["in_comment"], r["claim_id"]
        v = r["paper_value"]
        if np.isfinite(v) and "not printed" not in r["notes"]:
            forms = {f"{v:g}", f"{v:.1f}", f"{v / 100:.2f}"}
            assert any(f in r["quote"] for f in forms), (r["claim_id"], r["quote"], forms)
        if r["kind"] == "range":
            assert f"{r['paper_value_hi']:g}" in r["quote"]
    rare43 = text[text["quote"].str.contains(r"+4.3", regex=False)]
    assert len(rare43) == 1 and bool(rare43["in_comment"].iloc[0]) and rare43["metric"].iloc[0] == "rare_f1"
    assert text[text["in_comment"]].shape[0] == 3


def test_claims_table_is_well_formed(claims):
    assert set(claims["kind"]) <= set(verdict.KINDS)
    assert set(claims["mode"]) == {"global"}
    assert claims["paper_value"].notna().sum() == (claims["kind"] != "beats").sum()
    assert (claims.loc[claims["kind"] == "range", "paper_value_hi"].notna()).all()
    assert set(claims.loc[claims["kind"] == "bound", "comparator"]) <= {"<", ">"}
    assert (claims.loc[claims["kind"].isin(["difference", "range", "beats"]), "other_method"] != "").all()
    assert set(claims["dataset"]) == {"voc2007", "coco2014", "yeast", "mediamill", "eurlex-4k", "wiki10-31k",
                                      "amazoncat-13k"}


# ------------------------------------------------------------------ pure arithmetic

def test_percent_conversion():
    np.testing.assert_allclose(verdict.to_percent([0.0, 0.5, 0.7234, 1.0]), [0.0, 50.0, 72.34, 100.0])
    assert np.isnan(verdict.to_percent([np.nan])[0])
    with pytest.raises(ValueError, match="fractions"):
        verdict.to_percent([72.3])  # already percent: refused, not silently scaled again


def test_interval_hand_computation():
    est = verdict.describe([70.0, 72.0, 74.0])
    assert est.n == 3 and est.mean == pytest.approx(72.0) and est.std == pytest.approx(2.0)
    half = 4.302652729911275 * 2.0 / math.sqrt(3)  # t_{0.975,2} = 4.303
    assert half == pytest.approx(4.9683, abs=1e-4)
    assert (est.lo, est.hi) == (pytest.approx(72.0 - half), pytest.approx(72.0 + half))
    lo, hi, h = verdict.t_interval(72.0, 2.0, 3)
    assert h == pytest.approx(4.97, abs=0.005)
    assert all(math.isnan(x) for x in verdict.t_interval(72.0, math.nan, 1))


def test_value_claim_from_fractions_and_containment():
    runs = _runs([{"method": "CD-GTMLL", "seed": s, "rare_f1": v} for s, v in enumerate([0.70, 0.72, 0.74])])
    inside = _check(_claim(paper_value=76.9), runs)
    assert inside["status"] == verdict.CONSISTENT and inside["paper_in_ci"]
    assert inside["n"] == 3
    assert inside["reproduced_mean"] == pytest.approx(72.0) and inside["reproduced_std"] == pytest.approx(2.0)
    assert inside["ci_high"] - inside["reproduced_mean"] == pytest.approx(4.9683, abs=1e-4)
    assert inside["diff_vs_paper"] == pytest.approx(72.0 - 76.9)
    strict = verdict.ClaimSettings(implementation_tolerance=0.0)
    outside = _check(_claim(paper_value=77.0), runs, settings=strict)
    assert outside["status"] == verdict.INCONSISTENT and not outside["paper_in_ci"]
    # the default implementation tolerance (1 point) on top of the interval
    near = _check(_claim(paper_value=77.0), runs)
    assert near["status"] == verdict.CONSISTENT and not near["paper_in_ci"] and near["within_tolerance"]
    assert _check(_claim(paper_value=78.0), runs)["status"] == verdict.INCONSISTENT
    # the adaptive rows are ignored in global mode and used with mode='adaptive'
    both = pd.concat([runs, _runs([{"method": "CD-GTMLL", "seed": s, "mode": "adaptive", "rare_f1": 0.1}
                                   for s in range(3)])])
    assert _check(_claim(paper_value=72.0), both)["reproduced_mean"] == pytest.approx(72.0)
    assert _check(_claim(paper_value=72.0), both, mode="adaptive")["reproduced_mean"] == pytest.approx(10.0)


def test_judge_kinds():
    est = {"n": 3, "mean": 1.5, "lo": 0.5, "hi": 2.5}
    assert verdict.judge("range", "", 1.4, 1.7, est)["status"] == verdict.CONSISTENT
    assert verdict.judge("range", "", 2.6, 3.0, est)["status"] == verdict.INCONSISTENT
    assert verdict.judge("difference", "≈", 2.4, math.nan, est)["status"] == verdict.CONSISTENT
    assert verdict.judge("difference", "≈", 2.6, math.nan, est)["status"] == verdict.INCONSISTENT
    assert verdict.judge("beats", "", math.nan, math.nan, est)["status"] == verdict.CONSISTENT
    assert verdict.judge("beats", "", math.nan, math.nan, est, higher_is_better=False)["status"] == verdict.INCONSISTENT
    b = verdict.judge("bound", "<", 2.3, math.nan, {"n": 3, "mean": 2.0, "lo": 1.0, "hi": 3.0})
    assert b["status"] == verdict.CONSISTENT and b["ci_side"] == "interval straddles"
    b = verdict.judge("bound", "<", 2.3, math.nan, {"n": 3, "mean": 2.5, "lo": 2.4, "hi": 2.6})
    assert b["status"] == verdict.INCONSISTENT and b["ci_side"] == "whole interval violates"
    assert verdict.judge("value", "=", 1.0, math.nan, {"n": 1, "mean": 1.0, "lo": math.nan, "hi": math.nan})["status"] == verdict.NC_FEW


def test_bound_claim_on_rare_f1_drop():
    # clean Rare-F1 per seed 0.80/0.81/0.82; 30% noise 0.79/0.79/0.80 -> drops 1, 2, 2 (pp)
    recs = [{"method": "CD-GTMLL", "seed": s, "rare_f1": v} for s, v in enumerate([0.80, 0.81, 0.82])]
    recs += [{"method": "CD-GTMLL", "seed": s, "variant": "N0.30-s0", "rare_f1": v}
             for s, v in enumerate([0.79, 0.79, 0.80])]
    runs = _runs(recs)
    c = _claim(kind="bound", setting="noise@0.30", metric="rare_f1_drop", paper_value=2.3, comparator="<")
    r = _check(c, runs)
    assert r["status"] == verdict.CONSISTENT and r["reproduced_mean"] == pytest.approx(5 / 3)
    assert r["direction_match"] and r["n"] == 3
    r = _check({**c, "paper_value": 1.5}, runs)
    # the mean (1.67) violates "< 1.5" but the interval straddles it: not shown either way
    assert r["status"] == verdict.UNDECIDED and not r["direction_match"] and r["ci_side"] == "interval straddles"
    strict = verdict.ClaimSettings(implementation_tolerance=0.0)
    assert _check({**c, "paper_value": 0.1}, runs, settings=strict)["status"] == verdict.INCONSISTENT  # all above
    assert _check({**c, "paper_value": 0.1}, runs)["status"] == verdict.UNDECIDED  # within the tolerance of 1
    # the project's own 'N@0.30' spelling is the same setting
    assert _check({**c, "setting": "N@0.30"}, runs)["status"] == verdict.CONSISTENT
    # a noise level that was not run
    assert _check({**c, "setting": "noise@0.20"}, runs)["status"] == verdict.needs("N@0.20 runs on yeast")


# ------------------------------------------------------------------ paired tests

@pytest.fixture()
def r_runs():
    rng = np.random.default_rng(3)
    recs = []
    for method, base in (("CD-GTMLL", 0.62), ("MLC-NC", 0.60), ("BCE", 0.55)):
        for ss in (0, 1, 2):
            for seed in (0, 1, 2):
                if method == "MLC-NC" and (seed, ss) == (2, 2):
                    continue  # an unmatched run: must be dropped from the pairs
                recs.append({"method": method, "seed": seed, "variant": f"R0.50-s{ss}",
                             "rare_f1": base + 0.02 * rng.random()})
    return _runs(recs)


def test_paired_difference_matches_scipy(r_runs):
    c = _claim(kind="range", setting="R@0.50", other_method="MLC-NC", paper_value=1.4, paper_value_hi=1.7)
    r = _check(c, r_runs)
    a = r_runs[r_runs["method"] == "CD-GTMLL"].set_index(["seed", "variant"])["rare_f1"]
    b = r_runs[r_runs["method"] == "MLC-NC"].set_index(["seed", "variant"])["rare_f1"]
    idx = a.index.intersection(b.index)
    assert len(idx) == 8  # the unmatched run is dropped from the pairs
    # nested: per sampling seed the mean over its paired training seeds, then the
    # paired t-test over the 3 sampling seeds
    ma = (100 * a.loc[idx]).groupby(level="variant").mean()
    mb = (100 * b.loc[idx]).groupby(level="variant").mean()
    ref = stats.ttest_rel(ma, mb)
    assert r["n_pairs"] == 3 and "nested" in r["test"]
    assert r["t"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
    d = ma - mb
    assert r["reproduced_mean"] == pytest.approx(d.mean()) and r["reproduced_std"] == pytest.approx(d.std(ddof=1))
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert r["ci_low"] == pytest.approx(d.mean() - half)
    assert r["compared_with"] == "MLC-NC" and r["direction_match"]
    # the means printed beside the test are those of the paired runs (rows may have other seeds: power.seeds)
    assert r["method_mean"] == pytest.approx(100 * a.loc[idx].mean()) and r["method_n"] == 8
    assert r["other_mean"] == pytest.approx(100 * b.loc[idx].mean()) and r["other_n"] == 8
    assert "means over the 8 runs both rows have (CD-GTMLL: 9, MLC-NC: 8)" in r["detail"]
    overlap = r["ci_low"] - 1.0 <= 1.7 and r["ci_high"] + 1.0 >= 1.4  # the default implementation tolerance
    assert r["status"] == (verdict.CONSISTENT if overlap else verdict.INCONSISTENT)
    flat = stats.ttest_rel(100 * a.loc[idx], 100 * b.loc[idx])  # the pure function on unnested pairs
    assert verdict.paired_test(100 * a.loc[idx], 100 * b.loc[idx])["t"] == pytest.approx(flat.statistic)


def test_beats_picks_strongest_listed_comparator(r_runs):
    c = _claim(kind="beats", setting="R@0.50", other_method="BCE|MLC-NC|ASL")
    r = _check(c, r_runs)
    assert r["compared_with"] == "MLC-NC" and r["coverage"] == "2/3" and "ASL" in r["detail"]
    assert r["status"] == (verdict.CONSISTENT if r["reproduced_mean"] > 0 else verdict.INCONSISTENT)
    star = _check({**c, "other_method": "*"}, r_runs)
    assert star["compared_with"] == "MLC-NC" and star["coverage"] == "2 run"
    worse = _check({**c, "method": "BCE", "other_method": "MLC-NC"}, r_runs)
    assert worse["status"] == verdict.INCONSISTENT and worse["direction_match"] is False and worse["t"] < 0


def test_too_few_pairs():
    runs = _runs([{"method": "CD-GTMLL", "seed": 0}, {"method": "MLC-NC", "seed": 0},
                  {"method": "MLC-NC", "seed": 1}])
    r = _check(_claim(kind="beats", other_method="MLC-NC"), runs)
    assert r["status"] == verdict.NC_FEW and r["n_pairs"] == 1
    assert _check(_claim(paper_value=50.0), runs)["status"] == verdict.NC_FEW


# ------------------------------------------------------------------ not-checked statuses

def test_not_checked_statuses():
    runs = _runs([{"method": "CD-GTMLL", "seed": s} for s in range(3)])
    assert _check(_claim(dataset="coco2014", paper_value=49.2), runs)["status"] == verdict.NC_DATASET
    r = _check(_claim(method="MLC-NC", paper_value=69.0), runs)
    assert r["status"] == verdict.NC_METHOD
    assert _check(_claim(kind="beats", other_method="MLC-NC|ASL"), runs)["status"] == verdict.NC_METHOD
    assert _check(_claim(setting="R@0.30", paper_value=1.0), runs)["status"] == verdict.needs("R@0.30 runs on yeast")
    pr = _check(_claim(metric="pr_precision@recall=0.70", setting="R@*", paper_value=70.0), runs)
    assert pr["status"].startswith("not checked: needs Fig. pr_tail")
    sp = _check(_claim(metric="spec_share@player=2,epoch=60", setting="R@*", paper_value=36.0), runs)
    assert sp["status"].startswith("not checked: needs player-specialisation")


def test_packaged_claims_on_a_yeast_only_run_never_pass_other_datasets(claims):
    runs = _runs([{"method": m, "seed": s, "variant": v, "rare_f1": 0.3 + 0.01 * s}
                  for m in ("BCE", "CD-GTMLL") for s in range(3) for v in ("clean", "R0.40-s0")])
    res = compare.check_claims(claims, runs)
    other = res[res["dataset"] != "yeast"]
    # not run there: not checked -- or a paper inconsistency, which needs no run (PE's mAP/P@k vs BCE's)
    assert (other["status"].str.startswith("not checked") | (other["status"] == "paper inconsistency")).all()
    assert set(other.loc[other["status"] == "paper inconsistency", "method"]) == {"PE"}
    assert (res.loc[res["dataset"] != "yeast", "status"] != verdict.CONSISTENT).all()
    yeast = res[(res["dataset"] == "yeast") & res["claim_id"].str.startswith("T1:")]
    assert set(yeast.loc[yeast["method"].isin(["BCE", "CD-GTMLL"]), "status"]) <= {verdict.CONSISTENT, verdict.INCONSISTENT}
    assert set(yeast.loc[~yeast["method"].isin(["BCE", "CD-GTMLL"]), "status"]) == {verdict.NC_METHOD}


# ------------------------------------------------------------------ names, figure inputs, CLI

def test_names_and_settings():
    assert compare.canonical_method("CD-GTMLL@alpha=0.30") == compare.canonical_method("CD-GTMLL@alpha=0.3")
    assert compare.canonical_method("CD-GTMLL@n_players=3") == "CD-GTMLL@n_players=3"
    assert compare.canonical_method("EUT") == "ETU"
    assert compare.variant_setting("R0.40-s1") == ("R@0.40", 1)
    assert compare.variant_setting("N0.10-s0") == ("N@0.10", 0)
    assert compare.variant_setting("clean") == ("clean", -1)
    assert compare.canonical_setting("N@0.3") == "N@0.30" and compare.setting_matches("R@*", "R@0.50")


def test_pr_figure_claims(tmp_path):
    rows = []
    for m, p in (("CD-GTMLL", 0.70), ("MLC-NC", 0.65), ("BCE", 0.56)):
        for r in np.round(np.linspace(0, 1, 11), 2):
            rows.append({"method": m, "recall": r, "precision_mean": p, "precision_std": 0.02, "n_runs": 9})
    path = tmp_path / "pr_tail.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    (tmp_path / "pr_tail.sources.json").write_text(json.dumps(
        {"runs": {"BCE": [{"path": "results/runs/voc2007/R0.50-s0/BCE/seed0/predictions.npz", "sha256": "0"}]}}))
    pr = compare.load_pr(path)
    assert pr.datasets == {"voc2007"} and pr.settings == {"R@0.50"}
    runs = _runs([{"method": "BCE", "seed": 0}])
    base = _claim(dataset="voc2007", setting="R@*", metric="pr_precision@recall=0.70", comparator="≈")
    v = _check({**base, "paper_value": 70.0}, runs, pr=pr)
    assert v["status"] == verdict.CONSISTENT and v["reproduced_mean"] == pytest.approx(70.0)
    d = _check({**base, "kind": "difference", "other_method": "MLC-NC", "paper_value": 5.0}, runs, pr=pr)
    ref = stats.ttest_ind_from_stats(70.0, 2.0, 9, 65.0, 2.0, 9, equal_var=False)
    assert d["reproduced_mean"] == pytest.approx(5.0) and d["t"] == pytest.approx(ref.statistic)
    assert d["status"] == verdict.CONSISTENT
    nd = _check({**base, "kind": "beats", "metric": "pr_precision@all_recalls", "other_method": "*"}, runs, pr=pr)
    assert nd["status"] == verdict.CONSISTENT
    # a method without a curve (the figure's n_runs 0 row, reason in no_curve) is no comparator:
    # the claim against it is not checked, never passed against an empty curve
    rows = [{**r, "no_curve": ""} for r in rows if r["method"] != "MLC-NC"]
    rows.append({"method": "MLC-NC", "recall": None, "precision_mean": None, "precision_std": None, "n_runs": 0,
                 "no_curve": "all tail-label scores tied: no ranking in 9 of 9 runs"})
    pd.DataFrame(rows).to_csv(path, index=False)
    pr = compare.load_pr(path)
    assert "MLC-NC" not in set(pr.data["method"])
    nc = _check({**base, "kind": "beats", "metric": "pr_precision@all_recalls", "other_method": "MLC-NC"}, runs, pr=pr)
    assert nc["status"] == verdict.NC_METHOD
    assert _check({**base, "dataset": "coco2014", "paper_value": 70.0}, runs, pr=pr)["status"] == verdict.NC_DATASET


def test_spec_figure_claims(tmp_path):
    rows = [{"dataset": "voc2007", "epoch": e, "player": p, "share": s, "seed": seed}
            for seed, jit in ((0, 0.0), (1, 0.01), (2, -0.01))
            for e in (0, 15, 60) for p, s in ((1, 0.34), (2, 0.36 + jit if e == 60 else 0.33), (3, 0.28))]
    path = tmp_path / "spec.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    spec = compare.load_spec(path)
    runs = _runs([{"method": "BCE", "seed": 0}])
    c = _claim(dataset="voc2007", setting="R@*", metric="spec_share@player=2,epoch=60", paper_value=36.0,
               comparator="≈")
    r = _check(c, runs, spec=spec)
    assert r["status"] == verdict.CONSISTENT and r["reproduced_mean"] == pytest.approx(36.0) and r["n"] == 3
    b = _check({**c, "kind": "bound", "metric": "spec_share@player=3,epoch=60", "paper_value": 30.0,
                "comparator": "<"}, runs, spec=spec)
    assert b["status"] == verdict.CONSISTENT and b["reproduced_mean"] == pytest.approx(28.0)
    bal = _check({**c, "metric": "spec_share@player=2,epoch=0-15", "paper_value": 33.0}, runs, spec=spec)
    assert bal["reproduced_mean"] == pytest.approx(33.0) and bal["status"] == verdict.CONSISTENT
    assert _check({**c, "metric": "spec_share@player=2,epoch=80"}, runs, spec=spec)["status"].startswith(
        "not checked: needs player 2 at epoch")


def test_spec_claims_from_study_figures_summary(tmp_path):
    # the long form written by `cdgtmll.figures.studies.build specialization`
    rows = [{"dataset": "voc2007", "variant": "R0.50-s0", "method": "CD-GTMLL", "epoch": e, "player": p,
             "share_mean": mu, "share_std": 0.02, "n_seeds": 3, "n_labels": 20.0, "labels": "all"}
            for e in (0, 10, 60) for p, mu in ((1, 0.33), (2, 0.36 if e == 60 else 0.34), (3, 0.31))]
    path = tmp_path / "spec_ratio.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    spec = compare.load_spec(path)
    runs = _runs([{"method": "BCE", "seed": 0}])
    c = _claim(dataset="voc2007", setting="R@*", metric="spec_share@player=2,epoch=0-15", paper_value=33.0,
               comparator="≈")
    r = _check(c, runs, spec=spec)
    half = stats.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)
    assert r["reproduced_mean"] == pytest.approx(34.0) and r["ci_high"] == pytest.approx(34.0 + half)
    assert r["status"] == verdict.CONSISTENT
    b = _check({**c, "kind": "bound", "metric": "spec_share@player=3,epoch=60", "paper_value": 30.0,
                "comparator": "<"}, runs, spec=spec)
    # the mean 31.0 violates "< 30" but its interval [26.0, 36.0] straddles 30: undecided
    assert b["status"] == verdict.UNDECIDED and b["reproduced_mean"] == pytest.approx(31.0)
    assert _check({**c, "setting": "R@0.30"}, runs, spec=spec)["status"] == verdict.needs(
        "R@0.30 rows in spec_ratio.csv")


def test_cli_writes_csv_and_md(tmp_path, r_runs):
    runs_path = tmp_path / "all_runs.csv"
    r_runs.to_csv(runs_path, index=False)
    out = tmp_path / "claims" / "claims_check"
    assert check.main(["--runs", str(runs_path), "--out", str(out)]) == 0
    res = pd.read_csv(f"{out}.csv")
    assert len(res) == len(paper.read_claims())
    md = Path(f"{out}.md").read_text(encoding="utf-8")
    assert md.startswith("# Paper claims vs. reproduced runs")
    n_ds = int((res["status"] == verdict.NC_DATASET).sum())
    assert f"| {verdict.NC_DATASET} | {n_ds} |" in md
    assert f"| **total** | {len(res)} |" in md
    assert not list(out.parent.glob(".*tmp*"))
    assert "(in LaTeX comment)" in md


# ------------------------------------------------------------------ paper inconsistencies

PAPER = "paper inconsistency"  # the status string of PAPER in the result csv

def test_paper_inconsistency_where_the_paper_separates_pe_from_bce(claims):
    """PE's mAP and P@k are BCE's by construction (PE only thresholds BCE's probabilities).
    Where the paper prints them different, the claim is a paper inconsistency -- its own
    status, never 'inconsistent' (a failure to reproduce) -- whether or not the dataset was run."""
    runs = _runs([{"method": m, "seed": s, "dataset": "voc2007", "mAP": 0.80 + 0.01 * s}
                  for m in ("BCE", "PE") for s in range(3)])
    res = compare.check_claims(claims, runs).set_index("claim_id")
    pe = res.loc["T1:voc2007:mAP:PE"]
    assert pe["status"] == PAPER and pe["compared_with"] == "BCE"
    assert "prints 90.50 for PE and 88.90 for BCE (T1:voc2007:mAP:BCE)" in pe["detail"]
    assert "reproduction check alone: inconsistent" in pe["detail"]  # 90.5 is outside the reproduced CI
    assert pe["reproduced_mean"] == pytest.approx(81.0)  # the reproduced numbers are still reported
    assert res.loc["T1:voc2007:mAP:BCE", "status"] == verdict.INCONSISTENT  # BCE itself is judged as usual
    assert res.loc["T1:voc2007:rare_f1:PE", "status"] != PAPER  # F1: thresholds differ
    # XMC table, not run: PE's P@k printed different from BCE's on all 9 cells
    pk = res[res.index.str.match(r"T3:.*:p@\d:PE$")]
    assert len(pk) == 9 and (pk["status"] == PAPER).all()
    assert pk["detail"].str.contains("reproduction check alone: not checked: dataset not run").all()
    # ETU (default utility macro-recall) ranks rows by eta/prior: nothing equal, judged as usual
    etu = res[res.index.str.match(r"T3:.*:ETU$")]
    assert len(etu) == 9 and (etu["status"] == verdict.NC_DATASET).all()
    assert (res["status"] == PAPER).sum() == 11
    md = report.render_markdown(res.reset_index(), "runs.csv", "claims.csv", len(runs), ["voc2007"], [])
    assert f"| {PAPER} | 11 |" in md
    assert verdict.PAPER_INCONSISTENT == PAPER and PAPER in verdict.STATUS_ORDER


def test_paper_inconsistency_follows_the_runs_construction():
    """ETU's P@k equals BCE's only with utility 'precision' (recorded per run in all_runs.csv);
    equal printed values are not flagged."""
    claims = pd.DataFrame([
        _claim(claim_id="T3:eurlex-4k:p@1:BCE", dataset="eurlex-4k", metric="p@1", method="BCE", paper_value=85.6),
        _claim(claim_id="T3:eurlex-4k:p@1:ETU", dataset="eurlex-4k", metric="p@1", method="ETU", paper_value=87.9),
        _claim(claim_id="T3:eurlex-4k:p@3:BCE", dataset="eurlex-4k", metric="p@3", method="BCE", paper_value=72.3),
        _claim(claim_id="T3:eurlex-4k:p@3:PE", dataset="eurlex-4k", metric="p@3", method="PE", paper_value=72.3),
    ])
    recs = [{"method": m, "seed": s, "dataset": "eurlex-4k"} for m in ("BCE", "ETU", "PE") for s in range(3)]
    runs = _runs(recs)
    runs["equal_by_construction"] = ["BCE:p@1,p@3,p@5" if m == "ETU" else ("BCE:mAP,p@1,p@3,p@5" if m == "PE" else "")
                                     for m in runs["method"]]
    res = compare.check_claims(claims, runs).set_index("claim_id")
    assert res.loc["T3:eurlex-4k:p@1:ETU", "status"] == PAPER
    assert res.loc["T3:eurlex-4k:p@3:PE", "status"] == verdict.INCONSISTENT  # printed equal to BCE's: a normal claim
    runs["equal_by_construction"] = ["BCE:mAP,p@1,p@3,p@5" if m == "PE" else "" for m in runs["method"]]
    res = compare.check_claims(claims, runs).set_index("claim_id")
    assert res.loc["T3:eurlex-4k:p@1:ETU", "status"] == verdict.INCONSISTENT  # macro-recall ETU: a reproduction result


# ------------------------------------------------------------------ HTML page

def test_cli_writes_the_same_check_as_one_html_page(tmp_path, r_runs):
    """claims_check.html (what Snakemake's report shows) holds the Markdown's summary and every
    claim row, with the status cell coloured by status; T3 claims included; byte-identical on a rerun."""
    from html.parser import HTMLParser

    runs_path = tmp_path / "all_runs.csv"
    r_runs.to_csv(runs_path, index=False)
    out = tmp_path / "claims" / "claims_check"
    assert check.main(["--runs", str(runs_path), "--out", str(out)]) == 0
    first = Path(f"{out}.html").read_bytes()
    assert check.main(["--runs", str(runs_path), "--out", str(out)]) == 0
    assert Path(f"{out}.html").read_bytes() == first

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.row, self.cell = [], None, None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.row = []
            elif tag in ("td", "th") and self.row is not None:
                self.cell = [dict(attrs).get("class", ""), ""]

        def handle_data(self, data):
            if self.cell is not None:
                self.cell[1] += data

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.row.append(tuple(self.cell))
                self.cell = None
            elif tag == "tr" and self.row is not None:
                self.tables[-1].append(self.row)
                self.row = None

    p = Rows()
    p.feed(first.decode("utf-8"))
    res = pd.read_csv(f"{out}.csv")
    summary = {r[0][1].strip(): r[1][1].strip() for r in p.tables[0][1:]}
    counts = res["status"].value_counts()
    assert summary == {**{s: str(int(n)) for s, n in counts.items()}, "total": str(len(res))}
    claim_rows = [r for t in p.tables[2:] for r in t[1:]]  # after the summary and per-kind tables
    assert len(claim_rows) == len(res)
    ids = set(res["claim_id"])
    md_rows = [line for line in Path(f"{out}.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| ") and line[2:].split(" | ")[0].split(" (in LaTeX")[0] in ids]
    assert len(md_rows) == len(res)
    by_id = {r[0][1].strip(): r for r in claim_rows}
    for line in md_rows:  # the same cells as the Markdown, in the same order
        # a Markdown cell as it reads (cdgtmll.tables.render.md_cell escapes `*`, `|`, `<` ...)
        cells = [re.sub(r"\\(.)", r"\1", c.strip()) for c in line.strip().strip("|").split(" | ")]
        assert [c[1].strip() for c in by_id[cells[0]]] == cells, cells[0]
    status_class = {r[0][1].strip(): r[-1][0] for r in claim_rows}
    for cid, status in zip(res["claim_id"], res["status"]):
        cid = cid + (" (in LaTeX comment)" if cid not in status_class else "")
        want = {verdict.CONSISTENT: "status-consistent", verdict.INCONSISTENT: "status-inconsistent",
                verdict.PAPER_INCONSISTENT: "status-paper",
                verdict.ABOVE_PANEL: "status-above", verdict.ABOVE_ANY: "status-above",
                verdict.UNDECIDED: "status-undecided"}.get(status, "status-notchecked")
        assert want in status_class[cid].split(), (cid, status)
    assert any(c.startswith("T3:") for c in status_class)
    html = first.decode("utf-8")
    assert "<h2>Table 3 (tab:xmc)</h2>" in html and "<script" not in html
