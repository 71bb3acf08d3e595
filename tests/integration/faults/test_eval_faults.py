"""Fault catalogue: a label with no training positives is reported, not hidden.

A Yeast copy with one label's training positives removed runs through ``cdgtmll.train``,
``cdgtmll.metrics.evaluate_run`` and the tables: the run log and the evaluation log warn, ``provenance.json``
and ``metrics.json`` record the label and the rule (counted), and the table footnote says so.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.mirror import yeast_arrays
from tests.support.specs import clean_spec

# the catalogue's UserWarnings (unverified files, labels without positives) are expected
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_label_without_training_positives_is_reported(tmp_path, capsys):
    from cdgtmll import train as run
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run as evaluate
    from cdgtmll.tables import collect, footnotes

    X, Y = yeast_arrays(900)
    Y = Y.copy()
    names = [f"Class{k + 1}" for k in range(14)]
    splits = {"train": np.arange(0, 500), "val": np.arange(500, 700), "test": np.arange(700, 900)}
    zeroed = 3
    Y[splits["train"], zeroed] = 0  # Class4: no positive among the training rows
    assert Y[splits["test"], zeroed].sum() > 0  # still present in the test split
    data = ProcessedData("yeast-zeroed", X, Y, names, splits, {})
    clean = tmp_path / "processed.npz"
    data.save(clean)
    spec = clean_spec("yeast-zeroed", "BCE", training={"backbone": "mlp", "epochs": 2, "batch_size": 64, "hidden_dim": 32})
    rundir = tmp_path / "runs" / "yeast-zeroed" / "clean" / "BCE"
    tail = tail_labels(Y[splits["train"]])
    run.run_seed(data, tail, spec, 0, rundir / "seed0", {"clean": clean})
    out = capsys.readouterr().out
    assert "WARNING" in out and "1 label(s) have no positive in the training split: Class4" in out

    prov = json.loads((rundir / "seed0" / "provenance.json").read_text())
    assert prov["labels_without_train_positives"] == {"count": 1, "labels": [zeroed], "names": ["Class4"]}

    assert evaluate.main(["--clean", str(clean), "--rundir", str(rundir), "--seeds", "0"]) == 0
    assert "1 label(s) without training positives (Class4" in capsys.readouterr().out
    m = json.loads((rundir / "seed0" / "metrics.json").read_text())
    rec = m["labels_without_train_positives"]
    assert rec["names"] == ["Class4"] and rec["rule"] == "counted" == evaluate.UNTRAINED_RULE
    assert rec["in_tail"] == int(zeroed in set(tail.tolist()))
    # "counted": the label is in Macro-F1 (it has test positives), so the macro mean covers all 14 labels
    assert m["global@0.5"]["n_labels_in_macro_f1"] == 14

    df = collect.collect([rundir / "seed0" / "metrics.json"])
    assert set(df["untrained_labels"]) == {"Class4"}
    summary = collect.summarise(df)
    table = {"columns": [("yeast-zeroed", "Yeast-zeroed", "clean", "macro_f1", "Macro-F1")]}
    notes = footnotes._untrained_notes(table, summary, "global")
    assert len(notes) == 1 and "yeast-zeroed clean: Class4" in notes[0] and "counted in every metric" in notes[0]
