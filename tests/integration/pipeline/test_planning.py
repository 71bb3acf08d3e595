"""What the default profile's dry run plans: each distinct run spec trained once, and the order
(Snakemake priorities) in which a run makes the tables' runs first."""

from __future__ import annotations

import pytest

from cdgtmll.config import loader, plan
from tests.support.workflow import copy_repo, run_snakemake, snakemake_env


def planned(out: str) -> list[dict[str, str]]:
    """Every job of a dry run's output: rule, wildcards and priority."""
    jobs: list[dict[str, str]] = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            jobs.append({"rule": line.split()[1].rstrip(":"), "wildcards": "", "priority": "0"})
        elif jobs and line.startswith(("wildcards:", "priority:")):
            key, _, value = line.partition(":")
            jobs[-1][key] = value.strip()
    return jobs


def job_of(wildcards: str) -> tuple[str, str, str]:
    wc = dict(item.split("=", 1) for item in wildcards.split(", "))
    return wc["dataset"], wc["variant"], wc["method"]


@pytest.fixture(scope="module")
def default_dry_run(tmp_path_factory, mirror):
    repo = copy_repo(tmp_path_factory.mktemp("plan") / "repo")
    res = run_snakemake(repo, snakemake_env(mirror), "-n", "all", "--configfile", "config/config.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return repo, planned(res.stdout)


def test_default_profile_trains_each_run_spec_once(default_dry_run):
    repo, jobs = default_dry_run
    cfg = loader.load(repo / "config/config.yaml")
    train = [job_of(j["wildcards"]) for j in jobs if j["rule"] == "train"]
    keys = {plan.result_key(plan.run_spec(cfg, *j)): j for j in train}
    assert len(keys) == len(train)  # no two train jobs with the same resolved spec
    # and every configured setting's spec is trained under one name
    studies = [j for js in plan.study_jobs(cfg).values() for j in js]
    for job in studies:
        if not plan.not_runnable(cfg, job[0], job[2]):
            assert plan.result_key(plan.run_spec(cfg, *job)) in keys, job
    for setting in ("CD-GTMLL@alpha=0.4", "CD-GTMLL@n_players=3", "CD-GTMLL@alpha=0.0", "CD-GTMLL@n_players=1"):
        assert ("yeast", "clean", setting) not in train
    assert sorted(job_of(j["wildcards"]) for j in jobs if j["rule"] == "evaluate") == sorted(train)


def test_tables_rows_train_first_and_evaluation_follows_training(default_dry_run):
    repo, jobs = default_dry_run
    cfg = loader.load(repo / "config/config.yaml")
    rows = {(d, v, m) for d in cfg["experiments"]["datasets"] for v in plan.variants(cfg, d)
            for m in cfg["experiments"]["methods"]}
    prio = {}
    for j in jobs:
        if j["rule"] in ("train", "evaluate"):
            prio.setdefault((j["rule"], job_of(j["wildcards"]) in rows), set()).add(int(j["priority"]))
    assert set(prio) == {("train", True), ("train", False), ("evaluate", True), ("evaluate", False)}
    assert min(prio[("train", True)]) > max(prio[("train", False)])  # the tables' rows before the studies
    assert min(prio[("evaluate", False)]) > max(prio[("train", True)])  # an evaluation before any training
    assert min(prio[("evaluate", True)]) >= max(prio[("evaluate", False)])
    data = {int(j["priority"]) for j in jobs if j["rule"] in ("prepare_dataset", "r_variant", "noise_variant")}
    assert min(data) > max(p for ps in prio.values() for p in ps)  # Table 2's R-variants are not held back


def test_tables_wait_only_for_their_own_rows(default_dry_run, mirror):
    """The tables are written from the tables' runs alone: asked for, they plan no study setting's
    training, and in a whole run the tables job outranks every training job, so that a run
    stopped after the tables' rows has the tables. Every run's summary (all_runs.csv,
    metrics_full, the DVC metric rows) is the metrics_summary job, after the tables."""
    repo, jobs = default_dry_run
    cfg = loader.load(repo / "config/config.yaml")
    rows = {(d, v, m) for d in cfg["experiments"]["datasets"] for v in plan.variants(cfg, d)
            for m in cfg["experiments"]["methods"] if not plan.not_runnable(cfg, d, m)}
    res = run_snakemake(repo, snakemake_env(mirror), "-n", "results/tables/table1_standard.md",
                        "--configfile", "config/config.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    only = planned(res.stdout)
    assert {job_of(j["wildcards"]) for j in only if j["rule"] == "train"} == rows
    assert {j["rule"] for j in only} == {"prepare_dataset", "r_variant", "train", "evaluate", "tables"}
    whole = {j["rule"]: int(j["priority"]) for j in jobs if j["rule"] in ("tables", "metrics_summary")}
    assert set(whole) == {"tables", "metrics_summary"}
    assert whole["tables"] > max(int(j["priority"]) for j in jobs if j["rule"] in ("train", "evaluate"))
    trained = sum(j["rule"] == "train" for j in jobs)
    assert trained > len(rows)  # the default profile's studies train settings of their own
