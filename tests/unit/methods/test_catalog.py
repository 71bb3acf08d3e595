"""The method catalog answers planning's questions exactly as the method classes do, and
planning with it imports neither torch nor scikit-learn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdgtmll.config import loader, plan
from cdgtmll.methods import base, catalog
from cdgtmll.methods.catalog import BUILTIN_MODULES, load_builtins

REPO = Path(__file__).resolve().parents[3]
CONFIGS = sorted((REPO / "config").glob("*.yaml"))


def _class_resolved(name: str, hparams: dict, training: dict) -> dict:
    full = json.loads(json.dumps(base.resolved_hparams(name, hparams, training), default=str))
    return {k: v for k, v in full.items() if k not in catalog.catalog()["methods"][name]["derived"]}


def _jobs(cfg: dict):
    """(dataset, method) of every job of a config: the method list and every study."""
    pairs = {(d, m) for d in cfg["experiments"]["datasets"] for m in cfg["experiments"]["methods"]}
    for jobs in plan.study_jobs(cfg).values():
        pairs |= {(d, m) for d, _, m in jobs}
    return sorted(pairs)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_run_specs_and_not_run_reasons_equal_the_classes(config):
    cfg = loader.load(config)
    checked = 0
    for dataset, method in _jobs(cfg):
        registered, _ = plan.resolve_method(cfg, method)
        hp = plan.method_hparams(cfg, dataset, method)
        training = plan.training_protocol(cfg, dataset)
        m = base.build(registered, hp)
        want = m.not_runnable_reason()
        if want is None and plan.finetunes_images(cfg, dataset):
            want = base.image_input_reason(m)
        assert plan.not_runnable(cfg, dataset, method) == want, (dataset, method)
        got = json.loads(json.dumps(catalog.resolved_hparams(registered, hp, training), default=str))
        assert got == _class_resolved(registered, hp, training), (dataset, method)
        checked += 1
    assert checked >= len(cfg["experiments"]["methods"])


def test_every_builtin_method_is_in_the_catalog_with_its_class_facts():
    entries = catalog.catalog()["methods"]
    load_builtins()
    builtin = sorted(n for n, c in base.registered().items() if c.__module__ in BUILTIN_MODULES)
    assert sorted(entries) == builtin  # plugins registered by other tests in this process left out
    for name, e in entries.items():
        cls = base.get(name)
        assert (e["module"], e["class"]) == (cls.__module__, cls.__qualname__)
        assert e["accepted"] == sorted(base.hparam_names(cls)[0])
        assert e["supports_images"] == cls().supports_images()
        assert catalog.is_neural(name) is e["neural"] is cls.neural
        assert catalog.builds_on(name) == e["builds_on"] == cls.builds_on
        if cls.builds_on is not None:  # read through NeuralMethod.fit, from a neural base run
            assert cls.neural and base.get(cls.builds_on).neural
        assert catalog.is_deterministic(name) is e["deterministic"] is cls.deterministic


def test_entries_that_follow_an_argument_are_marked_derived():
    """ML-Decoder's ``loss_hparams`` are ASL's with ``loss: asl`` and empty with ``bce``: a
    constant taken at the defaults would be wrong for the other value."""
    e = catalog.catalog()["methods"]["ML-Decoder"]
    assert e["derived"] == {"loss_hparams": ["loss"]}
    for loss in ("asl", "bce"):
        got = catalog.resolved_hparams("ML-Decoder", {"loss": loss}, {"epochs": 3})
        assert got == _class_resolved("ML-Decoder", {"loss": loss}, {"epochs": 3})


@pytest.mark.parametrize("name, hparams, error", [
    ("BR-LogReg", {"C": -1.0}, base.HparamError),
    ("BR-LogReg", {"Cee": 1.0}, ValueError),
    ("CD-GTMLL", {"divergence": "hellinger"}, base.HparamError),
    ("ASL", {"gamma_neg": float("nan")}, base.HparamError),
])
def test_bad_hyper_parameters_fail_with_the_classes_message(name, hparams, error):
    with pytest.raises(error) as want:
        base.build(name, hparams)
    with pytest.raises(error) as got:
        catalog.check(name, hparams)
    assert str(got.value) == str(want.value)


def test_the_cache_key_follows_every_source_file(tmp_path):
    pkg = tmp_path / "cdgtmll"
    (pkg / "methods").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "methods" / "neural.py").write_text("DEFAULT = 1\n")
    before = catalog.source_sha256(pkg)
    (pkg / "methods" / "neural.py").write_text("DEFAULT = 2\n")
    assert catalog.source_sha256(pkg) != before
    assert catalog.cache_path(before) != catalog.cache_path(catalog.source_sha256(pkg))


@pytest.mark.slow
def test_check_config_and_run_specs_import_neither_torch_nor_sklearn(tmp_path):
    """With the catalog cached (``make venv`` does it), validating a profile and planning every
    job's spec, not-run reason and code identity imports no method module, and no scipy (0.14 s
    of every Snakemake start when the label helpers imported scipy.sparse)."""
    catalog.catalog.cache_clear()
    catalog.catalog()  # cached for the source tree as it is now, in $XDG_CACHE_HOME (as the child sees it)
    code = (
        "import sys\n"
        "from cdgtmll.config import loader, plan\n"
        "from cdgtmll.lineage.code import identity, train_roots\n"
        f"cfg = loader.load({str(REPO / 'config' / 'config.yaml')!r})\n"
        "for d in cfg['experiments']['datasets']:\n"
        "    for v in plan.variants(cfg, d):\n"
        "        for m in cfg['experiments']['methods']:\n"
        "            spec = plan.run_spec(cfg, d, v, m); plan.not_runnable(cfg, d, m)\n"
        "            identity(train_roots(spec))\n"
        "print(sorted(m for m in ('torch', 'sklearn', 'scipy', 'cdgtmll.methods.neural') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_plugin_cannot_take_a_builtin_name(tmp_path):
    (tmp_path / "takes_bce.py").write_text(
        "from cdgtmll.methods.base import Method, register\n"
        "@register('BCE')\n"
        "class Mine(Method):\n"
        "    def fit(self, data, ctx):\n        return self\n"
        "    def predict_proba(self, X):\n        return X\n")
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg["plugins"] = ["takes_bce"]
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(Exception, match="registers \\['BCE'\\], the name of a built-in method|registered twice"):
            loader.validate(cfg)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("takes_bce", None)


@pytest.mark.slow
def test_a_training_job_imports_only_its_methods_module(tmp_path):
    """With the catalog cached (``make venv`` caches it), building a method imports the module that
    defines it and not the other built-ins (scikit-learn alone is about 1.1 s of CPU per training
    process); without a cached catalog every built-in module is imported, as before."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    probe = ("import sys\nfrom cdgtmll.methods.base import build\nbuild('CD-GTMLL', {})\n"
             "print('sklearn' in sys.modules, 'cdgtmll.methods.classic' in sys.modules)\n")
    cold = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert cold.stdout.strip() == "True True", cold.stderr[-2000:]
    made = subprocess.run([sys.executable, "-m", "cdgtmll.methods.catalog"], env=env, check=True,
                          capture_output=True, text=True, timeout=300)
    # what `make venv` prints: the catalog's path, and no runpy warning (the package used to import
    # the module before `-m` ran it: "found in sys.modules after import of package")
    assert made.stdout.strip().endswith("built-in methods") and made.stderr == "", made.stderr
    warm = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert warm.stdout.strip() == "False False", warm.stderr[-2000:]
