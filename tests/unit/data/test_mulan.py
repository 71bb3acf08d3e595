"""MULAN ARFF / XML and river-CSV loaders on the real mirror files; prepare() end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cdgtmll.data import acquire
from cdgtmll.data.acquire import locate_packaged
from cdgtmll.data.mulan import (
    arff_label_names,
    read_mulan_arff,
    read_mulan_xml,
    read_river_yeast_csv,
)
from cdgtmll.data.prepare import main as prepare_main
from cdgtmll.data.prepare import prepare
from cdgtmll.data.processed import ProcessedData
from cdgtmll.data.registry import RIVER_YEAST, get_spec
from tests.support.mirror import mirror_file

# MULAN's published figures (mulan.sourceforge.net/datasets-mlc.html):
# dataset -> (mirror folder, file stem, n_train, n_test, n_features, n_labels)
OFFICIAL = {
    "yeast": ("yeast", "yeast", 1500, 917, 103, 14),
    "enron": ("enron", "enron", 1123, 579, 1001, 53),
    "bibtex": ("bibtex", "bibtex", 4880, 2515, 1836, 159),
    "tmc2007-500": ("tmc2007", "tmc2007-500", 21519, 7077, 500, 22),
    "delicious": ("delicious", "delicious", 12920, 3185, 500, 983),
}


@pytest.fixture(scope="module")
def loaded(mirror):
    """Parse each mirrored dataset once per module (all five take ~2 s)."""
    cache = {}

    def get(name):
        if name not in cache:
            folder, stem, *_ = OFFICIAL[name]
            labels = read_mulan_xml(mirror_file(mirror, f"{folder}/{stem}.xml"))
            tr = read_mulan_arff(mirror_file(mirror, f"{folder}/{stem}-train.arff"), labels)
            te = read_mulan_arff(mirror_file(mirror, f"{folder}/{stem}-test.arff"), labels)
            cache[name] = (labels, tr, te)
        return cache[name]

    return get


@pytest.fixture()
def no_env_mirror(monkeypatch):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)


@pytest.mark.parametrize("name", list(OFFICIAL))
def test_official_sizes(loaded, name):
    _, _, n_train, n_test, d, L = OFFICIAL[name]
    labels, (Xtr, Ytr, fn), (Xte, Yte, fn_te) = loaded(name)
    assert len(labels) == L
    assert Xtr.shape == (n_train, d) and Xte.shape == (n_test, d)
    assert Ytr.shape == (n_train, L) and Yte.shape == (n_test, L)
    assert Xtr.dtype == np.float32 and Ytr.dtype == np.uint8 and isinstance(Xtr, np.ndarray)
    assert set(np.unique(Ytr)) <= {0, 1} and fn == fn_te and len(fn) == d
    spec = get_spec(name)
    assert (spec.n_train, spec.n_test, spec.n_features, spec.n_labels) == (n_train, n_test, d, L)


def test_label_columns_follow_arff_order_not_xml_order(mirror, loaded):
    labels, _, _ = loaded("yeast")
    assert labels[3] == "Class6"  # the XML lists Class6 before Class4
    assert arff_label_names(mirror / "yeast" / "yeast-train.arff", labels) == [f"Class{k}" for k in range(1, 15)]


def test_n_labels_instead_of_xml(mirror, loaded):
    _, (X, Y, fn), _ = loaded("enron")
    X2, Y2, fn2 = read_mulan_arff(mirror / "enron" / "enron-train.arff", 53)
    assert np.array_equal(X, X2) and np.array_equal(Y, Y2) and fn == fn2


def test_sparse_file_kept_sparse_when_asked(mirror, loaded):
    _, (X, Y, _), _ = loaded("enron")
    Xs, Ys, _ = read_mulan_arff(mirror / "enron" / "enron-train.arff", 53, dense=False)
    assert Xs.format == "csr" and np.array_equal(Xs.toarray(), X) and np.array_equal(Ys, Y)


def _yeast_lines(mirror):
    return (mirror / "yeast" / "yeast-train.arff").read_text().split("\n")


def test_corrupted_arff_names_file_and_line(mirror, tmp_path):
    lines = _yeast_lines(mirror)
    k = lines.index("@data") + 10  # 0-based index -> file line k + 1
    lines[k] = lines[k].replace(",", ",x7!", 1)
    bad = tmp_path / "yeast-train.arff"
    bad.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=rf"{bad}: malformed ARFF at line {k + 1}"):
        read_mulan_arff(bad, 14)


def test_truncated_arff(mirror, tmp_path):
    raw = (mirror / "yeast" / "yeast-train.arff").read_bytes()
    mid = tmp_path / "mid.arff"
    mid.write_bytes(raw[: len(raw) // 2])  # cut inside a row
    with pytest.raises(ValueError, match=f"{mid}: malformed ARFF at line"):
        read_mulan_arff(mid, 14)
    whole = tmp_path / "lines.arff"  # cut on a row boundary: parses, but the row count is wrong
    whole.write_bytes(raw[: raw.rindex(b"\n", 0, len(raw) // 2) + 1])
    with pytest.raises(ValueError, match=f"{whole}: expected 1500 data rows, found"):
        read_mulan_arff(whole, 14, n_rows=1500)


def test_label_mismatch_errors(mirror):
    f = mirror / "yeast" / "yeast-train.arff"
    names = [f"Class{k}" for k in range(1, 15)]
    with pytest.raises(ValueError, match=rf"{f}: label count mismatch: expected 15 labels .* found 14 .*missing: Class15"):
        read_mulan_arff(f, names + ["Class15"])
    with pytest.raises(ValueError, match="not the last 15 attributes.*Att103"):
        read_mulan_arff(f, names + ["Att1"])
    with pytest.raises(ValueError, match=rf"{f}: row 0: label 'Att103' has value 0.125632, expected 0/1"):
        read_mulan_arff(f, 15)


def test_xml_hierarchical_flattened_and_malformed(tmp_path):
    x = tmp_path / "h.xml"
    x.write_text('<?xml version="1.0"?><labels xmlns="http://mulan.sourceforge.net/labels">'
                 '<label name="A"><label name="A.1"></label><label name="A.2"/></label><label name="B"/></labels>')
    assert read_mulan_xml(x) == ["A", "A.1", "A.2", "B"]
    x.write_text('<labels xmlns="http://mulan.sourceforge.net/labels"><label name="A">\n</labels>')
    with pytest.raises(ValueError, match=f"{x}: malformed MULAN label XML at line 2"):
        read_mulan_xml(x)


def test_sparse_arff_edge_cases(tmp_path):
    head = "@relation t\n@attribute f0 numeric\n@attribute f1 {0,1}\n@attribute y0 {0,1}\n@attribute y1 {0,1}\n@data\n"
    f = tmp_path / "s.arff"
    f.write_text(head + "{0 2.5,2 1}\n{}\n{1 1,3 1}\n")  # an all-zero row must still count
    X, Y, fn = read_mulan_arff(f, ["y0", "y1"])
    assert fn == ["f0", "f1"] and X.tolist() == [[2.5, 0], [0, 0], [0, 1]] and Y.tolist() == [[1, 0], [0, 0], [0, 1]]
    f.write_text(head.replace("f1 {0,1}", "f1 {1,0}") + "{0 2.5}\n")
    # an omitted nominal value is the first declared category ('1'): one-hot, that is f1=1
    X, Y, fn = read_mulan_arff(f, 2)
    assert fn == ["f0", "f1=1", "f1=0"] and X.tolist() == [[2.5, 1, 0]]
    with pytest.raises(ValueError, match="first declared value '1' is not 0"):  # read as a number, 0 would be 1
        read_mulan_arff(f, 2, features={"f1": "numeric"})


def test_arff_and_river_csv_are_identical(mirror, loaded):
    """Exact equality (not allclose): river's CSV carries the ARFF's decimal strings
    byte for byte, so both parse to the same float64 and the same float32."""
    p = locate_packaged(RIVER_YEAST)
    if p is None:
        pytest.skip("river==0.26.1 not installed")
    X, Y, names, tr, te = read_river_yeast_csv(p)
    assert (len(tr), len(te)) == (1500, 917) and tr[0] == 917 and te[-1] == 916
    _, (Xtr, Ytr, _), (Xte, Yte, _) = loaded("yeast")
    assert names == arff_label_names(mirror / "yeast" / "yeast-train.arff", 14)
    assert X.dtype == Xtr.dtype == np.float32
    assert np.array_equal(X[tr], Xtr) and np.array_equal(Y[tr], Ytr)
    assert np.array_equal(X[te], Xte) and np.array_equal(Y[te], Yte)


# --------------------------------------------------------------------------- prepare
def test_prepare_yeast_mirror_and_packaged_identical(mirror, tmp_path, no_env_mirror):
    if locate_packaged(RIVER_YEAST) is None:
        pytest.skip("river==0.26.1 not installed")
    a = prepare("yeast", tmp_path / "rawA", tmp_path / "a.npz", mirror=mirror, allow_download=False)
    b = prepare("yeast", tmp_path / "rawB", tmp_path / "b.npz", mirror=None, allow_download=False)
    A, B = ProcessedData.load(tmp_path / "a.npz"), ProcessedData.load(tmp_path / "b.npz")
    for x, y in ((A, a), (B, b)):
        assert np.array_equal(x.X, y.X) and np.array_equal(x.Y, y.Y)
    assert np.array_equal(A.X, B.X) and np.array_equal(A.Y, B.Y) and A.label_names == B.label_names
    for s in ("train", "val", "test"):
        assert np.array_equal(A.splits[s], B.splits[s])
    assert A.X.shape == (2417, 103) and A.Y.shape == (2417, 14)
    assert np.array_equal(A.splits["test"], np.arange(1500, 2417))
    assert A.splits["train"].size + A.splits["val"].size == 1500 and A.splits["train"].max() < 1500
    assert {f["source"] for f in A.meta["source_files"]} == {"mirror"}
    assert [f["source"] for f in B.meta["source_files"]] == ["packaged"]
    assert B.meta["source_files"][0]["sha256"] == RIVER_YEAST.sha256
    assert A.meta["split"]["seed"] == 0 and A.meta["split"]["fraction"] == 0.1
    assert A.meta["official_split"]["n_train"] == 1500 and A.meta["display_name"] == "Yeast"
    # rerun reuses the raw files
    c = prepare("yeast", tmp_path / "rawA", tmp_path / "c.npz", mirror=None, allow_download=False)
    assert {f["source"] for f in c.meta["source_files"]} == {"cached"} and np.array_equal(c.X, A.X)


def test_prepare_sparse_mulan_dataset(mirror, tmp_path, no_env_mirror):
    mirror_file(mirror, "enron/enron-train.arff")
    d = prepare("enron", tmp_path / "raw", tmp_path / "e.npz", mirror=mirror, allow_download=False,
                val_fraction=0.2, split_seed=3)
    e = ProcessedData.load(tmp_path / "e.npz")
    assert e.X.shape == (1702, 1001) and e.n_labels == 53 and e.meta["split"]["seed"] == 3
    assert e.splits["test"].size == 579 and abs(e.splits["val"].size - 0.2 * 1123) < 15
    assert np.array_equal(e.X, d.X)


def test_prepare_config_defined_dataset_via_file_urls(mirror, tmp_path, no_env_mirror):
    """A MULAN dataset unknown to the registry, defined in config, fetched from file:// URLs.
    MULAN's own Enron split has 10 test rows identical to training rows: a config-defined copy
    must say that it keeps them (``duplicate_rows: warn``), and prepare records the count."""
    src = mirror_file(mirror, "enron")
    sha = {r.split("\t")[0]: r.split("\t")[2] for r in mirror_file(mirror, "MANIFEST.tsv").read_text().splitlines()[1:]}
    cfg = {
        "format": "mulan-arff", "train": "enron-train.arff", "test": "enron-test.arff", "xml": "enron.xml",
        "urls": {k: [(src / v).as_uri()] for k, v in
                 (("train", "enron-train.arff"), ("test", "enron-test.arff"), ("xml", "enron.xml"))},
        "sha256": {"train": sha["enron/enron-train.arff"], "test": sha["enron/enron-test.arff"]},
        "duplicate_rows": "warn",
    }
    with pytest.warns(acquire.UnverifiedWarning):  # the xml has no sha256 in this config
        d = prepare("my-enron", tmp_path / "raw", tmp_path / "m.npz", dataset_config=cfg)
    assert d.name == "my-enron" and d.Y.shape == (1702, 53)
    assert d.meta["train_test_duplicates"]["count"] == 10 and "feature_encoding" not in d.meta
    files = {f["file"]: f for f in d.meta["source_files"]}
    assert files["enron-train.arff"]["source"] == "url" and files["enron-train.arff"]["verified"]
    assert files["enron.xml"]["verified"] is False
    # CLI with inline JSON, mirror via env var
    cfg2 = {k: v for k, v in cfg.items() if k not in ("urls", "sha256")}
    mirror2 = tmp_path / "m2"
    (mirror2 / "my-enron").mkdir(parents=True)
    for n in ("enron-train.arff", "enron-test.arff", "enron.xml"):
        (mirror2 / "my-enron" / n).symlink_to(src / n)
    with pytest.warns(acquire.UnverifiedWarning):  # no sha256 at all now
        rc = prepare_main(["--dataset", "my-enron", "--raw-dir", str(tmp_path / "raw2"), "--out", str(tmp_path / "m2.npz"),
                           "--mirror", str(mirror2), "--no-download", "--dataset-config", json.dumps(cfg2)])
    assert rc == 0 and np.array_equal(ProcessedData.load(tmp_path / "m2.npz").Y, d.Y)


def test_cli_unimplemented_loader_and_unknown_dataset(tmp_path, capsys, monkeypatch):
    import dataclasses

    from cdgtmll.data import prepare as prepare_mod

    real = prepare_mod.get_spec
    monkeypatch.setattr(prepare_mod, "get_spec",  # a registry entry whose loader does not exist yet
                        lambda name, *a, **k: dataclasses.replace(real(name), loader=None))
    rc = prepare_main(["--dataset", "coco2014", "--raw-dir", str(tmp_path), "--out", str(tmp_path / "c.npz")])
    assert rc != 0
    assert "dataset 'coco2014': loader not implemented yet (format coco-json)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing downloaded or written
    rc = prepare_main(["--dataset", "nope", "--raw-dir", str(tmp_path), "--out", str(tmp_path / "c.npz")])
    assert rc != 0 and "unknown dataset 'nope'; known:" in capsys.readouterr().err


def test_cli_mediamill_explains_manual_acquisition(tmp_path, capsys, no_env_mirror):
    rc = prepare_main(["--dataset", "mediamill", "--raw-dir", str(tmp_path), "--out", str(tmp_path / "m.npz"),
                       "--no-download"])
    err = capsys.readouterr().err
    assert rc != 0 and "could not acquire 'mediamill-train.arff'" in err and "mediamill.rar" in err
