"""Loaders for MULAN-format multi-label data and for the river copy of Yeast.

MULAN format (Tsoumakas, Spyromitros-Xioufis, Vilcek & Vlahavas, "MULAN: A Java Library
for Multi-Label Learning", JMLR 12:2411-2414, 2011; http://mulan.sourceforge.net/format.html):

* one ARFF file per split (Weka's Attribute-Relation File Format, dense rows
  ``v1,v2,...`` or sparse rows ``{index value, ...}``), in which every label is a nominal
  ``{0,1}`` attribute;
* an XML file ``<labels xmlns="http://mulan.sourceforge.net/labels"><label name=".."/>..``
  naming the label attributes (hierarchies are nested ``<label>`` elements).

MULAN identifies labels by *name*; the label index order is the ARFF attribute order (the
XML order may differ, e.g. Yeast lists Class6 before Class4). The loaders here therefore
return label columns in ARFF attribute order and check that the XML names are exactly
the label attributes. In every mirrored file the labels are the last attributes; that
is required here (an error otherwise).

Sparse ARFF: an omitted value is 0 for numeric attributes and the *first declared value*
for nominal ones, so a nominal attribute in a sparse file must declare a first value
that means 0 (MULAN's ``{0,1}``); anything else is refused rather than misread.

Attribute names: a quoted name (``'O\\'Brien'``, ``"say \\"hi\\""``) may contain backslash
escapes, which are decoded with the rules liac-arff applies to quoted *values*
(``arff._unquote``: ``\\\\ \\' \\" \\t \\n \\r \\b \\f \\%``, ``\\<octal>``, ``\\uXXXX``; any
other escape is an error). liac-arff itself only strips the quotes of a name, which left
``O\\'Brien`` not matching the XML's ``O'Brien``. An unquoted name is taken literally:
Delicious declares ``TAG_m\\'usica`` unquoted and its XML spells it the same way.
"""

from __future__ import annotations

import csv
import gzip
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import arff
import numpy as np
import scipy.sparse as sp

DENSIFY_MAX_CELLS = 200_000_000  # densify a sparse X only up to this many cells (~800 MB float32)
RIVER_YEAST_TEST_ROWS = 917  # rows 0-916 of river's yeast.csv.gz are MULAN's test split
RIVER_YEAST_ROWS = 2417  # then 1500 train rows
RIVER_YEAST_LABELS = 14


def _short(msg: str, n: int = 240) -> str:
    msg = str(msg)
    return msg if len(msg) <= n else msg[:n] + "..."


# --------------------------------------------------------------------------- XML
def read_mulan_xml(path: str | Path) -> list[str]:
    """Label names of a MULAN XML file, in document order (nested, i.e. hierarchical,
    labels flattened depth-first)."""
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else "?"
        raise ValueError(f"{path}: malformed MULAN label XML at line {line}: {exc}") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read MULAN label XML: {exc}") from None
    if _local(root.tag) != "labels":
        raise ValueError(f"{path}: root element is <{_local(root.tag)}>, expected <labels>")
    names = []
    for el in root.iter():
        if _local(el.tag) == "label":
            name = el.get("name")
            if not name:
                raise ValueError(f"{path}: a <label> element has no 'name' attribute")
            names.append(name)
    if not names:
        raise ValueError(f"{path}: no <label> elements")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{path}: duplicate label names: {', '.join(dup[:10])}")
    return names


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


# --------------------------------------------------------------------------- ARFF
#: liac-arff's escape table for quoted strings (arff._ESCAPE_SUB_MAP, liac-arff 2.5.0)
_ARFF_ESCAPES = {
    "\\\\": "\\", '\\"': '"', "\\'": "'", "\\t": "\t", "\\n": "\n", "\\r": "\r",
    "\\b": "\b", "\\f": "\f", "\\%": "%",
    **{f"\\{i}": chr(i) for i in range(10)},
}
_RE_ARFF_ESCAPE = re.compile(r"\\([0-9]{1,3}|u[0-9a-f]{4}|.)")
#: liac-arff's split of an ``@attribute`` declaration into name and type (arff._RE_ATTRIBUTE)
_RE_ARFF_ATTRIBUTE = re.compile(r"""^(\".*\"|\'.*\'|[^\{\}%,\s]*)\s+(.+)$""", re.UNICODE)


