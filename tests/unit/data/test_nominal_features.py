"""Bring-your-own MULAN data with nominal and string features, on files
generated here in the exact MULAN format (an ARFF per split, labels the last ``{0,1}``
attributes, and the label XML), shaped like the real files that stopped ``prepare``: a
protein-ID string attribute, ``{YES,NO}`` nominal attributes, a nominal with numeric-looking
values and numeric attributes.

* nominal attributes are one-hot by default, in the header's declared category order, so
  train and test get the same columns; ``{1,2,3}`` too (not an ordinal) unless configured
  ``numeric``; a string attribute is refused with the key that drops it;
  ``data.custom.<name>.features`` drops or encodes by name or glob; the encoding is recorded;
* an empty (0-byte) file is named as empty;
* rows shared by the training and test files (and the same file given twice) are an error,
  or with ``duplicate_rows: warn`` a warning with the count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cdgtmll.data import acquire
from cdgtmll.data.mulan import read_mulan_xml
from cdgtmll.data.prepare import prepare
from cdgtmll.data.processed import ProcessedData, dataset_warnings

pytestmark = pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")

NAME = "prot"
YESNO = ("m1", "m2", "m3", "m4")
LABELS = ("c1", "c2", "c3")
#: attribute declarations, in file order: ID string, {YES,NO} motifs, a numeric-looking
#: nominal, two numeric attributes, then the labels (MULAN: the last attributes)
ATTRIBUTES = (
    ["@attribute protein string"]
    + [f"@attribute {m} {{YES,NO}}" for m in YESNO]
    + ["@attribute grade {1,2,3}", "@attribute x0 numeric", "@attribute x1 numeric"]
    + [f"@attribute {c} {{0,1}}" for c in LABELS]
)
#: line of the first @attribute (after '@relation' and a blank line)
FIRST_ATTR_LINE = 3
HEADER_LINES = 2 + len(ATTRIBUTES) + 2  # @relation, blank, attributes, blank, @data


def rows(n: int, seed: int, grades=(1, 2, 3)) -> list[str]:
    """``n`` data rows as MULAN writes them: ``O00060,YES,NO,...,2,0.51,-1.2,1,0,1``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        motifs = ["YES" if v else "NO" for v in rng.random(len(YESNO)) < 0.4]
        grade = str(grades[i % len(grades)])
        x = [f"{v:.4f}" for v in rng.normal(size=2)]
        y = [str(int(v)) for v in rng.random(len(LABELS)) < 0.5]
        y[i % len(LABELS)] = "1"
        out.append(",".join([f"P{seed}{i:05d}", *motifs, grade, *x, *y]))
    return out


def write_arff(path: Path, data: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"@relation '{NAME}: -C -{len(LABELS)}'", "", *ATTRIBUTES, "", "@data", *data]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_xml(path: Path) -> Path:
    body = "".join(f'<label name="{c}"></label>\n' for c in LABELS)
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">\n'
                    f"{body}</labels>\n")
    return path


def make(tmp_path: Path, train=None, test=None) -> Path:
    """The mirror folder ``<tmp>/mirror/prot/`` with the train/test ARFF and the label XML."""
    mirror = tmp_path / "mirror"
    d = mirror / NAME
    write_arff(d / "prot-train.arff", rows(120, 0) if train is None else train)
    write_arff(d / "prot-test.arff", rows(40, 1, grades=(1, 2)) if test is None else test)
    write_xml(d / "prot.xml")
    return mirror


def cfg(**kw) -> dict:
    return {"format": "mulan-arff", "train": "prot-train.arff", "test": "prot-test.arff", "xml": "prot.xml", **kw}


DROP_ID = {"protein": "drop"}


def run(tmp_path: Path, mirror: Path, config: dict) -> tuple[ProcessedData, str]:
    lines: list[str] = []
    data = prepare(NAME, tmp_path / "raw", tmp_path / "out" / "processed.npz", mirror=mirror, allow_download=False,
                   dataset_config=config, log=lines.append)
    return data, "\n".join(lines)


def raw(tmp_path: Path, f: str) -> Path:
    return tmp_path / "raw" / NAME / f


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)


