"""Config files as Snakemake reads them: the Snakefile reads its config files again with the
YAML 1.2 loader (:mod:`cdgtmll.config.yaml12`), so an unquoted ``1e-3`` is a number and a key
set twice is an error naming the file, the key and both lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def test_snakemake_reads_yaml12_floats_and_names_duplicate_keys(tmp_path, mirror):
    repo = tmp_path / "repo"
    repo.mkdir()
    for item in ("Snakefile", "workflow", "config", "environment.yml"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / item)
    quick = (repo / "config" / "quick.yaml").read_text()
    assert "lr_backbone: 2.0e-3," in quick
    (repo / "config" / "faults.yaml").write_text(quick.replace("lr_backbone: 2.0e-3,", "lr_backbone: 1e-3,"))
    lines = quick.splitlines()
    at = lines.index("  seeds: [0, 1, 2]")
    (repo / "config" / "dup.yaml").write_text("\n".join(lines[: at + 1] + ["  seeds: [0]"] + lines[at + 1 :]) + "\n")
    env = {
        **os.environ,
        "CDGTMLL_DATA_MIRROR": str(mirror),
        "PYTHONPATH": str(ROOT / "src"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache"),
        "MPLCONFIGDIR": str(tmp_path / "mpl"),
    }

    def dry_run(configfile: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "snakemake", "-n", "--configfile", configfile, "--config", "name=faults", "--", "all"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    ok = dry_run("config/faults.yaml")  # YAML 1.1 read '1e-3' as a string: "is not of type 'number'"
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "This was a dry-run" in ok.stdout + ok.stderr
    dup = dry_run("config/dup.yaml")
    assert dup.returncode != 0
    assert (
        f"config/dup.yaml: config error at 'experiments.seeds': duplicate key 'seeds' at line {at + 2} (first set at line {at + 1})"
    ) in dup.stdout + dup.stderr, dup.stderr[-2000:]


# --------------------------------------------------------------------------- names and the config's plugins
def _check_config(cwd: Path, cfg: str) -> subprocess.CompletedProcess:
    (cwd / "x.yaml").write_text(cfg)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"),
           "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache")}
    return subprocess.run([sys.executable, "-m", "cdgtmll.cli", "check-config", "x.yaml"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _quick_with(**replace: str) -> str:
    text = (ROOT / "config" / "quick.yaml").read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    return text


def test_check_config_names_plugins_before_importing_them_and_refuses_a_name_the_workflow_cannot_carry(tmp_path):
    """A config's plugins are code: check-config says which modules it imports before it imports
    them (the module's own print comes after), and a method registered as ``O'Brien LR`` stops the
    check naming the plugin, its class and the wildcard, instead of a MissingInputException later."""
    (tmp_path / "obrien.py").write_text(
        "print('obrien imported')\n"
        "from cdgtmll.methods.base import Method, register\n\n\n"
        "@register(\"O'Brien LR\")\n"
        "class OBrien(Method):\n"
        "    pass\n"
    )
    res = _check_config(tmp_path, _quick_with(**{"name: quick": "name: quick\nplugins: [obrien]"}))
    assert res.returncode == 2, res.stdout + res.stderr
    first = res.stdout.splitlines()[0]
    assert first == ("x.yaml: importing plugin module(s) obrien: a config's plugins are Python code that runs here "
                     "and in every job; trust the config as you would a Snakefile")
    assert res.stdout.index("importing plugin") < res.stdout.index("obrien imported")
    err = res.stderr.strip()
    assert err.startswith("x.yaml: config error at 'plugins[0]': cannot import 'obrien'"), err
    assert "obrien.OBrien: register(\"O'Brien LR\"): method name \"O'Brien LR\": it holds ' ', \"'\"" in err
    assert "wildcard {method} of rule train" in err


def test_check_config_refuses_a_dataset_name_that_would_leave_its_folder(tmp_path):
    custom = ("  custom:\n    '../../../tmp/x': {format: mulan-arff, train: a.arff, test: b.arff, n_labels: 2}\n")
    res = _check_config(tmp_path, _quick_with(**{"  custom: {}\n": custom}))
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("x.yaml: config error at 'data.custom.../../../tmp/x': dataset name '../../../tmp/x': "
                                 "it holds a path separator. It becomes a folder and the value of the wildcard "
                                 "{dataset} of rule prepare_dataset"), res.stderr
    assert res.stdout == ""
