"""Noise-rho label-noise training variants (paper Sec. 5.3)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from cdgtmll.data.processed import ProcessedData
from cdgtmll.io import sha256_file
from cdgtmll.variants.noise import apply_to_dataset, main, make_noisy, variant_id


def rand_Y(M=400, L=12, p=0.3, seed=7) -> np.ndarray:
    return (np.random.default_rng(seed).random((M, L)) < p).astype(np.uint8)


def toy_dataset(M=300, L=10, sparse=False) -> ProcessedData:
    rng = np.random.default_rng(3)
    Y = (rng.random((M, L)) < 0.35).astype(np.uint8)
    X = rng.normal(size=(M, 4)).astype(np.float32)
    perm = rng.permutation(M)
    splits = {"train": np.sort(perm[:180]), "val": np.sort(perm[180:230]), "test": np.sort(perm[230:])}
    return ProcessedData("toy", X, sp.csr_matrix(Y) if sparse else Y, [f"l{i}" for i in range(L)], splits,
                         meta={"source_files": []})


def test_only_positives_flip_to_zero():
    Y = rand_Y()
    Y_new, book = make_noisy(Y, 0.3, seed=0)
    assert Y_new.dtype == Y.dtype and Y_new.shape == Y.shape
    assert not np.any((Y == 0) & (Y_new == 1)), "a negative became positive"
    flipped = (Y == 1) & (Y_new == 0)
    assert flipped.sum() == book["total_flipped"] > 0
    np.testing.assert_array_equal(Y.sum(0) - Y_new.sum(0), book["flipped_per_label"])
    assert book["positives_before"] == Y.sum(0).tolist()
    assert book["positives_after"] == Y_new.sum(0).tolist()
    assert book["n_positives_before"] - book["n_positives_after"] == book["total_flipped"]
    assert book["variant_id"] == "N0.30-s0" == variant_id(0.3, 0)
    json.dumps(book)  # JSON-able
    # the input is not modified
    assert (Y == rand_Y()).all()


def test_flip_fraction_binomial_tolerance():
    Y = rand_Y(M=2000, L=20, p=0.25, seed=11)
    n = int(Y.sum())
    for rate in (0.1, 0.2, 0.3):
        _, book = make_noisy(Y, rate, seed=5)
        k = book["total_flipped"]
        sd = math.sqrt(n * rate * (1 - rate))
        assert abs(k - n * rate) <= 5 * sd, (rate, k, n)
        assert book["empirical_flip_fraction"] == pytest.approx(k / n)


def test_seed_reproducibility_and_dense_sparse_agree():
    Y = rand_Y()
    a, ba = make_noisy(Y, 0.2, seed=1)
    b, bb = make_noisy(Y, 0.2, seed=1)
    c, _ = make_noisy(Y, 0.2, seed=2)
    np.testing.assert_array_equal(a, b)
    assert ba == bb
    assert not np.array_equal(a, c)
    s, bs = make_noisy(sp.csr_matrix(Y), 0.2, seed=1)
    assert sp.issparse(s) and s.dtype == Y.dtype
    np.testing.assert_array_equal(s.toarray(), a)
    assert bs["flipped_sha256"] == ba["flipped_sha256"]
    # documented RNG rule, recomputed independently
    r, cidx = np.nonzero(Y)
    u = np.random.default_rng(1).random(r.size)
    expect = Y.copy()
    expect[r[u < 0.2], cidx[u < 0.2]] = 0
    np.testing.assert_array_equal(a, expect)


def test_rate_edges_and_validation():
    Y = rand_Y()
    same, b0 = make_noisy(Y, 0.0, 0)
    np.testing.assert_array_equal(same, Y)
    assert b0["total_flipped"] == 0
    none, b1 = make_noisy(Y, 1.0, 0)
    assert none.sum() == 0 and b1["rows_emptied"] == int((Y.sum(1) > 0).sum())
    for bad in (-0.1, 1.5, float("nan"), True):
        with pytest.raises(ValueError):
            make_noisy(Y, bad, 0)
    with pytest.raises(ValueError):
        make_noisy(Y * 2, 0.1, 0)


@pytest.mark.parametrize("sparse", [False, True])
def test_apply_to_dataset_touches_train_rows_only(sparse):
    data = toy_dataset(sparse=sparse)
    out, book = apply_to_dataset(data, 0.3, seed=0)
    Y0 = data.Y.toarray() if sparse else data.Y
    Y1 = out.Y.toarray() if sparse else out.Y
    assert sp.issparse(out.Y) == sparse
    changed = np.flatnonzero((Y0 != Y1).any(1))
    assert changed.size > 0 and np.isin(changed, data.splits["train"]).all()
    for s in ("val", "test"):
        np.testing.assert_array_equal(Y0[data.splits[s]], Y1[data.splits[s]])
    assert not np.any((Y0 == 0) & (Y1 == 1))
    assert int((Y0 != Y1).sum()) == book["total_flipped"]
    # same result as make_noisy on the training rows
    ref, _ = make_noisy(Y0[data.splits["train"]], 0.3, 0)
    np.testing.assert_array_equal(Y1[data.splits["train"]], ref)
    assert out.X is data.X and out.name == "toy-N"
    assert out.meta["variant"]["kind"] == "N" and out.meta["variant"]["rate"] == 0.3
    with pytest.raises(ValueError, match="already a variant"):
        apply_to_dataset(out, 0.1, 0)


def test_cli_roundtrip(tmp_path: Path):
    data = toy_dataset()
    src = tmp_path / "clean.npz"
    data.save(src)
    out, bk = tmp_path / "N0.10-s0.npz", tmp_path / "N0.10-s0.json"
    assert main(["--in", str(src), "--rate", "0.1", "--seed", "0", "--out", str(out), "--bookkeeping", str(bk)]) == 0
    book = json.loads(bk.read_text())
    assert book["rate"] == 0.1 and book["seed"] == 0
    assert book["source"]["sha256"] == sha256_file(src)
    assert book["output"]["sha256"] == sha256_file(out)
    loaded = ProcessedData.load(out)
    expect, _ = apply_to_dataset(data, 0.1, 0)
    np.testing.assert_array_equal(loaded.Y, expect.Y)
    assert main(["--in", str(out), "--rate", "0.1", "--seed", "0", "--out", str(tmp_path / "x.npz"),
                 "--bookkeeping", str(tmp_path / "x.json")]) == 2  # refused: already a variant


def test_yeast_train_flip_rate(mirror):
    from cdgtmll.data.mulan import read_mulan_arff

    path = mirror / "yeast" / "yeast-train.arff"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    _, Y, _ = read_mulan_arff(path, 14)
    Y_new, book = make_noisy(Y, 0.2, seed=0)
    n = int(Y.sum())
    assert abs(book["total_flipped"] - 0.2 * n) <= 5 * math.sqrt(n * 0.2 * 0.8)
    assert not np.any((Y == 0) & (Y_new == 1))
