"""Provenance records: what produced an artifact, so that any number can be traced.

Every run writes ``provenance.json`` beside its metrics with: git commit and dirty
flag, the job's code identity and the package hash (:mod:`cdgtmll.lineage.code`), sha256 of
the resolved run spec and of the full config, sha256 of every input data file (and the
upstream source hashes recorded in the processed data), seed(s), package versions, device,
host, command line, start and end time.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from cdgtmll.config.run_spec import RunSpec
from cdgtmll.io import sha256_file
from cdgtmll.lineage import worktree
from cdgtmll.lineage.code import package_sha256
from cdgtmll.pipeline.env import GPUS_BY_REQUEST_ENV, JOB_GPUS_ENV

PACKAGES = (
    "cdgtmll", "numpy", "scipy", "scikit-learn", "pandas", "torch", "torchvision",
    "liac-arff", "iterative-stratification", "snakemake", "dvc", "matplotlib",
)


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def cpu_model(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> dict[str, str | None]:
    """The CPU's vendor, model name and family/model/stepping, from the first processor of
    ``/proc/cpuinfo`` (Linux; elsewhere ``platform.processor()`` as the model, the rest None).

    Same seed, config and data give identical metrics on CPU only on the same kind of CPU,
    because torch's CPU kernels are chosen by vendor and instruction set. Dropout, for one:
    ``bernoulli_(p)``, which ``F.dropout`` calls, draws from MKL's MCG31 stream (``viRngBernoulli``)
    on an Intel CPU in an MKL build and from the generator's mt19937 everywhere else
    (``aten/src/ATen/native/cpu/DistributionKernels.cpp``, ``bernoulli_scalar_kernel``), so a
    method with dropout trains on other masks there. The record says which CPU made a run."""
    first: dict[str, str] = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    if first:  # the end of the first processor's block
                        break
                    continue
                key, _, value = line.partition(":")
                first.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    fms = [first.get(k) for k in ("cpu family", "model", "stepping")]
    return {"vendor": first.get("vendor_id"), "model": first.get("model name") or platform.processor() or None,
            "family_model_stepping": "/".join(fms) if all(fms) else None}


def device_info(device: str | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "requested": device,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        # how idle OpenMP threads wait (the workflow's jobs: PASSIVE, cdgtmll/runtime/openmp.py)
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        # the GPUs a training job asked its scheduler for and whether GPUs come by request (the
        # rule's gpu resource; cdgtmll/pipeline/env.py job_device): why an `auto` job trained on the CPU
        "job_gpus": os.environ.get(JOB_GPUS_ENV),
        "gpus_by_request": os.environ.get(GPUS_BY_REQUEST_ENV),
    }
    if "torch" in sys.modules:  # never import torch just to describe the device
        import torch

        info["torch_threads"] = torch.get_num_threads()
        # the instruction set torch's CPU kernels dispatch to (AVX512, AVX2, ...) and whether MKL is in
        # the build: with the vendor, what decides which CPU kernels a run used (:func:`cpu_model`)
        info["cpu"]["torch_capability"] = torch.backends.cpu.get_cpu_capability()
        info["cpu"]["torch_mkl"] = torch.backends.mkl.is_available()
        info["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            info["cuda_device"] = torch.cuda.get_device_name(0)
            info["cuda_version"] = torch.version.cuda
    return info


def device_kind(device: dict | None) -> str | None:
    """The kind of machine a run's numbers depend on, as one line, from its record's ``device``
    block: the CPU's model name (or vendor) with its family/model/stepping, and the GPU for a run
    that did not ask for the CPU, e.g. ``AMD EPYC (26/2/1)`` or ``Intel(R) Xeon(R) Platinum 8480+
    (6/143/8) + NVIDIA H100 80GB HBM3``. None for a record without the CPU (written before it was
    recorded). Thread counts are left out (a job's setting, not the machine's), and so is torch's
    instruction set, which processes that never load torch do not record: both would make one
    machine look like two."""
    device = device or {}
    cpu = device.get("cpu") or {}
    name = cpu.get("model") or cpu.get("vendor")
    if not name:
        return None
    kind = f"{name} ({cpu['family_model_stepping']})" if cpu.get("family_model_stepping") else str(name)
    if device.get("requested") not in (None, "cpu") and device.get("cuda_device"):
        kind += f" + {device['cuda_device']}"
    return kind


def training_machines(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The kinds of machine that trained a run, in order, from its training log's ``machine``
    column (:mod:`cdgtmll.nn.trainer`): ``[{"machine": kind, "epochs": [first, last]}, ...]``,
    one entry per stretch of epochs on one kind. More than one entry means the run was resumed
    from a checkpoint on another kind of machine. None without a log (a method that does not
    train epoch by epoch) or without the column."""
    out: list[dict[str, Any]] = []
    for r in rows or []:
        kind = r.get("machine")
        if not kind:
            return None
        if out and out[-1]["machine"] == kind:
            out[-1]["epochs"][1] = int(r["epoch"])
        else:
            out.append({"machine": kind, "epochs": [int(r["epoch"]), int(r["epoch"])]})
    return out or None


