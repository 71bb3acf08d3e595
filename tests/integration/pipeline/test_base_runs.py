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
        if spec["method"] in ("PE", "ETU", "LSFA"):
            b = spec["base_run"]
            assert b["method"] == "BCE" and b["dir"] == f"results/runs/{spec['dataset']}/{spec['variant']}/BCE"
            assert all(f"{b['dir']}/seed{s}/provenance.json" in j["input"] for s in spec["seeds"])
            built[spec["method"]] = built.get(spec["method"], 0) + len(spec["seeds"])
        if spec["method"] == "SRB":  # its own strongly proper surrogate: nothing to build on
            assert "base_run" not in spec
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
    pe = {j["spec"]["variant"]: j for j in jobs if j["spec"]["method"] == "PE"}
    assert pe["clean"]["spec"]["base_run"]["dir"] == "results/runs/yeast/clean/BCE"
    others = [v for v in pe if v != "clean"]
    assert others
    for v in others:
        assert pe[v]["spec"]["base_run"] == {"method": "BCE", "dir": None,
                                             "reason": f"BCE is not run on yeast/{v} in this configuration"}
        assert not any("/BCE/" in i for i in pe[v]["input"])
