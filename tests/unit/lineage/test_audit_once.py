"""``cdgtmll audit`` of a deterministic method's cell (fitted once, n = 1): the one run is
traced and equals the table's CSV, and the audit says the single training seed is by design.
The runs are trained and evaluated as the workflow does on Yeast."""

from __future__ import annotations

from tests.support.once_runs import trained_runs


def test_a_cell_of_one_deterministic_run_is_complete_and_says_why(tmp_path, monkeypatch):
    from cdgtmll.lineage import audit
    from cdgtmll.tables import build

    monkeypatch.chdir(tmp_path)
    paths = trained_runs(tmp_path, {"BR-LogReg": {}, "RF-300": {"n_estimators": 10}})
    out = tmp_path / "tables"
    assert build.main(["--metrics", *map(str, paths), "--methods", "RF-300", "BR-LogReg", "--out", str(out)]) == 0
    rep = audit.audit(out / "table1_standard.md", ("BR-LogReg", "Yeast Micro-F1"))
    text = "\n".join(rep.lines)
    assert rep.checked >= 1 and not rep.problems, rep.problems
    assert "cell     BR-LogReg | Yeast Micro-F1: 1 run(s)" in text and "(n=1)" in text
    assert "ok       equals table1_standard.csv" in text
    assert "BR-LogReg: deterministic (its fit does not use the seed): fitted once, one training seed by design" in text
    rf = "\n".join(audit.audit(out / "table1_standard.md", ("RF-300", "Yeast Micro-F1")).lines)
    assert "(n=3)" in rf and "deterministic" not in rf
