"""Every hyper-parameter is range-checked before any job starts.

Each method's spec declares a JSON-schema fragment per hyper-parameter
(:class:`cdgtmll.methods.spec.HParam`; a loss-head method's loss keywords too);
``methods.base.build`` checks the given values before the constructor runs, so
``cdgtmll.config.loader.validate`` (and every job) rejects a bad value naming the key down to
the parameter, e.g. ``config error at 'methods.BR-LogReg.C': expected a number > 0, got -1``.
"""

from __future__ import annotations

import copy
import inspect
import re

import pytest
import yaml

from cdgtmll.config import loader, schema
from cdgtmll.methods import base
from cdgtmll.methods.spec import TRAINER_DEFAULTS, UNSET, trainer_hparams
from cdgtmll.nn.losses.registry import build_loss, loss_class, loss_hparam_space, loss_names
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def shipped():
    return yaml.safe_load((ROOT / "config/config.yaml").read_text(encoding="utf-8"))


def _loss_keywords(loss: str) -> dict[str, object]:
    """The loss constructor's own keywords (and their defaults) beyond the label statistics."""
    params = inspect.signature(loss_class(loss).__init__).parameters.values()
    return {p.name: p.default for p in params if p.name not in ("self", "label_counts", "n_train")}


# ------------------------------------------------------------------- (a) completeness


@pytest.mark.parametrize("name", base.available())
def test_every_hyperparameter_has_a_range_and_a_default_inside_it(name):
    """Numbers have a range, strings of a fixed set an enum; every declared default lies in its
    space, and the class takes every declared hyper-parameter (build passes them all)."""
    spec = base.spec_of(name)
    for key, frag in spec.space().items():
        types = frag.get("type", [])
        types = {types} if isinstance(types, str) else set(types)
        if types & {"number", "integer"}:
            assert {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} & set(frag), f"{name}.{key}: no range"
    base.check_values(f"method '{name}'", spec.space(), spec.defaults())
    base.build(name)


@pytest.mark.parametrize("name", [n for n in base.available() if "loss" in base.spec_of(n).fixed])
def test_a_loss_head_declares_its_loss_keywords_with_the_loss_spaces(name):
    """A method trained on a registered loss (``fixed["loss"]``) takes exactly the loss's keywords
    besides its own, with the loss's declared spaces (:mod:`cdgtmll.nn.losses`, which checks them
    again in every job); those it leaves UNSET keep the loss's own default."""
    spec = base.spec_of(name)
    loss = spec.fixed["loss"]
    keywords = _loss_keywords(loss)
    declared = {k: h for k, h in spec.hparams.items() if k in keywords}
    assert set(declared) == set(keywords), name
    assert {k: h.space for k, h in declared.items()} == loss_hparam_space(loss), name
    m = base.build(name)
    assert m.loss_hparams == {k: h.default for k, h in declared.items() if h.default is not UNSET}


@pytest.mark.parametrize("loss", loss_names())
def test_every_loss_hyperparameter_has_a_declared_space(loss):
    assert set(loss_hparam_space(loss)) == set(_loss_keywords(loss))


def test_trainer_space_is_the_config_schemas_training_block():
    """One source of truth: the trainer's hyper-parameters use the fragments of the schema's
    ``training`` block (lr_head and grad_clip may also be None in a method), with the trainer's
    defaults, in every method that takes them."""
    from cdgtmll.methods.neural import NeuralMethod

    props = schema.schema_document()["$defs"]["training"]["properties"]
    trainer = trainer_hparams()
    for key in TRAINER_DEFAULTS:
        frag, ref = dict(trainer[key].space), {k: v for k, v in props[key].items() if k != "description"}
        if key in ("lr_head", "grad_clip"):
            assert frag.pop("type") == [ref.pop("type"), "null"]
        assert frag == ref, key
    for name in base.available():
        spec = base.spec_of(name)
        assert spec.trainer == issubclass(base.get(name), NeuralMethod), name
        if spec.trainer:
            assert all(spec.all_hparams()[k] == trainer[k] for k in TRAINER_DEFAULTS), name


