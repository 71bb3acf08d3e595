"""The headline `dvc exp show` prints (src/cdgtmll/metrics/headline.py): the proposed method's
mAP and Rare-F1 on the clean split and Rare-F1 on the most severe R-variant, short names."""

from __future__ import annotations

import json

import pytest

from cdgtmll.metrics import headline as hl


def _row(root, dataset, setting, method, **metrics):
    path = root / dataset / setting / f"{method}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mAP": 0.5, "micro_f1": 0.6, "macro_f1": 0.3, "rare_f1": 0.1, "rare_f1_adaptive": 0.2,
                                "n": 3, **metrics}))


def test_one_dataset_gives_short_names_in_table_order(tmp_path):
    rows = tmp_path / "metrics"
    _row(rows, "yeast", "clean", "CD-GTMLL", mAP=0.4042, rare_f1=0.0333)
    _row(rows, "yeast", "clean", "BCE", mAP=0.9)
    _row(rows, "yeast", "R@0.40", "CD-GTMLL", rare_f1=0.05)
    _row(rows, "yeast", "R@0.50", "CD-GTMLL", rare_f1=0.0123)
    _row(rows, "yeast", "N@0.20", "CD-GTMLL", rare_f1=0.9)
    out = tmp_path / "headline.json"
    assert hl.main(["--rows", str(rows), "--out", str(out)]) == 0
    assert out.read_text() == json.dumps({"clean": {"mAP": 0.4042, "rare": 0.0333},
                                          "R": {"rare": 0.0123, "severity": 0.5}}, indent=2) + "\n"
    # the names dvc exp show prints (nested keys joined by "."): none is a per-row file's
    names = {f"{k}.{m}" for k, v in json.loads(out.read_text()).items() for m in v}
    assert names == {"clean.mAP", "clean.rare", "R.rare", "R.severity"}


def test_several_datasets_start_with_the_dataset_and_missing_rows_are_left_out(tmp_path):
    rows = tmp_path / "metrics"
    _row(rows, "yeast", "clean", "CD-GTMLL", mAP=0.4, rare_f1=None)
    _row(rows, "enron", "R@0.50", "CD-GTMLL", rare_f1=0.2)
    _row(rows, "bibtex", "clean", "BCE")
    assert hl.headline(rows) == {"enron": {"R": {"rare": 0.2, "severity": 0.5}},
                                 "yeast": {"clean": {"mAP": 0.4, "rare": None}}}
    assert hl.headline(rows, method="BCE") == {"clean": {"mAP": 0.5, "rare": 0.1}}
    assert hl.headline(tmp_path / "none") == {}


def test_a_bad_row_is_named(tmp_path, capsys):
    rows = tmp_path / "metrics"
    _row(rows, "yeast", "clean", "CD-GTMLL", mAP="high")
    with pytest.raises(hl.HeadlineError, match=r"CD-GTMLL.json: field 'mAP' must be a number or null, got 'high'"):
        hl.headline(rows)
    (rows / "yeast/clean/CD-GTMLL.json").write_text("{")
    assert hl.main(["--rows", str(rows), "--out", str(tmp_path / "h.json")]) == 1
    assert "CD-GTMLL.json: cannot read the metrics row" in capsys.readouterr().err
    assert not (tmp_path / "h.json").exists()
