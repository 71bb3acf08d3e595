"""The environment the Snakefile gives every job (src/cdgtmll/pipeline/env.py; OpenMP's wait
policy: tests/unit/runtime/test_openmp.py). That a real job gets it is checked on the tiny
pipeline's provenance (tests/integration/pipeline/test_pipeline_e2e.py)."""

from __future__ import annotations

from cdgtmll.pipeline.env import GPUS_BY_REQUEST_ENV, JOB_GPUS_ENV, export_gpu_requests, job_device


def test_a_cluster_job_that_asked_for_no_gpu_trains_on_the_cpu():
    """device auto picks CUDA wherever one is visible; a job whose GPUs come by request
    (cluster: true) and that asked for none (below cluster_resources.gpu_min_cells) gets cpu.
    A local run (GPUs not by request) keeps auto, and cuda or cpu are never changed."""
    env: dict[str, str] = {}
    export_gpu_requests(True, env)
    assert env == {GPUS_BY_REQUEST_ENV: "1"}
    assert job_device("auto", {**env, JOB_GPUS_ENV: "0"}) == "cpu"
    assert job_device("auto", {**env, JOB_GPUS_ENV: "1"}) == "auto"
    assert job_device("auto", env) == "auto"  # a job that is no training job says nothing
    assert job_device("cuda", {**env, JOB_GPUS_ENV: "0"}) == "cuda"
    export_gpu_requests(False, env)
    assert job_device("auto", {**env, JOB_GPUS_ENV: "0"}) == "auto"

