"""The ``cdgtmll`` command line, run as a user runs it (the installed console script, in a
subprocess, with no ``PYTHONPATH=.``): bring-your-own plugin methods and the dataset listing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdgtmll.data.registry import RIVER_YEAST, get_spec
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # the command line in a subprocess

PLUGIN = '''"""A bring-your-own method: predicts each label's training prevalence."""
import numpy as np

from cdgtmll.methods.base import Method, register


@register("PriorPlugin")
class PriorPlugin(Method):
    description = "training label prevalence for every row"

    def fit(self, data, ctx):
        self.p = np.asarray(data.Y_train).mean(0)
        return self

    def predict_proba(self, X):
        return np.tile(self.p, (X.shape[0], 1))
'''

BROKEN = '''from cdgtmll.methods.base import register

SCALE = undefined_name * 2
'''


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``cdgtmll ARGS`` in ``cwd``: the console script beside this interpreter (as installed),
    else the same entry point under ``python -P`` (which, like a console script, does not put
    the working directory on sys.path). PYTHONPATH is passed through only with this checkout's
    src/ (never '.' or the plugin folder)."""
    exe = Path(sys.executable).parent / "cdgtmll"
    cmd = [str(exe)] if exe.is_file() else [sys.executable, "-P", "-c", "import sys; from cdgtmll.cli import main; sys.exit(main())"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() == (ROOT / "src").resolve()]
    if keep:
        env["PYTHONPATH"] = keep[0]
    return subprocess.run(cmd + list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _project(tmp_path: Path, plugins: list[str]) -> Path:
    """A checkout-like folder: a Snakefile, plugin modules beside it, and the shipped default
    config with ``plugins`` and the plugin method added (scale otherwise unchanged)."""
    proj = tmp_path / "proj"
    (proj / "config").mkdir(parents=True)
    (proj / "Snakefile").write_text((ROOT / "Snakefile").read_text())
    (proj / "my_methods.py").write_text(PLUGIN)
    (proj / "broken_plugin.py").write_text(BROKEN)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["plugins"] = plugins
    cfg["experiments"]["methods"] = ["BCE", "PriorPlugin"]
    (proj / "config" / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return proj


def test_plugin_beside_the_snakefile_checks_lists_and_fails_clearly(tmp_path):
    """check-config imports a plugin the way the pipeline does (from the
    folder snakemake runs in), `cdgtmll methods` lists its method as a plugin, and a plugin
    that fails to import names the config key, the module, the file and the line."""
    proj = _project(tmp_path, ["my_methods"])
    res = _cli("check-config", "config/config.yaml", cwd=proj)
    assert res.returncode == 0, res.stderr
    assert "config/config.yaml: valid" in res.stdout and "'PriorPlugin'" in res.stdout
    assert f"plugin my_methods ({proj / 'my_methods.py'}): registers PriorPlugin" in res.stdout

    res = _cli("methods", cwd=proj)  # the default config/config.yaml of the working directory
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("PriorPlugin "))
    assert "training label prevalence for every row" in line and "[plugin my_methods, config/config.yaml]" in line
    bce = next(x for x in res.stdout.splitlines() if x.startswith("BCE "))
    assert "plugin" not in bce  # built-ins are not marked

    cfg = yaml.safe_load((proj / "config" / "config.yaml").read_text())
    cfg["plugins"] = ["broken_plugin"]
    (proj / "config" / "broken.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = _cli("check-config", "config/broken.yaml", cwd=proj)
    # the modules are named before they are imported: a config's plugins are code that runs
    assert res.returncode == 2 and res.stdout == (
        "config/broken.yaml: importing plugin module(s) broken_plugin: a config's plugins are Python code that "
        "runs here and in every job; trust the config as you would a Snakefile\n")
    assert res.stderr.strip() == (
        f"config/broken.yaml: config error at 'plugins[0]': cannot import 'broken_plugin' "
        f"({proj / 'broken_plugin.py'}): NameError: name 'undefined_name' is not defined "
        f"(at {proj / 'broken_plugin.py'}:3)")


def test_datasets_prints_each_files_source_and_sha256(tmp_path):
    res = _cli("datasets", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("yeast "))
    block = lines[start + 1:start + 6]
    assert block[0].strip() == "mirror folder <mirror>/yeast/"
    for f, line in zip(get_spec("yeast").files, block[1:4]):
        assert line.split() == [f.name, "sha256", f.sha256, "source", f.urls[0]]
    assert block[1].split()[2] == "e759dc991ff54694a4ff9c4314f3be0d6fd2b1994a4b563f57e416394c6aebbd"
    assert block[4].split()[:5] == ["yeast.csv.gz", "sha256", RIVER_YEAST.sha256, "source", "packaged"]
    assert "river==0.26.1:river/datasets/yeast.csv.gz" in block[4]
    mediamill = next(x for x in lines if x.strip().startswith("mediamill-train.arff "))
    assert "sha256 unknown (not published)" in mediamill and "mediamill.rar" in mediamill
