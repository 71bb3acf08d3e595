"""The statuses ``above every model run here`` and ``above any predictor`` (two
statuses): a claim whose paper value lies above the ceiling on the test split (the runs'
``oracle_*`` columns of all_runs.csv) gets one of them, with the ceiling and its panel beside it
in the CSV and on the page; the page sets Micro-F1 claims beside our Micro-F1 and Hamming
accuracy as a measured comparison only."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from cdgtmll.claims import check, compare, report, verdict

METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")


def _runs(methods=("BCE", "CD-GTMLL"), seeds=(0, 1, 2)) -> pd.DataFrame:
    """Yeast clean, both modes. Rare-F1 ~0.10 (oracle 0.15, 0.17, 0.18 by seed), Micro-F1 ~0.62
    (oracle 0.66-0.668), Hamming accuracy 0.79; perfect-ranking P@5 0.60."""
    rows = []
    for method in methods:
        for seed in seeds:
            for mode in ("global", "adaptive"):
                row = {"dataset": "yeast", "variant": "clean", "method": method, "seed": seed, "mode": mode,
                       "own_thresholds": False, "metrics_path": "x", "metrics_sha256": "0",
                       **{m: 0.5 for m in METRICS}}
                row.update({"rare_f1": 0.10 + 0.001 * seed, "micro_f1": 0.62 + 0.002 * seed,
                            "oracle_rare_f1": (0.15, 0.17, 0.18)[seed], "oracle_micro_f1": 0.66 + 0.004 * seed,
                            "oracle_macro_f1": 0.55, "oracle_mAP": 1.0, "oracle_p@1": 1.0, "oracle_p@3": 0.95,
                            "oracle_p@5": 0.60, "hamming_accuracy": 0.79 + 0.001 * seed})
                rows.append(row)
    return pd.DataFrame(rows)


def _claim(cid, metric="rare_f1", value=64.8, method="BCE", kind="value", comparator="=", other=""):
    return {"claim_id": cid, "location": "", "line": 1, "quote": "", "kind": kind, "dataset": "yeast",
            "setting": "clean", "metric": metric, "method": method, "other_method": other, "paper_value": value,
            "paper_value_hi": math.nan, "comparator": comparator, "mode": "global", "in_comment": False, "notes": ""}


def _check(claims: list[dict], runs=None) -> pd.DataFrame:
    return compare.check_claims(pd.DataFrame(claims), _runs() if runs is None else runs).set_index("claim_id")


def test_above_bound_rule():
    assert verdict.above_bound("value", "=", 64.8, 18.0)
    assert verdict.above_bound("bound", ">", 50.0, 40.0)
    assert not verdict.above_bound("bound", "<", 50.0, 40.0)  # "below 50" is reachable
    assert not verdict.above_bound("difference", "=", 5.0, 1.0)
    assert not verdict.above_bound("value", "=", 18.04, 18.0)  # within the rounding of one printed decimal
    assert verdict.above_bound("value", "=", 18.06, 18.0)
    assert not verdict.above_bound("value", "=", 64.8, math.nan)
    assert not verdict.above_bound("value", math.nan, math.nan, 10.0)
    assert verdict.ABOVE_PANEL in verdict.STATUS_ORDER and verdict.ABOVE_ANY in verdict.STATUS_ORDER


def test_f1_claim_above_the_best_thresholding_of_every_run_is_above_the_panel():
    res = _check([_claim("rare"), _claim("reachable", value=17.0), _claim("micro", metric="micro_f1", value=75.4),
                  _claim("near", metric="micro_f1", value=66.8)])
    rare = res.loc["rare"]
    assert rare["status"] == verdict.ABOVE_PANEL
    assert rare["ceiling"] == pytest.approx(18.0)  # max over every run of the dataset and setting, in percent
    assert rare["ceiling_panel"] == "BCE, CD-GTMLL"
    assert "over 6 run(s) of 2 model(s) run here" in rare["ceiling_basis"]
    assert "reproduction check alone: inconsistent" in rare["detail"]
    assert res.loc["reachable", "status"] == verdict.INCONSISTENT  # below the bound: an ordinary failure
    assert res.loc["micro", "status"] == verdict.ABOVE_PANEL and res.loc["micro", "ceiling"] == pytest.approx(66.8)
    assert res.loc["near", "status"] == verdict.INCONSISTENT  # at the bound: reachable by some thresholding


def test_score_ceilings_belong_to_the_panel_ranking_bounds_to_the_data():
    runs = _runs(methods=("BCE",))
    res = _check([_claim("f1-unrun", method="MLC-NC"), _claim("p5-unrun", metric="p@5", value=70.0, method="MLC-NC"),
                  _claim("p5-ok", metric="p@5", value=55.0, method="MLC-NC"),
                  _claim("map", metric="mAP", value=99.0, method="BCE"),
                  _claim("diff", metric="rare_f1", value=5.0, kind="difference", other="BCE", method="CD-GTMLL")], runs)
    # an F1 ceiling is a property of the scores that were run: the panel of every model run on the
    # dataset, so a method not run is above every model run here (none of them reaches it)
    f1 = res.loc["f1-unrun"]
    assert f1["status"] == verdict.ABOVE_PANEL and f1["ceiling"] == pytest.approx(18.0) and f1["ceiling_panel"] == "BCE"
    assert "not checked: method not run" in f1["detail"]
    # a perfect ranking bounds P@k for any predictor, also one not run
    assert res.loc["p5-unrun", "status"] == verdict.ABOVE_ANY and res.loc["p5-unrun", "ceiling"] == pytest.approx(60)
    assert res.loc["p5-unrun", "ceiling_panel"] == "any predictor"
    assert "not checked: method not run" in res.loc["p5-unrun", "detail"]
    assert res.loc["p5-ok", "status"] == verdict.NC_METHOD and res.loc["p5-ok", "ceiling"] == pytest.approx(60)
    assert res.loc["map", "status"] == verdict.INCONSISTENT and res.loc["map", "ceiling"] == pytest.approx(100)
    assert res.loc["diff", "status"] not in (verdict.ABOVE_ANY, verdict.ABOVE_PANEL)
    assert math.isnan(res.loc["diff", "ceiling"])


def test_consistent_claims_keep_their_status_and_old_runs_have_no_bound():
    runs = _runs()
    runs.loc[runs["seed"] == 2, "rare_f1"] = 0.30  # wide interval around a mean of ~0.17
    res = _check([_claim("wide", value=19.0)], runs)
    assert res.loc["wide", "status"] == verdict.CONSISTENT and res.loc["wide", "ceiling"] == pytest.approx(18.0)
    old = _runs().drop(columns=[c for c in _runs().columns if c.startswith("oracle_")] + ["hamming_accuracy"])
    res = _check([_claim("rare")], old)
    assert res.loc["rare", "status"] == verdict.INCONSISTENT and math.isnan(res.loc["rare", "ceiling"])
    assert compare.hamming_comparison(res.reset_index(), old).empty


def test_page_explains_the_status_prints_the_bound_and_the_hamming_comparison(tmp_path):
    runs = tmp_path / "all_runs.csv"
    _runs().to_csv(runs, index=False)
    claims = tmp_path / "claims.csv"
    rows = [_claim("T1:yeast:rare_f1:BCE"), _claim("T1:yeast:micro_f1:BCE", metric="micro_f1", value=75.4),
            _claim("T1:yeast:micro_f1:CD-GTMLL", metric="micro_f1", value=80.3, method="CD-GTMLL"),
            _claim("T1:yeast:micro_f1:ASL", metric="micro_f1", value=78.6, method="ASL")]
    pd.DataFrame(rows).assign(in_comment="false").to_csv(claims, index=False)
    out = tmp_path / "claims_check"
    assert check.main(["--runs", str(runs), "--out", str(out), "--claims", str(claims)]) == 0
    csv = pd.read_csv(f"{out}.csv").set_index("claim_id")
    assert {"status", "ceiling", "ceiling_panel", "ceiling_basis", "equivalence", "p_holm"} <= set(csv.columns)
    assert csv.loc["T1:yeast:rare_f1:BCE", "status"] == verdict.ABOVE_PANEL
    assert csv.loc["T1:yeast:rare_f1:BCE", "ceiling"] == pytest.approx(18.0)
    md = (tmp_path / "claims_check.md").read_text()
    how = md.split("## How this check was made", 1)[1].split("## Summary", 1)[0]
    assert f"`{verdict.ABOVE_PANEL}`" in how and "thresholds chosen on the test set" in how
    assert f"`{verdict.ABOVE_ANY}`" in how
    assert "perfect ranking" in how
    # the Hamming comparison: paper value, our Micro-F1, our Hamming accuracy, for the claims run
    assert report.HAMMING_TITLE in how and "does not assume the paper used Hamming accuracy" in how
    line = next(ln for ln in how.splitlines() if ln.startswith("| T1:yeast:micro_f1:BCE |"))
    assert line.split(" | ")[2:5] == ["75.40", "62.20", "79.10"]
    assert "T1:yeast:micro_f1:ASL" not in how  # not run: nothing measured to set beside it
    # the ceiling beside the paper value in the claim tables, the status naming the panel
    header = next(ln for ln in md.splitlines() if ln.startswith("| claim | what | paper |"))
    assert header.split(" | ")[3] == "ceiling"
    rare = next(ln for ln in md.splitlines() if ln.startswith("| T1:yeast:rare_f1:BCE |"))
    assert rare.split(" | ")[2:4] == ["64.80", "18.00"] and f"{verdict.ABOVE_PANEL} (BCE, CD-GTMLL)" in rare
    assert "No model here reaches: 4" in md.split("## How this check was made", 1)[0]  # ASL's too: none run reaches
    assert "unattainable" not in md.lower()
    html = (tmp_path / "claims_check.html").read_text()
    assert "status-above" in html and "claims_hamming" in html and "unattainable" not in html.lower()
