"""R-variants (App. E.3) on Yeast and VOC2007, and the VOC2007 label reader."""

from __future__ import annotations

import json
import math
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from cdgtmll.data.processed import ProcessedData
from cdgtmll.data.voc import VOC_CLASSES, read_voc_labels
from cdgtmll.labels import ascending_order, label_counts, prevalence, tail_labels
from cdgtmll.variants.r_variant import apply_to_dataset, main, make_r_variant
from tests.support.mirror import YEAST_DIR, mirror_path

MIRROR = mirror_path()
VOC_MAIN = MIRROR / "voc2007" / "ImageSets" / "Main"
YEAST_N_LABELS = 14


def floor_sigma_p(sigma: float, P: int) -> int:
    """floor(sigma * P_l) on the decimal value of sigma (independent of the module's code)."""
    return int((Decimal(str(sigma)) * P).to_integral_value(rounding="ROUND_FLOOR"))


def load_yeast(split: str = "train") -> np.ndarray:
    path = YEAST_DIR / f"yeast-{split}.arff"
    if not path.is_file():
        pytest.skip(f"Yeast mirror not found at {path} (set CDGTMLL_DATA_MIRROR)")
    import arff

    with open(path) as fh:
        d = arff.load(fh)
    names = [a[0] for a in d["attributes"][-YEAST_N_LABELS:]]
    assert names == [f"Class{i}" for i in range(1, 15)]
    data = np.asarray(d["data"], dtype=object)
    return data[:, -YEAST_N_LABELS:].astype(np.float64).astype(np.uint8)


def voc(split: str = "trainval"):
    if not VOC_MAIN.is_dir():
        pytest.skip(f"VOC2007 ImageSets/Main not found at {VOC_MAIN} (set CDGTMLL_DATA_MIRROR)")
    return read_voc_labels(VOC_MAIN, split)


@pytest.fixture(scope="module")
def yeast_Y():
    return load_yeast("train")


@pytest.fixture(scope="module")
def voc_Y():
    return voc("trainval")[1]


def check_variant(Y: np.ndarray, sigma: float, seed: int, q: float = 0.2) -> dict:
    Y_in = Y.copy()
    Y_new, book = make_r_variant(Y, sigma, seed, q=q)
    np.testing.assert_array_equal(Y, Y_in)  # input untouched
    assert Y_new.dtype == Y.dtype and Y_new.shape == Y.shape
    L = Y.shape[1]
    tail = tail_labels(Y, q)
    # exactly floor(qL) tail labels, and they are the least prevalent
    assert tail.size == math.floor(q * L) == book["n_tail"]
    assert book["tail_labels"] == tail.tolist()
    counts = label_counts(Y)
    rest = np.setdiff1d(np.arange(L), tail)
    assert counts[tail].max() <= counts[rest].min()
    # no 0 -> 1; no change outside tail columns
    assert not np.any((Y == 0) & (Y_new == 1))
    np.testing.assert_array_equal(Y_new[:, rest], Y[:, rest])
    flipped = (Y == 1) & (Y_new == 0)
    assert not flipped[:, rest].any()
    total = 0
    by_label = {e["label"]: e for e in book["per_tail_label"]}
    for l in tail:
        P = int(Y[:, l].sum())
        k = int(flipped[:, l].sum())
        assert k == floor_sigma_p(sigma, P)
        e = by_label[int(l)]
        assert e["P"] == P and e["n_flipped"] == k
        assert e["sigma_hat"] == pytest.approx(k / P)
        assert e["flipped_rows"] == np.flatnonzero(flipped[:, l]).tolist()
        assert e["prevalence_after"] == pytest.approx(Y_new[:, l].mean())
        assert e["prevalence_before"] == pytest.approx(Y[:, l].mean())
        total += k
    assert book["total_flipped"] == total == int(flipped.sum())
    np.testing.assert_allclose(book["prevalence_before"], prevalence(Y))
    np.testing.assert_allclose(book["prevalence_after"], prevalence(Y_new))
    assert book["n_train"] == Y.shape[0] and book["n_labels"] == L
    assert book["severity"] == sigma and book["sampling_seed"] == seed
    json.dumps(book)
    return book


# --------------------------------------------------------------------------- Yeast