# --------------------------------------------------------------------------- encoding
def test_added_by_config_alone_one_hot_in_declared_order_and_the_encoding_is_recorded(tmp_path):
    mirror = make(tmp_path)
    data, log = run(tmp_path, mirror, cfg(features=DROP_ID))
    onehot = [f"{m}={v}" for m in YESNO for v in ("YES", "NO")] + ["grade=1", "grade=2", "grade=3"]
    assert data.X.shape == (160, len(onehot) + 2)
    assert data.n_labels == 3
    enc = data.meta["feature_encoding"]
    assert enc["rules"] == {"protein": "drop"}
    assert enc["n_attributes"] == 8 and enc["n_columns"] == len(onehot) + 2
    assert enc["counts"] == {"drop": 1, "onehot": 5, "numeric": 2}
    by = {a["attribute"]: a for a in enc["attributes"]}
    assert by["protein"] == {"attribute": "protein", "type": "string", "action": "drop",
                             "by": "data.custom.prot.features.protein"}
    assert by["m1"]["columns"] == ["m1=YES", "m1=NO"] and by["m1"]["by"] == "default"
    assert by["grade"] == {"attribute": "grade", "type": "nominal", "action": "onehot", "by": "default",
                           "columns": ["grade=1", "grade=2", "grade=3"]}
    assert "x0" not in by  # numeric, read as it is
    # row 0 of the training file, column by column
    first = rows(120, 0)[0].split(",")
    want = [float(first[1 + k] == v) for k in range(len(YESNO)) for v in ("YES", "NO")]
    want += [float(first[5] == g) for g in "123"] + [np.float32(first[6]), np.float32(first[7])]
    np.testing.assert_array_equal(data.X[0], np.asarray(want, dtype=np.float32))
    assert data.Y[0].tolist() == [int(v) for v in first[8:]]
    # every one-hot group has exactly one 1 per row
    X = data.X[:, : len(onehot)]
    assert (X[:, 0:2].sum(1) == 1).all() and (X[:, 8:11].sum(1) == 1).all()


def test_train_and_test_get_the_same_columns_even_when_a_category_is_absent_from_one(tmp_path):
    mirror = make(tmp_path)  # the test rows have grades 1 and 2 only
    data, _ = run(tmp_path, mirror, cfg(features=DROP_ID))
    Xte, _ = data.part("test")
    col = 10  # grade=3: the 11th column (8 motif columns, grade=1, grade=2, grade=3)
    assert Xte.shape[1] == data.X.shape[1]
    assert Xte[:, col].sum() == 0 and data.X[: 120, col].sum() == 40


def test_numeric_looking_nominal_is_one_hot_unless_configured_numeric_and_globs_select(tmp_path):
    mirror = make(tmp_path)
    data, _ = run(tmp_path, mirror, cfg(features={"protein": "drop", "grade": "numeric", "m[12]": "drop"}))
    assert data.X.shape[1] == 4 + 1 + 2  # m3, m4 one-hot; grade one number; x0, x1
    assert sorted(np.unique(data.X[:, 4]).tolist()) == [1.0, 2.0, 3.0]
    enc = {a["attribute"]: a for a in data.meta["feature_encoding"]["attributes"]}
    assert enc["m1"]["by"] == enc["m2"]["by"] == "data.custom.prot.features.m[12]"
    assert enc["grade"] == {"attribute": "grade", "type": "nominal", "action": "numeric",
                            "by": "data.custom.prot.features.grade"}


def test_string_attribute_is_refused_with_the_key_that_drops_it(tmp_path):
    mirror = make(tmp_path)
    with pytest.raises(ValueError) as exc:
        run(tmp_path, mirror, cfg())
    assert str(exc.value).startswith(
        f"{raw(tmp_path, 'prot-train.arff')} line {FIRST_ATTR_LINE}: attribute 'protein' is a string attribute "
        "(STRING): it cannot be a feature; drop it with 'data.custom.prot.features.protein: drop' in the config")
    assert not (tmp_path / "out" / "processed.npz").exists()


@pytest.mark.parametrize(("features", "message"), [
    ({"protein": "drop", "grade": "bogus"}, "config error at 'data.custom.prot.features.grade': must be one of "
                                            "drop, onehot, numeric, got 'bogus'"),
    ({"protien": "drop"}, "config error at 'data.custom.prot.features.protien': matches no feature attribute"),
    ({"protein": "drop", "c1": "numeric"}, "config error at 'data.custom.prot.features.c1': matches only label "
                                           "attributes (a label is never a feature)"),
    ({"protein": "drop", "x0": "onehot"}, "config error at 'data.custom.prot.features.x0': attribute 'x0'"),
    ({"protein": "drop", "m1": "numeric"}, "declares the value 'YES', which is not a number"),
    ({"protein": "numeric"}, "it can only be dropped ('drop'), not 'numeric'"),
    ({"protein": "drop", "m*": "drop", "*1": "onehot"}, "attribute 'm1'"),
])
def test_feature_rules_that_cannot_apply_are_config_errors(tmp_path, features, message):
    mirror = make(tmp_path)
    with pytest.raises(ValueError, match="config error|not a number") as exc:
        run(tmp_path, mirror, cfg(features=features))
    assert message in str(exc.value)