def arff_unquote_name(token: str) -> str:
    """The name an ARFF ``@attribute`` token declares: a quoted token loses its quotes and
    has its backslash escapes decoded (liac-arff's rules for quoted values); an unquoted
    token is returned as it is. Raises ``ValueError`` on an unsupported escape."""
    if len(token) < 2 or token[0] not in "'\"" or token[-1] != token[0]:
        return token

    def sub(m: re.Match) -> str:
        esc = m.group()
        if len(esc) == 2:
            if esc not in _ARFF_ESCAPES:
                known = " ".join(k for k in _ARFF_ESCAPES if not k[1].isdigit())
                raise ValueError(f"unsupported escape {esc} (expected one of {known}, \\<octal digits> or \\uXXXX)")
            return _ARFF_ESCAPES[esc]
        return chr(int(esc[2:], 16)) if esc[1] == "u" else chr(int(esc[1:], 8))

    return _RE_ARFF_ESCAPE.sub(sub, token[1:-1])


def _declared_names(path: Path, parsed: list[str]) -> list[str]:
    """The attribute names of an ARFF header with quoted names unescaped
    (:func:`arff_unquote_name`); ``parsed`` are liac-arff's names (quotes stripped, escapes
    kept), used for unquoted names and as a consistency check."""
    tokens: list[tuple[int, str]] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            row = line.strip(" \r\n")
            if not row or row.startswith("%"):
                continue
            head = row[:10].upper()
            if head.startswith("@DATA"):
                break
            if head.startswith("@ATTRIBUTE"):
                parts = row.split(None, 1)
                m = _RE_ARFF_ATTRIBUTE.match(parts[1].strip()) if len(parts) == 2 else None
                tokens.append((lineno, m.group(1) if m else ""))
    if len(tokens) != len(parsed):  # not the header liac-arff read: keep its names
        return list(parsed)
    names = []
    for (lineno, token), liac in zip(tokens, parsed):
        if token[:1] not in ("'", '"'):
            names.append(liac)
            continue
        try:
            names.append(arff_unquote_name(token))
        except ValueError as exc:
            raise ValueError(f"{path}: line {lineno}: attribute name {token}: {exc}") from None
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{path}: duplicate attribute names after unescaping: {', '.join(map(repr, dup[:10]))}")
    return names


def _is_sparse(path: Path) -> bool:
    """Whether the first data row is in sparse ``{i v, ...}`` form."""
    in_data = False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            s = line.strip()
            if not s or s.startswith("%"):
                continue
            if in_data:
                return s.startswith("{")
            if s.lower().startswith("@data"):
                in_data = True
    return False


def arff_data_lines(path: str | Path, rows: Sequence[int]) -> dict[int, tuple[int, str]]:
    """``{row: (line number, line text)}`` for the given 0-based data rows of an ARFF file.

    Data rows are counted as liac-arff counts them: after the ``@data`` line, every line
    that is not empty and does not start with ``%`` (after stripping whitespace) is a row;
    line numbers are 1-based, as an editor shows them."""
    want = set(int(r) for r in rows)
    out: dict[int, tuple[int, str]] = {}
    if not want:
        return out
    in_data, row = False, -1
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not in_data:
                in_data = s.upper().startswith("@DATA") and not s.startswith("%")
                continue
            if not s or s.startswith("%"):
                continue
            row += 1
            if row in want:
                out[row] = (lineno, s)
                if len(out) == len(want):
                    break
    return out


def describe_arff_cells(path: str | Path, cells: Sequence[tuple[int, int]], names: Sequence[str]) -> list[str]:
    """One line per bad feature cell ``(row, column)`` (0-based data row, attribute index) of an
    ARFF file: ``<path> line 57 (data row 12), attribute 'f3': missing value '?'`` (data row
    1-based), with the value as the file spells it (``'?'``, ``NaN``, ``Infinity``, ...)."""
    lines = arff_data_lines(path, [r for r, _ in cells])
    out = []
    for r, c in cells:
        lineno, text = lines.get(r, (None, ""))
        name = names[c] if c < len(names) else f"#{c + 1}"
        try:
            values = arff._parse_values(text) if text else None
        except Exception:  # the row parsed once already; a failure here only loses the token
            values = None
        token = (values.get(c) if isinstance(values, dict) else values[c]) if values and c < len(values) else ""
        what = "missing value '?'" if token is None else f"non-finite value {token!r}" if token else "non-finite value"
        where = f"line {lineno} (data row {r + 1})" if lineno else f"data row {r + 1}"
        out.append(f"{path} {where}, attribute '{name}': {what}")
    return out


