"""Seeds with power (config ``power``): which run folders train more seeds, which seeds,
and the five readings the readings study gained."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from cdgtmll.config import loader, plan
from cdgtmll.config.schema import ConfigError
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def default():
    return loader.load(ROOT / "config/config.yaml")


def _plan(cfg):
    main = [(d, v, m) for d in cfg["experiments"]["datasets"] for v in plan.variants(cfg, d)
            for m in cfg["experiments"]["methods"]]
    studies = plan.study_jobs(cfg)
    jobs = [j for j in dict.fromkeys(main + [j for js in studies.values() for j in js])
            if not plan.not_runnable(cfg, j[0], j[2])]
    run_of = plan.shared_runs(jobs, lambda *j: plan.run_spec(cfg, *j), own=main)
    return main, studies, run_of


def test_extra_seeds_are_power_seeds_less_the_experiments_seeds(default):
    assert default["experiments"]["seeds"] == [0, 1, 2]
    assert plan.extra_seeds(default) == [3, 4, 5, 6, 7, 8, 9]
    assert plan.powered_seeds(default) == list(range(10))
    spec = plan.run_spec(plan.with_seeds(default, plan.extra_seeds(default)), "yeast", "clean", "BCE")
    base = plan.run_spec(default, "yeast", "clean", "BCE")
    assert spec.seeds == (3, 4, 5, 6, 7, 8, 9) and dataclasses.replace(spec, seeds=base.seeds) == base
    assert default["experiments"]["seeds"] == [0, 1, 2]  # with_seeds leaves its input alone


@pytest.mark.parametrize("power", [None, {}, {"seeds": [0, 1, 2], "methods": ["BCE"]}, {"seeds": []}])
def test_no_power_or_no_other_seed_is_todays_plan(default, power):
    cfg = copy.deepcopy(default)
    cfg.pop("power")
    if power is not None:
        cfg["power"] = power
    main, studies, run_of = _plan(cfg)
    assert plan.extra_seeds(cfg) == [] and plan.powered_runs(cfg, run_of, main, studies) == set()


def test_powered_folders_are_the_compared_rows_and_every_setting_of_the_powered_studies(default):
    main, studies, run_of = _plan(default)
    runs = plan.powered_runs(default, run_of, main, studies)
    want = {run_of[j] for j in main if j[2] in ("BCE", "CD-GTMLL")}
    # the powered studies' settings as written; those of their `under` readings keep experiments.seeds
    as_written = {s: set(plan._study_base_methods(default, s)) for s in ("readings", "ablation")}
    want |= {run_of[j] for s in as_written for j in studies[s] if j in run_of and j[2] in as_written[s]}
    assert runs == want
    assert run_of[("yeast", "clean", "No-Curiosity@player_backbones=separate")] not in runs
    assert len(runs) == 22  # 6 table rows + the readings' 12 other settings + 4 ablations
    # the tables' rows on every variant, and a study setting read from a row's folder powers that folder
    assert {("yeast", v, m) for v in ("clean", "R0.40-s0", "R0.50-s0") for m in ("BCE", "CD-GTMLL")} <= runs
    assert run_of[("yeast", "clean", "CD-GTMLL@alpha=0.4")] in runs  # the alpha sweep's 0.4 is CD-GTMLL's run
    assert ("yeast", "clean", "CD-GTMLL@alpha=0.2") not in runs and ("yeast", "clean", "ASL") not in runs
    assert ("yeast", "clean", "CD-GTMLL@select_epoch=best_val") in runs


def test_power_studies_are_study_names(default):
    cfg = copy.deepcopy(default)
    cfg["power"]["studies"] = ["readingz"]
    with pytest.raises(ConfigError, match="power"):
        loader.validate(cfg)


@pytest.mark.parametrize("reading", ["select_epoch=best_val", "divergence=kl", "ema_decay=0.0", "rarity=count",
                                     "n_players=1,alpha=0.0"])
def test_the_five_new_readings_are_default_readings_that_change_the_run(default, reading):
    from cdgtmll.methods import base

    assert reading in plan.DEFAULT_READINGS
    method = f"CD-GTMLL@{reading}"
    name, over = plan.split_method(method)
    assert name == "CD-GTMLL" and over == dict(plan.split_method(f"x@{reading}")[1])
    base.check_hparams("CD-GTMLL", plan.method_hparams(default, "yeast", method))  # a hyper-parameter in range
    spec = plan.run_spec(default, "yeast", "clean", method)
    assert all(spec.resolved_hparams[k] == v for k, v in over.items())
    assert plan.result_key(spec) != plan.result_key(plan.run_spec(default, "yeast", "clean", "CD-GTMLL"))
    assert method in plan.study_methods(default, "readings")


def test_a_multi_key_reading_passes_the_schema(default):
    cfg = copy.deepcopy(default)
    cfg["studies"]["readings"]["readings"] = ["n_players=1,alpha=0.0", "divergence=kl"]
    loader.validate(cfg)