def test_a_missing_nominal_value_is_named_by_its_attribute(tmp_path):
    train = rows(120, 0)
    parts = train[7].split(",")
    parts[5] = "?"  # grade
    train[7] = ",".join(parts)
    mirror = make(tmp_path, train=train)
    with pytest.raises(ValueError) as exc:
        run(tmp_path, mirror, cfg(features=DROP_ID))
    assert (f"{raw(tmp_path, 'prot-train.arff')} line {HEADER_LINES + 8} (data row 8), attribute 'grade': "
            "missing value '?'") in str(exc.value)


# --------------------------------------------------------------------------- empty files
def test_an_empty_file_is_named_as_empty(tmp_path):
    mirror = make(tmp_path)
    (mirror / NAME / "prot-test.arff").write_bytes(b"")
    with pytest.raises(ValueError) as exc:
        run(tmp_path, mirror, cfg(features=DROP_ID))
    assert str(exc.value).startswith(f"{raw(tmp_path, 'prot-test.arff')}: the file is empty (0 bytes)")
    assert "line 0" not in str(exc.value)
    empty_xml = tmp_path / "empty.xml"
    empty_xml.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.xml: the file is empty \(0 bytes\)$"):
        read_mulan_xml(empty_xml)


# --------------------------------------------------------------------------- shared rows
def test_rows_shared_by_train_and_test_are_an_error_or_a_counted_warning(tmp_path):
    train = rows(120, 0)
    test = rows(40, 1)
    for i, j in ((3, 10), (17, 55), (30, 99)):
        test[i] = train[j]
    mirror = make(tmp_path, train=train, test=test)
    with pytest.raises(ValueError) as exc:
        run(tmp_path, mirror, cfg(features=DROP_ID))
    msg = str(exc.value)
    te, tr = raw(tmp_path, "prot-test.arff"), raw(tmp_path, "prot-train.arff")
    assert msg.startswith(f"dataset 'prot': 3 of 40 rows of {te} are identical (features and labels) to rows of {tr}")
    assert (f"{te} line {HEADER_LINES + 4} (data row 4) = {tr} line {HEADER_LINES + 11} (data row 11)") in msg
    assert "set data.custom.prot.duplicate_rows: warn to keep them" in msg
    assert not (tmp_path / "out" / "processed.npz").exists()

    data, log = run(tmp_path, mirror, cfg(features=DROP_ID, duplicate_rows="warn"))
    rec = data.meta["train_test_duplicates"]
    assert rec["count"] == 3 and rec["n_test"] == 40 and rec["rule"] == "warn" and rec["same_file"] is False
    sentence = ("prot: 3 of 40 test rows are identical (features and labels) to training rows, kept by the config "
                "(duplicate_rows: warn)")
    assert f"[prepare] WARNING {sentence}" in log
    assert any(w.startswith(sentence) for w in dataset_warnings(tmp_path / "out" / "processed.npz"))


def test_rows_differing_only_in_a_dropped_attribute_are_shared_rows(tmp_path):
    """What is compared is what a method sees: the protein ID, dropped, does not make a row new."""
    train = rows(120, 0)
    test = rows(40, 1)
    test[0] = "Q99999" + train[5][train[5].index(","):]
    mirror = make(tmp_path, train=train, test=test)
    with pytest.raises(ValueError, match="1 of 40 rows of .* are identical"):
        run(tmp_path, mirror, cfg(features=DROP_ID))


def test_the_training_file_given_as_the_test_file_is_refused(tmp_path):
    mirror = make(tmp_path)
    with pytest.raises(ValueError) as exc:
        run(tmp_path, mirror, cfg(features=DROP_ID, test="prot-train.arff"))
    assert "dataset 'prot': the training and the test file are the same file" in str(exc.value)
    assert "every test row is a training row" in str(exc.value)
    data, log = run(tmp_path, mirror, cfg(features=DROP_ID, test="prot-train.arff", duplicate_rows="warn"))
    rec = data.meta["train_test_duplicates"]
    assert rec["same_file"] is True and rec["count"] == 120
    assert "the training and test files are the same file: 120 of 120 test rows" in log


def test_duplicate_rows_must_be_error_or_warn(tmp_path):
    mirror = make(tmp_path)
    with pytest.raises(ValueError, match=r"config error at 'data.custom.prot.duplicate_rows': must be one of "
                                         r"error, warn, got 'ignore'"):
        run(tmp_path, mirror, cfg(features=DROP_ID, duplicate_rows="ignore"))
