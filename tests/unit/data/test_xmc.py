"""XMC: XC-Repository BoW loader, TF-IDF/l2, prepare() through the registry, top-K
predictions (run/evaluate), and the sparse TF-IDF linear backbone in the shared trainer."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from cdgtmll.data.xmc import (
    SPLIT_METHOD,
    XMCFormatError,
    load_xmc_bow,
    random_validation_split,
    read_xmc_data,
    read_xmc_smat,
    tfidf_l2,
)
from tests.support.specs import clean_spec

FIXTURE = (
    "5 6 4\n"
    "0,2 0:0.5 3:1.5\n"
    " 1:2 5:0.25\n"  # empty label list (the writer's leading blank)
    "3 2:1e-1\n"
    "1,2,3 0:1 1:1 4:3\n"
    "2\n"  # labels, no features
)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- parsing
def test_fixture_parses_to_expected_csr(tmp_path):
    X, Y, header = read_xmc_data(_write(tmp_path / "train.txt", FIXTURE))
    assert header == (5, 6, 4)
    assert sp.isspmatrix_csr(X) and X.dtype == np.float32 and X.shape == (5, 6)
    assert sp.isspmatrix_csr(Y) and Y.dtype == np.uint8 and Y.shape == (5, 4)
    X_exp = np.zeros((5, 6), np.float32)
    X_exp[0, [0, 3]] = [0.5, 1.5]
    X_exp[1, [1, 5]] = [2.0, 0.25]
    X_exp[2, 2] = np.float32(0.1)
    X_exp[3, [0, 1, 4]] = [1, 1, 3]
    Y_exp = np.zeros((5, 4), np.uint8)
    Y_exp[0, [0, 2]] = 1
    Y_exp[2, 3] = 1
    Y_exp[3, [1, 2, 3]] = 1
    Y_exp[4, 2] = 1
    np.testing.assert_array_equal(X.toarray(), X_exp)
    np.testing.assert_array_equal(Y.toarray(), Y_exp)
    assert X.has_canonical_format and Y.has_canonical_format
    assert X.indices.dtype == X.indptr.dtype == Y.indices.dtype == np.int32  # stored as parsed, no int64 copy
    # no leading blank before features of a label-less row, LSHTC-style "a, b", CRLF, no final newline
    # a blank line is a row without labels and features
    p2 = tmp_path / "b.txt"
    p2.write_bytes(b"4 6 4\r\n1:2 5:0.25\r\n0, 2 0:0.5 3:1.5\r\n\r\n3")
    X2, Y2, _ = read_xmc_data(p2)
    np.testing.assert_array_equal(X2.toarray()[:2], X_exp[[1, 0]])
    assert X2[2:].nnz == 0
    np.testing.assert_array_equal(Y2.toarray(), [[0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]])


def test_split_layout_reader(tmp_path):
    Xf = _write(tmp_path / "trn_X_Xf.txt", "3 5\n0:1 4:2\n\n2:0.5\n")
    Xy = _write(tmp_path / "trn_X_Y.txt", "3 3\n2:1\n0:1 1:1\n\n")
    X, (n, d) = read_xmc_smat(Xf, "features")
    Y, (ny, L) = read_xmc_smat(Xy, "labels")
    assert (n, d, ny, L) == (3, 5, 3, 3)
    np.testing.assert_array_equal(X.toarray(), [[1, 0, 0, 0, 2], [0, 0, 0, 0, 0], [0, 0, 0.5, 0, 0]])
    assert Y.dtype == np.uint8
    np.testing.assert_array_equal(Y.toarray(), [[0, 0, 1], [1, 1, 0], [0, 0, 0]])


def test_load_xmc_bow_split_layout_spec(tmp_path):
    from types import SimpleNamespace

    from cdgtmll.data.registry import DatasetSpec, RemoteFile

    files = {"train-features": ("trn_ft_mat.txt", "3 5\n0:1 4:2\n\n2:0.5\n"),
             "train-labels": ("trn_lbl_mat.txt", "3 3\n2:1\n0:1 1:1\n\n"),
             "test-features": ("tst_ft_mat.txt", "2 5\n1:1\n3:2 4:2\n"),
             "test-labels": ("tst_lbl_mat.txt", "2 3\n0:1\n1:1\n")}
    spec = DatasetSpec("toy", "Toy", "xmc", "xmc-bow", 3, tuple(RemoteFile(n, role=r) for r, (n, _) in files.items()),
                       3, 2, "cdgtmll.data.xmc.load_xmc_bow", n_features=5)
    fetched = {n: SimpleNamespace(path=_write(tmp_path / n, t)) for n, t in files.values()}
    tt = load_xmc_bow(spec, fetched, tfidf=False)
    assert tt.preprocessing["layout"].startswith("split") and tt.preprocessing["tfidf"] is False
    np.testing.assert_allclose(tt.X_test.toarray(), [[0, 1, 0, 0, 0], [0, 0, 0, 2 ** -0.5, 2 ** -0.5]], rtol=1e-6)
    np.testing.assert_array_equal(tt.Y_train.toarray(), [[0, 0, 1], [1, 1, 0], [0, 0, 0]])
    assert tt.label_names == ["0", "1", "2"]
    fetched["tst_lbl_mat.txt"] = SimpleNamespace(path=_write(tmp_path / "bad.txt", "3 3\n0:1\n1:1\n\n"))
    with pytest.raises(XMCFormatError, match=r"bad\.txt:1: 3 rows, but the feature file tst_ft_mat\.txt has 2"):
        load_xmc_bow(spec, fetched)


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("5 6\n0 1:1\n", 1, "bad header"),
        ("five 6 4\n0 1:1\n", 1, "bad header"),
        ("", 1, "bad header"),
        (FIXTURE.rsplit("\n", 3)[0] + "\n", 4, "ends after 3 of the 5 rows.*truncated"),
        ("2 6 4\n0 1:1\n0 1:1\n0 1:1\n", 4, "more rows"),
        ("2 6 4\n0 1:1\n0 6:1\n", 3, r"feature index 6 out of range \[0, 6\)"),
        ("2 6 4\n0 1:1\n4 5:1\n", 3, r"label index 4 out of range \[0, 4\)"),
        ("2 6 4\n0 1:1 2\n1 1:1\n", 2, "malformed token '2'"),
        ("2 6 4\n0 1:1:2\n1 1:1\n", 2, "malformed token '1:1:2'"),
        ("2 6 4\n0 1:1\n1 -1:1\n", 3, "malformed token"),
        ("2 6 4\n0 1:x\n1 1:1\n", 2, "malformed value in token '1:x'"),
        ("2 6 4\n0 1:nan\n1 1:1\n", 2, "non-finite"),
        ("2 6 4\n0 1:1\n1 2:1 3:-4e38\n", 3, r"feature value -4e\+38 is outside the float32 range"),
        ("2 6 4\n0;1 1:1\n1 1:1\n", 2, "malformed label list"),
        ("2 6 4\n0,,1 1:1\n1 1:1\n", 2, "malformed label list"),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, line, what):
    p = _write(tmp_path / "eurlex_train.txt", text)
    with pytest.raises(XMCFormatError, match=re.escape(f"{p}:{line}:") + ".*" + what):
        read_xmc_data(p)


def test_error_line_numbers_across_blocks(tmp_path, monkeypatch):
    import cdgtmll.data.xmc as xmc

    monkeypatch.setattr(xmc, "_BLOCK_BYTES", 64)  # many small blocks
    rows = [f"{i % 4} {i % 6}:1" for i in range(40)]
    rows[33] = "1 9:1"
    p = _write(tmp_path / "t.txt", "40 6 4\n" + "\n".join(rows) + "\n")
    with pytest.raises(XMCFormatError, match=re.escape(f"{p}:35:") + " feature index 9"):
        read_xmc_data(p)


# --------------------------------------------------------------------------- TF-IDF + l2
def test_tfidf_l2_unit_norm_and_equals_sklearn():
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.preprocessing import normalize

    Xtr = sp.random(60, 40, density=0.15, format="csr", dtype=np.float32, random_state=0)
    Xtr = sp.csr_matrix(sp.diags((np.arange(60) != 3).astype(np.float32)) @ Xtr)  # row 3 empty: stays zero
    Xtr.eliminate_zeros()
    Xte = sp.random(20, 40, density=0.15, format="csr", dtype=np.float32, random_state=1)
    A, B, info = tfidf_l2(Xtr, Xte, tfidf=True)
    assert info["tfidf"] and info["l2_normalize"] and A.dtype == np.float32 and sp.isspmatrix_csr(B)
    norms = np.sqrt(np.asarray(A.multiply(A).sum(1))).ravel()
    np.testing.assert_allclose(norms[np.arange(60) != 3], 1.0, rtol=1e-5)
    assert norms[3] == 0
    np.testing.assert_allclose(np.sqrt(np.asarray(B.multiply(B).sum(1))).ravel()[B.getnnz(1) > 0], 1.0, rtol=1e-5)
    ref = TfidfTransformer().fit(Xtr)  # sklearn's pipeline: tf-idf (idf from train) + l2
    np.testing.assert_allclose(A.toarray(), ref.transform(Xtr).toarray(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(B.toarray(), ref.transform(Xte).toarray(), rtol=1e-5, atol=1e-7)
    A0, B0, info0 = tfidf_l2(Xtr, Xte, tfidf=False)
    assert not info0["tfidf"]
    np.testing.assert_allclose(B0.toarray(), normalize(Xte).toarray(), rtol=1e-6)
    # the inputs are untouched by default; inplace=True gives the same matrices in the inputs' arrays
    keep = [M.copy() for M in (Xtr, Xte)]
    for flag in (True, False):
        tfidf_l2(Xtr, Xte, tfidf=flag)
        assert all((M != K).nnz == 0 for M, K in zip((Xtr, Xte), keep))
    for flag, (R1, R2) in ((True, (A, B)), (False, (A0, B0))):
        C, D = (K.copy() for K in keep)
        C2, D2, _ = tfidf_l2(C, D, tfidf=flag, inplace=True)
        assert np.shares_memory(C2.data, C.data) and np.shares_memory(D2.data, D.data)
        np.testing.assert_array_equal(C2.toarray(), R1.toarray())
        np.testing.assert_array_equal(D2.toarray(), R2.toarray())


def test_random_validation_split():
    fit, val = random_validation_split(1000, 0.1, seed=3)
    assert val.size == 100 and fit.size == 900 and np.intersect1d(fit, val).size == 0
    assert np.array_equal(np.union1d(fit, val), np.arange(1000))
    f2, v2 = random_validation_split(1000, 0.1, seed=3)
    assert np.array_equal(v2, val) and not np.array_equal(random_validation_split(1000, 0.1, seed=4)[1], val)


# --------------------------------------------------------------------------- prepare()
def _xc_file(path: Path, n: int, D: int, L: int, seed: int) -> None:
    """A file in the repository format with the registry's sizes (1-3 labels, 1-4 features per row,
    some rows label-less)."""
    rng = np.random.default_rng(seed)
    lines = [f"{n} {D} {L}"]
    for i in range(n):
        labs = "" if i % 17 == 5 else ",".join(map(str, sorted(set(rng.integers(0, L, rng.integers(1, 4))))))
        f = np.unique(rng.integers(0, D, rng.integers(1, 5)))
        feats = " ".join(f"{j}:{v:.4f}" for j, v in zip(f, rng.random(f.size) + 0.1))
        lines.append(f"{labs} {feats}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_prepare_through_registry_entry(tmp_path, monkeypatch):
    from cdgtmll.data.acquire import MIRROR_ENV, UnverifiedWarning
    from cdgtmll.data.prepare import prepare
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.data.registry import get_spec

    spec = get_spec("eurlex-4k")  # the real entry: its file names, sizes, loader
    assert spec.loader == "cdgtmll.data.xmc.load_xmc_bow" and spec.kind == "xmc"
    mirror = tmp_path / "mirror"
    (mirror / spec.folder).mkdir(parents=True)
    _xc_file(mirror / spec.folder / spec.file("train").name, spec.n_train, spec.n_features, spec.n_labels, 0)
    _xc_file(mirror / spec.folder / spec.file("test").name, spec.n_test, spec.n_features, spec.n_labels, 1)
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    out = tmp_path / "processed.npz"
    with pytest.warns(UnverifiedWarning):
        prepare("eurlex-4k", tmp_path / "raw", out, allow_download=False, val_fraction=0.1, split_seed=0)
    data = ProcessedData.load(out)
    n = spec.n_train + spec.n_test
    assert sp.isspmatrix_csr(data.X) and data.X.dtype == np.float32 and data.X.shape == (n, spec.n_features)
    assert sp.isspmatrix_csr(data.Y) and data.Y.dtype == np.uint8 and data.Y.shape == (n, spec.n_labels)
    assert data.splits["val"].size == round(0.1 * spec.n_train)
    assert data.splits["train"].size + data.splits["val"].size == spec.n_train
    np.testing.assert_array_equal(data.splits["test"], np.arange(spec.n_train, n))
    fit, val = random_validation_split(spec.n_train, 0.1, 0)
    np.testing.assert_array_equal(data.splits["val"], val)
    assert data.meta["split"]["method"] == SPLIT_METHOD
    assert data.meta["preprocessing"]["tfidf"] is True and data.meta["source_format"] == "xmc-bow"
    nz = data.X.getnnz(1) > 0
    np.testing.assert_allclose(np.sqrt(np.asarray(data.X.multiply(data.X).sum(1))).ravel()[nz], 1.0, rtol=1e-5)
    # the saved matrices are the loader's: parse + tf-idf(train) + l2
    Xtr, Ytr, _ = read_xmc_data(mirror / spec.folder / spec.file("train").name)
    Xte, Yte, _ = read_xmc_data(mirror / spec.folder / spec.file("test").name)
    A, B, _ = tfidf_l2(Xtr, Xte)
    assert (data.X != sp.vstack([A, B]).tocsr()).nnz == 0
    assert (data.Y != sp.vstack([Ytr, Yte]).tocsr()).nnz == 0
    # tfidf: false through loader_options; wrong registry size -> error naming the file and line 1
    with pytest.warns(UnverifiedWarning):
        d2 = prepare("eurlex-4k", tmp_path / "raw", tmp_path / "p2.npz", allow_download=False,
                     loader_options={"tfidf": False})
    assert d2.meta["preprocessing"]["tfidf"] is False and d2.meta["loader_options"] == {"tfidf": False}
    import dataclasses

    bad = dataclasses.replace(spec, n_train=spec.n_train + 1)
    with pytest.raises(XMCFormatError, match=r"eurlex_train\.txt:1: header says 15539 rows"), \
            pytest.warns(UnverifiedWarning):
        prepare(bad, tmp_path / "raw", tmp_path / "p3.npz", allow_download=False)


# --------------------------------------------------------------------------- top-K P@k
def test_topk_rows_equals_reference_with_ties():
    """metrics_core.topk_rows (argpartition + tie fallback) = metrics_core._topk_rows exactly:
    ties across the cut, ties inside it, -inf, NaN, float32, k = 1 .. L."""
    from cdgtmll.metrics.definitions import _topk_rows, topk_rows

    rng = np.random.default_rng(0)
    for trial in range(40):
        m, L = int(rng.integers(1, 30)), int(rng.integers(2, 40))
        S = np.round(rng.random((m, L)), 1)  # ~10 distinct values: ties everywhere
        S[rng.random((m, L)) < 0.1] = -np.inf
        for dtype in (np.float64, np.float32):
            Sd = S.astype(dtype)
            for k in range(1, L + 1):
                np.testing.assert_array_equal(topk_rows(Sd, k), _topk_rows(Sd, k), err_msg=f"{trial} {k}")
    S = rng.random((200, 3000)).astype(np.float32)  # no ties: the argpartition path only
    S[5, :] = 0.25  # one all-tied row
    S[7, rng.permutation(3000)[:40]] = 2.0  # 40 equal maxima, k = 5 and 100 straddle them
    S[9, :] = np.nan
    S[9, :200] = rng.random(200)  # NaN beyond the candidates
    for k in (1, 5, 100):
        np.testing.assert_array_equal(topk_rows(S, k), _topk_rows(S, k))
    S[9, 0] = np.nan
    S[9, 1:] = np.nan
    S[9, 1:4] = 1.0  # fewer finite values than k: falls back to the reference (same error)
    with pytest.raises(ValueError):
        _topk_rows(S, 5)
    with pytest.raises(ValueError):
        topk_rows(S, 5)


def test_topk_pak_equals_dense_pak():
    from cdgtmll.metrics.definitions import precision_at_k, precision_at_k_topk, topk_from_scores

    rng = np.random.default_rng(0)
    for n, L, K in ((300, 50, 5), (257, 120, 100), (64, 7, 7)):
        Y = (rng.random((n, L)) < 0.08).astype(np.uint8)
        Y[:5] = 0  # rows without positives
        S = np.round(rng.random((n, L)), 1)  # many ties: lower label index must win, as in metrics
        S[Y == 1] = np.minimum(S[Y == 1] + 0.2, 1.0)
        dense = precision_at_k(Y, S, ks=(1, 3, 5))
        idx, val = topk_from_scores(S, K)
        assert idx.dtype == np.int32 and val.dtype == np.float32 and idx.shape == (n, min(K, L))
        np.testing.assert_array_equal(val, np.take_along_axis(S, idx.astype(np.int64), 1).astype(np.float32))
        for Yin in (Y, sp.csr_matrix(Y)):
            assert precision_at_k_topk(Yin, idx, ks=(1, 3, 5), chunk=50) == dense
    with pytest.raises(ValueError, match="ks must be in"):
        precision_at_k_topk(Y, idx[:, :3], ks=(1, 3, 5))


# --------------------------------------------------------------------------- sparse backbone
def _sparse_problem(n=240, D=300, L=10, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, D, density=0.03, format="csr", dtype=np.float32, random_state=seed)
    X = tfidf_l2(X[:1], X, tfidf=False)[1]
    W = rng.normal(size=(D, L)).astype(np.float32)
    Z = X @ W
    Y = sp.csr_matrix((Z > np.quantile(Z, 0.85, axis=0)).astype(np.uint8))
    return X, Y


def _fit(name, X, Y, workdir, backbone="tfidf-linear", seed=0, **hp):
    import cdgtmll.methods.cdgtmll.model  # noqa: F401  (registers CD-GTMLL)
    from cdgtmll.methods import base
    from cdgtmll.methods.base import FitData, RunContext

    m = base.build(name, {"epochs": 2, "batch_size": 64, "hidden_dim": 32, **hp})
    n = X.shape[0]
    a, b = int(0.7 * n), int(0.85 * n)
    data = FitData(X[:a], Y[:a], X[a:b], Y[a:b], [str(j) for j in range(Y.shape[1])])
    m.fit(data, RunContext(seed=seed, workdir=Path(workdir), extra={"training": {"backbone": backbone}}))
    return m, X[b:]


def test_bce_trains_on_sparse_problem_with_sparse_backbone(tmp_path):
    from cdgtmll.nn.backbones.tfidf import SparseLinearBackbone

    X, Y = _sparse_problem()
    m, X_te = _fit("BCE", X, Y, tmp_path / "a")
    assert isinstance(m.model.backbone, SparseLinearBackbone) and m.model.backbone.out_dim == 32
    assert [r["epoch"] for r in m.train_log] == [1, 2]
    for r in m.train_log:
        assert np.isfinite(r["loss"]) and np.isfinite(r["val_mAP"]) and 0 <= r["val_p@1"] <= 1
    S = m.predict_proba(X_te)
    assert S.shape == (X_te.shape[0], Y.shape[1]) and np.all((S >= 0) & (S <= 1))
    # same seed -> bit-identical on CPU; sparse and dense feeding of the same backbone agree
    m2, _ = _fit("BCE", X, Y, tmp_path / "b")
    np.testing.assert_array_equal(m2.predict_proba(X_te), S)
    np.testing.assert_allclose(m.predict_proba(X_te.toarray()), S, rtol=1e-5, atol=1e-6)
    # a third run resumes from the complete checkpoint: nothing left to do, same model
    m3, _ = _fit("BCE", X, Y, tmp_path / "a")
    np.testing.assert_array_equal(m3.predict_proba(X_te), S)


def test_cdgtmll_and_mlp_paths(tmp_path):
    from cdgtmll.nn.backbones.mlp import MLPBackbone
    from cdgtmll.nn.backbones.tfidf import SparseLinearBackbone

    X, Y = _sparse_problem(n=160, L=8, seed=1)
    m, X_te = _fit("CD-GTMLL", X, Y, tmp_path / "c", n_players=2)  # sparse X and sparse Y
    assert isinstance(m.model.backbone, SparseLinearBackbone) and len(m.train_log) == 2
    assert len(m._player_acc) == 2  # epoch_end ran on the SparseRows validation inputs
    assert m.predict_proba(X_te).shape == (X_te.shape[0], 8)
    mlp, _ = _fit("BCE", X, Y, tmp_path / "d", backbone="mlp")  # explicit MLP: densified, as before
    assert isinstance(mlp.model.backbone, MLPBackbone)


def test_run_and_evaluate_topk_format(tmp_path, monkeypatch):
    """run.py writes top-K predictions for large L (threshold lowered here) and evaluate.py
    scores them: P@k equal to the dense P@k of the same model, mAP/F1 null with a note."""
    from cdgtmll import train as run
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import definitions
    from cdgtmll.metrics import evaluate_run as evaluate
    from cdgtmll.metrics.definitions import precision_at_k

    X, Y = _sparse_problem(n=200, L=12, seed=2)
    splits = {"train": np.arange(0, 140), "val": np.arange(140, 170), "test": np.arange(170, 200)}
    data = ProcessedData("toy-xmc", X, Y, [str(j) for j in range(12)], splits, {})
    monkeypatch.setattr(run, "TOPK_MIN_LABELS", 10)
    monkeypatch.setattr(run, "TOPK", 6)
    monkeypatch.setattr(run, "PREDICT_ROWS", 7)
    spec = clean_spec("toy-xmc", "BCE", training={"backbone": "tfidf-linear", "epochs": 2, "batch_size": 32}, hparams={"hidden_dim": 16})
    tail = tail_labels(Y[splits["train"]])
    pred = run.run_seed(data, tail, spec, 0, tmp_path / "seed0", {})
    with np.load(pred) as z:
        assert str(z["format"]) == "topk" and int(z["topk"]) == 6
        assert z["test_topk_idx"].shape == (30, 6) and z["test_topk_idx"].dtype == np.int32
        assert z["val_topk_score"].dtype == np.float32 and "test" not in z.files
        idx = z["test_topk_idx"]
    res = evaluate.evaluate_run(data, pred, tail, 0.5)
    # the same model's dense scores, recomputed: P@k must agree exactly
    from cdgtmll.methods.base import FitData, RunContext, build_for_protocol

    m = build_for_protocol("BCE", spec.hparams, spec.training)

    run.set_seed(0)
    m.fit(FitData(X[splits["train"]], Y[splits["train"]], X[splits["val"]], Y[splits["val"]], data.label_names,
                  tail=tail), RunContext(seed=0, workdir=tmp_path / "seed0", device="cpu",
                                         extra={"training": spec.training}))
    S = m.predict_proba(X[splits["test"]])
    np.testing.assert_array_equal(idx, definitions.topk_from_scores(S, 6)[0])
    dense = precision_at_k(Y[splits["test"]], S)
    for block in ("global@0.5", "adaptive"):
        b = res[block]
        assert {k: b[k] for k in ("p@1", "p@3", "p@5")} == dense
        assert b["mAP"] is None and b["macro_f1"] is None and b["note"] == evaluate.TOPK_NOTE
    assert res["adaptive_thresholds"] is None and res["format"] == "topk"


def test_cdgtmll_sparse_targets_relaid_once_with_identical_results(tmp_path, monkeypatch):
    """A sparse Y is re-laid once on the CSR matrix (``train_target_columns``): no batch goes
    through ``train_targets``, and the model is bit-identical to the per-batch re-lay and to a
    dense Y."""
    from cdgtmll.methods.cdgtmll.model import CDGTMLL

    X, Y = _sparse_problem(n=160, L=8, seed=1)
    calls = []
    per_batch = CDGTMLL.train_targets
    monkeypatch.setattr(CDGTMLL, "train_targets", lambda self, model, y: calls.append(y.shape) or per_batch(self, model, y))
    once, X_te = _fit("CD-GTMLL", X, Y, tmp_path / "once", n_players=2)
    assert calls == []
    S = once.predict_proba(X_te)
    dense, _ = _fit("CD-GTMLL", X, sp.csr_matrix(Y).toarray(), tmp_path / "dense", n_players=2)
    assert len(calls) == 1  # the dense path re-lays the whole Y once
    np.testing.assert_array_equal(dense.predict_proba(X_te), S)
    monkeypatch.setattr(CDGTMLL, "train_target_columns", lambda self, model: None)
    batched, _ = _fit("CD-GTMLL", X, Y, tmp_path / "batched", n_players=2)
    assert len(calls) > 3  # the per-batch path: every training batch
    np.testing.assert_array_equal(batched.predict_proba(X_te), S)
