"""Fault catalogue: a dataset that cannot be had becomes a reason, not a crash.

``mediamill`` (no download exists; a mirror only) and a data.custom dataset whose training file is
empty are in one profile beside Yeast. Before this, the first passed ``check-config`` and
``snakemake -n`` and stopped the run at ``prepare_dataset``; the second did the same, and no table
was written for Yeast. Now the plan names mediamill before any job; the failed prepare leaves its
reason, and the run ``make all`` makes (``snakemake datasets --keep-going``, then ``snakemake all``)
writes every table with Yeast's numbers and both datasets' cells ``n.r.`` with their reasons.
``data.unavailable: error`` stops before any job instead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdgtmll.config.loader import read_yaml
from tests.support.paths import ROOT
from tests.support.workflow import workflow_only

pytestmark = pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")

XML = ('<?xml version="1.0" encoding="utf-8"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">\n'
       '<label name="l0"></label>\n<label name="l1"></label>\n</labels>\n')


def _repo(tmp_path: Path, unavailable: str = "skip") -> tuple[Path, dict]:
    mirror = tmp_path / "mirror"
    (mirror / "broken").mkdir(parents=True)
    (mirror / "broken" / "broken-train.arff").write_bytes(b"")
    (mirror / "broken" / "broken-test.arff").write_text(
        "@relation broken\n@attribute a numeric\n@attribute l0 {0,1}\n@attribute l1 {0,1}\n@data\n1,0,1\n")
    (mirror / "broken" / "broken.xml").write_text(XML)
    # the shipped quick profile, changing only scale (one method, one seed, no R-variants) and
    # adding the two datasets
    cfg = read_yaml(ROOT / "config" / "quick.yaml")
    cfg["name"] = "unavailable"
    cfg["data"].update(allow_download=False, unavailable=unavailable,
                       custom={"broken": {"format": "mulan-arff", "train": "broken-train.arff",
                                          "test": "broken-test.arff", "xml": "broken.xml"}})
    cfg["experiments"].update(datasets=["yeast", "mediamill", "broken"], methods=["BR-LogReg"], seeds=[0],
                              r_variants=False)
    repo, env = workflow_only(tmp_path / "repo", mirror, configs=True)
    (repo / "config" / "t.yaml").write_text(yaml.safe_dump(cfg))
    return repo, env


def _snakemake(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """``snakemake ARGS --cores 2 --configfile config/t.yaml`` (targets first: --configfile takes
    every word after it)."""
    r = subprocess.run([sys.executable, "-m", "snakemake", *args, "--cores", "2", "--configfile", "config/t.yaml"],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.slow
def test_datasets_that_cannot_be_had_are_reasons_and_the_rest_runs_to_tables(tmp_path):
    repo, env = _repo(tmp_path)
    # the plan says, before any job, that mediamill cannot be had (no mirror copy, no download)
    rc, dry = _snakemake(repo, env, "all", "-n")
    assert rc == 0, dry[-3000:]
    assert "cdgtmll: mediamill is left out of this run: dataset mediamill cannot be obtained here: " \
           "mediamill-train.arff not in the mirror" in dry
    assert "mediamill.rar" in dry and "broken is left out" not in dry

    # make all's first pass: every dataset prepared, past failures; the broken one leaves its reason
    rc, _ = _snakemake(repo, env, "datasets", "--keep-going")
    assert rc != 0
    record = repo / "results/data/broken/unavailable.json"
    assert record.is_file() and not (repo / "results/data/broken/processed.npz").exists()
    log = (repo / "logs/prepare/broken.log").read_text()
    assert "the file is empty (0 bytes)" in log and "the next run leaves broken out" in log
    assert (repo / "results/data/yeast/processed.npz").is_file()

    # the main run: Yeast to every table, both others n.r. with their reasons
    rc, main = _snakemake(repo, env, "all")
    assert rc == 0, main[-3000:]
    assert "cdgtmll: broken is left out of this run: prepare_dataset failed: " in main
    table = (repo / "results/tables/table1_configured.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| BR-LogReg"))
    cells = [c.strip() for c in row.strip("|").split("|")[1:]]
    assert len(cells) == 6 and all(c[0].isdigit() or c.startswith("**") for c in cells[:2]), row
    assert all(c == "not run†" for c in cells[2:]), row
    assert "not run: dataset mediamill cannot be obtained here: mediamill-train.arff" in table
    assert "not run: prepare_dataset failed: " in table and "the file is empty (0 bytes)" in table
    assert "left out of this run for the reason its cells' † note gives" in table
    assert (repo / "results/claims/claims_check.md").is_file()

    # nothing changed: the record holds, nothing is planned; the data fixed: it is tried again
    _, again = _snakemake(repo, env, "all", "-n")
    assert "Nothing to be done" in again, again[-2000:]
    src = Path(env["CDGTMLL_DATA_MIRROR"]) / "broken" / "broken-train.arff"
    shutil.copy(Path(env["CDGTMLL_DATA_MIRROR"]) / "broken" / "broken-test.arff", src)
    _, retry = _snakemake(repo, env, "all", "-n")
    assert "broken is left out" not in retry
    assert "prepare_dataset" in retry


def test_data_unavailable_error_stops_before_any_job(tmp_path):
    repo, env = _repo(tmp_path, unavailable="error")
    rc, out = _snakemake(repo, env, "all", "-n")
    assert rc != 0
    assert "data.unavailable is error and these datasets cannot be had:" in out
    assert "  mediamill: dataset mediamill cannot be obtained here" in out
    assert not (repo / "results").exists()
