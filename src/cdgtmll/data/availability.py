"""Which datasets can be had here, decided before any job runs.

A dataset that cannot be obtained is a *reason*, not a crash: the plan
(``workflow/rules/common.smk``) leaves its jobs out, and every table cell of it says ``n.r.``
with the reason in a footnote, while every other dataset runs to its tables. Two kinds of
reason:

* :func:`offline_reason` – known before any job: a raw file that is neither cached in
  ``<raw_dir>/<dataset>/``, nor in the mirror, nor stood in for by an installed packaged copy,
  and that no download can bring (none known, or ``data.allow_download: false``). This is what
  :func:`cdgtmll.data.acquire.fetch` would find, looked up without copying or hashing anything.
  A file that only a download can bring is not a reason (the network may be there); it is a
  note (:func:`download_note`), and a failed download is the second kind.
* :func:`recorded_failure` – a ``prepare_dataset`` job that failed on its data (acquisition,
  checksum, a malformed file, a failed check) writes ``results/data/<dataset>/unavailable.json``
  (:func:`write_failure`) before it exits non-zero. The next plan reads it back as the reason, for
  as long as nothing that could change the outcome has changed: the dataset's config, the
  prepare code's identity and the state of every local source (path, size, mtime). Change any
  of them and the dataset is tried again.

``data.unavailable: error`` (or ``--config strict_data=True``) turns both into an error before
any job instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cdgtmll.data.acquire import local_inputs, locate_packaged, resolve_mirror
from cdgtmll.data.registry import DatasetSpec, RemoteFile, data_config, get_spec
from cdgtmll.io import read_json, write_json

#: The record a failed ``prepare_dataset`` job leaves beside where its output would be.
FAILURE_NAME = "unavailable.json"


def _packaged_for(spec: DatasetSpec, file: RemoteFile) -> bool:
    return any(file.name in c.replaces and locate_packaged(c) is not None for c in spec.packaged)


def _cached(spec: DatasetSpec, raw_dir: str | os.PathLike, name: str) -> bool:
    """A copy in the raw cache that acquisition recorded (its ``.source.json`` beside it); the
    sha256 is re-checked by the job itself (:func:`cdgtmll.data.acquire.fetch`)."""
    target = Path(raw_dir) / spec.name / name
    return target.is_file() and target.with_name(name + ".source.json").is_file()


def missing_files(spec: DatasetSpec, raw_dir: str | os.PathLike, mirror: str | os.PathLike | None,
                  allow_download: bool) -> list[tuple[RemoteFile, str]]:
    """The raw files of ``spec`` that nothing here can provide, each with why, in file order."""
    mirror_dir = resolve_mirror(mirror)
    if any(locate_packaged(c) is not None and set(c.replaces) >= {f.name for f in spec.files} for c in spec.packaged):
        return []  # one installed packaged copy stands in for every raw file
    out = []
    for f in spec.files:
        if _cached(spec, raw_dir, f.name) or _packaged_for(spec, f):
            continue
        if mirror_dir is not None and (mirror_dir / spec.folder / f.name).is_file():
            continue
        if f.urls and allow_download:
            continue
        where = (f"not in the mirror ({mirror_dir / spec.folder / f.name})" if mirror_dir is not None
                 else "no mirror configured (data.mirror or $CDGTMLL_DATA_MIRROR)")
        if not f.urls:
            how = f"no download known: {f.manual}" if f.manual else "no download known"
        else:
            how = "downloads are off (data.allow_download: false)"
        out.append((f, f"{where}; {how}"))
    return out


def offline_reason(spec: DatasetSpec, raw_dir: str | os.PathLike, mirror: str | os.PathLike | None,
                   allow_download: bool) -> str | None:
    """Why ``spec`` cannot be obtained here, in one line naming its first missing file (and how
    many more are missing); None when every raw file is at hand or downloadable."""
    missing = missing_files(spec, raw_dir, mirror, allow_download)
    if not missing:
        return None
    f, why = missing[0]
    more = f" (and {len(missing) - 1} more of its {len(spec.files)} files)" if len(missing) > 1 else ""
    return f"dataset {spec.name} cannot be obtained here: {f.name} {why}{more}"


def download_note(spec: DatasetSpec, raw_dir: str | os.PathLike, mirror: str | os.PathLike | None) -> str | None:
    """A line saying which raw files of ``spec`` only a download can bring (None: none)."""
    remote = [f for f, _ in missing_files(spec, raw_dir, mirror, allow_download=False) if f.urls]
    if not remote:
        return None
    return (f"dataset {spec.name}: {len(remote)} of its {len(spec.files)} raw files will be downloaded "
            f"({', '.join(f.name for f in remote[:3])}{', ...' if len(remote) > 3 else ''})")


def source_state(paths: list[str]) -> dict[str, list[int] | None]:
    """``{path: [size, mtime_ns]}`` of each local source (None when absent): what the failure
    record compares, without hashing (the plan runs at every Snakemake start)."""
    out: dict[str, list[int] | None] = {}
    for p in map(os.path.abspath, paths):  # a relative mirror and its absolute form are one place
        try:
            st = os.stat(p)
        except OSError:
            out[p] = None
        else:
            out[p] = [st.st_size, st.st_mtime_ns]
    return out


def failure_path(out: str | os.PathLike) -> Path:
    """Where the failure record of the job writing ``out`` (``processed.npz``) lies."""
    return Path(out).with_name(FAILURE_NAME)


def _key(dataset_config: Mapping[str, Any] | None, code: str, sources: list[str]) -> dict:
    return {"dataset_config": json.loads(json.dumps(dataset_config or {}, sort_keys=True)), "code": code,
            "sources": source_state(sources)}


def write_failure(out: str | os.PathLike, dataset: str, reason: str, *, dataset_config: Mapping[str, Any] | None,
                  code: str, sources: list[str], log: str | None = None) -> Path:
    """Record that preparing ``dataset`` failed (atomically): the reason and what it depended on."""
    path = failure_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"dataset": dataset, "reason": reason, "log": log,
                      **_key(dataset_config, code, sources)})
    return path


def clear_failure(out: str | os.PathLike) -> None:
    """Remove the failure record of ``out`` (a prepare that succeeded, or one tried again)."""
    failure_path(out).unlink(missing_ok=True)


def recorded_failure(out: str | os.PathLike, *, dataset_config: Mapping[str, Any] | None, code: str,
                     sources: list[str]) -> str | None:
    """The reason a failed prepare of ``out`` recorded, while nothing it depended on changed;
    None when there is no record or something changed (then the dataset is tried again)."""
    path = failure_path(out)
    if not path.is_file():
        return None
    try:
        rec = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or any(rec.get(k) != v for k, v in _key(dataset_config, code, sources).items()):
        return None
    reason = str(rec.get("reason", "prepare failed"))
    first = reason.strip().splitlines()[0] if reason.strip() else "prepare failed"
    where = f" (log: {rec['log']})" if rec.get("log") else ""
    return f"prepare_dataset failed: {first}{where}; fix the data and run again (record: {path})"


def failure_key(custom: Mapping[str, Any] | None, loader_options: Mapping[str, Any] | None,
                val_fraction: float, split_seed: int, min_split_rows: int) -> dict:
    """What of the config a prepare's outcome depends on besides its code and sources: the
    dataset's own definition (without the text for people), its loader options and the split
    settings. The plan and the job compute it from the same values."""
    return {"custom": dict(custom) if custom else None,
            "loader_options": dict(loader_options) if loader_options else None,
            "val_fraction": float(val_fraction), "split_seed": int(split_seed), "min_split_rows": int(min_split_rows)}


def plan_unavailable(config: Mapping[str, Any], datasets: list[str], code: str,
                     processed: Callable[[str], str]) -> dict[str, str]:
    """``{dataset: reason}`` for each of ``datasets`` that cannot be had here: its files
    (:func:`offline_reason`), or a recorded failure of its prepare (:func:`recorded_failure`;
    ``processed(dataset)`` is the path the job writes, ``code`` the prepare's code identity).
    Datasets whose processed file already exists are at hand whatever their sources."""
    data = config["data"]
    custom = data.get("custom") or {}
    out: dict[str, str] = {}
    for d in datasets:
        if Path(processed(d)).is_file():
            continue
        spec = get_spec(d, custom)
        reason = offline_reason(spec, data["raw_dir"], data.get("mirror"), bool(data.get("allow_download", True)))
        if reason is None:
            key = failure_key(data_config(custom[d]) if d in custom else None, (data.get("loader_options") or {}).get(d),
                              data["val_fraction"], data["split_seed"], data["min_split_rows"])
            reason = recorded_failure(processed(d), dataset_config=key, code=code,
                                      sources=local_inputs(spec, data.get("mirror"), bool(data.get("allow_download", True))))
        if reason is not None:
            out[d] = reason
    return out
