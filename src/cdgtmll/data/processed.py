"""The one on-disk processed format every dataset shares.

A processed dataset is a single ``.npz`` file (``np.savez``, no pickle) holding

=================  ==========================================================
key                content
=================  ==========================================================
``X``              dense float32 features ``[n, d]`` *or*
``X_data``,        the CSR parts of a sparse float32 feature matrix
``X_indices``,
``X_indptr``,
``X_shape``
``Y``              dense uint8 label matrix ``[n, L]`` *or* CSR parts ``Y_*``
``label_names``    unicode array ``[L]``
``idx_train``      int64 row indices of the training split (fit rows)
``idx_val``        int64 row indices of the validation split (carved from train)
``idx_test``       int64 row indices of the official test split
``meta``           a JSON string: dataset name, format version, source files
                   with sha256, split provenance (seed, fraction, method), and
                   what prepare's checks found: ``constant_train_labels``
                   (label names), ``imputation`` (rule, count, fill values),
                   ``train_test_duplicates`` (test rows equal to training
                   rows, kept), ``feature_encoding`` (dropped and one-hot
                   attributes, with the config key that decided each)
=================  ==========================================================

:func:`dataset_warnings` turns the checks' records into sentences (the prepare log and
the tables' footnotes repeat them).

Image datasets store paths instead of pixels: ``X`` is a float32 ``[n, 1]`` column of
row ids into ``meta['image_paths']`` (relative to ``meta['image_root']``,
``meta['x_kind'] == 'image-row-id'``), so that any row subset still maps to its files
(see ``cdgtmll.images.datasets``); ``python -m cdgtmll.images.features`` turns such a file into
one whose ``X`` holds frozen backbone features.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.io import atomic_path

FORMAT_VERSION = 1
SPLITS = ("train", "val", "test")


@dataclass
class ProcessedData:
    name: str
    X: Any  # np.ndarray float32 [n, d] or sp.csr_matrix
    Y: Any  # np.ndarray uint8 [n, L] or sp.csr_matrix
    label_names: list[str]
    splits: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.Y.shape[0]
        if self.X is not None and self.X.shape[0] != n:
            raise ValueError(f"{self.name}: X has {self.X.shape[0]} rows but Y has {n}")
        if len(self.label_names) != self.Y.shape[1]:
            raise ValueError(
                f"{self.name}: {len(self.label_names)} label names for {self.Y.shape[1]} label columns"
            )
        for s in SPLITS:
            if s not in self.splits:
                raise ValueError(f"{self.name}: missing split '{s}'")
            idx = np.asarray(self.splits[s], dtype=np.int64)
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise ValueError(f"{self.name}: split '{s}' indexes outside [0, {n})")
            self.splits[s] = idx
        seen = np.concatenate([self.splits[s] for s in SPLITS])
        if np.unique(seen).size != seen.size:
            raise ValueError(f"{self.name}: train/val/test splits overlap")

    @property
    def n_labels(self) -> int:
        return int(self.Y.shape[1])

    def part(self, split: str) -> tuple[Any, Any]:
        """(X, Y) rows of one split."""
        idx = self.splits[split]
        X = None if self.X is None else self.X[idx]
        return X, self.Y[idx]

    def with_labels(self, Y: Any, kind: str, variant: dict[str, Any]) -> ProcessedData:
        """A training-label variant of this dataset (R-variant, label noise): same
        features, splits and label names, labels ``Y``, name ``<name>-<kind>`` and
        ``meta['variant'] = variant``."""
        meta = dict(self.meta)
        meta["variant"] = variant
        return ProcessedData(
            name=f"{self.name}-{kind}",
            X=self.X,
            Y=Y,
            label_names=list(self.label_names),
            splits={s: np.array(v, copy=True) for s, v in self.splits.items()},
            meta=meta,
        )

    def save(self, path: str | Path) -> None:
        arrays: dict[str, np.ndarray] = {}
        _put(arrays, "X", self.X, np.float32)
        _put(arrays, "Y", self.Y, np.uint8)
        arrays["label_names"] = np.asarray(self.label_names, dtype=str)
        for s in SPLITS:
            arrays[f"idx_{s}"] = self.splits[s]
        meta = dict(self.meta, name=self.name, format_version=FORMAT_VERSION)
        arrays["meta"] = np.asarray(json.dumps(meta, sort_keys=True))
        with atomic_path(path, suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:  # a file object stops np.savez appending '.npz'
                np.savez(fh, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> ProcessedData:
        path = Path(path)
        try:
            z = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a processed dataset (.npz): {exc}") from exc
        with z:
            meta = json.loads(str(z["meta"]))
            if meta.get("format_version") != FORMAT_VERSION:
                raise ValueError(
                    f"{path}: field 'meta.format_version' is {meta.get('format_version')!r}, "
                    f"expected {FORMAT_VERSION}"
                )
            return cls(
                name=meta["name"],
                X=_get(z, "X"),
                Y=_get(z, "Y"),
                label_names=[str(s) for s in z["label_names"]],
                splits={s: z[f"idx_{s}"] for s in SPLITS},
                meta=meta,
            )


def _put(arrays: dict, key: str, M: Any, dtype: type) -> None:
    if M is None:
        return
    if sp.issparse(M):
        M = sp.csr_matrix(M, dtype=dtype)
        arrays[f"{key}_data"] = M.data
        arrays[f"{key}_indices"] = M.indices
        arrays[f"{key}_indptr"] = M.indptr
        arrays[f"{key}_shape"] = np.asarray(M.shape, dtype=np.int64)
    else:
        arrays[key] = np.ascontiguousarray(M, dtype=dtype)


def _get(z: Any, key: str) -> Any:
    if key in z.files:
        return z[key]
    if f"{key}_data" in z.files:
        return sp.csr_matrix(
            (z[f"{key}_data"], z[f"{key}_indices"], z[f"{key}_indptr"]), shape=tuple(z[f"{key}_shape"])
        )
    return None


def read_labels(path: str | Path) -> tuple[Any, dict[str, np.ndarray]]:
    """The label matrix ``Y`` and the split indices of a processed file, without loading its
    features (a table footnote counts each split's positives). Raises ``OSError``, ``ValueError``
    or ``KeyError`` for a file that is not one."""
    with np.load(path, allow_pickle=False) as z:
        Y = _get(z, "Y")
        if Y is None:
            raise KeyError(f"{path}: no label matrix 'Y'")
        return Y, {s: z[f"idx_{s}"] for s in SPLITS}


#: how many label names a warning sentence lists before '... and N more'
WARN_NAMES = 20


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta`` of a processed file, without loading its arrays."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{path}: not a processed dataset (.npz): {exc}") from exc


def _names(names: list[str]) -> str:
    more = len(names) - WARN_NAMES
    return ", ".join(names[:WARN_NAMES]) + (f" and {more} more" if more > 0 else "")


def meta_warnings(meta: dict[str, Any]) -> list[str]:
    """The warnings prepare recorded in a processed file's ``meta`` (see :func:`dataset_warnings`)."""
    name = meta.get("display_name") or meta.get("name") or "dataset"
    out = []
    const = list(meta.get("constant_train_labels") or [])
    if const:
        full = set(meta.get("all_positive_train_labels") or [])
        none = [n for n in const if n not in full]
        parts = ([f"{len(none)} with no positive ({_names(none)})"] if none else []) + (
            [f"{len(full)} positive in every row ({_names([n for n in const if n in full])})"] if full else [])
        out.append(f"{name}: {len(const)} label(s) constant in the training split, {' and '.join(parts)}: no method "
                   "can learn them from the training data (recorded by prepare).")
    imp = meta.get("imputation") or {}
    if imp.get("count"):
        out.append(f"{name}: {imp['count']} missing or non-finite feature value(s) in {len(imp.get('fill_values', {}))} "
                   f"column(s) imputed by prepare, rule '{imp['rule']}' ({imp.get('description', '')}).")
    dup = meta.get("train_test_duplicates") or {}
    if dup.get("count") or dup.get("same_file"):
        same = "the training and test files are the same file: " if dup.get("same_file") else ""
        out.append(f"{name}: {same}{dup['count']} of {dup.get('n_test', '?')} test rows are identical (features and "
                   "labels) to training rows, kept by the config (duplicate_rows: warn): their scores are "
                   "measured on training data (recorded by prepare).")
    return out


def dataset_warnings(path: str | Path) -> list[str]:
    """What prepare warned about in processed file ``path``, one sentence each: labels
    constant in the training split (no positive, or positive in every row), feature
    values imputed (``data.custom.<name>.impute``), and test rows identical to training rows
    kept by ``data.custom.<name>.duplicate_rows: warn``. Empty for a clean dataset and for files
    written before these checks."""
    return meta_warnings(read_meta(path))
