"""What the default profile's dry run plans: each distinct run spec trained once, and the order
(Snakemake priorities) in which a run makes the tables' runs first."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdgtmll.config import loader, plan
from tests.support.paths import ROOT
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
    train = [job_of(j["wildcards"]) for j in jobs if j["rule"] in ("train", "train_once")]
    keys = {plan.result_key(plan.run_spec(cfg, *j)): j for j in train}
    assert len(keys) == len(train)  # no two train jobs with the same resolved spec
    # and every configured setting's spec is trained under one name
    studies = [j for js in plan.study_jobs(cfg).values() for j in js]
    for job in studies:
        if not plan.not_runnable(cfg, job[0], job[2]):
            assert plan.result_key(plan.run_spec(cfg, *job)) in keys, job
    for setting in ("CD-GTMLL@alpha=0.4", "CD-GTMLL@n_players=3", "CD-GTMLL@alpha=0.0", "CD-GTMLL@n_players=1"):
        assert ("yeast", "clean", setting) not in train
    assert sorted(job_of(j["wildcards"]) for j in jobs if j["rule"] in ("evaluate", "evaluate_once")) == sorted(train)


def test_tables_rows_train_first_and_evaluation_follows_training(default_dry_run):
    repo, jobs = default_dry_run
    cfg = loader.load(repo / "config/config.yaml")
    rows = {(d, v, m) for d in cfg["experiments"]["datasets"] for v in plan.variants(cfg, d)
            for m in cfg["experiments"]["methods"]}
    prio = {}
    for j in jobs:
        if j["rule"] in ("train", "evaluate", "train_once", "evaluate_once"):  # _once: a deterministic method's
            prio.setdefault((j["rule"].removesuffix("_once"), job_of(j["wildcards"]) in rows), set()).add(int(j["priority"]))
    assert set(prio) == {("train", True), ("train", False), ("evaluate", True), ("evaluate", False)}
    assert min(prio[("train", True)]) > max(prio[("train", False)])  # the tables' rows before the studies
    assert min(prio[("evaluate", False)]) > max(prio[("train", True)])  # an evaluation before any training
    assert min(prio[("evaluate", True)]) >= max(prio[("evaluate", False)])
    data = {int(j["priority"]) for j in jobs if j["rule"] in ("prepare_dataset", "r_variant", "noise_variant")}
    assert min(data) > max(p for ps in prio.values() for p in ps)  # Table 2's R-variants are not held back
    # Table 1's rows (the clean variant) train before the other tables' rows, with their extra seeds
    # (config power), so that the first complete Table 1 comes as early as the DAG allows
    by_variant = {}
    for j in jobs:
        if j["rule"] in ("train", "train_more", "train_once") and job_of(j["wildcards"]) in rows:
            by_variant.setdefault(job_of(j["wildcards"])[1] == "clean", set()).add(int(j["priority"]))
    assert set(by_variant) == {True, False}
    assert min(by_variant[True]) > max(by_variant[False])


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
    assert {job_of(j["wildcards"]) for j in only if j["rule"] in ("train", "train_once")} == rows
    # a deterministic method's rows (BR-LogReg, kNN-15) by train_once, the others by train
    assert {m for _, _, m in (job_of(j["wildcards"]) for j in only if j["rule"] == "train_once")} == {"BR-LogReg", "kNN-15"}
    # and the extra seeds of the powered rows (config power: BCE and CD-GTMLL), of those rows only
    more = {"train_more", "evaluate_more"} if plan.extra_seeds(cfg) else set()
    assert {j["rule"] for j in only} == {"prepare_dataset", "r_variant", "train", "evaluate", "train_once",
                                         "evaluate_once", "tables"} | more
    assert {job_of(j["wildcards"]) for j in only if j["rule"] == "train_more"} < rows
    whole = {j["rule"]: int(j["priority"]) for j in jobs if j["rule"] in ("tables", "metrics_summary")}
    assert set(whole) == {"tables", "metrics_summary"}
    assert whole["tables"] > max(int(j["priority"]) for j in jobs if j["rule"].startswith(("train", "evaluate")))
    trained = sum(j["rule"] == "train" for j in jobs)
    assert trained > len(rows)  # the default profile's studies train settings of their own


# --------------------------------------------------------------------------- what a change re-runs
# A job's identity is what changes its result. A tiny pipeline on a custom
# dataset (Yeast's files under another name, so nothing pins their sha256) runs once; then each
# change is planned with `snakemake -n` and only the jobs it affects may be planned.

#: the rules that print names for people (tables, figures, summaries): all a display-name change may re-run
PRINTING_RULES = {"tables", "metrics_summary", "figure_pr", "claims_check", "all"}
SCIENCE_RULES = {"prepare_dataset", "r_variant", "noise_variant", "train", "evaluate", "train_once", "evaluate_once"}
YEAST_FILES = ("yeast-train.arff", "yeast-test.arff", "yeast.xml")


def _tiny_config(epochs: int = 2, display: str = "My Yeast") -> str:
    import yaml

    cfg = loader.read_yaml(ROOT / "config/quick.yaml")
    cfg["name"] = "tiny"
    cfg["data"]["custom"] = {"myyeast": {"format": "mulan-arff", "train": YEAST_FILES[0], "test": YEAST_FILES[1],
                                         "xml": YEAST_FILES[2], "display_name": display, "notes": "Yeast, renamed"}}
    cfg["experiments"].update(datasets=["myyeast"], methods=["BR-LogReg", "BCE"], seeds=[0], r_variants=False)
    cfg["r_variants"]["severities"] = {"myyeast": []}
    cfg["training"]["default"]["epochs"] = epochs
    cfg["figures"] = {"pr_curve": {}}
    return yaml.safe_dump(cfg, sort_keys=False)


def _mirror_copy(src: Path, dst: Path) -> Path:
    """A mirror ``dst`` holding the custom dataset's files, byte-identical copies of those in ``src``
    (a new folder, new mtimes)."""
    import shutil

    (dst / "myyeast").mkdir(parents=True)
    for f in YEAST_FILES:
        shutil.copyfile(src / f, dst / "myyeast" / f)
    return dst


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, mirror):
    """The tiny pipeline, run once to its end with a PATH that lacks this environment (the
    jobs must run the interpreter Snakemake runs in, not a bare `python` from PATH)."""
    import os
    import sys

    root = tmp_path_factory.mktemp("reruns")
    repo = copy_repo(root / "repo")
    m1 = _mirror_copy(mirror / "yeast", root / "m1")
    (repo / "config/tiny.yaml").write_text(_tiny_config())
    env = snakemake_env(m1)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)  # no folder with this environment's tools
                                  if p and Path(p) != Path(sys.executable).parent and not (Path(p) / "cdgtmll").exists())
    res = run_snakemake(repo, env, "--cores", "2", "all", "--configfile", "config/tiny.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return repo, root, env


def _dry(repo: Path, env: dict, configfile: str = "config/tiny.yaml") -> list[dict[str, str]]:
    res = run_snakemake(repo, env, "-n", "all", "--configfile", configfile)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return planned(res.stdout)


def test_jobs_run_the_environments_interpreter_without_it_on_path(tiny_run):
    repo, _, env = tiny_run
    assert not any((Path(p) / "cdgtmll").exists() for p in env["PATH"].split(":"))  # the venv is not on PATH
    assert (repo / "results/runs/myyeast/clean/BCE/seed0/predictions.npz").is_file()
    assert _dry(repo, env) == []  # and the run is complete


def test_a_byte_identical_mirror_in_another_folder_plans_nothing(tiny_run):
    repo, root, env = tiny_run
    m2 = _mirror_copy(root / "m1" / "myyeast", root / "m2-moved")
    (m2 / "myyeast" / YEAST_FILES[0]).touch()  # newer than every output
    assert _dry(repo, {**env, "CDGTMLL_DATA_MIRROR": str(m2)}) == []


def test_an_edited_source_file_re_runs_prepare_and_all_after_it(tiny_run):
    repo, root, env = tiny_run
    m3 = _mirror_copy(root / "m1" / "myyeast", root / "m3-edited")
    with open(m3 / "myyeast" / YEAST_FILES[0], "a") as fh:
        fh.write("% a comment line: other bytes, same data\n")
    rules = {j["rule"] for j in _dry(repo, {**env, "CDGTMLL_DATA_MIRROR": str(m3)})}
    assert {"prepare_dataset", "train", "evaluate", "tables"} <= rules


def test_a_display_name_change_re_runs_only_what_prints_it(tiny_run):
    repo, _, env = tiny_run
    (repo / "config/renamed.yaml").write_text(_tiny_config(display="Yeast <b>renamed</b> & \"quoted\""))
    jobs = _dry(repo, env, "config/renamed.yaml")
    rules = {j["rule"] for j in jobs}
    assert "tables" in rules, jobs
    assert rules <= PRINTING_RULES, rules
    assert not rules & SCIENCE_RULES


def test_a_neural_epoch_count_re_runs_only_the_neural_methods(tiny_run):
    repo, _, env = tiny_run
    (repo / "config/epochs.yaml").write_text(_tiny_config(epochs=3))
    jobs = _dry(repo, env, "config/epochs.yaml")
    trained = sorted(job_of(j["wildcards"]) for j in jobs if j["rule"].startswith(("train", "evaluate")))
    assert trained == [("myyeast", "clean", "BCE")] * 2, jobs  # train and evaluate BCE; BR-LogReg never reads epochs
    assert "prepare_dataset" not in {j["rule"] for j in jobs}
