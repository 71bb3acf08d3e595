"""Config validation: schema + registries, errors name the key, defaults are filled."""

import copy
import sys
from pathlib import Path

import pytest
import yaml

from cdgtmll import io
from cdgtmll.config import loader, plan, plugins, schema
from cdgtmll.variants import naming
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def default_cfg():
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "mulan.yaml"])
def test_shipped_configs_validate(name):
    cfg = loader.load(ROOT / "config" / name)
    assert cfg["experiments"]["datasets"]


def test_paper_profile_has_all_seven_datasets():
    cfg = loader.load(ROOT / "config/paper.yaml")
    assert set(cfg["experiments"]["datasets"]) == {
        "voc2007", "coco2014", "yeast", "mediamill", "eurlex-4k", "wiki10-31k", "amazoncat-13k"}
    # App. E.2 protocol values
    assert plan.training_protocol(cfg, "yeast")["epochs"] == 100
    assert plan.training_protocol(cfg, "voc2007")["batch_size"] == 64
    assert plan.training_protocol(cfg, "coco2014")["epochs"] == 40
    assert cfg["r_variants"]["severities"]["coco2014"] == [0.30, 0.40]


def test_defaults_filled(default_cfg):
    cfg = copy.deepcopy(default_cfg)
    del cfg["data"]["val_fraction"]
    loader.validate(cfg)
    assert cfg["data"]["val_fraction"] == 0.1
    assert cfg["thresholds"]["global"] == 0.5


def _err(cfg):
    with pytest.raises(schema.ConfigError) as ei:
        loader.validate(cfg)
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
    cfg = loader.validate(copy.deepcopy(default_cfg))
    a = plan.run_spec(cfg, "yeast", "clean", "BR-LogReg")
    b = plan.run_spec(loader.validate(copy.deepcopy(default_cfg)), "yeast", "clean", "BR-LogReg")
    assert a.sha256() == b.sha256() == io.config_hash(a.to_dict())
    cfg2 = copy.deepcopy(cfg)
    cfg2["methods"]["BR-LogReg"]["C"] = 2.0
    assert plan.run_spec(cfg2, "yeast", "clean", "BR-LogReg").sha256() != a.sha256()
    # a setting of another dataset does not change this job's spec
    cfg3 = copy.deepcopy(cfg)
    cfg3["training"]["mediamill"] = {"epochs": 7}
    assert plan.run_spec(cfg3, "yeast", "clean", "BR-LogReg").sha256() == a.sha256()


def test_code_default_change_changes_run_spec(monkeypatch):
    """A hyper-parameter the config does not set still enters the run spec with the value
    the method's spec declares, so changing a default re-runs the job (here CD-GTMLL's payoff
    weights, whose default changed from rarity to uniform)."""
    import dataclasses

    from cdgtmll.methods import base
    from cdgtmll.methods.spec import HParam

    cfg = loader.load(ROOT / "config" / "config.yaml")
    cfg["methods"]["CD-GTMLL"].pop("payoff_weights", None)
    a = plan.run_spec(cfg, "yeast", "clean", "CD-GTMLL")
    assert a.resolved_hparams["payoff_weights"] == "uniform"
    assert a.resolved_hparams["epochs"] == cfg["training"]["default"]["epochs"]
    spec = base.spec_of("CD-GTMLL")
    assert spec.hparams["payoff_weights"].default == "uniform"
    edited = dataclasses.replace(spec, hparams={**spec.hparams, "payoff_weights": HParam(
        "rarity", spec.hparams["payoff_weights"].space)})
    monkeypatch.setitem(base._SPECS, "CD-GTMLL", edited)
    b = plan.run_spec(cfg, "yeast", "clean", "CD-GTMLL")
    assert b.resolved_hparams["payoff_weights"] == "rarity"
    assert a.sha256() != b.sha256()
    assert dataclasses.replace(a, resolved_hparams=None) == dataclasses.replace(b, resolved_hparams=None)


