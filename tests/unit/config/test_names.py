"""Names that become folders and Snakemake wildcard values: one pattern, used by
the config check and by the workflow's wildcard constraints, so a name the check accepts always
makes its jobs and a name that would break a path is refused with its key."""

from __future__ import annotations

import copy
import re

import pytest

from cdgtmll.config import loader
from cdgtmll.config.names import DATASET_WILDCARD, METHOD_WILDCARD, name_problem
from cdgtmll.config.schema import ConfigError
from cdgtmll.data.registry import REGISTRY
from cdgtmll.methods import base
from tests.support.paths import ROOT

HOSTILE = ["a b", "../../../tmp/x", "..", ".", "Bad/Alias", "<img src=x onerror=alert(1)>", "O'Brien LR",
           " yeast", "yeast ", "ye\nast", "ye\x00ast", "a..b", ""]


def test_every_builtin_name_and_setting_is_accepted():
    for d in REGISTRY:
        assert name_problem(d, "dataset") is None and re.fullmatch(DATASET_WILDCARD, d)
    for m in base.available():
        assert name_problem(m, "method") is None and re.fullmatch(METHOD_WILDCARD, m)
    for m in ("CD-GTMLL@alpha=0.7,n_players=5", "CD-GTMLL@lr=1e-3", "CD-GTMLL@payoff_scale=sum", "No-Curiosity"):
        assert name_problem(m, "method-entry") is None and re.fullmatch(METHOD_WILDCARD, m)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused_by_check_and_wildcard_alike(name):
    assert name_problem(name, "dataset") is not None
    assert name_problem(name, "method-entry") is not None
    assert not re.fullmatch(DATASET_WILDCARD, name) and not re.fullmatch(METHOD_WILDCARD, name)


def _custom(cfg: dict, name: str) -> dict:
    cfg = copy.deepcopy(cfg)
    cfg["data"]["custom"][name] = {"format": "mulan-arff", "train": "t-train.arff", "test": "t-test.arff",
                                   "n_labels": 3, "display_name": "<script>x</script> & \"'|#$%\\ ü"}
    cfg["experiments"]["datasets"] = [name]
    cfg["r_variants"]["severities"] = {name: []}
    cfg["figures"] = {"pr_curve": {}}
    return cfg


@pytest.fixture(scope="module")
def quick():
    return loader.read_yaml(ROOT / "config/quick.yaml")


@pytest.mark.parametrize("name", ["a b", "../../../tmp/x", "..", "ye\tast"])
def test_a_custom_dataset_name_is_refused_naming_its_key_and_rule(quick, name):
    with pytest.raises(ConfigError) as err:
        loader.validate(_custom(quick, name), "my.yaml")
    msg = str(err.value)
    assert msg.startswith(f"my.yaml: config error at 'data.custom.{name}': dataset name {name!r}")
    assert "wildcard {dataset} of rule prepare_dataset" in msg


def test_a_display_name_may_hold_anything(quick):
    loader.validate(_custom(quick, "mine"), "my.yaml")


@pytest.mark.parametrize("alias", ["Bad/Alias", "<img src=x onerror=alert(1)>", "No Curiosity "])
def test_an_alias_name_is_refused_naming_its_key(quick, alias):
    cfg = copy.deepcopy(quick)
    cfg["aliases"] = {alias: {"method": "CD-GTMLL", "hparams": {"alpha": 0.0}}}
    cfg["experiments"]["methods"] = ["BCE", alias]
    with pytest.raises(ConfigError) as err:
        loader.validate(cfg, "my.yaml")
    assert f"config error at 'aliases.{alias}': alias name {alias!r}" in str(err.value)
    assert "wildcard {method} of rule train" in str(err.value)


def test_a_method_entry_with_a_path_in_an_override_is_refused(quick):
    cfg = copy.deepcopy(quick)
    cfg["experiments"]["methods"] = ["BCE", "CD-GTMLL@alpha=0.3/.."]
    with pytest.raises(ConfigError, match=r"config error at 'experiments.methods\[1\]': method name .*'@' overrides"):
        loader.validate(cfg, "my.yaml")


def test_a_method_class_cannot_register_a_name_the_workflow_cannot_carry():
    with pytest.raises(ValueError, match=r"register\(\"O'Brien LR\"\): method name .*it holds ' ', \"'\""):
        base.register("O'Brien LR")(type("OBrien", (base.Method,), {}))
    assert "O'Brien LR" not in base.registered()
