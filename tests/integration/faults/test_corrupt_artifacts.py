"""Fault catalogue: a corrupt artifact is named, deleted and re-made by the next run.

Real ``snakemake`` runs of config/quick.yaml as shipped, at test scale, on a copy of the
session's finished quick run (``quick_run``: 1 epoch, 1 seed, BR-LogReg and CD-GTMLL, the scale
as settings in params.yaml, which the Snakefile lays over the profile). A truncated
``predictions.npz`` makes the evaluate job fail naming the file (corrupt, the rule that writes
it, the command that rebuilds it) and deletes it; the next run re-runs training and completes.
A truncated ``metrics.json`` makes the tables job fail the same way, with no ``*.sources.json``
left behind; the next run re-runs the evaluation and the tables.
"""

from __future__ import annotations

import pytest

from tests.support.dvc_repo import copy_run, repo_env
from tests.support.workflow import run_snakemake, succeeded

pytestmark = pytest.mark.slow

CONFIGS = ("all", "--cores", "2", "--configfile", "config/quick.yaml")
RUN = "results/runs/yeast/clean/CD-GTMLL/seed0"
REBUILD = "`snakemake --cores all all --configfile <profile>` (or `make all CONFIG=<profile>`)"


def _truncate(path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_truncated_predictions_and_metrics_are_named_deleted_and_rebuilt(tmp_path, mirror, quick_run):
    repo = copy_run(quick_run, tmp_path / "repo")
    env = repo_env(repo, mirror)
    assert "Nothing to be done" in succeeded(run_snakemake(repo, env, "-n", *CONFIGS))  # a finished run
    tables = repo / "results/tables"
    assert len(list(tables.glob("*.sources.json"))) == 12

    # 1. a truncated predictions.npz: the evaluate job fails naming it (was: BadZipFile, every run)
    pred = repo / RUN / "predictions.npz"
    _truncate(pred)
    res = run_snakemake(repo, env, *CONFIGS)
    assert res.returncode != 0
    log = (repo / "logs/evaluate/yeast/clean/CD-GTMLL.log").read_text()
    assert (
        f"[evaluate] ERROR corrupt file {RUN}/predictions.npz: cannot be read (BadZipFile: File is not a zip "
        "file); it has been deleted, so the next snakemake run re-runs the job that writes it (rule train: "
        f"python -m cdgtmll.train): {REBUILD}"
    ) in log, log
    assert not pred.exists()
    # 2. the next run re-trains, evaluates and writes the tables
    out = succeeded(run_snakemake(repo, env, *CONFIGS))
    assert "rule train:" in out and "rule evaluate:" in out, out[-4000:]
    assert pred.is_file() and (repo / RUN / "metrics.json").is_file()

    # 3. a truncated metrics.json: the check before the run (cdgtmll.lineage.integrity) finds bytes
    # other than the tables read, names the file, deletes it, and this same run re-evaluates it and
    # writes every table again (before the check: the tables job failed naming it, and the next
    # run rebuilt it)
    metrics = repo / RUN / "metrics.json"
    _truncate(metrics)
    out = succeeded(run_snakemake(repo, env, *CONFIGS))
    assert f"cdgtmll integrity: {RUN}/metrics.json: sha256 " in out, out[-4000:]
    assert "cannot be read (JSONDecodeError" in out
    assert "deleted, so that this run re-makes it (rule evaluate: python -m cdgtmll.metrics.evaluate_run)" in out
    assert "rule evaluate:" in out and "rule tables:" in out and "rule train:" not in out, out[-4000:]
    assert len(list(tables.glob("*.sources.json"))) == 12 and metrics.is_file()