def test_coco_dbl_uses_official_coco_settings():
    """COCO's DBL settings are the official ones: configs/coco/LT_resnet50_pfc_DB.py uses map_param
    gamma (mu) = 0.2 and logit_reg neg_scale (lambda) = 2.0; VOC keeps 0.3 / 5."""
    from cdgtmll.methods import base
    from cdgtmll.methods.base import FitData, RunContext

    cfg = loader.load(ROOT / "config/paper.yaml")
    coco = plan.run_spec(cfg, "coco2014", "clean", "DBL")
    voc = plan.run_spec(cfg, "voc2007", "clean", "DBL")
    assert (coco.hparams["smooth_mu"], coco.hparams["lam"]) == (0.2, 2.0)
    assert (coco.resolved_hparams["smooth_mu"], coco.resolved_hparams["lam"]) == (0.2, 2.0)
    assert (voc.resolved_hparams["smooth_mu"], voc.resolved_hparams["lam"]) == (0.3, 5.0)
    # the loss the COCO run trains with carries them
    import numpy as np

    m = base.build_for_protocol("DBL", coco.hparams, coco.training)
    Y = np.eye(4, dtype=np.uint8).repeat(3, 0)
    m.prepare(FitData(np.zeros((12, 2), np.float32), Y, None, None, list("abcd")), RunContext(0, Path(".")))
    assert (m._criterion.smooth_mu, m._criterion.lam) == (0.2, 2.0)


def test_variant_ids_roundtrip(default_cfg):
    cfg = loader.validate(copy.deepcopy(default_cfg))
    vs = plan.variants(cfg, "yeast")
    rv = cfg["r_variants"]
    assert vs[0] == "clean" and len(vs) == 1 + len(rv["severities"]["yeast"]) * len(rv["sampling_seeds"])
    for v in vs[1:]:
        sev, seed = naming.parse_variant(v)
        assert naming.variant_id(sev, seed) == v


def test_aliases_and_at_variants_resolve(default_cfg):
    cfg = loader.validate(copy.deepcopy(default_cfg))
    assert plan.resolve_method(cfg, "No-Curiosity") == ("CD-GTMLL", {"alpha": 0.0})
    assert plan.resolve_method(cfg, "CD-GTMLL@alpha=0.2,n_players=4") == ("CD-GTMLL", {"alpha": 0.2, "n_players": 4})
    hp = plan.method_hparams(cfg, "yeast", "Single-Predictor")
    assert hp["n_players"] == 1 and hp["alpha"] == cfg["methods"]["CD-GTMLL"]["alpha"]
    spec = plan.run_spec(cfg, "yeast", "clean", "CD-GTMLL@alpha=0.6")
    assert spec.registered_method == "CD-GTMLL" and spec.hparams["alpha"] == 0.6
    jobs = plan.study_jobs(cfg)
    assert ("yeast", "N0.20-s0", "MLC-NC") in jobs["noise"] and ("yeast", "clean", "MLC-NC") in jobs["noise"]
    # the N sweep as written, then under each of studies.players.under (tests/unit/config/test_plan_under.py)
    assert [m for _, _, m in jobs["players"]][:8] == [f"CD-GTMLL@n_players={n}" for n in range(1, 9)]
    assert naming.variant_setting("N0.20-s0") == "N@0.20" and naming.variant_setting("R0.40-s2") == "R@0.40"


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
        "from cdgtmll.methods.base import Method, register\n"
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
    loader.validate(cfg)
    assert plan.run_spec(cfg, "yeast", "clean", "Prior").plugins == ("my_methods",)
    cfg = copy.deepcopy(default_cfg)
    cfg["plugins"] = ["no_such_module_xyz"]
    msg = _err(cfg)
    assert "plugins[0]" in msg and "no_such_module_xyz" in msg


