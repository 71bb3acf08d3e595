"""Checkpoint and training-log files of :mod:`cdgtmll.nn.trainer` (what the trainer
writes into ``ctx.workdir``).

* ``checkpoint.pt`` -- everything a bit-identical resume needs (see the trainer's module
  docstring), written atomically through :func:`cdgtmll.io.atomic_path`: a crash, a
  ``kill -9`` or a full disk leaves the previous complete checkpoint (or none), never
  a partial one; a temporary file orphaned by ``kill -9`` is removed by the next write
  into the same folder (:func:`cdgtmll.io.remove_stale_temps`). A full disk is reported
  as :class:`cdgtmll.io.DiskFullError` ("no space left on device" and the path) instead
  of torch's ``enforce fail at inline_container.cc``.
* ``train_log.csv`` -- one row per finished epoch, written atomically.

This module imports nothing from the trainer.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from cdgtmll.images.trainer_input import ImageInput
from cdgtmll.io import atomic_path, atomic_write, corrupt_artifact, sha256_file
from cdgtmll.lineage.code import package_sha256
from cdgtmll.nn import sparse as sparse_mod

CHECKPOINT = "checkpoint.pt"
TRAIN_LOG = "train_log.csv"
CHECKPOINT_VERSION = 1


def array_digest(a: Any) -> list[Any] | None:
    """Shape, dtype and sha256 of a training/validation array (image list digest for an
    :class:`ImageInput`, canonical CSR digest for a sparse matrix)."""
    if a is None:
        return None
    if isinstance(a, ImageInput):
        return a.digest()
    if sp.issparse(a):
        return sparse_mod.matrix_digest(a)
    a = np.ascontiguousarray(a)
    return [list(a.shape), str(a.dtype), hashlib.sha256(a.tobytes()).hexdigest()]


def run_fingerprint(task_fingerprint: dict[str, Any], train_config: dict[str, Any], seed: int,
                    arrays: tuple[Any, ...]) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: format version, the task's
    configuration, the trainer config, the seed, the data (``arrays`` = X/Y train/val)
    and the package's source code."""
    return {
        "version": CHECKPOINT_VERSION,
        "task": task_fingerprint,
        "train_config": train_config,
        "seed": seed,
        "data": [array_digest(a) for a in arrays],
        "code": package_sha256(),
    }


def fingerprint_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def training_state(fp: dict[str, Any], fp_hash: str, epoch: int, model: torch.nn.Module, opt: Any, sched: Any,
                   task: Any, gen: torch.Generator, rows: list[dict[str, Any]], scaler: Any,
                   best: dict[str, Any] | None = None) -> dict[str, Any]:
    """The checkpoint written after ``epoch``. ``best``: with ``select_epoch: best_val``, the
    best epoch so far ``{"epoch", "val_mAP", "model": state_dict}`` (None otherwise, or
    before any epoch with a finite validation mAP); ``model`` is always the last epoch's."""
    return {
        "fingerprint": fp_hash,
        "fingerprint_obj": fp,
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "task_state": task.extra_state(),
        "rng": get_rng_state(gen),
        "rows": rows,
        "grad_scaler": None if scaler is None else scaler.state_dict(),
        "best": best,
    }


def restore_state(state: dict[str, Any], model: torch.nn.Module, opt: Any, sched: Any, task: Any, scaler: Any,
                  gen: torch.Generator) -> list[dict[str, Any]]:
    """Load a checkpoint of :func:`training_state` into the live objects; returns its log rows."""
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    task.load_extra_state(state["task_state"])
    if scaler is not None and state.get("grad_scaler") is not None:
        scaler.load_state_dict(state["grad_scaler"])
    set_rng_state(state["rng"], gen)
    return list(state["rows"])


