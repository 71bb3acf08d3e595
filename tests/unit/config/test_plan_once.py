"""A deterministic method (``Method.deterministic``) is planned with one seed: the shipped
profiles' BR-LogReg and kNN-15 runs train the first of ``experiments.seeds`` and say so in their
run spec, while every other method keeps all seeds and its run spec (identity) as it was."""

from __future__ import annotations

import copy

import pytest

from cdgtmll.config import loader, plan
from tests.support.paths import ROOT


@pytest.fixture(scope="module", params=["config", "paper", "quick"])
def shipped(request):
    return loader.load(ROOT / f"config/{request.param}.yaml")


def test_br_logreg_is_planned_with_the_first_seed_only(shipped):
    seeds = shipped["experiments"]["seeds"]
    assert len(seeds) == 3
    assert plan.is_deterministic(shipped, "BR-LogReg") and plan.fit_seeds(shipped, "BR-LogReg") == seeds[:1]
    spec = plan.run_spec(shipped, "yeast", "clean", "BR-LogReg")
    assert list(spec.seeds) == seeds[:1] and spec.deterministic is True
    # an @-variant or alias of it is deterministic too (the registered method decides)
    assert plan.fit_seeds(shipped, "BR-LogReg@C=0.5") == seeds[:1]


@pytest.mark.parametrize("method", ["BCE", "CD-GTMLL", "RF-300"])
def test_a_method_that_uses_the_seed_keeps_every_seed_and_its_spec(shipped, method):
    assert not plan.is_deterministic(shipped, method)
    assert plan.fit_seeds(shipped, method) == shipped["experiments"]["seeds"]
    spec = plan.run_spec(shipped, "yeast", "clean", method)
    assert list(spec.seeds) == shipped["experiments"]["seeds"] and spec.deterministic is None
    assert "deterministic" not in spec.to_dict()


def test_the_default_profile_fits_knn_once_and_the_first_seed_is_the_one_listed_first():
    cfg = loader.load(ROOT / "config/config.yaml")
    assert "kNN-15" in cfg["experiments"]["methods"] and plan.fit_seeds(cfg, "kNN-15") == [0]
    other = copy.deepcopy(cfg)
    other["experiments"]["seeds"] = [7, 0, 1]
    assert plan.fit_seeds(other, "kNN-15") == [7]
    assert plan.run_spec(other, "yeast", "clean", "kNN-15").seeds == (7,)


def test_power_adds_no_seed_to_a_deterministic_run():
    """The default profile powers BCE and CD-GTMLL; a profile that also lists BR-LogReg in
    power.methods still gives its run spec one seed (the run folder's seeds follow it in
    common.smk run_seeds, which gives a deterministic method's folder ONCE_SEEDS before power)."""
    cfg = loader.load(ROOT / "config/config.yaml")
    cfg["power"]["methods"] = [*cfg["power"]["methods"], "BR-LogReg"]
    assert plan.run_spec(cfg, "yeast", "clean", "BR-LogReg").seeds == (0,)
