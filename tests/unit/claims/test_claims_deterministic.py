"""Claims on a deterministic method's row (fitted once, n = 1; ``all_runs.csv`` column
``deterministic``), on runs trained and evaluated as the workflow does on Yeast: its one value is
paired with every run of a seeded row (the test is over that row's runs), and two such rows, or a
value claim on one, get no test on a single run and say why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cdgtmll.claims import compare
from cdgtmll.claims.verdict import NC_FEW
from tests.support.claims import claim_record
from tests.support.once_runs import trained_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from cdgtmll.tables import build

    root = tmp_path_factory.mktemp("once_claims")
    paths = trained_runs(root, {"BR-LogReg": {}, "kNN-15": {}, "RF-300": {"n_estimators": 10}})
    out = root / "tables"
    assert build.main(["--metrics", *map(str, paths), "--methods", "RF-300", "BR-LogReg", "kNN-15",
                       "--out", str(out)]) == 0
    return pd.read_csv(out / "all_runs.csv")


def _claim(**kw) -> dict:
    return claim_record(**{"kind": "beats", "metric": "micro_f1", "method": "RF-300", "other_method": "BR-LogReg",
                           "comparator": ">", **kw})


def _check(claim: dict, runs: pd.DataFrame) -> dict:
    return compare.check_claims(pd.DataFrame([claim]), runs).iloc[0].to_dict()


def _values(runs, method):
    sel = runs[(runs["method"] == method) & (runs["mode"] == "global")].sort_values("seed")
    return 100 * sel["micro_f1"].to_numpy()


@pytest.mark.parametrize("seeded_first", [True, False])
def test_a_seeded_row_is_tested_against_the_one_value_of_a_deterministic_row(runs, seeded_first):
    rf, br = _values(runs, "RF-300"), _values(runs, "BR-LogReg")
    assert len(rf) == 3 and len(br) == 1
    claim = _claim() if seeded_first else _claim(method="BR-LogReg", other_method="RF-300", comparator="<")
    row = _check(claim, runs)
    sign = 1 if seeded_first else -1
    assert row["n_pairs"] == 3 and row["method_n"] == 3 and row["other_n"] == 3
    assert row["reproduced_mean"] == pytest.approx(sign * (rf.mean() - br[0]), abs=1e-9)
    assert row["p"] == pytest.approx(stats.ttest_1samp(rf, br[0]).pvalue, rel=1e-9)
    assert "BR-LogReg is deterministic (its fit does not use the seed; fitted once)" in row["detail"]
    assert "the test is over RF-300's runs" in row["detail"]


def test_two_deterministic_rows_get_no_test(runs):
    row = _check(_claim(method="kNN-15"), runs)
    assert row["status"] == NC_FEW and row["n_pairs"] == 1 and not np.isfinite(row["p"])
    assert "kNN-15 and BR-LogReg are both deterministic (fitted once)" in row["detail"]
    assert "no test on a single run" in row["detail"]


def test_a_value_claim_on_a_deterministic_row_has_no_interval(runs):
    row = _check(_claim(kind="value", method="BR-LogReg", other_method="", comparator="=", paper_value=50.0), runs)
    assert row["status"] == NC_FEW
    assert row["detail"].startswith("BR-LogReg is deterministic (its fit does not use the seed): fitted once")
    assert "no interval and no test on a single run" in row["detail"]
