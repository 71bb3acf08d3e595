"""prepare's checks on bring-your-own data, on small files in the exact
MULAN format (ARFF per split + label XML, written here) and on the real Enron mirror files:

* missing (``?``) / non-finite (``NaN``, ``Infinity``) features: named by file, line, data
  row and attribute, first 5 + total, nothing written; or imputed by ``impute`` (mean / zero)
  with fill values fitted on the training (fit) rows only, recorded in meta;
* fewer than 2 labels: an error naming the label file and the count;
* a split below ``min_split_rows``: an error naming the split and its size;
* labels constant in the training split: a warning, ``meta['constant_train_labels']``,
  :func:`cdgtmll.data.processed.dataset_warnings`, and the tables' footnote.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cdgtmll.data import acquire, splits
from cdgtmll.data.mulan import arff_data_lines
from cdgtmll.data.prepare import prepare
from cdgtmll.data.processed import ProcessedData, dataset_warnings
from cdgtmll.data.registry import REGISTRY, spec_from_config
from tests.support.mirror import mirror_file

pytestmark = pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")

LABELS = ("l1", "l2", "l3")
HEADER_LINES = 2 + 4 + len(LABELS) + 2  # @relation, blank, 4 features, labels, blank, @data


def write_arff(path: Path, n: int, seed: int, bad: dict | None = None, labels=LABELS, y=None) -> Path:
    """A dense MULAN ARFF: features f0..f3 (numeric), then ``{0,1}`` labels; ``bad`` maps
    ``(row, feature)`` to the token written there (``'?'``, ``'NaN'``, ...); ``y(i)`` the label row."""
    rng = np.random.default_rng(seed)
    lines = [f"@relation 'mine: -C -{len(labels)}'", ""]
    lines += [f"@attribute f{j} numeric" for j in range(4)]
    lines += [f"@attribute {lab} {{0,1}}" for lab in labels]
    lines += ["", "@data"]
    for i in range(n):
        vals = [f"{v:.4f}" for v in rng.normal(size=4)]
        for (r, c), tok in (bad or {}).items():
            if r == i:
                vals[c] = tok
        if y is None:
            yy = (rng.random(len(labels)) < 0.4).astype(int)
            yy[i % len(labels)] = 1
        else:
            yy = y(i)
        lines.append(",".join(vals) + "," + ",".join(map(str, yy)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def write_xml(path: Path, labels=LABELS) -> Path:
    body = "".join(f'<label name="{lab}"></label>\n' for lab in labels)
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">\n{body}</labels>\n')
    return path


def cfg(**kw) -> dict:
    return {"format": "mulan-arff", "train": "train.arff", "test": "test.arff", "xml": "mine.xml", **kw}


def make(tmp_path: Path, n_train=200, n_test=50, bad_train=None, bad_test=None, labels=LABELS, y=None) -> Path:
    mirror = tmp_path / "mirror"
    write_arff(mirror / "mine" / "train.arff", n_train, 0, bad_train, labels, y)
    write_arff(mirror / "mine" / "test.arff", n_test, 1, bad_test, labels, y)
    write_xml(mirror / "mine" / "mine.xml", labels)
    return mirror


def run(tmp_path: Path, mirror: Path, config: dict, **kw):
    lines: list[str] = []
    data = prepare(
        "mine",
        tmp_path / "raw",
        tmp_path / "out" / "processed.npz",
        mirror=mirror,
        allow_download=False,
        dataset_config=config,
        log=lines.append,
        **kw,
    )
    return data, "\n".join(lines)


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)


# --------------------------------------------------------------------------- features
def test_data_lines_are_counted_as_liac_arff_counts_rows(tmp_path):
    p = tmp_path / "c.arff"
    p.write_text(
        "% comment\n@relation r\n\n@attribute a numeric\n@attribute b {0,1}\n@DATA\n"
        "% a comment among the rows\n\n1.0,0\n  \n2.0,1\n%x\n3.0,?\n"
    )
    assert arff_data_lines(p, [0, 1, 2]) == {0: (9, "1.0,0"), 1: (11, "2.0,1"), 2: (13, "3.0,?")}


def test_missing_and_non_finite_features_are_named_and_nothing_is_written(tmp_path):
    bad_train = {(11, 3): "?", (20, 1): "NaN"}
    mirror = make(tmp_path, bad_train=bad_train, bad_test={(3, 0): "Infinity", (4, 2): "-inf"})
    with pytest.raises(ValueError) as e:
        run(tmp_path, mirror, cfg())
    msg = str(e.value)
    raw = tmp_path / "raw" / "mine"
    assert "dataset 'mine': 4 missing or non-finite feature value(s)" in msg
    assert f"2 in {raw / 'train.arff'} (2 missing/NaN, 0 infinite)" in msg
    assert f"2 in {raw / 'test.arff'} (0 missing/NaN, 2 infinite)" in msg
    first = HEADER_LINES + 1  # line of data row 1
    assert f"{raw / 'train.arff'} line {first + 11} (data row 12), attribute 'f3': missing value '?'" in msg
    assert f"{raw / 'train.arff'} line {first + 20} (data row 21), attribute 'f1': non-finite value 'NaN'" in msg
    assert f"{raw / 'test.arff'} line {first + 3} (data row 4), attribute 'f0': non-finite value 'Infinity'" in msg
    assert f"{raw / 'test.arff'} line {first + 4} (data row 5), attribute 'f2': non-finite value '-inf'" in msg
    assert "set data.custom.mine.impute to 'mean' or 'zero'" in msg
    # the raw copy's source is named too, and the line number is the source's line
    assert f"{raw / 'train.arff'} is a copy of mirror {mirror / 'mine' / 'train.arff'}" in msg
    lines = (mirror / "mine" / "train.arff").read_text().splitlines()
    assert lines[first + 11 - 1].split(",")[3] == "?"
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == []  # no processed.npz, no temporary file


def test_first_five_per_file_and_the_total(tmp_path):
    bad = {(r, r % 4): "?" for r in range(2, 16)}  # 14 in the training file
    mirror = make(tmp_path, bad_train=bad)
    with pytest.raises(ValueError) as e:
        run(tmp_path, mirror, cfg())
    msg = str(e.value)
    assert "14 missing or non-finite feature value(s): 14 in" in msg and "first 5 per file" in msg
    assert msg.count("missing value '?'") == 5
    assert f"line {HEADER_LINES + 1 + 6} (data row 7), attribute 'f2'" in msg  # the 5th
    assert "(data row 8)" not in msg


def test_sparse_arff_missing_value_is_named(tmp_path):
    mirror = tmp_path / "mirror"
    d = mirror / "mine"
    d.mkdir(parents=True)
    head = "@relation sp\n\n" + "".join(f"@attribute f{j} numeric\n" for j in range(4))
    head += "".join(f"@attribute {lab} {{0,1}}\n" for lab in LABELS) + "\n@data\n"
    rows = [f"{{{i % 4} 1.5,{4 + i % 3} 1,{4 + (i + 1) % 3} 1}}" for i in range(150)]
    rows[30] = "{0 2.0,2 ?,4 1,5 1}"
    (d / "train.arff").write_text(head + "\n".join(rows) + "\n")
    (d / "test.arff").write_text(head + "\n".join(rows[:40]).replace("?", "0.5") + "\n")
    write_xml(d / "mine.xml")
    with pytest.raises(ValueError, match=r"train\.arff line 42 \(data row 31\), attribute 'f2': missing value '\?'"):
        run(tmp_path, mirror, cfg())


def test_impute_mean_is_fitted_on_the_training_rows_only_and_recorded(tmp_path):
    mirror = make(tmp_path, bad_train={(11, 3): "?", (20, 1): "NaN"}, bad_test={(3, 3): "Infinity"})
    data, log = run(tmp_path, mirror, cfg(impute="mean"))
    saved = ProcessedData.load(tmp_path / "out" / "processed.npz")
    assert np.isfinite(saved.X).all()
    rec = saved.meta["imputation"]
    assert rec["rule"] == "mean" and rec["count"] == 3 and rec["fitted_on"] == "train split (fit rows)"
    assert set(rec["fill_values"]) == {"f1", "f3"}
    # the fill value is the mean of the fit rows' finite values: not of val rows, not of test rows
    from cdgtmll.data.mulan import read_mulan_arff

    Xtr, _, _ = read_mulan_arff(mirror / "mine" / "train.arff", list(LABELS))
    fit = saved.splits["train"]
    want = np.nanmean(Xtr[fit, 3].astype(np.float64))
    assert rec["fill_values"]["f3"] == pytest.approx(want, rel=1e-6)
    assert want != pytest.approx(np.nanmean(Xtr[:, 3].astype(np.float64)), rel=1e-6)  # val rows would change it
    assert saved.X[11, 3] == np.float32(rec["fill_values"]["f3"])
    assert saved.X[200 + 3, 3] == np.float32(rec["fill_values"]["f3"])  # test row: the training mean
    assert f'"f3": {rec["fill_values"]["f3"]}' in log and "imputed 3 feature value(s), rule 'mean'" in log
    assert "line 23 (data row 12), attribute 'f3': missing value '?'" in log
    assert any("imputed by prepare, rule 'mean'" in w for w in dataset_warnings(tmp_path / "out" / "processed.npz"))


def test_impute_zero(tmp_path):
    mirror = make(tmp_path, bad_train={(5, 0): "?"})
    data, _ = run(tmp_path, mirror, cfg(impute="zero"))
    assert data.X[5, 0] == 0 and data.meta["imputation"]["fill_values"] == {"f0": 0.0}
    assert data.meta["imputation"]["count"] == 1


def test_impute_key_is_checked_by_the_config_parser():
    with pytest.raises(ValueError, match=r"config error at 'data.custom.mine.impute': must be one of none, mean, zero"):
        spec_from_config("mine", cfg(impute="median"))
    spec_from_config("mine", cfg(impute="mean"))


# --------------------------------------------------------------------------- labels
def test_a_single_label_is_an_error_naming_the_label_file(tmp_path):
    mirror = make(tmp_path, labels=("only",))
    with pytest.raises(ValueError) as e:
        run(tmp_path, mirror, cfg())
    assert f"dataset 'mine': {tmp_path / 'raw' / 'mine' / 'mine.xml'} gives 1 label ('only'); multi-label learning needs at least 2" in str(
        e.value
    )
    # without an XML (n_labels: 1) the training ARFF is named
    c = {"format": "mulan-arff", "train": "train.arff", "test": "test.arff", "n_labels": 1}
    with pytest.raises(ValueError, match=r"raw/mine/train\.arff gives 1 label \('only'\)"):
        run(tmp_path, mirror, c)
    assert not (tmp_path / "out" / "processed.npz").exists()


def test_constant_training_labels_are_warned_recorded_and_exposed(tmp_path):
    def y(i):  # l2 never positive, l3 always positive
        return [i % 2, 0, 1]

    mirror = make(tmp_path, y=y)
    data, log = run(tmp_path, mirror, cfg())
    assert (
        "[prepare] WARNING mine: 2 label(s) constant in the training split, 1 with no positive (l2) and 1 positive in every row (l3)" in log
    )
    saved = ProcessedData.load(tmp_path / "out" / "processed.npz")
    assert saved.meta["constant_train_labels"] == ["l2", "l3"]
    assert saved.meta["all_positive_train_labels"] == ["l3"]
    assert dataset_warnings(tmp_path / "out" / "processed.npz") == [
        "mine: 2 label(s) constant in the training split, 1 with no positive (l2) and 1 positive in every row (l3): "
        "no method can learn them from the training data (recorded by prepare)."
    ]


def test_real_enron_label_without_training_positive(tmp_path, mirror):
    src = mirror_file(mirror, "enron/enron-train.arff").parent.parent
    lines: list[str] = []
    prepare("enron", tmp_path / "raw", tmp_path / "enron.npz", mirror=src, allow_download=False, log=lines.append)
    meta = ProcessedData.load(tmp_path / "enron.npz").meta
    assert meta["constant_train_labels"] == ["D.D18"] and meta["all_positive_train_labels"] == []
    assert any(line.startswith("[prepare] WARNING Enron: 1 label(s) constant") for line in lines)
    assert dataset_warnings(tmp_path / "enron.npz")[0].startswith(
        "Enron: 1 label(s) constant in the training split, 1 with no positive (D.D18)"
    )


# --------------------------------------------------------------------------- split sizes
def test_a_one_row_test_split_is_an_error_naming_split_and_size(tmp_path):
    mirror = make(tmp_path, n_test=1)
    with pytest.raises(ValueError) as e:
        run(tmp_path, mirror, cfg())
    assert (
        f"dataset 'mine': split 'test' has 1 row ({tmp_path / 'raw' / 'mine' / 'test.arff'}): fewer than "
        f"data.min_split_rows = {splits.DEFAULT_MIN_SPLIT_ROWS}" in str(e.value)
    )
    assert not (tmp_path / "out" / "processed.npz").exists()
    data, _ = run(tmp_path, mirror, cfg(), min_split_rows=1)  # configurable
    assert data.splits["test"].size == 1


def test_a_small_validation_split_is_named_with_how_it_was_carved(tmp_path):
    mirror = make(tmp_path, n_train=60)
    with pytest.raises(
        ValueError,
        match=r"split 'val' has 6 rows \(carved from the 60 official training rows, "
        r"data\.val_fraction 0\.1\): fewer than data\.min_split_rows = 10",
    ):
        run(tmp_path, mirror, cfg())
    data, _ = run(tmp_path, mirror, cfg(), val_fraction=0.2)
    assert data.splits["val"].size == 12


def test_every_registry_dataset_meets_the_default_minimum():
    for spec in REGISTRY.values():
        if spec.n_train is None or spec.n_test is None:
            continue
        n_val = round(splits.DEFAULT_FRACTION * spec.n_train)
        assert min(spec.n_test, n_val, spec.n_train - n_val) >= splits.DEFAULT_MIN_SPLIT_ROWS, spec.name


def test_schema_documents_the_new_keys():
    import yaml

    from cdgtmll.config import schema

    s = yaml.safe_load(Path(schema.__file__).with_name("schema.yaml").read_text())
    data = s["properties"]["data"]["properties"]
    assert data["min_split_rows"]["default"] == splits.DEFAULT_MIN_SPLIT_ROWS and data["min_split_rows"]["description"]
    imp = data["custom"]["additionalProperties"]["properties"]["impute"]
    assert imp["enum"] == ["none", "mean", "zero"] and "training split" in imp["description"]


# --------------------------------------------------------------------------- tables
def test_tables_repeat_the_dataset_warning_as_a_footnote(tmp_path, mirror, monkeypatch):
    """A metrics file records the clean data it was evaluated on (relative to the workflow
    folder); the footnotes of a table with that dataset as a column repeat the file's warnings."""
    import pandas as pd

    from cdgtmll.tables import collect, layout
    from cdgtmll.tables.footnotes import footnotes

    src = mirror_file(mirror, "enron/enron-train.arff").parent.parent
    root = tmp_path / "wf"
    prepare("enron", root / "results/raw", root / "results/data/enron/processed.npz", mirror=src, allow_download=False)
    rows = []
    for seed in (0, 1):
        d = root / "results/runs/enron/clean/BCE" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"inputs": {"clean_data": {"path": "results/data/enron/processed.npz", "sha256": "x"}}}))
        for mode in collect.MODES:
            rows.append(
                {
                    "dataset": "enron",
                    "variant": "clean",
                    "setting": "clean",
                    "method": "BCE",
                    "seed": seed,
                    "mode": mode,
                    "own_thresholds": False,
                    "backbone": "",
                    "metrics_path": str(d / "metrics.json"),
                    **{m: 0.5 for m in collect.METRICS},
                }
            )
    summary = collect.summarise(pd.DataFrame(rows))
    monkeypatch.chdir(tmp_path)  # not the workflow folder: the recorded path is resolved beside results/
    want = (
        "Enron: 1 label(s) constant in the training split, 1 with no positive (D.D18): no method can learn "
        "them from the training data (recorded by prepare)."
    )
    for number in (1, 2):
        cols = layout.configured_columns(number, [("enron", "Enron")], {})
        table = layout.build_table(summary, "global", cols, layout.PAPER_ROWS[number], ["BCE"], number=number)
        table["configured"] = True
        assert want in footnotes(table, summary, "global", 0.5)
    table = layout.build_table(summary, "global", layout.paper_columns(1), layout.PAPER_ROWS[1], ["BCE"], number=1)
    assert not any("D.D18" in n for n in footnotes(table, summary, "global", 0.5))  # Enron is no column there