def run_machine(prov: dict[str, Any]) -> str | None:
    """The kind of machine behind a run's numbers, from its provenance: the kinds that trained it
    in order (``A, then B`` for a run resumed on another kind of machine: its numbers match a
    run from scratch on neither), else the kind that recorded it (:func:`device_kind`)."""
    trained = prov.get("training_machines") or []
    if len(trained) > 1:
        return ", then ".join(t["machine"] for t in trained)
    return device_kind(prov.get("device"))


SCHEDULER_VARS = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_CLUSTER_NAME",
                  "SLURM_JOB_PARTITION", "SLURM_JOB_NODELIST", "SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_NODE")


def scheduler_info() -> dict[str, str] | None:
    """The batch job this process runs in (Slurm), so a run can be matched to the cluster's accounting
    (`sacct -j <SLURM_JOB_ID>`); None outside a scheduler."""
    found = {k.lower(): os.environ[k] for k in SCHEDULER_VARS if k in os.environ}
    return {"kind": "slurm", **found} if "slurm_job_id" in found else None


def file_hashes(paths: dict[str, str | os.PathLike]) -> dict[str, dict[str, Any]]:
    return {
        role: {"path": str(p), "sha256": sha256_file(p), "bytes": Path(p).stat().st_size}
        for role, p in paths.items()
    }


def used_hparams(spec: dict) -> dict[str, Any]:
    """The hyper-parameters a run spec's run used: its ``resolved_hparams`` (code defaults and
    what the method reports) with the configured ``hparams`` over them. ``spec``: the JSON form
    (:meth:`cdgtmll.config.run_spec.RunSpec.to_dict`), or the part of it a record has."""
    return {**(spec.get("resolved_hparams") or {}), **(spec.get("hparams") or {})}


def recorded_spec(prov: dict, source: str) -> RunSpec:
    """The run spec a training's provenance record holds (its ``config``), parsed
    (:meth:`cdgtmll.config.run_spec.RunSpec.from_dict`; ``source``: the record's path, named
    in the error when it is not a run spec)."""
    return RunSpec.from_dict(prov.get("config"), source)


def record(
    *,
    spec: RunSpec,
    code: dict[str, Any] | None = None,
    inputs: dict[str, str | os.PathLike],
    seed: int | list[int] | None,
    device: str | None,
    started: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a provenance record (call at the end of a run): ``config`` is the run spec's
    JSON form and ``config_sha256`` its sha256 (:meth:`~cdgtmll.config.run_spec.RunSpec.sha256`)."""
    rec = {
        "schema": "cdgtmll.lineage.provenance/1",
        "git": worktree.git_state(),  # through the module: the tests set it per seed
        # the job's code identity (cdgtmll.lineage.code: its modules, their hashes, the lock
        # file); package_sha256: every module of the package, for reference
        "code_sha256": (code or {}).get("sha256", package_sha256()),
        "code": code,
        "package_sha256": package_sha256(),
        "config_sha256": spec.sha256(),
        "config": spec.to_dict(),
        "inputs": file_hashes(inputs),
        "seed": seed,
        "packages": package_versions(),
        "device": device_info(device),
        "host": socket.gethostname(),
        "scheduler": scheduler_info(),
        "command": sys.argv,
        "started": started,
        "finished": now(),
    }
    if extra:
        rec.update(extra)
    return rec
