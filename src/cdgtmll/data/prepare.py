"""Prepare one dataset: acquire its raw files, load them, carve validation, save ProcessedData.

    python -m cdgtmll.data.prepare --dataset yeast --raw-dir RAW --out OUT.npz \\
        [--mirror DIR] [--no-download] [--val-fraction 0.1] [--split-seed 0] \\
        [--dataset-config JSON] [--min-split-rows 10]

Raw files go to ``RAW/<dataset>/`` (:func:`cdgtmll.data.acquire.fetch`: cached, mirror,
packaged copy, URLs; ``CDGTMLL_DATA_MIRROR`` overrides ``--mirror``). The processed
file (:class:`cdgtmll.data.processed.ProcessedData`) holds the official train split
followed by the official test split, ``X = [X_train; X_test]``; ``splits['train']`` (fit
rows) and ``splits['val']`` are carved from the first ``n_train`` rows with
:func:`cdgtmll.data.splits.carve_validation`, ``splits['test']`` is ``n_train..n-1``.

XMC datasets (``spec.kind == 'xmc'``) are the exception: their validation rows are a
seeded uniform random ``val_fraction`` of the train rows
(:func:`cdgtmll.data.xmc.random_validation_split`), because iterative stratification
needs the dense label matrix (AmazonCat-13K: 1.19M x 13,330) and does not scale to
10^4 labels; their Y stays sparse (CSR). ``--loader-options`` (JSON) is passed to the
loader as keyword arguments, e.g. ``'{"tfidf": false}'`` for :func:`cdgtmll.data.xmc.load_xmc_bow`.

``--dataset-config`` takes a JSON mapping (inline, or a path to a .json file) defining a
MULAN-format dataset not in the registry (see :func:`cdgtmll.data.registry.spec_from_config`).

Checks before anything is written (:func:`check_labels`, :func:`feature_problems`,
:func:`cdgtmll.data.splits.check_split_sizes`), each a ``ValueError`` naming the file:

* fewer than 2 labels (a single label is binary classification);
* a missing (``?``) or non-finite (``NaN``, ``Infinity``, a value beyond float32) feature
  value: the first :data:`REPORT_FIRST` are named by file, line, data row and attribute,
  with the total count. ``impute`` (``data.custom.<name>.impute``: ``none`` (default),
  ``mean``, ``zero``) fills them instead, with per-column values fitted on the training
  (fit) rows only; the rule, count and fill values go to ``meta['imputation']`` and the log;
* a split (train = fit rows, val, test) with fewer rows than ``--min-split-rows``
  (``data.min_split_rows``, default :data:`cdgtmll.data.splits.DEFAULT_MIN_SPLIT_ROWS`).

Labels constant in the training split (no positive, or positive in every row) are a
warning in the log and ``meta['constant_train_labels']`` (label names;
``meta['all_positive_train_labels']`` the all-positive ones), repeated by
:func:`cdgtmll.data.processed.dataset_warnings` and the tables' footnotes.

The log (stdout) says where each raw file came from and why (``[acquire]`` lines: a
missing mirror file and the packaged copy used instead, a cached copy re-verified against
its source, ``source <path> changed: sha256 <old> -> <new>; re-copying``). An error in a
raw file names the raw copy and the source it was copied from; nothing is written then.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.data import splits as splits_mod
from cdgtmll.data.acquire import AcquisitionError, ChecksumError, fetch, local_inputs
from cdgtmll.data.availability import clear_failure, failure_key, write_failure
from cdgtmll.data.processed import ProcessedData, meta_warnings
from cdgtmll.data.registry import IMPUTE_RULES, DatasetSpec, get_spec, spec_from_config

#: ``data.custom.<name>`` keys that say how prepare reads the files, not where they are: taken out
#: before :func:`cdgtmll.data.registry.spec_from_config` (the spec has no field for them)
READ_KEYS = ("features", "duplicate_rows")
#: rows shared by the training and test files (``data.custom.<name>.duplicate_rows``)
DUPLICATE_RULES = ("error", "warn")

#: how many bad feature values an error (or the imputation log) names one by one
REPORT_FIRST = 5
IMPUTE_HOW = {"mean": "each column's mean over the finite values of the training split's rows",
              "zero": "0 in every column"}


class LoaderNotImplemented(RuntimeError):
    pass


def _resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def prepare(
    dataset: str | DatasetSpec,
    raw_dir: str | os.PathLike,
    out: str | os.PathLike,
    mirror: str | os.PathLike | None = None,
    allow_download: bool = True,
    val_fraction: float = splits_mod.DEFAULT_FRACTION,
    split_seed: int = splits_mod.DEFAULT_SEED,
    dataset_config: Mapping[str, Any] | None = None,
    timeout: float = 60,
    loader_options: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    min_split_rows: int = splits_mod.DEFAULT_MIN_SPLIT_ROWS,
    impute: str | None = None,
) -> ProcessedData:
    """Acquire, load, check, split and save one dataset; returns what was saved to ``out``.

    ``dataset`` is a registry name, a spec, or (with ``dataset_config``) the name of a
    config-defined MULAN dataset. Raises :class:`LoaderNotImplemented` for datasets whose
    loader does not exist yet (checked before anything is downloaded). ``log`` receives
    one line per acquisition note and per raw file, and the checks' warnings (default: none).
    ``impute``: the rule for missing/non-finite features (default: ``dataset_config['impute']``,
    else ``'none'``: an error). A failed check raises ``ValueError`` and writes nothing.
    """
    read = read_options(dataset if isinstance(dataset, str) else dataset.name, dataset_config)
    if isinstance(dataset, DatasetSpec):
        spec = dataset
    elif dataset_config is not None:
        spec = spec_from_config(dataset, {k: v for k, v in dataset_config.items() if k not in READ_KEYS})
    else:
        spec = get_spec(dataset)
    if spec.loader is None:
        raise LoaderNotImplemented(f"dataset '{spec.name}': loader not implemented yet (format {spec.format})")
    loader = _resolve(spec.loader)
    if impute is None:
        impute = str((dataset_config or {}).get("impute", "none"))
    if impute not in IMPUTE_RULES:
        raise ValueError(f"dataset '{spec.name}': impute {impute!r} is not one of {', '.join(IMPUTE_RULES)}")
    if isinstance(min_split_rows, bool) or not isinstance(min_split_rows, int) or min_split_rows < 1:
        raise ValueError(f"min_split_rows must be a positive integer, got {min_split_rows!r}")

    dest = Path(raw_dir) / spec.name
    fetched = {}
    for f in spec.files:
        res = fetched[f.name] = fetch(spec, f, dest, mirror=mirror, allow_download=allow_download, timeout=timeout)
        if log is not None:
            for note in res.notes:
                log(f"[acquire] {f.name}: {note}")
            log(f"[acquire] {f.name}: {describe_source(res.record())} -> {res.path} sha256 {res.sha256} "
                + ("verified" if res.verified else "NOT verified (sha256 unknown)"))
        if res.source == "packaged" or (res.source == "cached" and res.original_source == "packaged"):
            break  # one packaged copy stands in for all the raw files
    try:
        kwargs = dict(loader_options or {})
        if read["features"]:
            kwargs["features"] = read["features"]
        tt = loader(spec, fetched, **kwargs)
        n_train = tt.Y_train.shape[0]
        n_test = tt.Y_test.shape[0]
        check_labels(spec, tt, fetched)
        problems = feature_problems(spec, tt, impute, custom=dataset_config is not None)
        if problems is not None and impute == "none":
            raise ValueError(problems)
        duplicates = None
        if dataset_config is not None:  # the registry's official splits are taken as published
            duplicates = shared_rows(spec.name, tt, fetched, read["duplicate_rows"])
        files = getattr(tt, "split_files", None) or {}
        where = {s: str(files.get(s) or f"official {s} split") for s in ("train", "test")}
        splits_mod.check_split_sizes(spec.name, {"train": (n_train, f"official training rows, {where['train']}"),
                                                 "test": (n_test, where["test"])}, min_split_rows)
        split_method = splits_mod.METHOD
        if spec.kind == "xmc":  # XMC: seeded random split (stratification infeasible at 10^4 labels)
            from cdgtmll.data.xmc import SPLIT_METHOD, random_validation_split

            fit, val = random_validation_split(n_train, fraction=val_fraction, seed=split_seed)
            split_method = SPLIT_METHOD
        else:
            fit, val = splits_mod.carve_validation(tt.Y_train, fraction=val_fraction, seed=split_seed)
        carved = f"carved from the {n_train} official training rows, data.val_fraction {val_fraction}"
        splits_mod.check_split_sizes(spec.name, {"train": (int(fit.size), f"fit rows {carved}"),
                                                 "val": (int(val.size), carved)}, min_split_rows)
        if sp.issparse(tt.X_train):
            X = sp.vstack([tt.X_train, tt.X_test], format="csr", dtype=np.float32)
        else:
            X = np.concatenate([tt.X_train, tt.X_test]).astype(np.float32, copy=False)
        imputation = None
        if problems is not None:
            X, imputation = impute_features(spec.name, X, fit, impute, tt.feature_names)
            imputation["found"] = problems
    except ValueError as exc:
        # the raw copy's path alone hides the file the user must fix: name its source too
        msg = str(exc)
        origins = [f"{r.path} is a copy of {describe_source(r.record())}"
                   for r in {id(r): r for r in fetched.values()}.values() if str(r.path) in msg]
        if origins:
            exc.args = (f"{msg} ({'; '.join(origins)})", *exc.args[1:])  # keeps its type (e.g. XMCFormatError)
        raise

    if sp.issparse(tt.Y_train) or sp.issparse(tt.Y_test):  # XMC: keep Y sparse
        Y = sp.vstack([sp.csr_matrix(tt.Y_train), sp.csr_matrix(tt.Y_test)], format="csr", dtype=np.uint8)
    else:
        Y = np.concatenate([tt.Y_train, tt.Y_test]).astype(np.uint8, copy=False)
    sources = []
    for r in {id(r): r for r in fetched.values()}.values():
        sources.append(r.record())
    meta = {
        "display_name": spec.display_name,
        "kind": spec.kind,
        "format": spec.format,
        "loader": spec.loader,
        "source_format": tt.source_format,
        "source_files": sources,
        "official_split": {"n_train": n_train, "n_test": n_test,
                           "registry_n_train": spec.n_train, "registry_n_test": spec.n_test},
        "split": {
            "method": split_method,
            "fraction": val_fraction,
            "seed": split_seed,
            "carved_from": "official train split",
            "n_fit": int(fit.size),
            "n_val": int(val.size),
        },
        "n_features": int(X.shape[1]),
        "row_layout": "rows 0..n_train-1 = official train split (file order), n_train..n-1 = official test split",
    }
    if imputation is not None:
        meta["imputation"] = imputation
    if getattr(tt, "feature_encoding", None):
        meta["feature_encoding"] = tt.feature_encoding
    if duplicates is not None:
        meta["train_test_duplicates"] = duplicates
    const, full = constant_labels(Y, fit, list(tt.label_names))
    if const:
        meta["constant_train_labels"] = const
        meta["all_positive_train_labels"] = full
    if getattr(tt, "preprocessing", None):  # e.g. XMC: TF-IDF / l2 applied by the loader
        meta["preprocessing"] = tt.preprocessing
    if loader_options:
        meta["loader_options"] = dict(loader_options)
    meta.update(getattr(tt, "meta", None) or {})  # loader-specific meta (image paths, category ids, ...)
    data = ProcessedData(
        name=spec.name,
        X=X,
        Y=Y,
        label_names=list(tt.label_names),
        splits={"train": fit, "val": val, "test": np.arange(n_train, n_train + n_test, dtype=np.int64)},
        meta=meta,
    )
    if log is not None:
        if imputation is not None:
            log(f"[prepare] {spec.name}: imputed {imputation['count']} feature value(s), rule '{impute}' "
                f"({imputation['description']}); fill values {json.dumps(imputation['fill_values'])}; found:\n"
                + imputation["found"])
        for w in meta_warnings(dict(meta, name=spec.name)):
            log(f"[prepare] WARNING {w}")
    data.save(out)
    return data


# --------------------------------------------------------------------------- checks
def _label_file(spec: DatasetSpec, tt: Any, fetched: Mapping[str, Any]) -> str:
    """The file the label count comes from: the label-name file, else the training file."""
    f = getattr(tt, "labels_file", None) or (getattr(tt, "split_files", None) or {}).get("train")
    if f is None:
        f = next((r.path for r in fetched.values()), None)
    return str(f) if f is not None else f"dataset '{spec.name}'"


def check_labels(spec: DatasetSpec, tt: Any, fetched: Mapping[str, Any]) -> None:
    """At least 2 labels: a single label is binary classification, which the methods and the
    multi-label metrics refuse (scikit-learn: 'Got 'binary' instead'), after a full training."""
    L = int(tt.Y_train.shape[1])
    if L < 2:
        names = ", ".join(repr(n) for n in tt.label_names)
        raise ValueError(f"dataset '{spec.name}': {_label_file(spec, tt, fetched)} gives {L} label"
                         f"{'' if L == 1 else 's'}{f' ({names})' if names else ''}; multi-label learning needs "
                         "at least 2 (a single label is binary classification)")


def read_options(name: str, cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """The checked read keys of ``data.custom.<name>`` (:data:`READ_KEYS`): ``features``
    (attribute name or glob -> drop | onehot | numeric; the actions are checked against the
    file's attributes by :func:`cdgtmll.data.mulan.feature_plan`) and ``duplicate_rows`` (error,
    the default, or warn). The config schema checks them too; this is the same check for
    ``--dataset-config`` given by hand, with the same key paths."""
    from cdgtmll.data.mulan import FEATURE_ACTIONS

    cfg = cfg or {}
    prefix = f"data.custom.{name}"
    features = cfg.get("features") or {}
    if not isinstance(features, Mapping):
        raise ValueError(f"config error at '{prefix}.features': expected a mapping from attribute names or glob "
                         f"patterns to {' | '.join(FEATURE_ACTIONS)}, got {type(features).__name__}")
    for k, v in features.items():
        if not isinstance(k, str) or not k:
            raise ValueError(f"config error at '{prefix}.features': attribute names must be non-empty strings, got {k!r}")
        if v not in FEATURE_ACTIONS:
            raise ValueError(f"config error at '{prefix}.features.{k}': must be one of {', '.join(FEATURE_ACTIONS)}, "
                             f"got {v!r}")
    dup = cfg.get("duplicate_rows", "error")
    if dup not in DUPLICATE_RULES:
        raise ValueError(f"config error at '{prefix}.duplicate_rows': must be one of {', '.join(DUPLICATE_RULES)}, "
                         f"got {dup!r}")
    return {"features": dict(features), "duplicate_rows": dup}


def _row_keys(X: Any, Y: Any) -> list[bytes]:
    """One bytes key per row: its feature values (float32, -0.0 as 0.0, a sparse row's explicit
    zeros removed) and its labels, so that equal rows, and only those, have equal keys."""
    Y = np.asarray(Y.toarray() if sp.issparse(Y) else Y, dtype=np.uint8)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32, copy=True)
        X.data += np.float32(0.0)
        X.eliminate_zeros()
        X.sort_indices()
        return [X.indices[a:b].tobytes() + b"|" + X.data[a:b].tobytes() + b"|" + Y[i].tobytes()
                for i, (a, b) in enumerate(zip(X.indptr[:-1], X.indptr[1:]))]
    A = np.ascontiguousarray(X, dtype=np.float32) + np.float32(0.0)
    return [A[i].tobytes() + b"|" + Y[i].tobytes() for i in range(A.shape[0])]


def shared_rows(name: str, tt: Any, fetched: Mapping[str, Any], rule: str = "error") -> dict[str, Any] | None:
    """Test rows identical (features as read, after ``features``, and labels) to a training row.

    A test row that is also a training row is scored on what the model was fitted on, which
    overstates every metric, and nothing downstream can tell. Such rows, or the same file given
    as both splits, are a ``ValueError`` (``rule`` 'error') naming both files and the first
    :data:`REPORT_FIRST` pairs by line, or (``rule`` 'warn') the record that prepare writes to
    ``meta['train_test_duplicates']`` and the tables repeat. None when no row is shared."""
    from cdgtmll.data.mulan import arff_data_lines

    files = getattr(tt, "split_files", None) or {}
    train, test = files.get("train"), files.get("test")
    first: dict[bytes, int] = {}
    for i, k in enumerate(_row_keys(tt.X_train, tt.Y_train)):
        first.setdefault(k, i)
    pairs = [(i, first[k]) for i, k in enumerate(_row_keys(tt.X_test, tt.Y_test)) if k in first]
    shas = {s: r.sha256 for s in ("train", "test") for r in fetched.values()
            if files.get(s) is not None and str(r.path) == str(files[s])}
    same = bool(shas.get("train")) and shas.get("train") == shas.get("test")
    if not pairs and not same:
        return None
    n_test = int(tt.Y_test.shape[0])
    key = f"data.custom.{name}.duplicate_rows"
    if rule == "warn":
        return {"rule": rule, "count": len(pairs), "n_test": n_test, "same_file": same,
                "compared": "features as read (after data.custom features rules) and labels"}
    if same:
        raise ValueError(f"dataset '{name}': the training and the test file are the same file ({train} and {test}, "
                         f"sha256 {shas['train']}): every test row is a training row, so every metric would be "
                         f"measured on training data; give the official test file as data.custom.{name}.test "
                         f"(or set {key}: warn to run it anyway)")
    tr_lines = arff_data_lines(train, [j for _, j in pairs[:REPORT_FIRST]]) if train else {}
    te_lines = arff_data_lines(test, [i for i, _ in pairs[:REPORT_FIRST]]) if test else {}

    def where(f: Any, lines: dict, row: int) -> str:
        line = lines.get(row, (None,))[0]
        return f"{f} " + (f"line {line} (data row {row + 1})" if line else f"data row {row + 1}")

    shown = "\n  ".join(f"{where(test, te_lines, i)} = {where(train, tr_lines, j)}" for i, j in pairs[:REPORT_FIRST])
    raise ValueError(f"dataset '{name}': {len(pairs)} of {n_test} rows of {test} are identical (features and labels) "
                     f"to rows of {train}: those test rows would be scored on training data; first "
                     f"{min(len(pairs), REPORT_FIRST)}:\n  {shown}\nremove them from one of the files, or set "
                     f"{key}: warn to keep them (prepare records the count and the tables repeat it)")


def _bad_cells(X: Any) -> tuple[int, int, list[tuple[int, int]]]:
    """``(NaN count, infinite count, first REPORT_FIRST (row, column) in row order)``."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        X.sort_indices()
        bad = np.flatnonzero(~np.isfinite(X.data))
        vals = X.data[bad]
        rows = np.searchsorted(X.indptr, bad[:REPORT_FIRST], side="right") - 1
        cells = list(zip(rows.tolist(), X.indices[bad[:REPORT_FIRST]].tolist()))
    else:
        A = np.asarray(X)
        flat = np.flatnonzero(~np.isfinite(A))
        vals = A.reshape(-1)[flat]
        cells = [tuple(int(v) for v in np.unravel_index(i, A.shape)) for i in flat[:REPORT_FIRST]]
    n_nan = int(np.isnan(vals).sum())
    return n_nan, int(vals.size) - n_nan, cells


