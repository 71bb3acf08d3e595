"""A ``metrics.json`` carries what it takes to check it: the evaluate job records its settings
and seals the file with a self-hash, so that a value edited by hand is refused by the tables
(named, deleted, the rule that re-makes it said), and the same code can score the predictions
again and name every field that differs (what ``cdgtmll audit`` does)."""

from __future__ import annotations

import json

import pytest

from tests.support.runs import train_seeds
from tests.unit.lineage.test_audit_cell_values import _dataset


@pytest.fixture()
def run(tmp_path):
    """``(metrics.json path, clean data path)`` of one real BR-LogReg run, evaluated by the job's code."""
    from cdgtmll.metrics import evaluate_run

    clean, clean_path = _dataset(tmp_path)
    rundir = train_seeds(clean, clean_path, tmp_path / "runs" / "yeast" / "clean" / "BR-LogReg", "BR-LogReg", [0],
                         {"backbone": "mlp", "epochs": 1})
    assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir), "--seeds", "0",
                              "--threshold", "0.5", "--tail-fraction", "0.2", "--f1-no-positive-labels", "zero"]) == 0
    return rundir / "seed0" / "metrics.json", clean_path


def _forge(path, value=0.991):
    m = json.loads(path.read_text())
    m["global@0.5"]["micro_f1"] = value
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")


def test_evaluate_records_its_settings_the_predictions_sha_and_a_seal(run):
    from cdgtmll.io import sha256_file
    from cdgtmll.lineage.seal import read_sealed_json, seal_problem

    path, _ = run
    m, digest = read_sealed_json(path)
    assert digest == sha256_file(path)
    assert m["settings"] == {"threshold": 0.5, "tail_fraction": 0.2, "tie_seed": 0, "f1_no_positive_labels": "zero"}
    assert m["inputs"]["predictions"]["sha256"] == sha256_file(path.parent / "predictions.npz")
    assert len(m["integrity"]["sha256"]) == 64 and seal_problem(m) is None


def test_a_hand_edited_value_breaks_the_seal_and_is_named_and_deleted(run):
    from cdgtmll.io import CorruptArtifactError
    from cdgtmll.lineage.seal import read_sealed_json

    path, _ = run
    _forge(path)
    with pytest.raises(CorruptArtifactError) as err:
        read_sealed_json(path, remove=True)
    text = str(err.value)
    assert text.startswith(f"corrupt file {path}: its content does not match its self-hash (field 'integrity.sha256' ")
    assert "edited after it was written" in text and "(rule evaluate: python -m cdgtmll.metrics.evaluate_run)" in text
    assert not path.exists()


def test_the_tables_refuse_a_hand_edited_metrics_file(run, tmp_path, capsys):
    from cdgtmll.io import CorruptArtifactError
    from cdgtmll.tables import build

    path, _ = run
    _forge(path)
    with pytest.raises(CorruptArtifactError, match="its content does not match its self-hash"):
        build.main(["--metrics", str(path), "--methods", "BR-LogReg", "--out", str(tmp_path / "tables")])
    assert not path.exists() and not (tmp_path / "tables").exists()


def test_a_seal_removed_with_the_edit_is_still_named(run):
    from cdgtmll.io import CorruptArtifactError
    from cdgtmll.lineage.seal import read_sealed_json

    path, _ = run
    m = json.loads(path.read_text())
    del m["integrity"]
    path.write_text(json.dumps(m))
    with pytest.raises(CorruptArtifactError, match=r"field 'integrity.sha256' \(its self-hash\) is missing"):
        read_sealed_json(path)
    assert read_sealed_json(path, unsealed_ok=True)[0] == m  # files from before the seal: read


def test_reevaluation_equals_the_record_and_names_each_forged_field(run):
    from cdgtmll.metrics.evaluate_run import differences, reevaluate

    path, _ = run
    m = json.loads(path.read_text())
    assert differences(m, reevaluate(m, path)) == []
    true = m["global@0.5"]["micro_f1"]
    m["global@0.5"]["micro_f1"] = 0.991
    m["adaptive"]["rare_f1"] = None
    m["global@0.4"] = {"micro_f1": 1.0}  # a block evaluation does not make
    diffs = differences(m, reevaluate(m, path))
    assert ("global@0.5.micro_f1", 0.991, true) in diffs
    assert any(d[0] == "adaptive.rare_f1" and d[1] is None for d in diffs)
    assert ("global@0.4", {"micro_f1": 1.0}, "(absent)") in diffs and len(diffs) == 3


def test_reevaluation_uses_the_recorded_settings_and_says_what_is_missing(run):
    from cdgtmll.metrics.evaluate_run import differences, reevaluate

    path, _ = run
    m = json.loads(path.read_text())
    other = {**m, "settings": {**m["settings"], "threshold": 0.3}}  # another threshold: another block
    diffs = {d[0]: d for d in differences(other, reevaluate(other, path))}
    assert diffs["global@0.3"][1] == "(absent)" and diffs["global@0.5"][2] == "(absent)"
    del m["settings"]
    with pytest.raises(KeyError, match=rf"{path}: field 'settings' \(threshold, tail_fraction, tie_seed, "
                                       r"f1_no_positive_labels\) is missing"):
        reevaluate(m, path)
