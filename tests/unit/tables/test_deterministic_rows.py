"""A deterministic method's row (``Method.deterministic``: fitted once, n = 1) in the tables: its
cell is the one run's value without a std, the runs-per-cell note names it, and a footnote says
why it has one run. The runs are trained and evaluated as rules train_once / train and evaluate
do, on Yeast: BR-LogReg with the run spec planning gives it (one seed), RF-300 with three seeds."""

from __future__ import annotations

import csv
import json

import pytest

from tests.support.once_runs import trained_runs


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    from cdgtmll.tables import build

    root = tmp_path_factory.mktemp("once_tables")
    paths = trained_runs(root, {"BR-LogReg": {}, "RF-300": {"n_estimators": 10}})
    out = root / "tables"
    assert build.main(["--metrics", *map(str, paths), "--methods", "RF-300", "BR-LogReg", "--out", str(out)]) == 0
    return root, out


def test_the_row_is_one_run_shown_without_a_std_and_footnoted(tables):
    root, out = tables
    assert sorted(p.name for p in (root / "runs/yeast/clean/BR-LogReg").iterdir()) == ["seed0"]
    rows = {r["method"]: r for r in csv.DictReader(open(out / "table1_standard.csv"))}
    assert rows["BR-LogReg"]["Yeast Rare-F1 n"] == "1" and rows["BR-LogReg"]["Yeast Rare-F1 std"] == ""
    assert rows["RF-300"]["Yeast Rare-F1 n"] == "3" and float(rows["RF-300"]["Yeast Micro-F1 std"]) > 0
    md = (out / "table1_standard.md").read_text()
    line = {seg.split("|")[1].strip(): seg for seg in md.splitlines() if seg.startswith("| ")}
    assert "±" not in line["BR-LogReg"] and "±" in line["RF-300"]
    assert "BR-LogReg: deterministic (its fit does not use the seed): fitted once, n = 1." in md
    assert "RF-300: deterministic" not in md
    assert "Runs per cell (n): 1 for BR-LogReg; 3 for every other row." in md
    long = list(csv.DictReader(open(out / "all_runs.csv")))
    assert {(r["method"], r["deterministic"]) for r in long} == {("BR-LogReg", "True"), ("RF-300", "False")}
    prov = json.loads((root / "runs/yeast/clean/BR-LogReg/seed0/provenance.json").read_text())
    assert prov["config"]["seeds"] == [0] and prov["config"]["deterministic"] is True


def test_metrics_full_says_so_too(tables):
    _, out = tables
    md = (out / "metrics_full.md").read_text()
    assert "BR-LogReg: deterministic (its fit does not use the seed): fitted once, n = 1 per dataset" in md
