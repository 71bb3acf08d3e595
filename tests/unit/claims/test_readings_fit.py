"""Readings beside the verdict (:mod:`cdgtmll.claims.readings`): which readings of App. E.4
bring the paper's value inside the reproduced 95 % t-interval (computed here with scipy on
fixed numbers), the nested interval of R-variant draws, the tail detail of Rare-F1 claims,
and the two columns in ``claims_check.csv`` written by ``python -m cdgtmll.claims.check``."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from scipy import stats

from cdgtmll.claims import readings as CR
from cdgtmll.metrics.readings import READING_COLUMNS

TAIL = [{"label": 8, "name": "Class9", "f1": 0.0, "n_pos_test": 13, "n_pos_train": 22},
        {"label": 13, "name": "Class14", "f1": 0.2, "n_pos_test": 30, "n_pos_train": 44}]
#: three runs' Micro-F1 readings (fractions), one row per training seed
MICRO = {"e4": (0.639, 0.640, 0.641), "flat_macro": (0.745, 0.746, 0.747),
         "flat_weighted": (0.780, 0.787, 0.794), "hamming": (0.788, 0.790, 0.801),
         "samples": (0.60, 0.61, 0.62)}


def _interval(vals):
    a = 100 * np.asarray(vals)
    half = stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size)
    return a.mean() - half, a.mean() + half


def _runs(variants=("clean",), seeds=(0, 1, 2), method="BCE", tail_f1=(0.0, 0.2)):
    rows = []
    k = 0
    for v in variants:
        for s in seeds:
            row = {"dataset": "yeast", "variant": v, "method": method, "seed": s, "mode": "global",
                   "micro_f1": MICRO["e4"][s % 3], "rare_f1": 0.1}
            row.update({c: np.nan for c in READING_COLUMNS})
            for key, vals in MICRO.items():
                row[f"reading:micro_f1:{key}"] = vals[s % 3] + (0.01 * k if v != "clean" else 0)
            row["reading:rare_f1:e4"] = 0.1
            row["reading:rare_f1:tail_cumulative"] = (0.46, 0.47, 0.48)[s % 3]
            tail = [dict(t, f1=f) for t, f in zip(TAIL, tail_f1)]
            row["tail_labels_f1"] = json.dumps(tail)
            row.update({"rare_f1_bootstrap_lo": 0.02 + 0.01 * s, "rare_f1_bootstrap_hi": 0.2 + 0.01 * s,
                        "rare_f1_bootstrap_B": 1000, "rare_f1_bootstrap_seed": 0})
            rows.append(row)
        k += 1
    return pd.DataFrame(rows)


def _claim(metric="micro_f1", value=78.7, setting="clean", **kw):
    return {"claim_id": f"T1:yeast:{metric}:BCE", "status": "inconsistent", "kind": "value", "dataset": "yeast",
            "setting": setting, "metric": metric, "method": "BCE", "mode": "global", "comparator": "=",
            "paper_value": value, **kw}


def test_readings_that_fit_are_those_whose_interval_holds_the_paper_value():
    res = pd.DataFrame([_claim(value=v) for v in (78.7, 79.0, 64.0, 90.0)])
    out = CR.add_reading_columns(res, _runs())
    fw, ham = _interval(MICRO["flat_weighted"]), _interval(MICRO["hamming"])
    assert fw[0] <= 78.7 <= fw[1] and ham[0] <= 78.7 <= ham[1]  # the numbers are built so
    assert not _interval(MICRO["e4"])[0] <= 78.7 <= _interval(MICRO["e4"])[1]
    assert out["readings_that_fit"].tolist()[0] == "flattened weighted F1; Hamming accuracy"
    assert fw[0] <= 79.0 <= fw[1] and ham[0] <= 79.0 <= ham[1]
    assert out["readings_that_fit"].tolist()[1] == "flattened weighted F1; Hamming accuracy"
    assert out["readings_that_fit"].tolist()[2] == "as written (E.4)"
    assert out["readings_that_fit"].tolist()[3] == "none"
    assert out["status"].tolist() == ["inconsistent"] * 4  # evidence beside the verdict: no status changes


def test_only_value_claims_on_f1_columns_with_runs_get_readings():
    res = pd.DataFrame([_claim(metric="mAP"), _claim(kind="difference"), _claim(comparator=">"),
                        _claim(status="not checked: dataset not run"), _claim(method="ASL")])
    out = CR.add_reading_columns(res, _runs())
    assert out["readings_that_fit"].tolist()[:4] == ["", "", "", ""]
    assert out["readings_that_fit"].tolist()[4] == CR.NOT_RECORDED  # no run of ASL here: nothing recorded
    old = _runs().drop(columns=list(READING_COLUMNS))  # runs evaluated before the readings existed
    assert CR.add_reading_columns(pd.DataFrame([_claim()]), old)["readings_that_fit"].tolist() == [CR.NOT_RECORDED]


def test_r_variant_draws_are_nested_units():
    runs = _runs(variants=("R0.50-s0", "R0.50-s1"), seeds=(0, 1, 2))
    sel = CR.claim_runs(CR.normalise_runs(runs), _claim(setting="R@0.50"))
    assert len(sel) == 6
    got = CR.units(sel, "reading:micro_f1:flat_weighted")
    want = [100 * np.mean(MICRO["flat_weighted"]), 100 * (np.mean(MICRO["flat_weighted"]) + 0.01)]
    np.testing.assert_allclose(sorted(got), want)
    lo, hi = _interval(np.asarray(want) / 100)
    fits = CR.fitting_readings(sel, "micro_f1", (lo + hi) / 2)
    assert "flattened weighted F1" in fits
    one = CR.claim_runs(CR.normalise_runs(_runs(variants=("R0.50-s0",))), _claim(setting="R@0.50"))
    assert len(CR.units(one, "reading:micro_f1:flat_weighted")) == 3  # one draw: the runs are the units


def test_tail_detail_of_rare_f1_claims():
    runs = pd.concat([_runs(seeds=(0,), tail_f1=(0.0, 0.2)), _runs(seeds=(1,), tail_f1=(0.0, 0.4))])
    out = CR.add_reading_columns(pd.DataFrame([_claim("rare_f1", 64.8), _claim("micro_f1", 75.4)]), runs)
    text = out["tail_detail"].tolist()[0]
    assert text.startswith("E.4 tail of 2 label(s), F1 mean over 2 run(s) of BCE: ")
    assert "Class9 F1 0.0 (test positives 13, training positives 22)" in text
    assert "Class14 F1 30.0 (test positives 30, training positives 44)" in text
    assert "[2.5, 20.5]" in text and "B = 1000, seed 0" in text  # means of (2, 3) and (20, 21)
    assert out["tail_detail"].tolist()[1] == ""
    # Rare-F1 64.8: E.4 (10.0) and the cumulative tail (46-48) are far below it
    assert out["readings_that_fit"].tolist()[0] == "none"


def test_check_main_writes_the_two_columns(tmp_path):
    from cdgtmll.claims import check

    runs = _runs()
    runs_path = tmp_path / "all_runs.csv"
    runs.to_csv(runs_path, index=False)
    assert check.main(["--runs", str(runs_path), "--out", str(tmp_path / "claims_check")]) == 0
    res = pd.read_csv(tmp_path / "claims_check.csv", keep_default_na=False).set_index("claim_id")
    assert {"readings_that_fit", "tail_detail"} <= set(res.columns)
    assert res.loc["T1:yeast:micro_f1:BCE", "readings_that_fit"] == "none"  # paper 75.4: no reading here fits
    assert res.loc["T1:yeast:micro_f1:CD-GTMLL", "readings_that_fit"] == ""  # not run
    assert "Class9" in res.loc["T1:yeast:rare_f1:BCE", "tail_detail"]
