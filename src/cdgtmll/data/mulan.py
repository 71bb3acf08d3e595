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
import fnmatch
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
    _refuse_empty(path)
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


def _refuse_empty(path: Path) -> None:
    """A 0-byte file is named as empty: parsed, it only gives 'malformed ... at line 0' (liac-arff)
    or 'no element found' (XML), which sends the user looking for a syntax error."""
    try:
        empty = path.stat().st_size == 0
    except OSError:
        return  # the reader's own error names a missing or unreadable file
    if empty:
        raise ValueError(f"{path}: the file is empty (0 bytes)")


# --------------------------------------------------------------------------- feature encoding
#: how a feature attribute is read (``data.custom.<name>.features.<attribute or glob>``)
FEATURE_ACTIONS = ("drop", "onehot", "numeric")
_NUMERIC_TYPES = ("NUMERIC", "REAL", "INTEGER")
_GLOB_CHARS = frozenset("*?[")
#: the default, in words (recorded with the encoding, and the docs say the same)
DEFAULT_ENCODING = ("numeric attributes and nominal {0,1} attributes (MULAN's binary features) as numbers; "
                    "other nominal attributes one-hot, one column per category in the header's declared order; "
                    "string and date attributes refused")


def is_glob(rule: str) -> bool:
    """Whether a ``features`` key is a glob pattern (``fnmatch``: ``*``, ``?``, ``[...]``), not a name."""
    return any(ch in _GLOB_CHARS for ch in rule)


def _attr_kind(t: Any) -> str:
    if isinstance(t, list):
        return "nominal"
    if t in _NUMERIC_TYPES:
        return "numeric"
    return "date" if isinstance(t, str) and t.upper().startswith("DATE") else "string"


@dataclass(frozen=True)
class FeatureColumn:
    """One feature attribute as read: ``action`` numeric (one column), onehot (one column per
    declared category, ``columns`` named ``<attribute>=<category>``) or drop (no column)."""

    attribute: int  # index among the ARFF's attributes
    name: str
    kind: str  # numeric | nominal | string | date
    action: str
    by: str  # 'default' or the config key that chose the action
    categories: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        if self.action == "drop":
            return []
        return [f"{self.name}={c}" for c in self.categories] if self.action == "onehot" else [self.name]


def feature_plan(
    path: Path,
    attrs: Sequence[tuple[str, Any]],
    names: Sequence[str],
    n_features: int,
    rules: Mapping[str, str] | None = None,
    key: str = "data.custom.<name>.features",
) -> list[FeatureColumn]:
    """How each of the first ``n_features`` attributes (the labels follow them) becomes columns.

    ``rules`` maps an attribute name, or a glob pattern (:func:`is_glob`, matched case-sensitively
    against the whole name), to one of :data:`FEATURE_ACTIONS`; an exact name wins over patterns,
    and two patterns giving one attribute different actions are an error (the config's key order
    is not kept on the way to ``prepare``). A rule that matches no feature attribute, or that names
    a label attribute, is an error too: a typo must not leave a feature read the default way. The
    defaults (:data:`DEFAULT_ENCODING`) keep the registry's MULAN files exactly as they were read
    before (their ``{0,1}`` nominal features are numbers) and stop reading ``{1,2,3}`` as an
    ordinal: its categories are not quantities. ``key`` is the config key ``rules`` came from,
    for the messages."""
    rules = dict(rules or {})
    feats = list(names[:n_features])
    labels = set(names[n_features:])
    lines = _attribute_lines(path)
    for rule, action in rules.items():
        if action not in FEATURE_ACTIONS:
            raise ValueError(f"config error at '{key}.{rule}': must be one of {', '.join(FEATURE_ACTIONS)}, got {action!r}")
        hits = [n for n in feats if (fnmatch.fnmatchcase(n, rule) if is_glob(rule) else n == rule)]
        if not hits:
            label = rule in labels or (is_glob(rule) and any(fnmatch.fnmatchcase(n, rule) for n in labels))
            why = ("matches only label attributes (a label is never a feature)" if label
                   else "matches no feature attribute")
            raise ValueError(f"config error at '{key}.{rule}': {why} of {path} ({n_features} feature attributes, "
                             f"e.g. {', '.join(repr(n) for n in feats[:5])})")
    patterns = sorted(r for r in rules if is_glob(r))
    plan = []
    for j, name in enumerate(feats):
        t = attrs[j][1]
        kind = _attr_kind(t)
        where = f"{path} line {lines[j]}" if j < len(lines) else str(path)
        if name in rules:
            action, by = rules[name], f"{key}.{name}"
        else:
            hit = [r for r in patterns if fnmatch.fnmatchcase(name, r)]
            if len({rules[r] for r in hit}) > 1:
                raise ValueError(f"config error at '{key}': attribute '{name}' ({where}) matches patterns "
                                 + " and ".join(f"{r!r} ({rules[r]})" for r in hit)
                                 + f"; give the attribute its own key ({key}.{name})")
            action, by = (rules[hit[0]], f"{key}.{hit[0]}") if hit else (None, "default")
        if action is None:
            if kind in ("string", "date"):
                raise ValueError(
                    f"{where}: attribute '{name}' is a {kind} attribute ({t}): it cannot be a feature; "
                    f"drop it with '{key}.{name}: drop' in the config (or encode it into numbers in the file)")
            action = "numeric" if kind == "numeric" or list(t) == ["0", "1"] else "onehot"
        elif kind in ("string", "date") and action != "drop":
            raise ValueError(f"config error at '{by}': attribute '{name}' ({where}) is a {kind} attribute; "
                             f"it can only be dropped ('drop'), not '{action}'")
        elif kind == "numeric" and action == "onehot":
            raise ValueError(f"config error at '{by}': attribute '{name}' ({where}) is numeric ({t}); 'onehot' "
                             "needs a nominal attribute, whose header declares the categories")
        elif kind == "nominal" and action == "numeric":
            for v in t:
                try:
                    float(v)
                except ValueError:
                    raise ValueError(f"config error at '{by}': nominal attribute '{name}' ({where}) declares the "
                                     f"value {v!r}, which is not a number; use 'onehot' or 'drop'") from None
        cats = tuple(t) if kind == "nominal" and action == "onehot" else ()
        if action == "onehot" and not cats:
            raise ValueError(f"{where}: nominal attribute '{name}' declares no categories")
        plan.append(FeatureColumn(j, name, kind, action, by, cats))
    return plan