def feature_problems(spec: DatasetSpec, tt: Any, impute: str = "none", custom: bool = True) -> str | None:
    """The missing or non-finite feature values of both official splits, in words (None: none):
    the total, then the first :data:`REPORT_FIRST` of each file by file, line, data row and
    attribute (ARFF; other formats: row and column), then what to do (``custom``: a
    ``data.custom`` dataset, which can set ``impute``)."""
    from cdgtmll.data.mulan import describe_arff_cells

    names = list(getattr(tt, "feature_names", None) or [])
    files = getattr(tt, "split_files", None) or {}
    attr_of = getattr(tt, "feature_attributes", None)  # X column -> ARFF attribute (one-hot, dropped)
    attr_names = getattr(tt, "attribute_names", None) or names
    counts, lines = [], []
    total = 0
    for split, X in (("train", tt.X_train), ("test", tt.X_test)):
        n_nan, n_inf, cells = _bad_cells(X)
        if not n_nan + n_inf:
            continue
        total += n_nan + n_inf
        f = files.get(split)
        where = str(f) if f is not None else f"official {split} split"
        counts.append(f"{n_nan + n_inf} in {where} ({n_nan} missing/NaN, {n_inf} infinite)")
        if f is not None and str(f).endswith(".arff"):
            if attr_of is not None:
                cells = [(r, attr_of[c]) for r, c in cells]
            lines += describe_arff_cells(f, cells, attr_names if attr_of is not None else names)
        else:
            lines += [f"{where} row {r + 1}, column {c + 1}" + (f" ('{names[c]}')" if c < len(names) else "")
                      + ": missing or non-finite value" for r, c in cells]
    if not total:
        return None
    if impute != "none":
        hint = f"imputed with rule '{impute}'"
    elif custom:
        hint = f"fix the data, or set data.custom.{spec.name}.impute to 'mean' or 'zero' (fill values fitted on the training split)"
    else:
        hint = "fix the raw files (imputation, data.custom.<name>.impute, is a setting of config-defined datasets)"
    return (f"dataset '{spec.name}': {total} missing or non-finite feature value(s): {'; '.join(counts)}; "
            f"first {min(total, len(lines))} per file:\n  " + "\n  ".join(lines) + f"\n{hint}")


