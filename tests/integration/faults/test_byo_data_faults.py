"""Fault catalogue, bring-your-own data: data that would pass ``prepare`` silently and fail
later (or not at all) stops at ``prepare`` with the file, line, row and column, through the command line the ``prepare_dataset`` rule runs:

* ``?`` / ``NaN`` / ``Infinity`` features (once per method with scikit-learn's message, after
  a full training when only the test split had them);
* a single-label dataset (``Supported target type is: multilabel-indicator. Got 'binary'``);
* a 1-row test split (mAP 1.0 and Rare-F1 1.0, no warning);

on small files in the exact MULAN format (ARFF per split + label XML), generated here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cdgtmll.data.prepare import main as prepare_main
from cdgtmll.data.processed import ProcessedData
from tests.support.workflow import workflow_only
from tests.unit.data.test_validation import HEADER_LINES, LABELS, write_arff, write_xml

pytestmark = pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")

MINE = {"format": "mulan-arff", "train": "mine-train.arff", "test": "mine-test.arff", "xml": "mine.xml"}


def _mirror(root: Path, n_train=200, n_test=50, bad_train=None, bad_test=None, labels=LABELS) -> Path:
    mirror = root / "mirror"
    write_arff(mirror / "mine" / "mine-train.arff", n_train, 0, bad_train, labels)
    write_arff(mirror / "mine" / "mine-test.arff", n_test, 1, bad_test, labels)
    write_xml(mirror / "mine" / "mine.xml", labels)
    return mirror


def _cli(tmp_path: Path, mirror: Path, cfg: dict, capsys, *extra: str) -> tuple[int, str, str]:
    out = tmp_path / "results" / "data" / "mine" / "processed.npz"
    rc = prepare_main(
        [
            "--dataset",
            "mine",
            "--raw-dir",
            str(tmp_path / "raw"),
            "--out",
            str(out),
            "--mirror",
            str(mirror),
            "--no-download",
            "--dataset-config",
            json.dumps(cfg),
            *extra,
        ]
    )
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _nothing_written(tmp_path: Path) -> bool:
    folder = tmp_path / "results" / "data" / "mine"
    return not folder.exists() or list(folder.iterdir()) == []


@pytest.fixture(autouse=True)
def _no_env_mirror(no_env_mirror):
    return None


def test_nan_only_in_the_test_split_stops_prepare_not_the_runs(tmp_path, capsys):
    mirror = _mirror(tmp_path, bad_test={(6, 2): "NaN"})
    rc, out, err = _cli(tmp_path, mirror, MINE, capsys)
    raw = tmp_path / "raw" / "mine" / "mine-test.arff"
    assert rc == 2, out + err
    assert err.startswith("error: dataset 'mine': 1 missing or non-finite feature value(s): 1 in ")
    assert f"{raw} line {HEADER_LINES + 7} (data row 7), attribute 'f2': non-finite value 'NaN'" in err
    assert f"{raw} is a copy of mirror {mirror / 'mine' / 'mine-test.arff'}" in err
    assert _nothing_written(tmp_path)


def test_question_marks_and_infinity_in_training_rows_then_imputed_when_configured(tmp_path, capsys):
    mirror = _mirror(tmp_path, bad_train={(11, 3): "?", (40, 0): "Infinity"})
    rc, out, err = _cli(tmp_path, mirror, MINE, capsys)
    raw = tmp_path / "raw" / "mine" / "mine-train.arff"
    assert rc == 2
    assert f"{raw} line {HEADER_LINES + 12} (data row 12), attribute 'f3': missing value '?'" in err
    assert f"{raw} line {HEADER_LINES + 41} (data row 41), attribute 'f0': non-finite value 'Infinity'" in err
    assert "2 in " in err and "(1 missing/NaN, 1 infinite)" in err
    assert "set data.custom.mine.impute to 'mean' or 'zero'" in err
    assert _nothing_written(tmp_path)

    rc, out, err = _cli(tmp_path, mirror, dict(MINE, impute="mean"), capsys)
    assert rc == 0, out + err
    data = ProcessedData.load(tmp_path / "results/data/mine/processed.npz")
    rec = data.meta["imputation"]
    assert rec["rule"] == "mean" and rec["count"] == 2 and sorted(rec["fill_values"]) == ["f0", "f3"]
    assert np.isfinite(data.X).all() and data.X[11, 3] == np.float32(rec["fill_values"]["f3"])
    assert "[prepare] mine: imputed 2 feature value(s), rule 'mean'" in out
    assert f'"f0": {rec["fill_values"]["f0"]}' in out
    assert "[prepare] WARNING mine: 2 missing or non-finite feature value(s) in 2 column(s) imputed by prepare" in out


def test_single_label_dataset_stops_prepare(tmp_path, capsys):
    mirror = _mirror(tmp_path, labels=("only",))
    rc, out, err = _cli(tmp_path, mirror, MINE, capsys)
    assert rc == 2
    assert (
        f"error: dataset 'mine': {tmp_path / 'raw' / 'mine' / 'mine.xml'} gives 1 label ('only'); "
        "multi-label learning needs at least 2" in err
    )
    assert f"is a copy of mirror {mirror / 'mine' / 'mine.xml'}" in err
    assert _nothing_written(tmp_path)


def test_one_row_test_split_stops_prepare_unless_the_minimum_is_lowered(tmp_path, capsys):
    mirror = _mirror(tmp_path, n_test=1)
    rc, out, err = _cli(tmp_path, mirror, MINE, capsys)
    assert rc == 2
    assert (
        f"error: dataset 'mine': split 'test' has 1 row ({tmp_path / 'raw' / 'mine' / 'mine-test.arff'}): "
        "fewer than data.min_split_rows = 10"
    ) in err
    assert _nothing_written(tmp_path)
    rc, out, err = _cli(tmp_path, mirror, MINE, capsys, "--min-split-rows", "1")
    assert rc == 0, out + err
    assert "train 180 / val 20 / test 1" in out


def test_a_failed_save_leaves_no_partial_file(tmp_path, capsys, monkeypatch):
    """processed.npz is written to a temporary file and renamed: a save that fails halfway
    (here: the disk fills after the first bytes) leaves neither a partial target nor the
    temporary file, and a previous complete file stays as it was."""
    mirror = _mirror(tmp_path)
    rc, out, err = _cli(tmp_path, mirror, MINE, capsys)
    assert rc == 0, out + err
    target = tmp_path / "results/data/mine/processed.npz"
    before = target.read_bytes()

    def half_written(fh, **arrays):
        fh.write(b"PK\x03\x04 partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", half_written)
    with pytest.raises(OSError):
        _cli(tmp_path, mirror, dict(MINE, display_name="changed"), capsys)
    assert target.read_bytes() == before
    assert [p.name for p in target.parent.iterdir()] == ["processed.npz"]


@pytest.mark.slow
def test_a_mulan_dataset_with_string_and_nominal_features_runs_to_its_table_row_by_config_alone(tmp_path):
    """Nominal and string features through the workflow: real MULAN files with a protein-ID string
    attribute and ``{YES,NO}`` nominal features, which a numeric-only reader stops at
    (``attribute 'protein' has non-numeric value 'O00060'``). Here the format-exact fixture of ``tests/unit/data/test_nominal_features.py``
    is added by config alone (the ID dropped by ``features``, no code), and Snakemake runs it
    from ``check`` to its row of the configured Table 1, with the encoding in the processed file."""
    import subprocess
    import sys

    import yaml

    from tests.unit.data.test_nominal_features import cfg as prot_cfg
    from tests.unit.data.test_nominal_features import make as make_prot

    mirror = make_prot(tmp_path)
    repo, env = workflow_only(tmp_path / "repo", mirror)
    config = {
        "name": "byo-nominal",
        "data": {"mirror": None, "allow_download": False,
                 "custom": {"prot": prot_cfg(display_name="Proteins", features={"protein": "drop"})}},
        "experiments": {"datasets": ["prot"], "methods": ["BR-LogReg"], "seeds": [0], "r_variants": False},
        "r_variants": {"severities": {}},
        "training": {"default": {"epochs": 1}},
        "methods": {"BR-LogReg": {"C": 1.0}},
    }
    (repo / "config" / "byo.yaml").write_text(yaml.safe_dump(config))
    target = "results/tables/table1_configured.md"
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "config/byo.yaml",
                        "--", target], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = ProcessedData.load(repo / "results/data/prot/processed.npz")
    assert data.X.shape == (160, 13)  # 4 x {YES,NO} + grade {1,2,3} one-hot, x0, x1; the ID dropped
    assert data.meta["feature_encoding"]["counts"] == {"drop": 1, "onehot": 5, "numeric": 2}
    table = (repo / target).read_text()
    assert "Proteins" in table
    row = next(line for line in table.splitlines() if line.startswith("| BR-LogReg"))
    assert "n.r." not in row and any(ch.isdigit() for ch in row), row