def is_identity(plan: Sequence[FeatureColumn]) -> bool:
    """Whether the plan reads every attribute as one number by default (the registry's files)."""
    return all(c.action == "numeric" and c.by == "default" for c in plan)


def encoding_record(plan: Sequence[FeatureColumn], rules: Mapping[str, str] | None) -> dict[str, Any]:
    """What prepare records about the encoding (``meta['feature_encoding']``): the configured
    rules, the default in words, and every attribute not read as one number by default, with the
    key that decided it and its columns, so that a column of X can be traced to the file."""
    return {
        "rules": dict(sorted((rules or {}).items())),
        "default": DEFAULT_ENCODING,
        "n_attributes": len(plan),
        "n_columns": sum(len(c.columns) for c in plan),
        "counts": {a: sum(c.action == a for c in plan) for a in FEATURE_ACTIONS},
        "attributes": [
            {"attribute": c.name, "type": c.kind, "action": c.action, "by": c.by,
             **({"columns": c.columns} if c.action == "onehot" else {})}
            for c in plan if not (c.action == "numeric" and c.by == "default" and c.kind == "numeric")
        ],
    }


def _attribute_lines(path: Path) -> list[int]:
    """The 1-based line of each ``@attribute`` declaration, in order (for the messages)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            head = line.strip(" \r\n\t")[:10].upper()
            if head.startswith("@DATA"):
                break
            if head.startswith("@ATTRIBUTE"):
                out.append(lineno)
    return out


@dataclass
class ArffRead:
    """One ARFF file as read: X's columns follow ``plan`` (``feature_names`` their names,
    ``feature_attributes`` the ARFF attribute index of each), Y the labels in file order."""

    X: Any
    Y: np.ndarray
    feature_names: list[str]
    label_names: list[str]
    attribute_names: list[str]
    feature_attributes: list[int]
    plan: list[FeatureColumn]


def _read_arff(
    path: str | Path,
    labels: Sequence[str] | int,
    n_rows: int | None = None,
    dense: bool | None = None,
    features: Mapping[str, str] | None = None,
    features_key: str = "data.custom.<name>.features",
) -> ArffRead:
    """One ARFF file read with the feature ``features`` rules (:func:`feature_plan`). See
    :func:`read_mulan_arff`."""
    path = Path(path)
    _refuse_empty(path)
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
    label_names = names[d_all - L:]
    for j in label_idx:
        t = attrs[j][1]
        vals = set(t) if isinstance(t, list) else None
        if t not in _NUMERIC_TYPES and not (vals and vals <= {"0", "1"}):
            raise ValueError(f"{path}: label attribute '{names[j]}' has type {t!r}, expected {{0,1}}")
    d = d_all - L
    plan = feature_plan(path, attrs, names, d, features, features_key)
    identity = is_identity(plan)

    data = obj["data"]
    n = len(data)
    if n_rows is not None and n != n_rows:
        raise ValueError(
            f"{path}: expected {n_rows} data rows, found {n} (truncated or wrong file)"
        )
    # the first column of each kept attribute in X
    start, col = {}, 0
    for c in plan:
        start[c.attribute] = col
        col += len(c.columns)
    d_out = col
    by_attr = {c.attribute: c for c in plan}
    if sparse_rows:
        for j in range(d_all):
            t = attrs[j][1]
            c = by_attr.get(j)
            if c is not None and c.action != "numeric":
                continue  # dropped, or one-hot: an omitted value is the first declared category
            if isinstance(t, list) and (not t or _to_float(t[0], path, names[j]) != 0.0):
                raise ValueError(
                    f"{path}: sparse ARFF with nominal attribute '{names[j]}' whose first declared value "
                    f"{t[0] if t else None!r} is not 0: omitted values would not mean 0"
                )
        onehot = {c.attribute: {v: k for k, v in enumerate(c.categories)} for c in plan if c.action == "onehot"}
        cat = {j: np.zeros(n, dtype=np.int64) for j in onehot}  # category index per row; -1: missing
        rows, cols, vals = [], [], []
        Y = np.zeros((n, L), dtype=np.uint8)
        for i, row in enumerate(data):
            for j, v in row.items():
                if j >= d:
                    fv = _to_float(v, path, names[j])
                    if fv not in (0.0, 1.0):
                        raise ValueError(f"{path}: row {i}: label '{names[j]}' has value {v!r}, expected 0/1")
                    Y[i, j - d] = int(fv)
                elif j in onehot:
                    cat[j][i] = -1 if v is None else onehot[j][v]
                elif by_attr[j].action == "numeric":
                    rows.append(i)
                    cols.append(start[j])
                    vals.append(_to_float(v, path, names[j]))
        for j, k in cat.items():
            ok = k >= 0
            rows += np.flatnonzero(ok).tolist()
            cols += (start[j] + k[ok]).tolist()
            vals += [1.0] * int(ok.sum())
            miss = np.flatnonzero(~ok)  # a missing category: NaN in every column of the attribute
            for m in range(len(onehot[j])):
                rows += miss.tolist()
                cols += [start[j] + m] * miss.size
                vals += [np.nan] * miss.size
        X = sp.csr_matrix(
            (np.asarray(vals, dtype=np.float32), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
            shape=(n, d_out),
            dtype=np.float32,
        )
        X.sum_duplicates()
        if dense is True or (dense is None and n * d_out <= DENSIFY_MAX_CELLS):
            X = X.toarray()
    else:
        num = [attrs[j][1] in _NUMERIC_TYPES for j in range(d_all)]
        if all(num):
            A = np.array(data, dtype=np.float64) if n else np.zeros((0, d_all))
        else:
            O = np.array(data, dtype=object).reshape(n, d_all)
            A = np.empty((n, d_all), dtype=np.float64)
            for j in range(d_all):
                c = by_attr.get(j)
                if c is not None and c.action != "numeric":
                    A[:, j] = np.nan  # not read as a number (dropped or one-hot below)
                elif num[j]:
                    A[:, j] = [np.nan if v is None else v for v in O[:, j]]
                else:  # nominal read as its value: declared values must be numbers (MULAN's {0,1})
                    lookup = {v: _to_float(v, path, names[j]) for v in attrs[j][1]}
                    A[:, j] = [np.nan if v is None else lookup[v] for v in O[:, j]]
        Yf = A[:, d:]
        if np.isnan(Yf).any() or not np.isin(Yf, (0.0, 1.0)).all():
            bad = np.argwhere(~np.isin(Yf, (0.0, 1.0)))[0]
            raise ValueError(
                f"{path}: row {bad[0]}: label '{label_names[bad[1]]}' has value {Yf[bad[0], bad[1]]}, expected 0/1"
            )
        Y = Yf.astype(np.uint8)
        if identity:  # every feature one number: the columns as they are (the registry's files)
            X = np.ascontiguousarray(A[:, :d], dtype=np.float32)
        else:
            X = np.zeros((n, d_out), dtype=np.float32)
            for c in plan:
                if c.action == "numeric":
                    X[:, start[c.attribute]] = A[:, c.attribute]
                elif c.action == "onehot":
                    index = {v: k for k, v in enumerate(c.categories)}
                    for i, v in enumerate(O[:, c.attribute]):
                        if v is None:  # missing: NaN in every column of the attribute
                            X[i, start[c.attribute]:start[c.attribute] + len(index)] = np.nan
                        else:
                            X[i, start[c.attribute] + index[v]] = 1.0
        if dense is False:
            X = sp.csr_matrix(X)
    feature_names = [name for c in plan for name in c.columns]
    feature_attributes = [c.attribute for c in plan for _ in c.columns]
    return ArffRead(X, Y, feature_names, label_names, list(names), feature_attributes, plan)


def read_mulan_arff(
    path: str | Path,
    labels: Sequence[str] | int,
    n_rows: int | None = None,
    dense: bool | None = None,
    features: Mapping[str, str] | None = None,
) -> tuple[Any, np.ndarray, list[str]]:
    """Read one MULAN ARFF file: ``(X float32 [n, d], Y uint8 [n, L], feature_names)``.

    ``labels`` is either the label names (from :func:`read_mulan_xml`; they must be
    exactly the last ``L`` attributes) or the number ``L`` of trailing label attributes.
    Y's columns are in ARFF attribute order (MULAN's label index order), which may differ
    from the XML order. Sparse ARFF rows give a CSR ``X`` that is densified when it has at
    most ``DENSIFY_MAX_CELLS`` cells (``dense`` forces either way); Y is always dense.

    Errors are ``ValueError`` naming the file: malformed ARFF (with liac-arff's line
    number), label names/count not matching the attributes (expected vs found), a
    ``n_rows`` mismatch (truncated file), non-0/1 label values, an empty file, a string
    attribute not dropped. ``features`` maps attribute names or glob patterns to ``drop``,
    ``onehot`` or ``numeric`` (:func:`feature_plan`); ``feature_names`` are X's column names
    (``<attribute>=<category>`` for one-hot columns).
    """
    r = _read_arff(path, labels, n_rows=n_rows, dense=dense, features=features)
    return r.X, r.Y, r.feature_names


def arff_label_names(path: str | Path, labels: Sequence[str] | int) -> list[str]:
    """Label names in the column order :func:`read_mulan_arff` uses."""
    return _read_arff(path, labels).label_names


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
    #: ARFF files: every attribute's name and, per X column, the attribute it came from, so that
    #: a bad value in a one-hot column is named by its attribute (None: column j is attribute j)
    attribute_names: list[str] | None = None
    feature_attributes: list[int] | None = None
    #: how the features were encoded (:func:`encoding_record`); None: every attribute one number
    feature_encoding: dict[str, Any] | None = None


def load_spec(spec: Any, fetched: Mapping[str, Any], features: Mapping[str, str] | None = None) -> TrainTest:
    """Loader for ``mulan-arff`` specs (``DatasetSpec.loader``).

    ``fetched`` maps each of the spec's file names to its ``FetchResult``. If a file was
    satisfied by a packaged copy (river's Yeast CSV), the whole dataset is read from that
    copy; otherwise from the ARFF pair and the XML (or ``spec.n_labels``). Row counts are
    checked against the spec's official split sizes when it has them. ``features``
    (``data.custom.<name>.features``) says how to read feature attributes (:func:`feature_plan`);
    both files get the same columns, since one-hot columns follow the header's declared
    categories, and a header that differs between the files is an error.
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
    key = f"data.custom.{spec.name}.features"
    tr = _read_arff(train, labels, n_rows=spec.n_train, features=features, features_key=key)
    te = _read_arff(test, labels, n_rows=spec.n_test, features=features, features_key=key)
    Xtr, Ytr, fn, ln = tr.X, tr.Y, tr.feature_names, tr.label_names
    Xte, Yte, fn_te, ln_te = te.X, te.Y, te.feature_names, te.label_names
    if fn != fn_te or ln != ln_te:
        raise ValueError(f"dataset '{spec.name}': {train.name} and {test.name} declare different attributes")
    if tr.plan != te.plan:  # same names, other types or categories: the columns would not mean the same
        diff = next(a for a, b in zip(tr.plan, te.plan) if a != b)
        raise ValueError(f"dataset '{spec.name}': {train} and {test} declare attribute '{diff.name}' differently "
                         f"({diff.kind} {list(diff.categories) or ''} vs the test file's): the columns would differ")
    if sp.issparse(Xtr) != sp.issparse(Xte):
        Xtr, Xte = sp.csr_matrix(Xtr), sp.csr_matrix(Xte)
    labels_file = fetched[spec.file("labels").name].path if not isinstance(labels, int) else None
    identity = is_identity(tr.plan) and not features
    return TrainTest(Xtr, Ytr, Xte, Yte, ln, fn, "mulan-arff", split_files={"train": train, "test": test},
                     labels_file=labels_file, attribute_names=tr.attribute_names,
                     feature_attributes=tr.feature_attributes,
                     feature_encoding=None if identity else encoding_record(tr.plan, features))


def _is_packaged_path(spec: Any, path: Path) -> bool:
    return any(Path(path).name == c.name for c in spec.packaged)


def _check_sizes(spec: Any, n_train: int, n_test: int, path: Path) -> None:
    for what, want, got in (("train", spec.n_train, n_train), ("test", spec.n_test, n_test)):
        if want is not None and want != got:
            raise ValueError(f"{path}: {what} split has {got} rows, expected {want}")