def impute_features(name: str, X: Any, fit: np.ndarray, rule: str, feature_names: list[str]) -> tuple[Any, dict]:
    """Fill the non-finite values of ``X`` (all rows: train and test) by ``rule`` ('mean':
    each column's mean over the finite values of the fit rows ``fit``, a sparse matrix's
    implicit zeros included; 'zero': 0). Returns ``(X, record)`` with the rule, the count and
    the fill value of each column that had a non-finite value (by feature name)."""
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32, copy=True)
        bad = ~np.isfinite(X.data)
        cols = np.unique(X.indices[bad])
    else:
        X = np.array(X, dtype=np.float32, copy=True)
        bad = ~np.isfinite(X)
        cols = np.flatnonzero(bad.any(axis=0))
    fills = np.zeros(cols.size, dtype=np.float64)
    if rule == "mean" and cols.size:
        sub = X[fit][:, cols]
        if sp.issparse(sub):
            sub = sp.csr_matrix(sub)
            ok = np.isfinite(sub.data)
            sums = np.bincount(sub.indices[ok], weights=sub.data[ok].astype(np.float64), minlength=cols.size)
            n_ok = fit.size - np.bincount(sub.indices[~ok], minlength=cols.size)
        else:
            finite = np.isfinite(sub)
            sums = np.where(finite, sub, 0).astype(np.float64).sum(axis=0)
            n_ok = finite.sum(axis=0)
        empty = [feature_names[c] if c < len(feature_names) else f"#{c + 1}" for c in cols[n_ok == 0]]
        if empty:
            raise ValueError(f"dataset '{name}': impute 'mean': column(s) {', '.join(map(repr, empty[:10]))} have no "
                             "finite value in the training split's rows; fix the data or use impute 'zero'")
        fills = sums / n_ok
    count = int(bad.sum())
    if sp.issparse(X):
        pos = np.searchsorted(cols, X.indices[bad])
        X.data[bad] = fills[pos].astype(np.float32)
        X.eliminate_zeros()
    else:
        for k, c in enumerate(cols):
            X[bad[:, c], c] = np.float32(fills[k])
    names = [feature_names[c] if c < len(feature_names) else f"#{c + 1}" for c in cols]
    record = {"rule": rule, "description": IMPUTE_HOW[rule], "fitted_on": "train split (fit rows)",
              "n_fit_rows": int(fit.size), "count": count,
              "fill_values": {n: float(np.float32(v)) for n, v in zip(names, fills)}}
    return X, record


