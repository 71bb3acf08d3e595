"""Fault catalogue: a run of another profile into a results folder stops before its first job.

A copy of the session's finished run of config/quick.yaml at test scale (``quick_run``: 1 epoch,
1 seed, the scale as settings in params.yaml) has recorded its profile (results/profile.json). A
run of another profile (config/quick.yaml renamed, as a user's own profile would be) into the
same checkout then stops before any job: exit non-zero, both profiles named with the command of
each way forward, results/ byte for byte as it was. A dry run of it only warns; a run of the
recorded profile with a ``--config`` override goes on (src/cdgtmll/pipeline/profile_guard.py).
"""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from tests.support.dvc_repo import copy_run, repo_env
from tests.support.workflow import run_snakemake, succeeded

pytestmark = pytest.mark.slow

QUICK = ("--configfile", "config/quick.yaml")
OTHER = ("--configfile", "config/other.yaml")


def _snapshot(root) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + f"@{p.stat().st_mtime_ns}"
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_another_profiles_run_stops_before_any_job_naming_both(tmp_path, mirror, quick_run):
    repo = copy_run(quick_run, tmp_path / "repo")
    other = yaml.safe_load((repo / "config/quick.yaml").read_text())
    other["name"] = "other"
    (repo / "config/other.yaml").write_text(yaml.safe_dump(other))
    env = repo_env(repo, mirror)
    marker = json.loads((repo / "results/profile.json").read_text())
    assert marker["name"] == "quick" and marker["configfiles"] == ["config/quick.yaml"]
    before = _snapshot(repo / "results")

    # another profile into the same folder: stops before its first job
    res = run_snakemake(repo, env, "all", "--cores", "2", *OTHER)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert '"quick"' in out and '"other"' in out, out[-3000:]
    assert "snakemake all --cores all --configfile config/quick.yaml" in out
    assert "mv results results.quick && mv figures figures.quick" in out
    assert "snakemake all --cores all --configfile config/other.yaml" in out
    assert "rule " not in out and "localrule " not in out, out[-3000:]  # no job was started
    assert _snapshot(repo / "results") == before

    # a dry run of it only warns
    dry = succeeded(run_snakemake(repo, env, "-n", "all", *OTHER))
    assert '"quick"' in dry and '"other"' in dry and "A dry run" in dry
    assert _snapshot(repo / "results") == before

    # the recorded profile with a --config override goes on (one job forced, so that the run starts)
    again = succeeded(run_snakemake(repo, env, "all", "--cores", "2", *QUICK, "--config", "cluster=False",
                              "--forcerun", "claims_check"))
    assert "claims_check" in again and "results/ holds a run of profile" not in again