@pytest.mark.parametrize("sigma", [0.4, 0.5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_yeast_r_variant(yeast_Y, sigma, seed):
    assert yeast_Y.shape == (1500, 14)
    check_variant(yeast_Y, sigma, seed)


def test_yeast_seeds(yeast_Y):
    a, _ = make_r_variant(yeast_Y, 0.4, 0)
    b, _ = make_r_variant(yeast_Y, 0.4, 0)
    c, _ = make_r_variant(yeast_Y, 0.4, 1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert int(a.sum()) == int(c.sum())  # same counts, different flipped sets


# --------------------------------------------------------------------------- VOC2007


@pytest.mark.parametrize("sigma", [0.3, 0.5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_voc_r_variant(voc_Y, sigma, seed):
    book = check_variant(voc_Y, sigma, seed)
    assert book["n_tail"] == 4


def test_voc_tail_is_least_prevalent_classes(voc_Y):
    tail = tail_labels(voc_Y)
    counts = label_counts(voc_Y)
    expected = np.sort(np.argsort(counts, kind="stable")[:4])
    # no ties at the VOC boundary, so the tail is simply the 4 smallest counts
    assert np.sort(counts)[3] < np.sort(counts)[4]
    np.testing.assert_array_equal(tail, expected)


def test_voc_different_seeds_flip_different_sets(voc_Y):
    _, b0 = make_r_variant(voc_Y, 0.3, 0)
    _, b1 = make_r_variant(voc_Y, 0.3, 1)
    _, b0b = make_r_variant(voc_Y, 0.3, 0)
    assert b0 == b0b
    rows0 = [e["flipped_rows"] for e in b0["per_tail_label"]]
    rows1 = [e["flipped_rows"] for e in b1["per_tail_label"]]
    assert all(r0 != r1 for r0, r1 in zip(rows0, rows1))
    assert [len(r) for r in rows0] == [len(r) for r in rows1]


# --------------------------------------------------------------------------- synthetic


def tied_matrix() -> np.ndarray:
    """10 labels whose counts are 3,3,3,3,5,5,... -> floor(0.2*10)=2 tail labels
    chosen among the four labels tied at 3."""
    rng = np.random.default_rng(0)
    counts = [3, 3, 3, 3, 5, 6, 7, 8, 9, 10]
    Y = np.zeros((40, 10), np.uint8)
    for j, c in enumerate(counts):
        Y[rng.choice(40, c, replace=False), j] = 1
    return Y


def test_ties_broken_deterministically():
    Y = tied_matrix()
    tails = {tuple(tail_labels(Y, 0.2, tie_seed=s)) for s in range(20)}
    assert all(set(t) <= {0, 1, 2, 3} and len(t) == 2 for t in tails)
    assert len(tails) > 1  # the tie seed matters
    for s in (0, 5):
        t = tail_labels(Y, 0.2, tie_seed=s)
        np.testing.assert_array_equal(t, tail_labels(Y, 0.2, tie_seed=s))
        np.testing.assert_array_equal(t, np.sort(ascending_order(Y, s)[:2]))
        _, book = make_r_variant(Y, 0.5, 0, tie_seed=s)
        assert book["tail_labels"] == t.tolist() and book["tie_seed"] == s
    check_variant(Y, 0.5, 3)


def test_sparse_input_matches_dense():
    Y = tied_matrix()
    dense, bd = make_r_variant(Y, 0.6, 4)
    sparse, bs = make_r_variant(sp.csr_matrix(Y), 0.6, 4)
    assert sp.issparse(sparse) and sparse.dtype == Y.dtype
    np.testing.assert_array_equal(sparse.toarray(), dense)
    assert bd == bs


def test_floor_is_exact_decimal():
    # 0.57 * 100 = 56.99999999999999 in floating point; floor(sigma P_l) must be 57
    assert math.floor(0.57 * 100) == 56
    Y = np.zeros((200, 5), np.uint8)
    Y[:100, 0] = 1  # the single tail label (floor(0.2 * 5) = 1), P = 100
    Y[:150, 1:] = 1
    Y_new, book = make_r_variant(Y, 0.57, 0)
    assert book["tail_labels"] == [0]
    assert book["per_tail_label"][0]["n_flipped"] == 57 == 100 - int(Y_new[:, 0].sum())


@pytest.mark.parametrize("bad", [0, 1, 0.0, 1.0, -0.1, 1.5, float("nan"), "0.3", True])
def test_severity_out_of_range(bad):
    with pytest.raises(ValueError, match="severity"):
        make_r_variant(tied_matrix(), bad, 0)


def test_non_binary_rejected():
    Y = tied_matrix()
    Y[0, 0] = 2
    with pytest.raises(ValueError, match="0/1"):
        make_r_variant(Y, 0.3, 0)


# --------------------------------------------------------------------------- datasets


def yeast_processed(Y: np.ndarray) -> ProcessedData:
    n = Y.shape[0]
    perm = np.random.default_rng(0).permutation(n)
    X = np.random.default_rng(1).random((n, 4)).astype(np.float32)
    return ProcessedData(
        name="yeast",
        X=X,
        Y=Y,
        label_names=[f"Class{i}" for i in range(1, Y.shape[1] + 1)],
        splits={"train": np.sort(perm[:1000]), "val": np.sort(perm[1000:1200]), "test": perm[1200:]},
        meta={"source": "test"},
    )


def test_apply_to_dataset(yeast_Y):
    data = yeast_processed(yeast_Y)
    Y_orig = data.Y.copy()
    out, book = apply_to_dataset(data, 0.5, 2)
    np.testing.assert_array_equal(data.Y, Y_orig)  # input untouched
    tr = data.splits["train"]
    # tail from the train rows only
    assert book["tail_labels"] == tail_labels(Y_orig[tr]).tolist()
    for s in ("val", "test"):
        idx = data.splits[s]
        np.testing.assert_array_equal(out.Y[idx], Y_orig[idx])
        np.testing.assert_array_equal(out.splits[s], data.splits[s])
    np.testing.assert_array_equal(out.Y[tr], make_r_variant(Y_orig[tr], 0.5, 2)[0])
    assert out.X is data.X and out.Y.shape == Y_orig.shape and out.Y.dtype == np.uint8
    assert out.meta["variant"]["severity"] == 0.5 and out.meta["variant"]["sampling_seed"] == 2
    assert out.meta["source"] == "test"
    for e in book["per_tail_label"]:
        rows = np.asarray(e["flipped_dataset_rows"])
        np.testing.assert_array_equal(rows, tr[e["flipped_rows"]])
        assert np.all(Y_orig[rows, e["label"]] == 1) and np.all(out.Y[rows, e["label"]] == 0)
    with pytest.raises(ValueError, match="variant"):
        apply_to_dataset(out, 0.5, 2)


def test_cli_roundtrip(yeast_Y, tmp_path):
    data = yeast_processed(yeast_Y)
    src = tmp_path / "yeast.npz"
    data.save(src)
    rc = main(["--in", str(src), "--severity", "0.4", "--sampling-seed", "1",
               "--out", str(tmp_path / "yeast-R.npz"), "--bookkeeping", str(tmp_path / "bk.json")])  # fmt: skip
    assert rc == 0
    out = ProcessedData.load(tmp_path / "yeast-R.npz")
    expect, _ = apply_to_dataset(ProcessedData.load(src), 0.4, 1)
    np.testing.assert_array_equal(out.Y, expect.Y)
    book = json.loads((tmp_path / "bk.json").read_text())
    assert book["severity"] == 0.4 and book["q"] == 0.2 and book["tie_seed"] == 0
    assert book["source"]["path"] == str(src)
    rc = main(["--in", str(src), "--severity", "1.2", "--sampling-seed", "1",
               "--out", str(tmp_path / "bad.npz"), "--bookkeeping", str(tmp_path / "bad.json")])  # fmt: skip
    assert rc == 2 and not (tmp_path / "bad.npz").exists() and not (tmp_path / "bad.json").exists()


# --------------------------------------------------------------------------- VOC reader


def test_voc_reader_shapes_and_ids():
    for split, n in (("trainval", 5011), ("test", 4952)):
        ids, Y, diff = voc(split)
        assert Y.shape == (n, 20) and Y.dtype == np.uint8 and diff.shape == (n, 20)
        listed = [ln.strip() for ln in (VOC_MAIN / f"{split}.txt").read_text().splitlines() if ln.strip()]
        assert ids == listed
        assert not np.any(Y.astype(bool) & diff)  # default: difficult counted as absent
        assert Y.sum(axis=1).min() >= 0 and diff.any()
    ids, Y_pos, diff = read_voc_labels(VOC_MAIN, "trainval", difficult="positive")
    _, Y_neg, _ = read_voc_labels(VOC_MAIN, "trainval", difficult="negative")
    np.testing.assert_array_equal(Y_pos, Y_neg | diff)
    # a spot check straight from one class file
    flags = dict(ln.split() for ln in (VOC_MAIN / "sheep_trainval.txt").read_text().splitlines() if ln.strip())
    j = VOC_CLASSES.index("sheep")
    assert [int(Y_neg[i, j]) for i in range(50)] == [int(flags[i] == "1") for i in ids[:50]]


def corrupted_copy(tmp_path: Path, cls: str, lineno: int, new_line: str) -> Path:
    if not VOC_MAIN.is_dir():
        pytest.skip(f"VOC2007 ImageSets/Main not found at {VOC_MAIN}")
    dst = tmp_path / "Main"
    dst.mkdir()
    for name in ["trainval.txt"] + [f"{c}_trainval.txt" for c in VOC_CLASSES]:
        shutil.copyfile(VOC_MAIN / name, dst / name)
    p = dst / f"{cls}_trainval.txt"
    lines = p.read_text().splitlines()
    lines[lineno - 1] = new_line
    p.write_text("\n".join(lines) + "\n")
    return dst


def test_voc_reader_malformed_line(tmp_path):
    d = corrupted_copy(tmp_path, "dog", 123, "000200")
    with pytest.raises(ValueError, match=r"dog_trainval\.txt:123: malformed"):
        read_voc_labels(d, "trainval")


def test_voc_reader_unknown_flag(tmp_path):
    d = corrupted_copy(tmp_path, "cat", 7, "000017  2")
    with pytest.raises(ValueError, match=r"cat_trainval\.txt:7: unknown flag '2'"):
        read_voc_labels(d, "trainval")


def test_voc_reader_id_mismatch(tmp_path):
    d = corrupted_copy(tmp_path, "bus", 10, "999999 -1")
    with pytest.raises(ValueError, match=r"bus_trainval\.txt:10: image id '999999'"):
        read_voc_labels(d, "trainval")


def test_voc_reader_bad_mode():
    with pytest.raises(ValueError, match="difficult"):
        read_voc_labels(VOC_MAIN, "trainval", difficult="maybe")