def constant_labels(Y: Any, fit: np.ndarray, names: list[str]) -> tuple[list[str], list[str]]:
    """``(constant, all_positive)``: names of the labels constant over the fit rows (no positive,
    or positive in every row), and the all-positive ones among them."""
    Yf = Y[fit]
    pos = np.asarray(Yf.sum(axis=0)).ravel()
    const = np.flatnonzero((pos == 0) | (pos == fit.size))
    return [names[k] for k in const], [names[k] for k in const if pos[k] == fit.size]


def describe_source(rec: Mapping[str, Any]) -> str:
    """Where a raw file (a ``FetchResult.record()``) came from, in words."""
    source = rec.get("source")
    if source == "cached":
        return f"cached copy of {rec.get('original_source') or 'unknown source'} {rec.get('origin')}"
    if source == "packaged":
        return f"packaged copy {rec.get('origin')}"
    return f"{source} {rec.get('origin')}"


def _sources_summary(data: ProcessedData) -> str:
    """``raw: 3 from mirror /m/yeast`` etc.: the sources actually used (not the configured mirror)."""
    counts: dict[str, int] = {}
    for rec in data.meta.get("source_files", []):
        src = rec.get("original_source") if rec.get("source") == "cached" else rec.get("source")
        origin = Path(str(rec.get("origin")))
        where = f"{src} {origin.parent}" if src in ("mirror", "packaged") else str(src)
        key = f"cached, from {where}" if rec.get("source") == "cached" else f"from {where}"
        counts[key] = counts.get(key, 0) + 1
    return "raw: " + ", ".join(f"{n} {k}" for k, n in counts.items())


