"""Config validation: schema + registries, errors name the key, defaults are filled."""

import copy
from pathlib import Path

import pytest
import yaml

from cdgtmll import config as cdg

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def default_cfg():
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "mulan.yaml"])
def test_shipped_configs_validate(name):
    cfg = cdg.load(ROOT / "config" / name)
    assert cfg["experiments"]["datasets"]


def test_paper_profile_has_all_seven_datasets():
    cfg = cdg.load(ROOT / "config/paper.yaml")
    assert set(cfg["experiments"]["datasets"]) == {
        "voc2007", "coco2014", "yeast", "mediamill", "eurlex-4k", "wiki10-31k", "amazoncat-13k"}
    # App. E.2 protocol values
    assert cdg.training_protocol(cfg, "yeast")["epochs"] == 100
    assert cdg.training_protocol(cfg, "voc2007")["batch_size"] == 64
    assert cdg.training_protocol(cfg, "coco2014")["epochs"] == 40
    assert cfg["r_variants"]["severities"]["coco2014"] == [0.30, 0.40]


def test_defaults_filled(default_cfg):
    cfg = copy.deepcopy(default_cfg)
    del cfg["data"]["val_fraction"]
    cdg.validate(cfg)
    assert cfg["data"]["val_fraction"] == 0.1
    assert cfg["thresholds"]["global"] == 0.5


def _err(cfg):
    with pytest.raises(cdg.ConfigError) as ei:
        cdg.validate(cfg)
    return str(ei.value)


def test_misspelt_key_named(default_cfg):
    cfg = copy.deepcopy(default_cfg)
    cfg["data"]["val_fracton"] = 0.1
    assert "'data.val_fracton'" in _err(cfg)
    cfg = copy.deepcopy(default_cfg)
    cfg["training"]["default"]["epocs"] = 3
    assert "'training.default.epocs'" in _err(cfg)
    cfg = copy.deepcopy(default_cfg)
    cfg["experimets"] = {}
    assert "'experimets'" in _err(cfg)


def test_unknown_dataset_and_method_named(default_cfg):
    cfg = copy.deepcopy(default_cfg)
    cfg["experiments"]["datasets"] = ["yeast", "yaest"]
    msg = _err(cfg)
    assert "experiments.datasets[1]" in msg and "yaest" in msg
    cfg = copy.deepcopy(default_cfg)
    cfg["experiments"]["methods"] = ["BR-LogRog"]
    msg = _err(cfg)
    assert "experiments.methods[0]" in msg and "BR-LogReg" in msg  # lists the registered names


def test_out_of_range_value_named(default_cfg):
    cfg = copy.deepcopy(default_cfg)
    cfg["data"]["val_fraction"] = 0.7
    assert "'data.val_fraction'" in _err(cfg)
    cfg = copy.deepcopy(default_cfg)
    cfg["r_variants"]["severities"]["yeast"] = [1.5]
    assert "r_variants.severities.yeast[0]" in _err(cfg)


def test_unknown_method_hyperparameter_named(default_cfg):
    cfg = copy.deepcopy(default_cfg)
    cfg["methods"]["BR-LogReg"] = {"CC": 1.0}
    msg = _err(cfg)
    assert "methods.BR-LogReg" in msg and "CC" in msg


def test_run_spec_hash_stable_and_sensitive(default_cfg):
    cfg = cdg.validate(copy.deepcopy(default_cfg))
    a = cdg.run_spec(cfg, "yeast", "clean", "BR-LogReg")
    b = cdg.run_spec(cdg.validate(copy.deepcopy(default_cfg)), "yeast", "clean", "BR-LogReg")
    assert cdg.config_hash(a) == cdg.config_hash(b)
    cfg2 = copy.deepcopy(cfg)
    cfg2["methods"]["BR-LogReg"]["C"] = 2.0
    assert cdg.config_hash(cdg.run_spec(cfg2, "yeast", "clean", "BR-LogReg")) != cdg.config_hash(a)
    # a setting of another dataset does not change this job's spec
    cfg3 = copy.deepcopy(cfg)
    cfg3["training"]["mediamill"] = {"epochs": 7}
    assert cdg.config_hash(cdg.run_spec(cfg3, "yeast", "clean", "BR-LogReg")) == cdg.config_hash(a)


