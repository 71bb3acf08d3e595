"""Seeds with power in the default profile's dry run: the extra seeds are planned only
for the powered run folders, by jobs of their own with the base job's spec but for its seeds, and
a profile without ``power`` plans exactly what it planned before (same jobs, same train specs)."""

from __future__ import annotations

import re

import pytest

from cdgtmll.config import loader, plan
from tests.support.workflow import copy_repo, run_snakemake, snakemake_env


def dry_jobs(out: str) -> list[dict[str, str]]:
    """Every job of ``snakemake -n -p``: rule, wildcards, output and shell command."""
    jobs: list[dict[str, str]] = []
    for line in out.splitlines():
        s = line.strip()
        if s.startswith(("rule ", "localrule ")) and s.endswith(":"):
            jobs.append({"rule": s.split()[1].rstrip(":"), "wildcards": "", "output": "", "shell": ""})
        elif jobs and s.startswith(("wildcards:", "output:")):
            key, _, value = s.partition(":")
            jobs[-1][key] = value.strip()
        elif jobs and s.startswith("Shell command:"):
            jobs[-1]["shell"] = s.partition(":")[2].strip()
    return jobs


def job_of(wildcards: str) -> tuple[str, str, str]:
    wc = dict(item.split("=", 1) for item in wildcards.split(", "))
    return wc["dataset"], wc["variant"], wc["method"]


def without_power(text: str) -> str:
    """The profile's text without its top-level ``power:`` block."""
    out = re.sub(r"(?m)^power:\n(?:[ \t]+.*\n|[ \t]*\n)*", "", text)
    assert "power:" not in out
    return out


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory, mirror):
    repo = copy_repo(tmp_path_factory.mktemp("power") / "repo")
    text = (repo / "config/config.yaml").read_text()
    (repo / "config/nopower.yaml").write_text(without_power(text))
    # power.methods naming a deterministic row too (BR-LogReg): it still trains one seed
    assert "  methods: [BCE, CD-GTMLL]\n  studies:" in text
    (repo / "config/powerlogreg.yaml").write_text(
        text.replace("  methods: [BCE, CD-GTMLL]\n  studies:", "  methods: [BCE, CD-GTMLL, BR-LogReg]\n  studies:"))
    env = snakemake_env(mirror)
    out = {}
    for name in ("config", "nopower", "powerlogreg"):
        res = run_snakemake(repo, env, "-n", "-p", "all", "--configfile", f"config/{name}.yaml")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        out[name] = dry_jobs(res.stdout)
    return repo, out


def test_the_extra_seeds_are_planned_for_the_powered_folders_only(dry_runs):
    repo, jobs = dry_runs
    cfg = loader.load(repo / "config/config.yaml")
    extra = plan.extra_seeds(cfg)
    assert extra == [3, 4, 5, 6, 7, 8, 9]
    main = [(d, v, m) for d in cfg["experiments"]["datasets"] for v in plan.variants(cfg, d)
            for m in cfg["experiments"]["methods"]]
    studies = plan.study_jobs(cfg)
    trained = {job_of(j["wildcards"]) for j in jobs["config"] if j["rule"] == "train"}
    run_of = {j: r for j, r in plan.shared_runs(
        list(dict.fromkeys(main + [j for js in studies.values() for j in js])),
        lambda *j: plan.run_spec(cfg, *j), own=main).items() if r in trained}
    powered = plan.powered_runs(cfg, run_of, main, studies)
    more = [job_of(j["wildcards"]) for j in jobs["config"] if j["rule"] == "train_more"]
    assert sorted(more) == sorted(powered) and len(more) == len(set(more))
    assert sorted(job_of(j["wildcards"]) for j in jobs["config"] if j["rule"] == "evaluate_more") == sorted(more)
    # 6 table rows (BCE, CD-GTMLL on clean and both R-variants) and the readings' and ablation's own folders
    assert {("yeast", v, m) for v in ("clean", "R0.40-s0", "R0.50-s0") for m in ("BCE", "CD-GTMLL")} <= set(more)
    assert ("yeast", "clean", "CD-GTMLL@alpha=0.2") not in more and ("yeast", "clean", "ASL") not in more
    for j in (j for j in jobs["config"] if j["rule"] == "train_more"):
        seeds = sorted(int(s) for s in re.findall(r"/seed(\d+)/predictions\.npz", j["output"]))
        assert seeds == extra and '"seeds": [3, 4, 5, 6, 7, 8, 9]' in j["shell"]


def test_a_profile_without_power_plans_what_it_did_before(dry_runs):
    _, jobs = dry_runs
    power, before = jobs["config"], jobs["nopower"]
    assert not any(j["rule"].endswith("_more") for j in before)
    more = sum(j["rule"] in ("train_more", "evaluate_more") for j in power)
    assert len(power) - more == len(before)
    # the base jobs are the same jobs with the same commands (spec and seeds): adding power re-runs nothing
    for rule in ("train", "evaluate"):
        assert sorted(j["shell"] for j in power if j["rule"] == rule) == \
            sorted(j["shell"] for j in before if j["rule"] == rule)
    assert all('"seeds": [0, 1, 2]' in j["shell"] for j in before if j["rule"] == "train")


def test_a_deterministic_method_is_trained_once_and_never_powered(dry_runs):
    """BR-LogReg and kNN-15 (``Method.deterministic``) are trained and evaluated by rules
    train_once and evaluate_once, one seed (the first of experiments.seeds) in their run folder
    and in their spec; no other rule trains or evaluates them; every other method keeps train."""
    _, jobs = dry_runs
    once = [j for j in jobs["config"] if j["rule"] == "train_once"]
    assert sorted(job_of(j["wildcards"]) for j in once) == sorted(
        ("yeast", v, m) for v in ("clean", "R0.40-s0", "R0.50-s0") for m in ("BR-LogReg", "kNN-15"))
    for j in once:
        assert re.findall(r"/seed(\d+)/predictions\.npz", j["output"]) == ["0"]
        assert '"seeds": [0]' in j["shell"] and '"deterministic": true' in j["shell"]
    evaluated = [j for j in jobs["config"] if j["rule"] == "evaluate_once"]
    assert sorted(job_of(j["wildcards"]) for j in evaluated) == sorted(job_of(j["wildcards"]) for j in once)
    assert all(re.findall(r"/seed(\d+)/metrics\.json", j["output"]) == ["0"] for j in evaluated)
    others = [job_of(j["wildcards"]) for j in jobs["config"]
              if j["rule"] in ("train", "train_more", "evaluate", "evaluate_more")]
    assert not any(m in ("BR-LogReg", "kNN-15") for _, _, m in others) and ("yeast", "clean", "RF-300") in others


def test_power_adds_no_seed_to_a_deterministic_row(dry_runs):
    """A profile whose power.methods lists BR-LogReg (deterministic) plans the same BR-LogReg jobs
    as one that does not: train_once with seed 0, no train_more (common.smk run_seeds)."""
    _, jobs = dry_runs

    def logreg(name):
        return sorted((j["rule"], j["output"]) for j in jobs[name] if "method=BR-LogReg" in j["wildcards"])

    assert logreg("powerlogreg") == logreg("config") and {r for r, _ in logreg("config")} == {"train_once",
                                                                                               "evaluate_once"}