def _load_config_arg(value: str) -> dict:
    p = Path(value)
    text = p.read_text(encoding="utf-8") if p.suffix == ".json" and p.is_file() else value
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--dataset-config: not valid JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError("--dataset-config: expected a JSON object")
    return cfg


def _record_failure(args: argparse.Namespace, reason: str) -> None:
    """Leave ``unavailable.json`` beside ``--out`` (cdgtmll.data.availability.write_failure) and
    say what the next run does with it."""
    cfg = _load_config_arg(args.dataset_config) if args.dataset_config else {}
    opts = _load_config_arg(args.loader_options) if args.loader_options else None
    try:
        spec = spec_from_config(args.dataset, cfg) if cfg else get_spec(args.dataset)
        sources = local_inputs(spec, args.mirror, not args.no_download)
    except (KeyError, ValueError):
        sources = []
    key = failure_key(cfg or None, opts, args.val_fraction, args.split_seed, args.min_split_rows)
    path = write_failure(args.out, args.dataset, reason, dataset_config=key, code=args.code, sources=sources,
                         log=args.log_path)
    print(f"recorded in {path}: the next run leaves {args.dataset} out, its table cells say n.r. with this "
          "reason, and every other dataset runs (config data.unavailable: error makes it an error instead); "
          "fix the data, or change its config, and it is tried again", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdgtmll.data.prepare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--raw-dir", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--mirror", default=None, help="offline mirror folder (env CDGTMLL_DATA_MIRROR overrides)")
    ap.add_argument("--no-download", action="store_true", help="never use the network")
    ap.add_argument("--val-fraction", type=float, default=splits_mod.DEFAULT_FRACTION)
    ap.add_argument("--split-seed", type=int, default=splits_mod.DEFAULT_SEED)
    ap.add_argument("--dataset-config", default=None, help="JSON (inline or .json path) defining a MULAN dataset")
    ap.add_argument("--min-split-rows", type=int, default=splits_mod.DEFAULT_MIN_SPLIT_ROWS,
                    help="fewest rows of the train (fit), val and test split (config data.min_split_rows)")
    ap.add_argument("--loader-options", default=None,
                    help='JSON object of loader keyword arguments, e.g. \'{"tfidf": false}\' (XMC)')
    ap.add_argument("--code", default=None,
                    help="the job's code identity: on a failure, record why beside --out (cdgtmll.data.availability), "
                    "so that the next plan leaves the dataset out with this reason")
    ap.add_argument("--log-path", default=None, help="the job's log, named in the failure record")
    args = ap.parse_args(argv)
    try:
        cfg = _load_config_arg(args.dataset_config) if args.dataset_config else None
        opts = _load_config_arg(args.loader_options) if args.loader_options else None
        data = prepare(
            args.dataset,
            args.raw_dir,
            args.out,
            mirror=args.mirror,
            allow_download=not args.no_download,
            val_fraction=args.val_fraction,
            split_seed=args.split_seed,
            dataset_config=cfg,
            loader_options=opts,
            log=lambda line: print(line, flush=True),
            min_split_rows=args.min_split_rows,
        )
    except (LoaderNotImplemented, AcquisitionError, ChecksumError, KeyError, ValueError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        if args.code:
            _record_failure(args, str(msg))
        return 2
    clear_failure(args.out)
    print(
        f"{data.name}: {data.Y.shape[0]} rows x {data.X.shape[1]} features, {data.n_labels} labels; "
        f"train {data.splits['train'].size} / val {data.splits['val'].size} / test {data.splits['test'].size} "
        f"-> {args.out} ({_sources_summary(data)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