def test_variant_ids_roundtrip(default_cfg):
    cfg = cdg.validate(copy.deepcopy(default_cfg))
    vs = cdg.variants(cfg, "yeast")
    rv = cfg["r_variants"]
    assert vs[0] == "clean" and len(vs) == 1 + len(rv["severities"]["yeast"]) * len(rv["sampling_seeds"])
    for v in vs[1:]:
        sev, seed = cdg.parse_variant(v)
        assert cdg.variant_id(sev, seed) == v


def test_aliases_and_at_variants_resolve(default_cfg):
    cfg = cdg.validate(copy.deepcopy(default_cfg))
    assert cdg.resolve_method(cfg, "No-Curiosity") == ("CD-GTMLL", {"alpha": 0.0})
    assert cdg.resolve_method(cfg, "CD-GTMLL@alpha=0.2,n_players=4") == ("CD-GTMLL", {"alpha": 0.2, "n_players": 4})
    hp = cdg.method_hparams(cfg, "yeast", "Single-Predictor")
    assert hp["n_players"] == 1 and hp["alpha"] == cfg["methods"]["CD-GTMLL"]["alpha"]
    spec = cdg.run_spec(cfg, "yeast", "clean", "CD-GTMLL@alpha=0.6")
    assert spec["registered_method"] == "CD-GTMLL" and spec["hparams"]["alpha"] == 0.6
    jobs = cdg.study_jobs(cfg)
    assert ("yeast", "N0.20-s0", "MLC-NC") in jobs["noise"] and ("yeast", "clean", "MLC-NC") in jobs["noise"]
    assert [m for _, _, m in jobs["players"]] == [f"CD-GTMLL@n_players={n}" for n in range(1, 9)]
    assert cdg.variant_setting("N0.20-s0") == "N@0.20" and cdg.variant_setting("R0.40-s2") == "R@0.40"


def test_bad_alias_and_variant_named(default_cfg):
    cfg = copy.deepcopy(default_cfg)
    cfg["aliases"]["Oops"] = {"method": "CD-GTMLX"}
    assert "aliases.Oops.method" in _err(cfg)
    cfg = copy.deepcopy(default_cfg)
    cfg["studies"]["alpha"]["values"] = [0.1]
    cfg["experiments"]["methods"] = ["CD-GTMLL@alfa=0.3"]
    msg = _err(cfg)
    assert "experiments.methods[0]" in msg and "alfa" in msg


def test_plugins_register_methods(default_cfg, tmp_path, monkeypatch):
    (tmp_path / "my_methods.py").write_text(
        "import numpy as np\n"
        "from cdgtmll.methods import Method, register\n"
        "@register('Prior')\n"
        "class Prior(Method):\n"
        "    def fit(self, data, ctx):\n"
        "        self.p = np.asarray(data.Y_train).mean(0)\n"
        "        return self\n"
        "    def predict_proba(self, X):\n"
        "        return np.tile(self.p, (X.shape[0], 1))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = copy.deepcopy(default_cfg)
    cfg["plugins"] = ["my_methods"]
    cfg["experiments"]["methods"] = ["BCE", "Prior"]
    cdg.validate(cfg)
    assert cdg.run_spec(cfg, "yeast", "clean", "Prior")["plugins"] == ["my_methods"]
    cfg = copy.deepcopy(default_cfg)
    cfg["plugins"] = ["no_such_module_xyz"]
    msg = _err(cfg)
    assert "plugins[0]" in msg and "no_such_module_xyz" in msg
