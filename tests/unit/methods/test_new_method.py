"""Adding a method takes one spec and one class: a plugin module with both (as docs/plugins.md
shows) is validated, planned and trained on MULAN Yeast as the pipeline does it (config loader,
:func:`cdgtmll.config.plan.run_spec`, :func:`cdgtmll.train.run_seed`), in this process."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from cdgtmll.config import loader, plan, schema
from cdgtmll.methods import base
from tests.support.paths import ROOT

#: the whole method: the module a user writes (docs/plugins.md, "A new method")
TOY = '''"""Label prevalence with add-one smoothing, for every row."""
import numpy as np

from cdgtmll.methods.base import Method, register
from cdgtmll.methods.spec import HParam, MethodSpec

SPEC = MethodSpec(
    "Toy-Prior",
    description="smoothed training label prevalence for every row",
    hparams={"smoothing": HParam(1.0, {"type": "number", "minimum": 0}, "ours: add-one (Laplace)")},
    deterministic=True,
)


@register(SPEC)
class ToyPrior(Method):
    def __init__(self, smoothing):
        self.smoothing = smoothing

    def fit(self, data, ctx):
        Y = np.asarray(data.Y_train, dtype=np.float64)
        self.p = (Y.sum(0) + self.smoothing) / (Y.shape[0] + 2 * self.smoothing)
        return self

    def predict_proba(self, X):
        return np.tile(self.p, (X.shape[0], 1))
'''


@pytest.fixture
def toy_config(tmp_path, monkeypatch):
    """The shipped config with only the toy method on Yeast; the registry restored afterwards."""
    monkeypatch.setattr(base, "_SPECS", dict(base._SPECS))
    monkeypatch.setattr(base, "_CLASSES", dict(base._CLASSES))
    (tmp_path / "toy_prior_plugin.py").write_text(TOY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "toy_prior_plugin", raising=False)
    cfg = copy.deepcopy(loader.load(ROOT / "config" / "config.yaml"))
    cfg["plugins"] = ["toy_prior_plugin"]
    cfg["experiments"]["methods"] = ["Toy-Prior"]
    cfg["experiments"]["datasets"] = ["yeast"]
    cfg["methods"] = {"Toy-Prior": {"smoothing": 0.5}}
    loader.validate(cfg)  # imports the plugin: the spec and the class are registered
    return cfg


def test_a_toy_method_is_one_spec_and_one_class(toy_config, tmp_path):
    from cdgtmll import train
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from tests.support.mirror import yeast_arrays

    spec = base.spec_of("Toy-Prior")
    assert spec.impl == "toy_prior_plugin:ToyPrior" and "Toy-Prior" in base.available()
    assert "Toy-Prior" not in base.builtin_names()
    # planning: from the spec alone
    run = plan.run_spec(toy_config, "yeast", "clean", "Toy-Prior")
    assert run.resolved_hparams == {"smoothing": 0.5}
    assert run.training == {} and list(run.seeds) == toy_config["experiments"]["seeds"][:1]
    assert run.deterministic is True and run.plugins == ("toy_prior_plugin",)
    assert plan.not_runnable(toy_config, "yeast", "Toy-Prior") is None
    assert plan.train_gpus({**toy_config, "cluster": True}, "yeast", "Toy-Prior") == 0  # not neural
    # validation: the declared range, named down to the key
    bad = copy.deepcopy(toy_config)
    bad["methods"]["Toy-Prior"]["smoothing"] = -1
    with pytest.raises(schema.ConfigError, match=r"methods.Toy-Prior.smoothing': expected a number >= 0, got -1"):
        loader.validate(bad)
    bad["methods"]["Toy-Prior"] = {"smoothin": 1.0}
    with pytest.raises(schema.ConfigError, match="smoothin"):
        loader.validate(bad)
    # training, as rule train runs it, on real Yeast rows
    X, Y = yeast_arrays()
    n = X.shape[0]
    splits = {"train": np.arange(0, n - 300), "val": np.arange(n - 300, n - 150), "test": np.arange(n - 150, n)}
    data = ProcessedData("yeast", X, Y, [f"Class{k + 1}" for k in range(14)], splits, {})
    pred = train.run_seed(data, tail_labels(data.part("train")[1]), dataclasses.replace(run, device="cpu"), run.seeds[0],
                          tmp_path / "run" / "seed0", {})
    Y_train = np.asarray(data.part("train")[1], dtype=np.float64)
    want = (Y_train.sum(0) + 0.5) / (Y_train.shape[0] + 1.0)
    with np.load(pred) as z:
        assert sorted(z.files) == ["idx_test", "idx_val", "test", "val"]
        np.testing.assert_array_equal(z["idx_test"], splits["test"])
        np.testing.assert_allclose(z["test"], np.tile(want, (150, 1)))
        np.testing.assert_allclose(z["val"], np.tile(want, (150, 1)))