# ---------------------------------------------------------------- messages and build


def test_build_names_method_parameter_value_and_range():
    with pytest.raises(base.HparamError) as ei:
        base.build("BR-LogReg", {"C": -1})
    assert str(ei.value) == "method 'BR-LogReg': hyper-parameter 'C' = -1: expected a number > 0"
    assert (ei.value.param, ei.value.value, ei.value.expected) == ("C", -1, "a number > 0")
    with pytest.raises(ValueError, match=re.escape("method 'CD-GTMLL': hyper-parameter 'divergence' = 'js': "
                                                   "expected one of 'jsd', 'kl'")):
        base.build("CD-GTMLL", {"divergence": "js"})
    with pytest.raises(ValueError, match=re.escape("'lr_head' = 2: expected null or a number in (0, 1]")):
        base.build("BCE", {"lr_head": 2})
    with pytest.raises(ValueError, match=re.escape("'n_players' = 2.5: expected an integer >= 1")):
        base.build("CD-GTMLL", {"n_players": 2.5})
    with pytest.raises(ValueError, match=re.escape("'alpha' = nan: expected a number >= 0")):
        base.build("CD-GTMLL", {"alpha": float("nan")})
    with pytest.raises(ValueError, match=re.escape("'lmt' = 'yes': expected a boolean")):
        base.build("C-Tran", {"lmt": "yes"})
    with pytest.raises(ValueError, match=re.escape("'threads' = 0: expected -1 or an integer >= 1")):
        base.build("XR-Linear", {"threads": 0})
    # nullable parameters accept None
    assert base.build("BCE", {"lr_head": None, "grad_clip": None}).lr_head is None
    assert base.build("CD-GTMLL", {"tail_fraction": None, "partition_seed": None}).tail_fraction is None


def test_checked_before_the_constructor_runs():
    """C-Tran's constructor computes hidden_dim % n_tokens: n_tokens = 0 would raise
    ZeroDivisionError; the declared range stops it first."""
    with pytest.raises(base.HparamError, match="'n_tokens' = 0: expected an integer >= 1"):
        base.build("C-Tran", {"n_tokens": 0})


def test_loss_keywords_checked_by_method_and_by_build_loss():
    import numpy as np

    with pytest.raises(base.HparamError, match=re.escape("method 'ASL': hyper-parameter 'gamma_neg' = -1")):
        base.build("ASL", {"gamma_neg": -1})
    with pytest.raises(base.HparamError,
                       match=re.escape("method 'CB': hyper-parameter 'beta' = 1.0: expected a number in [0, 1)")):
        base.build("CB", {"beta": 1.0})
    with pytest.raises(base.HparamError,
                       match=re.escape("loss 'dbl': hyper-parameter 'lam' = 0: expected a number > 0")):
        build_loss("dbl", np.array([3, 1]), 10, lam=0)
    with pytest.raises(ValueError, match="unknown hyper-parameter"):  # unknown keys are still named as such
        base.build("ASL", {"gamma_negative": 1.0})


# ------------------------------------- (b) one bad value per family, through config.validate

