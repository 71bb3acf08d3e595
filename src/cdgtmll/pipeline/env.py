"""The environment every job of the workflow inherits, set by the Snakefile before any job starts.

The interpreter the jobs run (:func:`own_python_first`), the data mirror (:func:`export_mirror`) and whether GPUs come by
request (:func:`export_gpu_requests`, read back by :func:`job_device`). OpenMP's wait policy,
which the Snakefile also exports, is a performance workaround: :mod:`cdgtmll.runtime.openmp`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping


def own_python_first(deployment: set[str], environ: MutableMapping[str, str] | None = None) -> bool:
    """Put the folder of this interpreter first on ``PATH`` in ``environ`` (default: this
    process's environment, which the jobs inherit), so that the jobs' ``python -m cdgtmll...``
    runs the environment Snakemake runs in, even when it was started as ``.venv/bin/snakemake``
    without that environment on PATH. Not under a software deployment (``deployment``: the
    names of Snakemake's deployment methods, ``CONDA``, ``APPTAINER``), where each job's own
    environment provides its python. Returns whether PATH was changed."""
    env = os.environ if environ is None else environ
    if deployment & {"CONDA", "APPTAINER"}:
        return False
    folder = os.path.dirname(sys.executable)
    path = env.get("PATH", "")
    if path.split(os.pathsep)[0] == folder:
        return False
    env["PATH"] = folder + (os.pathsep + path if path else "")
    return True


def export_mirror(mirror: str | None, environ: MutableMapping[str, str] | None = None) -> bool:
    """Give the jobs the configured data mirror through ``CDGTMLL_DATA_MIRROR`` (absolute), unless
    the variable is set already (it overrides the config anyway, cdgtmll.data.acquire.resolve_mirror).
    Through the environment, not a param: a param's change re-runs the job, and a folder is not
    data. Returns whether it was set here."""
    env = os.environ if environ is None else environ
    if not mirror or env.get("CDGTMLL_DATA_MIRROR"):
        return False
    env["CDGTMLL_DATA_MIRROR"] = os.path.abspath(mirror)
    return True


#: "1" in every job's environment when the jobs get a GPU by asking a scheduler for one
#: (:func:`cdgtmll.config.plan.gpus_wanted`: ``cluster: true`` with ``experiments.device: auto``,
#: or device ``cuda``), else "0"; set by the Snakefile (:func:`export_gpu_requests`)
GPUS_BY_REQUEST_ENV = "CDGTMLL_GPUS_BY_REQUEST"
#: the GPUs a training job asked the scheduler for: its ``gpu`` resource, which the rules
#: ``train`` and ``train_more`` put in front of their command
JOB_GPUS_ENV = "CDGTMLL_JOB_GPUS"


def export_gpu_requests(wanted: bool, environ: MutableMapping[str, str] | None = None) -> None:
    """Tell the jobs whether their GPUs come by request (:data:`GPUS_BY_REQUEST_ENV`). Through
    the environment, not a param, as the mirror: where a job runs does not change its result,
    and a param's change would re-run it. A cluster job's Snakemake (in the sbatch job) reads
    the same config and sets the same value."""
    env = os.environ if environ is None else environ
    env[GPUS_BY_REQUEST_ENV] = "1" if wanted else "0"


def job_device(device: str, environ: Mapping[str, str] | None = None) -> str:
    """The device a training job trains on, from its spec's ``experiments.device``: ``auto``
    becomes ``cpu`` in a job whose GPUs come by request (:data:`GPUS_BY_REQUEST_ENV` "1") and
    which asked for none (:data:`JOB_GPUS_ENV` "0": a neural method on a dataset below
    ``cluster_resources.gpu_min_cells``), so that it never takes a GPU of its node that the
    scheduler did not give it (``auto`` picks CUDA wherever one is visible). Otherwise
    ``device`` as given: a local run's ``auto`` uses a GPU the machine has."""
    env = os.environ if environ is None else environ
    if device == "auto" and env.get(GPUS_BY_REQUEST_ENV) == "1" and env.get(JOB_GPUS_ENV) == "0":
        return "cpu"
    return device
