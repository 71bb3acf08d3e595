r"""Loader for the Extreme Classification (XC) Repository's bag-of-words files.

Source: Bhatia et al., "The Extreme Classification Repository: Multi-label Datasets &
Code", http://manikvarma.org/downloads/XC/XMLRepository.html (archives on Google Drive,
no direct URL and no published checksum: the registry keeps the page and ``sha256=None``).

File formats
------------
**Data file** (one file per split; :func:`read_xmc_data`)::

    N D L                          <- header: rows, feature dimension, label count
    l1,l2,... f:v f:v ...          <- one row per line

Labels are comma-separated 0-based indices (the list may be empty: the line then starts
with the first ``f:v`` token, or with a blank); features are ``index:value`` tokens
with 0-based indices. A blank line is a row without labels and features; a final
newline does not start a row. Label lists with blanks after the commas
(``"3, 7 12:0.5"``, the LSHTC variant) are accepted.

**Split layout** (:func:`read_xmc_smat`): a feature file ``N D`` + rows ``f:v ...`` and
a label file ``N L`` + rows ``l:v ...`` (the repository tools' ``convert_format.pl`` output and
the layout of its newer sets: ``trn_X_Xf.txt`` / ``trn_X_Y.txt`` / ``tst_X_Xf.txt`` /
``tst_X_Y.txt``; some code bases, e.g. SLICE/SLEEC scripts, name them ``trn_ft_mat.txt`` /
``trn_lbl_mat.txt`` / ``tst_ft_mat.txt`` / ``tst_lbl_mat.txt``). A label is positive where its value is > 0.

Supported file names
--------------------
The loader finds files by *role* in the :class:`~cdgtmll.data.registry.DatasetSpec`,
so any name works; the registry uses the names inside the original XC BoW archives
(layout as used by many XMC code bases, e.g. napkinXC's ``datasets.py``):

* ``eurlex-4k``: ``eurlex_train.txt`` / ``eurlex_test.txt`` (archive folder ``Eurlex/``)
* ``wiki10-31k``: ``wiki10_train.txt`` / ``wiki10_test.txt`` (folder ``Wiki10/``)
* ``amazoncat-13k``: ``amazonCat_train.txt`` / ``amazonCat_test.txt`` (folder ``AmazonCat/``)

Newer re-packaged archives (``*.bow``) name the same format ``train.txt``/``test.txt``:
rename them, or use a spec whose files carry those names. A spec with the four roles
``train-features``, ``train-labels``, ``test-features``, ``test-labels`` is read in the
split layout (e.g. ``trn_X_Xf.txt`` ... or ``trn_ft_mat.txt`` ...).

Validation
----------
Every error is a :class:`XMCFormatError` (a ``ValueError``) whose message starts with
``<file>:<line>:``: a bad header (not three / two non-negative integers), a malformed
row (a token that is not ``int:number``, a label that is not an integer, a non-finite
value), a feature or label index outside ``[0, D)`` / ``[0, L)``, and a wrong row count
(fewer rows than the header declares = truncated file; more = wrong header). Header
sizes are also checked against the registry's ``n_train``/``n_test``/``n_features``/
``n_labels`` and train against test. Duplicate feature indices within a row are summed
(scipy's CSR convention), duplicate labels count once.

Parsing is vectorised per block of lines: one regular-expression check and a few
``bytes`` operations per *line* (no Python loop per token), then one ``np.fromstring``
over the block's numbers (``np.fromstring`` is ~half of the time). Measured on this
machine (one core, synthetic rows of 70 ``f:v`` tokens and 5 labels, 100k rows in 2.0 s):
about 50k rows/s, i.e. roughly 25 s for AmazonCat-13K's 1.19M training rows and 6 s for
its test file. Memory: each block's numbers are kept as they will be stored (float32
values, int32 indices; 8 bytes per non-zero) and :meth:`_Reader.csr` empties the block
lists as it concatenates them, so reading peaks at about 16 bytes per non-zero feature
(1.35 GB for AmazonCat-13K's 84M training non-zeros) plus one 8 MB block of lines;
:func:`load_xmc_bow` then applies TF-IDF and l2 in place (no copy). The whole
``prepare`` of AmazonCat-13K-shaped data is measured by ``benchmarks/bench_xmc_scale.py``
(docs/benchmarks.md).

Preprocessing ("as the paper says")
-----------------------------------
Sec. 5.1: "tabular/text data are tokenised and l2-normalised"; App. E.2: "TF-IDF
(d' = 200k sparse)". The XC BoW values are real-valued term weights (the weighting is
not documented per set), and no vocabulary/raw text comes with them, so "tokenise" has
nothing left to do. With ``tfidf=True`` (default, :data:`DEFAULT_TFIDF`) scikit-learn's
``TfidfTransformer(norm=None, use_idf=True, smooth_idf=True, sublinear_tf=False)`` is
fitted on the *training* rows and applied **on top of the provided values** (the
provided value plays the role of tf; idf = ln((1+n)/(1+df)) + 1 with df counted on the
training rows), then every row is l2-normalised (``sklearn.preprocessing.normalize``);
this equals ``TfidfTransformer()`` (its default ``norm='l2'``). With ``tfidf=False``
only the l2 normalisation is applied. Rows without features stay all-zero. What was
applied is recorded in the processed file's ``meta['preprocessing']``. The flag is a
keyword of :func:`load_xmc_bow`; ``cdgtmll.data.prepare`` passes it via
``loader_options={"tfidf": false}`` (CLI ``--loader-options '{"tfidf": false}'``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.data.mulan import TrainTest

FORMAT = "xmc-bow"
DEFAULT_TFIDF = True
#: validation split of XMC sets (see :func:`random_validation_split`)
SPLIT_METHOD = "seeded uniform random (numpy default_rng(seed).permutation); no stratification"
_BLOCK_BYTES = 8 << 20  # bytes of lines parsed per block

_FEAT_RE = re.compile(rb"[ \t]*(?:[0-9]+:[^\s:]+(?:[ \t]+[0-9]+:[^\s:]+)*)?[ \t]*")
_LAB_RE = re.compile(rb"[ \t]*(?:[0-9]+(?:[ \t]*,[ \t]*[0-9]+)*)?[ \t]*")
_WS = re.compile(rb"[ \t]")


class XMCFormatError(ValueError):
    """Malformed XC Repository file; the message starts with ``<file>:<line>:``."""


@dataclass
class XMCTrainTest(TrainTest):
    """:class:`TrainTest` plus a record of the preprocessing (saved to ``meta``)."""

    preprocessing: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- parsing
def _err(path: Path, line: int | str, msg: str) -> XMCFormatError:
    return XMCFormatError(f"{path}:{line}: {msg}")


def _read_header(fh, path: Path, n_fields: int, names: str) -> tuple[int, ...]:
    raw = fh.readline()
    parts = raw.split()
    if len(parts) != n_fields or not all(p.isdigit() for p in parts):
        shown = raw.decode("utf-8", "replace").rstrip("\r\n")[:80]
        raise _err(path, 1, f"bad header {shown!r}: expected {n_fields} non-negative integers '{names}'")
    return tuple(int(p) for p in parts)


def _first_bad_token(s: bytes) -> str:
    for tok in s.split():
        a, sep, b = tok.partition(b":")
        if not (sep and a.isdigit() and b and b":" not in b):
            return tok.decode("utf-8", "replace")[:40]
    return s.decode("utf-8", "replace")[:40]


def _index_dtype(bound: int) -> type:
    """int32 when every index and offset below ``bound`` fits (scipy's own choice), else int64."""
    return np.int32 if bound < np.iinfo(np.int32).max else np.int64


class _Reader:
    """Accumulates CSR parts of the rows of one file (features and optionally labels)."""

    def __init__(self, path: Path, n_cols: int, n_labels: int | None) -> None:
        self.path, self.n_cols, self.n_labels = path, n_cols, n_labels
        self.f_cnt: list[np.ndarray] = []
        self.f_idx: list[np.ndarray] = []
        self.f_val: list[np.ndarray] = []
        self.l_cnt: list[np.ndarray] = []
        self.l_idx: list[np.ndarray] = []

    def block(self, lines: list[bytes], line0: int) -> None:
        """Parse ``lines`` (raw, with end-of-line), the first being file line ``line0``."""
        m = len(lines)
        fcnt = np.empty(m, dtype=np.int64)
        lcnt = np.zeros(m, dtype=np.int64)
        feats: list[bytes] = []
        labs: list[bytes] = []
        with_labels = self.n_labels is not None
        for i, line in enumerate(lines):
            line = line.rstrip(b"\r\n")
            feat = line
            if with_labels:
                c = line.find(b":")
                if c < 0:
                    lab, feat = line, b""
                else:
                    s = max(line.rfind(b" ", 0, c), line.rfind(b"\t", 0, c)) + 1
                    lab, feat = line[:s], line[s:]
                if not _LAB_RE.fullmatch(lab):
                    raise _err(self.path, line0 + i, f"malformed label list {lab.decode('utf-8', 'replace')[:60]!r} "
                                                    "(expected comma-separated non-negative integers)")
                lab = lab.strip()
                if lab:
                    if b" " in lab or b"\t" in lab:
                        lab = _WS.sub(b"", lab)
                    lcnt[i] = lab.count(b",") + 1
                    labs.append(lab)
            if not _FEAT_RE.fullmatch(feat):
                raise _err(self.path, line0 + i, f"malformed token {_first_bad_token(feat)!r} "
                                                "(expected index:value with a 0-based integer index)")
            fcnt[i] = feat.count(b":")
            feats.append(feat)
        # ---- features: one parse for the whole block
        nf = int(fcnt.sum())
        vals = self._numbers(b" ".join(feats).replace(b":", b" "), 2 * nf, feats, line0)
        idx = vals[0::2]
        val = vals[1::2]
        if not np.all(np.isfinite(val)):
            row = self._row_of(fcnt, int(np.flatnonzero(~np.isfinite(val))[0]))
            raise _err(self.path, line0 + row, "non-finite feature value")
        if nf and idx.max() >= self.n_cols:
            k = int(np.flatnonzero(idx >= self.n_cols)[0])
            raise _err(self.path, line0 + self._row_of(fcnt, k),
                       f"feature index {int(idx[k])} out of range [0, {self.n_cols})")
        # kept per block as they are stored (float32 values, int32 indices when they fit):
        # half the memory of float64/int64 lists, and the same result as casting at the end
        with np.errstate(over="ignore"):  # overflow is reported below, naming the line
            val32 = val.astype(np.float32)
        if not np.all(np.isfinite(val32)):
            k = int(np.flatnonzero(~np.isfinite(val32))[0])
            raise _err(self.path, line0 + self._row_of(fcnt, k),
                       f"feature value {val[k]:g} is outside the float32 range (|v| < 3.4e38)")
        self.f_cnt.append(fcnt)
        self.f_idx.append(idx.astype(_index_dtype(self.n_cols)))
        self.f_val.append(val32)
        if with_labels:
            nl = int(lcnt.sum())
            lidx = np.fromstring(b",".join(labs), dtype=np.int64, sep=",") if nl else np.zeros(0, np.int64)
            if lidx.size != nl:  # cannot happen after the regex check; keep the invariant explicit
                raise _err(self.path, f"{line0}-{line0 + m - 1}", "label lists could not be parsed")
            if nl and lidx.max() >= self.n_labels:
                k = int(np.flatnonzero(lidx >= self.n_labels)[0])
                raise _err(self.path, line0 + self._row_of(lcnt, k),
                           f"label index {int(lidx[k])} out of range [0, {self.n_labels})")
            self.l_cnt.append(lcnt)
            self.l_idx.append(lidx.astype(_index_dtype(self.n_labels)))

    @staticmethod
    def _row_of(counts: np.ndarray, k: int) -> int:
        return int(np.searchsorted(np.cumsum(counts), k, side="right"))

    def _numbers(self, text: bytes, expected: int, feats: list[bytes], line0: int) -> np.ndarray:
        if expected == 0:
            return np.zeros(0, dtype=np.float64)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                arr = np.fromstring(text, dtype=np.float64, sep=" ")
        except (ValueError, DeprecationWarning):
            arr = None
        if arr is None or arr.size != expected:  # locate the offending line
            for i, f in enumerate(feats):
                for tok in f.split():
                    a, _, b = tok.partition(b":")
                    try:
                        float(b)
                    except ValueError:
                        raise _err(self.path, line0 + i, f"malformed value in token "
                                                         f"{tok.decode('utf-8', 'replace')[:40]!r}") from None
            raise _err(self.path, f"{line0}-{line0 + len(feats) - 1}", "could not parse the numbers of these lines")
        return arr

    def csr(self, n: int, n_cols: int, counts: list[np.ndarray], idx: list[np.ndarray],
            val: list[np.ndarray] | None, dtype: type) -> sp.csr_matrix:
        """The CSR matrix of the accumulated blocks; empties the lists ``idx`` and ``val``
        as it goes (a list and its concatenation coexist only one at a time)."""
        cnt = np.concatenate(counts) if counts else np.zeros(0, np.int64)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(cnt, out=indptr[1:])
        itype = _index_dtype(max(n_cols, int(indptr[-1])))
        ind = np.concatenate(idx).astype(itype, copy=False) if idx else np.zeros(0, itype)
        idx.clear()
        data = np.concatenate(val).astype(dtype, copy=False) if val else np.ones(ind.size, dtype=dtype)
        if val is not None:
            val.clear()
        M = sp.csr_matrix((data, ind, indptr.astype(itype, copy=False)), shape=(n, n_cols))
        M.sum_duplicates()  # also sorts indices
        return M


def _read_rows(path: Path, fh, n_rows: int, reader: _Reader) -> None:
    line_no = 2  # the header is line 1
    rows = 0
    while True:
        lines = fh.readlines(_BLOCK_BYTES)
        if not lines:
            break
        if rows + len(lines) > n_rows:
            raise _err(path, line_no + (n_rows - rows),
                       f"more rows than the {n_rows} declared in the header (line 1)")
        reader.block(lines, line_no)
        rows += len(lines)
        line_no += len(lines)
    if rows < n_rows:
        raise _err(path, line_no - 1 if rows else 1,
                   f"file ends after {rows} of the {n_rows} rows declared in the header (line 1): truncated file?")


def read_xmc_data(path: str | Path) -> tuple[sp.csr_matrix, sp.csr_matrix, tuple[int, int, int]]:
    """Read one XC data file: ``(X csr float32 [N, D], Y csr uint8 [N, L], (N, D, L))``."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            n, d, L = _read_header(fh, path, 3, "N D L")
            reader = _Reader(path, d, L)
            _read_rows(path, fh, n, reader)
    except OSError as exc:
        raise XMCFormatError(f"{path}: cannot read: {exc}") from None
    X = reader.csr(n, d, reader.f_cnt, reader.f_idx, reader.f_val, np.float32)
    Y = reader.csr(n, L, reader.l_cnt, reader.l_idx, None, np.uint8)
    Y.data[:] = 1  # duplicate labels (summed by sum_duplicates) count once
    return X, Y, (n, d, L)


def read_xmc_smat(path: str | Path, kind: str = "features") -> tuple[sp.csr_matrix, tuple[int, int]]:
    """Read one split-layout sparse matrix file (header ``N C``, rows ``i:v ...``).

    ``kind='features'`` -> csr float32; ``kind='labels'`` -> csr uint8 with 1 where the
    value is > 0 (entries <= 0 are dropped)."""
    path = Path(path)
    if kind not in ("features", "labels"):
        raise ValueError(f"kind must be 'features' or 'labels', got {kind!r}")
    try:
        with open(path, "rb") as fh:
            n, c = _read_header(fh, path, 2, "N D" if kind == "features" else "N L")
            reader = _Reader(path, c, None)
            _read_rows(path, fh, n, reader)
    except OSError as exc:
        raise XMCFormatError(f"{path}: cannot read: {exc}") from None
    M = reader.csr(n, c, reader.f_cnt, reader.f_idx, reader.f_val, np.float32)
    if kind == "labels":
        M.data = (M.data > 0).astype(np.uint8)
        M.eliminate_zeros()
        M = M.astype(np.uint8)
    return M, (n, c)


# --------------------------------------------------------------------------- preprocessing
def tfidf_l2(X_train: sp.spmatrix, X_test: sp.spmatrix, tfidf: bool = DEFAULT_TFIDF, inplace: bool = False
             ) -> tuple[sp.csr_matrix, sp.csr_matrix, dict[str, Any]]:
    """TF-IDF fitted on ``X_train`` (optional) then l2 row normalisation of both splits.

    The inputs are left unchanged (one float32 copy of each is transformed), unless
    ``inplace=True``: then float32 CSR inputs are transformed in their own arrays, no
    copy (what :func:`load_xmc_bow` does with the matrices it has just parsed: at
    AmazonCat-13K size a copy of the training matrix is 0.6 GB)."""
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.preprocessing import normalize

    Xtr = sp.csr_matrix(X_train, dtype=np.float32, copy=not inplace)
    Xte = sp.csr_matrix(X_test, dtype=np.float32, copy=not inplace)
    info: dict[str, Any] = {"tfidf": bool(tfidf), "l2_normalize": True}
    if tfidf:
        t = TfidfTransformer(norm=None, use_idf=True, smooth_idf=True, sublinear_tf=False).fit(Xtr)
        Xtr, Xte = t.transform(Xtr, copy=False), t.transform(Xte, copy=False)
        info["tfidf_params"] = {"fitted_on": "train rows", "norm": None, "use_idf": True, "smooth_idf": True,
                                "sublinear_tf": False, "applied_on": "the values provided in the files"}
    Xtr = normalize(Xtr, norm="l2", copy=False).astype(np.float32, copy=False)
    Xte = normalize(Xte, norm="l2", copy=False).astype(np.float32, copy=False)
    return sp.csr_matrix(Xtr), sp.csr_matrix(Xte), info


def random_validation_split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(fit_rows, val_rows)`` of ``n`` training rows: ``round(fraction * n)`` rows drawn
    uniformly without replacement (``np.random.default_rng(seed).permutation``); sorted
    int64. Used for XMC sets, where iterative stratification over 10^4 labels and 10^6
    rows (which needs the dense label matrix) is not feasible."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction}")
    n_val = int(round(fraction * n))
    if n_val < 1 or n_val >= n:
        raise ValueError(f"validation fraction {fraction} of {n} training rows leaves an empty side")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_val:]).astype(np.int64), np.sort(perm[:n_val]).astype(np.int64)


# --------------------------------------------------------------------------- spec loader
def _check_header(spec: Any, path: Path, what: str, n: int, d: int | None, L: int | None) -> None:
    want_n = spec.n_train if what == "train" else spec.n_test
    for name, want, got in (("rows", want_n, n), ("features", spec.n_features, d), ("labels", spec.n_labels, L)):
        if want is not None and got is not None and want != got:
            raise _err(path, 1, f"header says {got} {name}, the registry expects {want} for the {what} "
                                f"split of '{spec.name}' (wrong file?)")


def load_xmc_bow(spec: Any, fetched: Mapping[str, Any], *, tfidf: bool = DEFAULT_TFIDF) -> XMCTrainTest:
    """Loader for ``xmc-bow`` specs (``DatasetSpec.loader``).

    Roles ``train``/``test`` -> data-file layout (:func:`read_xmc_data`); roles
    ``train-features``/``train-labels``/``test-features``/``test-labels`` -> split layout
    (:func:`read_xmc_smat`). Returns sparse X (float32, TF-IDF if ``tfidf`` and l2
    normalised, see the module docstring) and sparse Y (uint8)."""
    roles = {f.role: fetched[f.name].path for f in spec.files if f.name in fetched}
    if "train" in roles and "test" in roles:
        Xtr, Ytr, (_, dtr, ltr) = read_xmc_data(roles["train"])
        _check_header(spec, roles["train"], "train", Xtr.shape[0], dtr, ltr)
        Xte, Yte, (_, dte, lte) = read_xmc_data(roles["test"])
        _check_header(spec, roles["test"], "test", Xte.shape[0], dte, lte)
        if (dtr, ltr) != (dte, lte):
            raise _err(roles["test"], 1, f"header D={dte} L={lte} differs from the train file's "
                                         f"D={dtr} L={ltr} ({roles['train']})")
        files = {"train": roles["train"].name, "test": roles["test"].name}
        layout = "data-file"
    elif {"train-features", "train-labels", "test-features", "test-labels"} <= set(roles):
        parts = {}
        for split in ("train", "test"):
            X, (n, d) = read_xmc_smat(roles[f"{split}-features"], "features")
            Y, (ny, L) = read_xmc_smat(roles[f"{split}-labels"], "labels")
            if ny != n:
                raise _err(roles[f"{split}-labels"], 1,
                           f"{ny} rows, but the feature file {roles[f'{split}-features'].name} has {n}")
            _check_header(spec, roles[f"{split}-features"], split, n, d, None)
            _check_header(spec, roles[f"{split}-labels"], split, ny, None, L)
            parts[split] = (X, Y)
        (Xtr, Ytr), (Xte, Yte) = parts["train"], parts["test"]
        if Xtr.shape[1] != Xte.shape[1] or Ytr.shape[1] != Yte.shape[1]:
            raise _err(roles["test-features"], 1, "train and test files declare different D or L")
        files = {r: roles[r].name for r in ("train-features", "train-labels", "test-features", "test-labels")}
        layout = "split (features file + labels file)"
    else:
        raise ValueError(f"dataset '{spec.name}': xmc-bow needs file roles train+test or train-features, "
                         f"train-labels, test-features, test-labels; got {sorted(roles)}")
    Xtr, Xte, info = tfidf_l2(Xtr, Xte, tfidf=tfidf, inplace=True)  # the parsed matrices are ours
    info.update({"layout": layout, "files": files, "label_names": "label index as in the files (no names shipped)"})
    L = Ytr.shape[1]
    return XMCTrainTest(Xtr, Ytr, Xte, Yte, [str(j) for j in range(L)], [], FORMAT, preprocessing=info)