def write_log(path: Path, rows: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    atomic_write(path, buf.getvalue())


def read_log(path: str | Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def get_rng_state(gen: torch.Generator) -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "generator": gen.get_state(),
    }


def set_rng_state(state: dict[str, Any], gen: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    gen.set_state(state["generator"])


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Atomically ``torch.save`` ``state`` to ``path`` (a full disk raises
    :class:`cdgtmll.io.DiskFullError` naming ``path``)."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path, fp_hash: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if it exists, is readable and has fingerprint
    ``fp_hash``; otherwise None (with a warning for an unreadable or foreign one). An
    unreadable (truncated, edited) checkpoint is deleted and the warning says so: training
    starts from scratch."""
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)  # our own file
        if not isinstance(state, dict):
            raise TypeError(f"holds a {type(state).__name__}, not a checkpoint")
    except Exception as e:  # noqa: BLE001 - a corrupt checkpoint is ignored, not fatal
        err = corrupt_artifact(path, e, remove=True)
        warnings.warn(f"ignoring corrupt checkpoint {path}: {err.reason}; it has been deleted and this seed trains "
                      "from scratch (the trainer writes a new checkpoint after every epoch)", stacklevel=3)
        return None
    if state.get("fingerprint") != fp_hash:
        warnings.warn(
            f"ignoring checkpoint {path}: it was written for a different configuration "
            "(hyper-parameters, seed or data); training from scratch",
            stacklevel=3,
        )
        return None
    return state


class BaseRunError(ValueError):
    """A base run (``base_run`` of a run spec) that cannot stand in for this run's first stage:
    the message names the file and what was expected."""


def base_checkpoint(seed_dir: Path, spec_sha256: str, expected_fp: dict[str, Any],
                    code_sha256: str | None) -> tuple[dict[str, Any], dict]:
    """The checkpoint of a base run's seed folder ``seed_dir`` (``provenance.json`` and
    ``checkpoint.pt`` of, e.g., the BCE run a PE run builds on) and the record of what was read,
    after checking that it holds exactly the model this run's first stage would train:

    * the base run's provenance has ``config_sha256 == spec_sha256`` (the run the spec names);
    * ``checkpoint.pt``'s sha256 is the one that provenance records (``outputs.checkpoint``);
    * the checkpoint's fingerprint (:func:`run_fingerprint`: task, trainer config, seed, data)
      equals ``expected_fp``, the one this run's own fit of the base method computes, in every
      field but ``code``, the package's source, which any edit changes. For the code, the base
      run's provenance ``code_sha256`` (the identity of the code its training ran,
      :mod:`cdgtmll.lineage.code`) must be ``code_sha256``, that of its training code now
      (computed by the caller: :func:`cdgtmll.train.base_seed_run`).

    Any failure raises :class:`BaseRunError` naming the file. The record: ``{dir, seed,
    provenance_sha256, checkpoint_sha256, spec_sha256}``."""
    seed_dir = Path(seed_dir)
    prov_path, ckpt_path = seed_dir / "provenance.json", seed_dir / CHECKPOINT
    try:
        prov = json.loads(prov_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaseRunError(f"base run {prov_path}: unreadable provenance ({exc})") from exc
    if prov.get("config_sha256") != spec_sha256:
        raise BaseRunError(f"base run {prov_path}: config_sha256 {prov.get('config_sha256')}, expected {spec_sha256} "
                           "(the run spec's base_run.spec_sha256): that folder holds another run")
    recorded = ((prov.get("outputs") or {}).get("checkpoint") or {}).get("sha256")
    if not recorded:
        raise BaseRunError(f"base run {prov_path}: records no checkpoint sha256 (outputs.checkpoint)")
    if not ckpt_path.is_file():
        raise BaseRunError(f"base run {ckpt_path}: missing (its provenance records sha256 {recorded})")
    ckpt_sha = sha256_file(ckpt_path)
    if ckpt_sha != recorded:
        raise BaseRunError(f"base run {ckpt_path}: sha256 {ckpt_sha}, but {prov_path} records {recorded}")
    if prov.get("code_sha256") != code_sha256:
        raise BaseRunError(f"base run {prov_path}: trained by code {prov.get('code_sha256')}, its training code is "
                           f"{code_sha256} now: re-run the base run first")
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)  # our own file, hash checked above
    got = {k: v for k, v in (state.get("fingerprint_obj") or {}).items() if k != "code"}
    want = {k: v for k, v in expected_fp.items() if k != "code"}
    if fingerprint_hash(got) != fingerprint_hash(want):
        fields = sorted(k for k in set(got) | set(want) if fingerprint_hash(got.get(k)) != fingerprint_hash(want.get(k)))
        raise BaseRunError(f"base run {ckpt_path}: trained another model than this run's first stage would "
                           f"(fingerprint differs in {', '.join(fields)})")
    record = {"dir": str(seed_dir), "seed": prov.get("seed"), "spec_sha256": spec_sha256,
              "provenance_sha256": sha256_file(prov_path), "checkpoint_sha256": ckpt_sha}
    return state, record


def restore_final_model(state: dict[str, Any], model: torch.nn.Module, task: Any, select_epoch: str) -> list[dict]:
    """Load into ``model`` the weights a finished training of ``state``'s run returned (the
    trainer's end of training: the ``best`` weights with ``select_epoch: best_val`` when the run
    kept some, else the last epoch's), restore the task's extra state and the random number
    generators as they were when that run's training ended; returns its log rows."""
    model.load_state_dict(state["model"])
    task.load_extra_state(state["task_state"])
    set_rng_state(state["rng"], torch.Generator())
    best = state.get("best")
    if select_epoch == "best_val" and best is not None:
        model.load_state_dict(best["model"])
    model.eval()
    return list(state["rows"])
