"""OpenMP's wait policy for the workflow's jobs (src/cdgtmll/runtime/openmp.py). That the Snakefile
sets it is checked on the parsed workflow (tests/integration/pipeline/test_snakefile_setup.py), that
a real job gets it on the tiny pipeline's provenance (tests/integration/pipeline/test_pipeline_e2e.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cdgtmll.runtime.openmp import OPENMP_WAIT_POLICY, passive_openmp_waits


def test_passive_waits_are_set_when_unset_and_a_users_choice_is_kept():
    env: dict[str, str] = {}
    assert passive_openmp_waits(env) is True and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert OPENMP_WAIT_POLICY == "PASSIVE"
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert passive_openmp_waits(mine) is False and mine == {"OMP_WAIT_POLICY": "ACTIVE"}
    empty = {"OMP_WAIT_POLICY": ""}  # set but empty counts as unset, as OpenMP reads it
    assert passive_openmp_waits(empty) is True and empty["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.slow
def test_a_process_started_with_it_keeps_torchs_results():
    """PASSIVE changes how OpenMP threads wait, not what they compute: a 2-thread matmul and
    convolution give the same bytes under both policies."""
    code = ("import hashlib, torch; torch.manual_seed(0); a = torch.randn(300, 300); "
            "w = torch.randn(8, 3, 3, 3); x = torch.randn(4, 3, 32, 32); "
            "print(hashlib.sha256((a @ a).numpy().tobytes() + "
            "torch.nn.functional.conv2d(x, w).numpy().tobytes()).hexdigest())")
    outs = set()
    for policy in ("ACTIVE", "PASSIVE"):
        env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": policy}
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout.strip())
    assert len(outs) == 1
