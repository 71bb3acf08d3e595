"""Evaluation reads only the predictions its training wrote: an edited predictions.npz that
still loads (different scores) is caught by the sha256 its provenance records, named, and
deleted so that the next run trains it again."""

import numpy as np

from tests.support.runs import train_seeds
from tests.unit.lineage.test_audit_cell_values import _dataset


def test_edited_predictions_are_refused_and_removed(tmp_path, capsys):
    from cdgtmll.metrics import evaluate_run

    clean, clean_path = _dataset(tmp_path)
    rundir = train_seeds(clean, clean_path, tmp_path / "runs" / "yeast" / "clean" / "BR-LogReg", "BR-LogReg", [0],
                         {"backbone": "mlp", "epochs": 1})
    args = ["--clean", str(clean_path), "--rundir", str(rundir), "--seeds", "0"]
    assert evaluate_run.main(args) == 0
    pred = rundir / "seed0" / "predictions.npz"
    with np.load(pred) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["test"] = 1.0 - arrays["test"]  # a valid file with other scores
    np.savez(pred, **arrays)
    capsys.readouterr()
    assert evaluate_run.main(args) == 1
    err = capsys.readouterr().err
    assert f"corrupt file {pred}: its sha256 " in err and "its training recorded (provenance.json outputs.predictions)" in err
    assert "rule train" in err and not pred.exists()