def _to_float(value: Any, path: Path, attr: str) -> float:
    if value is None:
        return np.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: attribute '{attr}' has non-numeric value {value!r}") from None


def _read_arff(
    path: str | Path,
    labels: Sequence[str] | int,
    n_rows: int | None = None,
    dense: bool | None = None,
) -> tuple[Any, np.ndarray, list[str], list[str]]:
    """(X, Y, feature_names, label_names in column order). See :func:`read_mulan_arff`."""
    path = Path(path)
    sparse_rows = _is_sparse(path)
    try:
        with open(path, encoding="utf-8") as fh:
            obj = arff.load(fh, return_type=arff.LOD if sparse_rows else arff.DENSE)
    except arff.ArffException as exc:
        line = getattr(exc, "line", None)
        where = f" at line {line}" if line not in (None, -1) else ""
        raise ValueError(f"{path}: malformed ARFF{where}: {_short(exc)}") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise ValueError(f"{path}: cannot read ARFF: {_short(exc)}") from None

    attrs: list[tuple[str, Any]] = obj["attributes"]
    names = _declared_names(path, [a[0] for a in attrs])
    d_all = len(attrs)
    # ---- which attributes are labels
    if isinstance(labels, (int, np.integer)) and not isinstance(labels, bool):
        L = int(labels)
        if not 1 <= L < d_all:
            raise ValueError(f"{path}: expected {L} labels but the file has {d_all} attributes")
    else:
        wanted = list(labels)
        L = len(wanted)
        present = set(names)
        missing = [n for n in wanted if n not in present]
        if missing:
            raise ValueError(
                f"{path}: label count mismatch: expected {L} labels (from the label names), found "
                f"{L - len(missing)} matching attributes; missing: {', '.join(missing[:10])}"
                + (" ..." if len(missing) > 10 else "")
            )
        if set(names[d_all - L:]) != set(wanted):
            stray = [n for n in names[d_all - L:] if n not in set(wanted)]
            raise ValueError(
                f"{path}: the {L} label attributes are not the last {L} attributes (MULAN convention "
                f"of these files); non-label attributes among the last {L}: {', '.join(stray[:10])}"
            )
    label_idx = list(range(d_all - L, d_all))
    feat_idx = list(range(d_all - L))
    label_names = names[d_all - L:]
    feature_names = names[: d_all - L]
    for j in label_idx:
        t = attrs[j][1]
        vals = set(t) if isinstance(t, list) else None
        if t not in ("NUMERIC", "REAL", "INTEGER") and not (vals and vals <= {"0", "1"}):
            raise ValueError(f"{path}: label attribute '{names[j]}' has type {t!r}, expected {{0,1}}")
    for j in feat_idx:
        t = attrs[j][1]
        if t == "STRING" or (isinstance(t, str) and t.upper().startswith("DATE")):
            raise ValueError(f"{path}: feature attribute '{names[j]}' has type {t!r}; only numeric/nominal supported")

    data = obj["data"]
    n = len(data)
    if n_rows is not None and n != n_rows:
        raise ValueError(
            f"{path}: expected {n_rows} data rows, found {n} (truncated or wrong file)"
        )
    d = len(feat_idx)
    if sparse_rows:
        for j in range(d_all):
            t = attrs[j][1]
            if isinstance(t, list) and (not t or _to_float(t[0], path, names[j]) != 0.0):
                raise ValueError(
                    f"{path}: sparse ARFF with nominal attribute '{names[j]}' whose first declared value "
                    f"{t[0] if t else None!r} is not 0: omitted values would not mean 0"
                )
        rows, cols, vals = [], [], []
        Y = np.zeros((n, L), dtype=np.uint8)
        for i, row in enumerate(data):
            for j, v in row.items():
                if j >= d:
                    fv = _to_float(v, path, names[j])
                    if fv not in (0.0, 1.0):
                        raise ValueError(f"{path}: row {i}: label '{names[j]}' has value {v!r}, expected 0/1")
                    Y[i, j - d] = int(fv)
                else:
                    rows.append(i)
                    cols.append(j)
                    vals.append(_to_float(v, path, names[j]))
        X = sp.csr_matrix(
            (np.asarray(vals, dtype=np.float32), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
            shape=(n, d),
            dtype=np.float32,
        )
        X.sum_duplicates()
        if dense is True or (dense is None and n * d <= DENSIFY_MAX_CELLS):
            X = X.toarray()
    else:
        num = [attrs[j][1] in ("NUMERIC", "REAL", "INTEGER") for j in range(d_all)]
        if all(num):
            A = np.array(data, dtype=np.float64) if n else np.zeros((0, d_all))
        else:
            O = np.array(data, dtype=object).reshape(n, d_all)
            A = np.empty((n, d_all), dtype=np.float64)
            for j in range(d_all):
                if num[j]:
                    A[:, j] = [np.nan if v is None else v for v in O[:, j]]
                else:  # nominal: declared values must be numbers (MULAN's {0,1})
                    lookup = {v: _to_float(v, path, names[j]) for v in attrs[j][1]}
                    A[:, j] = [np.nan if v is None else lookup[v] for v in O[:, j]]
        Yf = A[:, d:]
        if np.isnan(Yf).any() or not np.isin(Yf, (0.0, 1.0)).all():
            bad = np.argwhere(~np.isin(Yf, (0.0, 1.0)))[0]
            raise ValueError(
                f"{path}: row {bad[0]}: label '{label_names[bad[1]]}' has value {Yf[bad[0], bad[1]]}, expected 0/1"
            )
        Y = Yf.astype(np.uint8)
        X = np.ascontiguousarray(A[:, :d], dtype=np.float32)
        if dense is False:
            X = sp.csr_matrix(X)
    return X, Y, feature_names, label_names


def read_mulan_arff(
    path: str | Path,
    labels: Sequence[str] | int,
    n_rows: int | None = None,
    dense: bool | None = None,
) -> tuple[Any, np.ndarray, list[str]]:
    """Read one MULAN ARFF file: ``(X float32 [n, d], Y uint8 [n, L], feature_names)``.

    ``labels`` is either the label names (from :func:`read_mulan_xml`; they must be
    exactly the last ``L`` attributes) or the number ``L`` of trailing label attributes.
    Y's columns are in ARFF attribute order (MULAN's label index order), which may differ
    from the XML order. Sparse ARFF rows give a CSR ``X`` that is densified when it has at
    most ``DENSIFY_MAX_CELLS`` cells (``dense`` forces either way); Y is always dense.

    Errors are ``ValueError`` naming the file: malformed ARFF (with liac-arff's line
    number), label names/count not matching the attributes (expected vs found), a
    ``n_rows`` mismatch (truncated file), non-0/1 label values.
    """
    X, Y, feature_names, _ = _read_arff(path, labels, n_rows=n_rows, dense=dense)
    return X, Y, feature_names


def arff_label_names(path: str | Path, labels: Sequence[str] | int) -> list[str]:
    """Label names in the column order :func:`read_mulan_arff` uses."""
    return _read_arff(path, labels)[3]


# --------------------------------------------------------------------------- river CSV
def read_river_yeast_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Read ``river/datasets/yeast.csv.gz`` from the river==0.26.1 wheel.

    Returns ``(X float32 [2417, 103], Y uint8 [2417, 14], label_names, train_rows,
    test_rows)``; the file is the MULAN Yeast data in file order, rows 0-916 the MULAN
    test split and rows 917-2416 the train split (917 + 1500 = 2417). Its decimal strings
    are byte-identical to the ARFF's, so X equals the ARFF's float32 X exactly.
    """
    path = Path(path)
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read river yeast CSV: {exc}") from None
    if not rows:
        raise ValueError(f"{path}: empty file")
    header, body = rows[0], [r for r in rows[1:] if r]
    label_cols = [j for j, h in enumerate(header) if re.fullmatch(r"Class\d+", h)]
    if len(label_cols) != RIVER_YEAST_LABELS or label_cols != list(range(len(header) - RIVER_YEAST_LABELS, len(header))):
        raise ValueError(f"{path}: expected the last {RIVER_YEAST_LABELS} columns to be Class<k>, got {header[-RIVER_YEAST_LABELS:]}")
    if len(body) != RIVER_YEAST_ROWS:
        raise ValueError(f"{path}: expected {RIVER_YEAST_ROWS} rows, found {len(body)}")
    try:
        A = np.array(body, dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"{path}: malformed CSV: {exc}") from None
    d = len(header) - RIVER_YEAST_LABELS
    Yf = A[:, d:]
    if not np.isin(Yf, (0.0, 1.0)).all():
        raise ValueError(f"{path}: label values other than 0/1")
    X = np.ascontiguousarray(A[:, :d], dtype=np.float32)
    Y = Yf.astype(np.uint8)
    test_rows = np.arange(0, RIVER_YEAST_TEST_ROWS, dtype=np.int64)
    train_rows = np.arange(RIVER_YEAST_TEST_ROWS, RIVER_YEAST_ROWS, dtype=np.int64)
    return X, Y, header[d:], train_rows, test_rows


# --------------------------------------------------------------------------- spec loader
@dataclass
class TrainTest:
    """A dataset in its official train/test split, as loaders return it."""

    X_train: Any
    Y_train: np.ndarray
    X_test: Any
    Y_test: np.ndarray
    label_names: list[str]
    feature_names: list[str]
    source_format: str  # 'mulan-arff' or a PackagedCopy format
    #: the file each official split was read from ({'train': path, 'test': path}) and the
    #: label-name file: prepare's checks name them (ARFF: line and attribute of a bad value)
    split_files: dict[str, Any] = field(default_factory=dict)
    labels_file: Any = None


def load_spec(spec: Any, fetched: Mapping[str, Any]) -> TrainTest:
    """Loader for ``mulan-arff`` specs (``DatasetSpec.loader``).

    ``fetched`` maps each of the spec's file names to its ``FetchResult``. If a file was
    satisfied by a packaged copy (river's Yeast CSV), the whole dataset is read from that
    copy; otherwise from the ARFF pair and the XML (or ``spec.n_labels``). Row counts are
    checked against the spec's official split sizes when it has them.
    """
    packaged = [r for r in fetched.values() if r.source == "packaged" or _is_packaged_path(spec, r.path)]
    if packaged:
        copy = next(c for c in spec.packaged if c.name == packaged[0].path.name)
        if copy.format != "river-yeast-csv":
            raise ValueError(f"dataset '{spec.name}': no reader for packaged format '{copy.format}'")
        X, Y, names, tr, te = read_river_yeast_csv(packaged[0].path)
        _check_sizes(spec, len(tr), len(te), packaged[0].path)
        d = X.shape[1]
        return TrainTest(X[tr], Y[tr], X[te], Y[te], names, [f"Att{j + 1}" for j in range(d)], copy.format)

    train = fetched[spec.file("train").name].path
    test = fetched[spec.file("test").name].path
    try:
        labels: Sequence[str] | int = read_mulan_xml(fetched[spec.file("labels").name].path)
    except KeyError:
        if spec.n_labels is None:
            raise ValueError(f"dataset '{spec.name}': neither a label XML nor n_labels is given") from None
        labels = spec.n_labels
    if spec.n_labels is not None and not isinstance(labels, int) and len(labels) != spec.n_labels:
        raise ValueError(
            f"dataset '{spec.name}': label XML lists {len(labels)} labels, registry expects {spec.n_labels}"
        )
    Xtr, Ytr, fn, ln = _read_arff(train, labels, n_rows=spec.n_train)
    Xte, Yte, fn_te, ln_te = _read_arff(test, labels, n_rows=spec.n_test)
    if fn != fn_te or ln != ln_te:
        raise ValueError(f"dataset '{spec.name}': {train.name} and {test.name} declare different attributes")
    if sp.issparse(Xtr) != sp.issparse(Xte):
        Xtr, Xte = sp.csr_matrix(Xtr), sp.csr_matrix(Xte)
    labels_file = fetched[spec.file("labels").name].path if not isinstance(labels, int) else None
    return TrainTest(Xtr, Ytr, Xte, Yte, ln, fn, "mulan-arff", split_files={"train": train, "test": test},
                     labels_file=labels_file)


def _is_packaged_path(spec: Any, path: Path) -> bool:
    return any(Path(path).name == c.name for c in spec.packaged)


def _check_sizes(spec: Any, n_train: int, n_test: int, path: Path) -> None:
    for what, want, got in (("train", spec.n_train, n_train), ("test", spec.n_test, n_test)):
        if want is not None and want != got:
            raise ValueError(f"{path}: {what} split has {got} rows, expected {want}")