def test_plugin_folders_and_not_found_message(tmp_path, monkeypatch):
    """Plugins resolve where the pipeline finds them (the working directory,
    and the folder with the Snakefile above the config file); a module found nowhere is a
    config error naming the key, the module and each folder looked in."""
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    (proj / "config" / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    (proj / "Snakefile").write_text("")
    monkeypatch.chdir(elsewhere)
    assert plugins.plugin_dirs(proj / "config" / "sub" / "x.yaml") == [elsewhere.resolve(), proj.resolve()]
    assert plugins.plugin_dirs("no/snakefile/above.yaml") == [elsewhere.resolve()]
    monkeypatch.setattr(sys, "path", list(sys.path))  # import_plugins prepends the folders
    with pytest.raises(schema.ConfigError) as ei:
        plugins.import_plugins(["ok_mod_none"], source="x.yaml", search=[elsewhere, proj])
    assert str(ei.value).startswith(
        f"x.yaml: config error at 'plugins[0]': cannot import 'ok_mod_none': no module 'ok_mod_none' found "
        f"(looked in {elsewhere}, {proj}, PYTHONPATH and the installed packages)")
    (tmp_path / "bad.yaml").write_text("plugins: [ok, 'not a module']\n")
    with pytest.raises(schema.ConfigError, match=r"config error at 'plugins\[1\]': expected a dotted module name"):
        plugins.read_plugins(tmp_path / "bad.yaml")


def test_method_hyperparameter_out_of_range_named(default_cfg):
    """A method's hyper-parameters are range-checked like the training
    block, and the error names the key down to the parameter, the range and the value."""
    cfg = copy.deepcopy(default_cfg)
    cfg["methods"]["BR-LogReg"]["C"] = -1
    assert "config error at 'methods.BR-LogReg.C': expected a number > 0, got -1" in _err(cfg)
    cfg = copy.deepcopy(default_cfg)
    cfg["methods"]["BCE"] = {"lr_backbone": 1e6}
    assert "config error at 'methods.BCE.lr_backbone': expected a number in (0, 1], got 1000000.0" in _err(cfg)
    cfg = copy.deepcopy(default_cfg)
    cfg["aliases"]["No-Overlap"]["hparams"]["rho"] = 1.0
    assert "config error at 'aliases.No-Overlap.hparams.rho': expected a number in [0, 1), got 1.0" in _err(cfg)


def test_custom_dataset_without_severities_named(default_cfg):
    """A custom dataset with r_variants on and no severities would get clean runs only,
    silently; the config check names the missing key."""
    cfg = copy.deepcopy(default_cfg)
    cfg["data"]["custom"] = {"toy": {"format": "mulan-arff", "train": "toy-train.arff", "test": "toy-test.arff",
                                     "n_labels": 3}}
    cfg["experiments"]["datasets"] = ["yeast", "toy"]
    with pytest.raises(schema.ConfigError, match=r"r_variants\.severities\.toy.*no R-variant severities"):
        loader.validate(copy.deepcopy(cfg))
    ok = copy.deepcopy(cfg)
    ok["r_variants"]["severities"]["toy"] = []  # explicitly clean only
    loader.validate(ok)
    off = copy.deepcopy(cfg)
    off["experiments"]["r_variants"] = False
    loader.validate(off)


# ------------------------------------------------- YAML 1.2 reading, pr_curve, distinct runs


def _quick_with(tmp_path, old, new, name="my.yaml"):
    text = (ROOT / "config/quick.yaml").read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


def test_load_reads_unquoted_exponent_floats_as_numbers(tmp_path):
    """``lr_backbone: 1e-3`` is a number (YAML 1.2), not the string '1e-3' YAML 1.1 reads."""
    path = _quick_with(tmp_path, "lr_backbone: 2.0e-3, lr_head: 2.0e-3", "lr_backbone: 1e-3, lr_head: .5E-2")
    cfg = loader.load(path)
    assert plan.training_protocol(cfg, "yeast")["lr_backbone"] == 0.001
    assert plan.training_protocol(cfg, "yeast")["lr_head"] == 0.005


def test_duplicate_key_names_file_line_and_key(tmp_path):
    path = _quick_with(tmp_path, "  split_seed: 0\n", "  split_seed: 0\n  val_fraction: 0.2\n")
    lines = path.read_text().splitlines()
    first, dup = (i + 1 for i, line in enumerate(lines) if line.startswith("  val_fraction:"))
    with pytest.raises(schema.ConfigError) as ei:
        loader.load(path)
    assert str(ei.value) == (
        f"{path}: config error at 'data.val_fraction': duplicate key 'val_fraction' at line {dup} (first set at line {first})"
    )
    flow = _quick_with(tmp_path, "epochs: 100,", "epochs: 100, epochs: 5,", name="flow.yaml")
    with pytest.raises(
        schema.ConfigError,
        match=rf"^{flow}: config error at 'training\.default\.epochs': duplicate "
        rf"key 'epochs' at line \d+, column \d+ \(first set at line \d+",
    ):
        loader.load(flow)


def test_load_files_merges_files_and_overrides_in_order(tmp_path):
    from types import MappingProxyType

    base = _quick_with(tmp_path, "name: quick", "name: quick", name="base.yaml")
    extra = tmp_path / "extra.yaml"
    extra.write_text("name: extra\nthresholds: {global: 2.5e-1}\n")
    cfg = loader.load_files([base, extra], MappingProxyType({"experiments": {"seeds": [7]}}))
    assert (cfg["name"], cfg["thresholds"]["global"], cfg["experiments"]["seeds"]) == ("extra", 0.25, [7])
    assert cfg["experiments"]["methods"] == ["BR-LogReg", "BCE", "CD-GTMLL"]
    with pytest.raises(
        schema.ConfigError,
        match=rf"^{base} \+ {extra} \+ --config: config error at "
        r"'experiments\.seeds\[0\]': 'x' is not of type 'integer'",
    ):
        loader.load_files([base, extra], {"experiments": {"seeds": ["x"]}})


def test_pr_curve_severity_not_configured_is_named(default_cfg):
    """figures.pr_curve at a severity the dataset does not have is an error, not a PR figure
    dropped silently."""
    cfg = copy.deepcopy(default_cfg)
    cfg["figures"]["pr_curve"]["severity"] = 0.6
    assert (
        "config error at 'figures.pr_curve.severity': 0.6 is not a configured severity of 'yeast' "
        "(r_variants.severities.yeast: [0.4, 0.5]); the PR figure would not be made"
    ) in _err(cfg)
    cfg = copy.deepcopy(default_cfg)
    cfg["r_variants"]["severities"]["yeast"] = []
    cfg["figures"]["pr_curve"] = {"dataset": "yeast"}
    assert (
        "config error at 'figures.pr_curve.dataset': 'yeast' has no R-variant severities "
        "(r_variants.severities.yeast: []); the PR figure would not be made"
    ) in _err(cfg)
    # no PR figure is asked for: R-variants off, or the dataset is not run
    off = copy.deepcopy(default_cfg)
    off["figures"]["pr_curve"]["severity"] = 0.6
    off["experiments"]["r_variants"] = False
    assert not plan.pr_curve_enabled(loader.validate(off))
    other = copy.deepcopy(default_cfg)
    other["figures"]["pr_curve"] = {"dataset": "mediamill", "severity": 0.6}
    assert not plan.pr_curve_enabled(loader.validate(other))
    ok = copy.deepcopy(default_cfg)
    ok["figures"]["pr_curve"] = {"severity": 0.4}  # the dataset defaults to yeast
    assert plan.pr_curve_enabled(loader.validate(ok)) and ok["figures"]["pr_curve"]["dataset"] == "yeast"


def test_two_methods_with_the_same_run_spec_are_named(default_cfg):
    def cfg_with(methods, **aliases):
        cfg = copy.deepcopy(default_cfg)
        cfg["experiments"]["methods"] = methods
        cfg["aliases"].update(aliases)
        return cfg

    # methods.CD-GTMLL sets alpha 0.4 already
    assert (
        "config error at 'experiments.methods[2]': 'CD-GTMLL@alpha=0.4' makes the same run as "
        "experiments.methods[1] 'CD-GTMLL' on dataset 'yeast'"
    ) in _err(cfg_with(["BCE", "CD-GTMLL", "CD-GTMLL@alpha=0.4"]))
    # an alias equal to its base, listed before it; beta_warmup 0.1 is CD-GTMLL's code default
    assert (
        "config error at 'experiments.methods[1]': 'CD-GTMLL' makes the same run as experiments.methods[0] 'Same' on dataset 'yeast'"
    ) in _err(cfg_with(["Same", "CD-GTMLL"], Same={"method": "CD-GTMLL", "hparams": {"beta_warmup": 0.1}}))
    # different runs; a study's sweep point equal to a listed run (alpha 0.4) and duplicates
    # inside a study's own methods are not errors
    cfg = cfg_with(["BCE", "CD-GTMLL", "CD-GTMLL@alpha=0.5", "No-Curiosity"], Same={"method": "CD-GTMLL", "hparams": {}})
    cfg["studies"]["ablation"]["methods"] = ["No-Curiosity", "CD-GTMLL", "Same", "CD-GTMLL@alpha=0.4"]
    assert 0.4 in cfg["studies"]["alpha"]["values"]
    loader.validate(cfg)
