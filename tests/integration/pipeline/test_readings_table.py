"""The readings study's table goes with the tables: rule ``study_readings`` writes
``results/tables/readings.{csv,md,sources.json}`` (a readings study of one reading on Yeast, two
epochs, two seeds), and ``cdgtmll audit`` follows the table to every run behind it."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from tests.support.workflow import run_audit, run_snakemake, succeeded, workflow_only

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "tiny-readings",
    "data": {"mirror": None, "allow_download": False},
    "experiments": {"datasets": ["yeast"], "methods": ["BCE"], "seeds": [0, 1]},
    "r_variants": {"sampling_seeds": [0], "severities": {"yeast": [0.5]}},
    "training": {"default": {"epochs": 2}},
    "methods": {},
    "figures": {"pr_curve": {"dataset": "yeast", "severity": 0.5}},
    "studies": {"readings": {"dataset": "yeast", "reference": "BCE", "readings": ["divergence=kl"]}},
}


@pytest.fixture(scope="module")
def readings_run(tmp_path_factory, mirror):
    repo, env = workflow_only(tmp_path_factory.mktemp("readings") / "wf", mirror, configs=True)
    (repo / "config/tiny.yaml").write_text(yaml.safe_dump(CONFIG))
    out = succeeded(run_snakemake(repo, env, "--cores", "2", "results/tables/readings.md", "--configfile",
                                  "config/tiny.yaml"))
    return repo, env, out


def test_the_readings_table_is_written_under_results_tables(readings_run):
    repo, _, out = readings_run
    assert "study_readings" in out
    assert not (repo / "figures" / "readings.md").exists()
    rows = list(csv.DictReader((repo / "results/tables/readings.csv").open(encoding="utf-8")))
    assert {r["reading"] for r in rows} == {"default", "divergence=kl"}, rows
    assert "divergence=kl" in (repo / "results/tables/readings.md").read_text(encoding="utf-8")
    runs = json.loads((repo / "results/tables/readings.sources.json").read_text())["runs"]
    assert sorted(runs) == [f"yeast/clean/{m}" for m in ("BCE", "CD-GTMLL", "CD-GTMLL@divergence=kl")]


def test_the_audit_follows_the_table_to_every_file_it_read(readings_run):
    repo, env, _ = readings_run
    audit = run_audit(repo, env, "results/tables/readings.md")
    assert "artifact results/tables/readings.md" in audit.stdout, audit.stdout[-3000:] + audit.stderr[-3000:]
    sources = json.loads((repo / "results/tables/readings.sources.json").read_text())["runs"]
    for runs in sources.values():
        for r in runs:  # every file the table read is re-hashed
            assert f"{r['path']} sha256 {r['sha256'][:16]}" in audit.stdout, r["path"]


def test_the_audit_of_the_readings_table_passes(readings_run):
    repo, env, _ = readings_run
    audit = run_audit(repo, env, "results/tables/readings.md")
    assert audit.returncode == 0, audit.stdout[-3000:]
    # each metrics.json the table read is traced like a table cell's run: to its predictions
    # (evaluated again) and its training's provenance
    assert "DIFFERS" not in audit.stdout and "predictions sha256" in audit.stdout, audit.stdout[-3000:]
