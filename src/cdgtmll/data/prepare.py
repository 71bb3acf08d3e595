"""Prepare one dataset: acquire its raw files, load them, carve validation, save ProcessedData.

    python -m cdgtmll.data.prepare --dataset yeast --raw-dir RAW --out OUT.npz \\
        [--mirror DIR] [--no-download] [--val-fraction 0.1] [--split-seed 0] \\
        [--dataset-config JSON]

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
from cdgtmll.data.acquire import AcquisitionError, ChecksumError, fetch
from cdgtmll.data.processed import ProcessedData
from cdgtmll.data.registry import DatasetSpec, get_spec, spec_from_config


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
) -> ProcessedData:
    """Acquire, load, split and save one dataset; returns what was saved to ``out``.

    ``dataset`` is a registry name, a spec, or (with ``dataset_config``) the name of a
    config-defined MULAN dataset. Raises :class:`LoaderNotImplemented` for datasets whose
    loader does not exist yet (checked before anything is downloaded). ``log`` receives
    one line per acquisition note and per raw file (default: none).
    """
    if isinstance(dataset, DatasetSpec):
        spec = dataset
    elif dataset_config is not None:
        spec = spec_from_config(dataset, dataset_config)
    else:
        spec = get_spec(dataset)
    if spec.loader is None:
        raise LoaderNotImplemented(f"dataset '{spec.name}': loader not implemented yet (format {spec.format})")
    loader = _resolve(spec.loader)

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
        tt = loader(spec, fetched, **dict(loader_options or {}))
    except ValueError as exc:
        # the raw copy's path alone hides the file the user must fix: name its source too
        msg = str(exc)
        origins = [f"{r.path} is a copy of {describe_source(r.record())}"
                   for r in {id(r): r for r in fetched.values()}.values() if str(r.path) in msg]
        if origins:
            exc.args = (f"{msg} ({'; '.join(origins)})", *exc.args[1:])  # keeps its type (e.g. XMCFormatError)
        raise

    n_train = tt.Y_train.shape[0]
    n_test = tt.Y_test.shape[0]
    split_method = splits_mod.METHOD
    if spec.kind == "xmc":  # XMC: seeded random split (stratification infeasible at 10^4 labels)
        from cdgtmll.data.xmc import SPLIT_METHOD, random_validation_split

        fit, val = random_validation_split(n_train, fraction=val_fraction, seed=split_seed)
        split_method = SPLIT_METHOD
    else:
        fit, val = splits_mod.carve_validation(tt.Y_train, fraction=val_fraction, seed=split_seed)
    if sp.issparse(tt.X_train):
        X = sp.vstack([tt.X_train, tt.X_test], format="csr", dtype=np.float32)
    else:
        X = np.concatenate([tt.X_train, tt.X_test]).astype(np.float32, copy=False)
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
    data.save(out)
    return data


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
    ap.add_argument("--loader-options", default=None,
                    help='JSON object of loader keyword arguments, e.g. \'{"tfidf": false}\' (XMC)')
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
        )
    except (LoaderNotImplemented, AcquisitionError, ChecksumError, KeyError, ValueError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        return 2
    print(
        f"{data.name}: {data.Y.shape[0]} rows x {data.X.shape[1]} features, {data.n_labels} labels; "
        f"train {data.splits['train'].size} / val {data.splits['val'].size} / test {data.splits['test'].size} "
        f"-> {args.out} ({_sources_summary(data)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
