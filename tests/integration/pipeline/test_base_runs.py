"""The shipped profiles' dry runs plan every BCE model once: PE, ETU and LSFA read the BCE run
of their dataset and variant (``base_run`` in their run spec, the BCE run's provenance files among
their inputs), SRB trains its own surrogate model (tools/base_fits.py counts them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdgtmll.config import loader
from tests.support.paths import ROOT
from tests.support.tools import load_tool

FITS = load_tool("base_fits")


@pytest.fixture(scope="module", params=["config/config.yaml", "config/paper.yaml"])
def planned(request, mirror):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CDGTMLL_DATA_MIRROR", str(mirror))
        mp.delenv("SNAKEMAKE_PROFILE", raising=False)
        import tempfile

        with tempfile.TemporaryDirectory(prefix="base-fits-") as tmp:
            repo = FITS.copy_checkout(Path(tmp) / "repo")
            jobs = FITS.train_jobs(FITS.dry_run(repo, request.param))
    return request.param, jobs, loader.load(ROOT / request.param)


def test_no_bce_fit_inside_pe_etu_lsfa(planned):
    name, jobs, config = planned
    numbers = FITS.count(jobs, config)
    bce = numbers["methods"]["BCE"]
    assert bce["inside"] == {} and numbers["problems"] == [], FITS.summary(name, numbers)
    built = {}
    for j in jobs:
        spec = j["spec"]
        if spec.method in ("PE", "ETU", "LSFA"):
            b = spec.base_run
            assert b["method"] == "BCE" and b["dir"] == f"results/runs/{spec.dataset}/{spec.variant}/BCE"
            assert all(f"{b['dir']}/seed{s}/provenance.json" in j["input"] for s in spec.seeds)
            built[spec.method] = built.get(spec.method, 0) + len(spec.seeds)
        if spec.method == "SRB":  # its own strongly proper surrogate: nothing to build on
            assert spec.base_run is None
    assert built and bce["read"] == built


def test_without_bce_rows_fit_their_own_stage_one_and_say_why(mirror, tmp_path):
    """A profile whose tables run PE without BCE: on the R-variants, where no BCE run is planned,
    PE's spec says it fits stage 1 itself and why, and no BCE file is its input; on the clean
    split it reads the BCE run a study plans there (the noise study's clean runs)."""
    repo = FITS.copy_checkout(tmp_path / "repo")
    cfg = (repo / "config" / "config.yaml").read_text()
    cfg = cfg.replace("methods: [BCE, PE,", "methods: [PE,", 1)
    (repo / "config" / "nobce.yaml").write_text(cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CDGTMLL_DATA_MIRROR", str(mirror))
        jobs = FITS.train_jobs(FITS.dry_run(repo, "config/nobce.yaml"))
    pe = {j["spec"].variant: j for j in jobs if j["spec"].method == "PE"}
    assert pe["clean"]["spec"].base_run["dir"] == "results/runs/yeast/clean/BCE"
    others = [v for v in pe if v != "clean"]
    assert others
    for v in others:
        assert pe[v]["spec"].base_run == {"method": "BCE", "dir": None,
                                             "reason": f"BCE is not run on yeast/{v} in this configuration"}
        assert not any("/BCE/" in i for i in pe[v]["input"])


def _tiny_config(**bce) -> str:
    import yaml

    cfg = loader.read_yaml(ROOT / "config/quick.yaml")
    cfg["name"] = "tiny"
    cfg["experiments"].update(datasets=["yeast"], methods=["BCE", "PE", "SRB", "LSFA", "ETU"], seeds=[0],
                              r_variants=False)
    cfg["r_variants"]["severities"] = {"yeast": []}
    cfg["training"]["default"].update(epochs=2, hidden_dim=32)
    cfg["methods"] = {"LSFA": {"gen_epochs": 3, "gen_hidden_dim": 16}, **({"BCE": bce} if bce else {})}
    cfg["figures"] = {"pr_curve": {}}
    return yaml.safe_dump(cfg, sort_keys=False)


def test_a_run_reads_bce_once_and_a_change_to_bce_re_runs_the_rows_on_it(tmp_path, mirror):
    """The pipeline end to end on Yeast: PE, ETU and LSFA read the BCE run's checkpoint (no
    checkpoint of their own, their provenance names the BCE seed folder), SRB trains its own;
    the table's footnote names the shared run and the audit of the table passes; then BCE at
    another learning rate re-plans BCE and, as they now fit their own stage 1, PE, ETU and LSFA."""
    import json
    import re

    from tests.support.workflow import copy_repo, run_audit, run_snakemake, snakemake_env

    repo = copy_repo(tmp_path / "repo")
    (repo / "config/tiny.yaml").write_text(_tiny_config())
    env = snakemake_env(mirror)
    res = run_snakemake(repo, env, "--cores", "2", "all", "--configfile", "config/tiny.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    runs = repo / "results" / "runs" / "yeast" / "clean"
    bce = json.loads((runs / "BCE" / "seed0" / "provenance.json").read_text())
    for m in ("PE", "ETU", "LSFA"):
        prov = json.loads((runs / m / "seed0" / "provenance.json").read_text())
        assert prov["base_run"]["dir"] == "results/runs/yeast/clean/BCE/seed0"
        assert prov["base_run"]["checkpoint_sha256"] == bce["outputs"]["checkpoint"]["sha256"]
        assert not (runs / m / "seed0" / "checkpoint.pt").exists()
    assert "base_run" not in json.loads((runs / "SRB" / "seed0" / "provenance.json").read_text())
    assert (runs / "SRB" / "seed0" / "checkpoint.pt").is_file()
    table = (repo / "results" / "tables" / "table1_standard.md").read_text()
    assert ("stage 1 is the BCE run of the same dataset, variant and seeds (results/runs/<dataset>/<variant>/BCE)"
            in table)
    audit = run_audit(repo, env, "results/tables/table1_standard.md")
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    assert "first stage read from the BCE run results/runs/yeast/clean/BCE/seed0" in audit.stdout

    # a BCE run re-made (for whatever reason) re-runs the rows on it: they are its DAG successors
    res = run_snakemake(repo, env, "-n", "all", "--configfile", "config/tiny.yaml",
                        "--forcerun", "results/runs/yeast/clean/BCE/seed0/provenance.json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    planned = set(re.findall(r"rule train:\n(?: +\w+: .*\n)*? +wildcards: dataset=yeast, variant=clean, "
                             r"method=([\w-]+)", res.stdout))
    assert planned == {"BCE", "PE", "ETU", "LSFA"}, res.stdout[-3000:]

    (repo / "config/tiny.yaml").write_text(_tiny_config(lr_backbone=1.0e-3))
    res = run_snakemake(repo, env, "-n", "all", "--configfile", "config/tiny.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    planned = set(re.findall(r"rule train:\n(?: +\w+: .*\n)*? +wildcards: dataset=yeast, variant=clean, "
                             r"method=([\w-]+)", res.stdout))
    assert planned == {"BCE", "PE", "ETU", "LSFA"}, res.stdout[-3000:]