BAD = [
    # (family, config key path, value, expected text)
    ("classic", ("methods", "BR-LogReg", "C"), -1, "a number > 0"),
    ("loss head: trainer", ("methods", "BCE", "lr_backbone"), 1e6, "a number in (0, 1]"),
    ("loss head: loss keyword", ("methods", "ASL", "gamma_neg"), -1, "a number >= 0"),
    ("loss head: dataset override", ("dataset_overrides", "yeast", "DBL", "lam"), 0, "a number > 0"),
    ("data side: BalanceMix", ("methods", "BalanceMix", "relabel_tau"), 0.4, "a number in (0.5, 1]"),
    ("data side: MLBOTE", ("methods", "MLBOTE", "cross_threshold"), 0.5, "a number >= 1"),
    ("data side: LSFA", ("methods", "LSFA", "gen_lr"), 0, "a number > 0"),
    ("architecture: ML-GCN", ("methods", "ML-GCN", "tau"), 2, "a number in (0, 1]"),
    ("architecture: C-Tran", ("methods", "C-Tran", "n_tokens"), 0, "an integer >= 1"),
    ("architecture: CC", ("methods", "CC", "order"), "alphabetical", "one of 'random', 'frequency'"),
    ("architecture: ML-Decoder", ("methods", "ML-Decoder", "dropout"), 1.0, "a number in [0, 1)"),
    ("MLC-NC", ("methods", "MLC-NC", "weight_proto"), -0.5, "a number >= 0"),
    ("LCIFS", ("methods", "LCIFS", "beta"), 0, "a number > 0"),
    ("XMC: XR-Linear", ("methods", "XR-Linear", "nr_splits"), 1, "an integer >= 2"),
    ("XMC: ETU", ("methods", "ETU", "k"), 0, "an integer >= 1"),
    ("CD-GTMLL", ("methods", "CD-GTMLL", "rho"), 1.5, "a number in [0, 1)"),
    ("CD-GTMLL enum", ("methods", "CD-GTMLL", "payoff_weights"), "rare", "one of 'uniform', 'rarity'"),
    ("CD-GTMLL dataset override", ("dataset_overrides", "yeast", "CD-GTMLL", "alpha"), -0.1, "a number >= 0"),
    ("alias hparams", ("aliases", "No-Curiosity", "hparams", "alpha"), -1, "a number >= 0"),
]


def _fmt(value) -> str:
    """A value as the messages spell it (YAML-like: null, true/false, repr otherwise)."""
    return "null" if value is None else ("true" if value else "false") if isinstance(value, bool) else repr(value)


def _set(cfg: dict, path: tuple, value) -> None:
    node = cfg
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value


def _error(cfg: dict) -> str:
    with pytest.raises(schema.ConfigError) as ei:
        loader.validate(cfg)
    return str(ei.value)


@pytest.mark.parametrize("family, path, value, expected", BAD, ids=[b[0] for b in BAD])
def test_bad_value_rejected_naming_the_key(shipped, family, path, value, expected):
    cfg = copy.deepcopy(shipped)
    _set(cfg, path, value)
    msg = _error(cfg)
    key = ".".join(path)
    assert f"config error at '{key}': expected {expected}, got {_fmt(value)}" in msg, msg


def test_at_override_rejected_naming_the_list_entry(shipped):
    cfg = copy.deepcopy(shipped)
    cfg["studies"]["ablation"]["methods"] = ["CD-GTMLL@alpha=-1", "CD-GTMLL"]
    msg = _error(cfg)
    assert ("config error at 'studies.ablation.methods[0].alpha': expected a number >= 0, got -1 "
            "(in 'CD-GTMLL@alpha=-1')") in msg, msg


def test_shipped_configs_still_valid():
    for name in ("config.yaml", "paper.yaml", "quick.yaml", "mulan.yaml"):
        loader.load(ROOT / "config" / name)


# ------------------------- (c) one range for lr_backbone, wherever it is set


@pytest.mark.parametrize("value", [1e-6, 2e-3, 1, 1.0, 0, -1e-3, 1.5, 1e6, "1e-3", None, True])
def test_lr_backbone_same_verdict_in_training_and_methods(shipped, value):
    def accepted(path):
        cfg = copy.deepcopy(shipped)
        _set(cfg, path, value)
        try:
            loader.validate(cfg)
            return True
        except schema.ConfigError:
            return False

    under_training = accepted(("training", "default", "lr_backbone"))
    under_methods = accepted(("methods", "BCE", "lr_backbone"))
    assert under_training == under_methods, (value, under_training, under_methods)
    assert under_methods == (value in (1e-6, 2e-3, 1) and value is not True)
