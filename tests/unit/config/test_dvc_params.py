"""DVC's parameters file (params.yaml): the profile dvc.yaml's stage runs and the settings laid
over it (cdgtmll.config.dvc_params), and how the config loader merges them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cdgtmll.config import dvc_params, loader
from cdgtmll.config.schema import ConfigError
from tests.support.paths import ROOT


def _root(tmp_path: Path, params: str) -> Path:
    (tmp_path / "config").mkdir()
    shutil.copy2(ROOT / "config/quick.yaml", tmp_path / "config/quick.yaml")
    (tmp_path / "params.yaml").write_text(params)
    return tmp_path


def test_shipped_params_run_the_default_profile_unchanged():
    params = dvc_params.read_params(ROOT)
    assert params == {"profile": "config/config.yaml", "settings": {}}
    assert dvc_params.settings_layer([ROOT / "config/config.yaml"], ROOT) is None


def test_settings_are_laid_over_exactly_the_params_profile(tmp_path):
    root = _root(tmp_path, "profile: config/quick.yaml\nsettings:\n  methods:\n    CD-GTMLL:\n      alpha: 0.2\n"
                           "  experiments:\n    seeds: [0]\n")
    layer = dvc_params.settings_layer([str(root / "config/quick.yaml")], root)
    assert layer == ("params.yaml settings", {"methods": {"CD-GTMLL": {"alpha": 0.2}}, "experiments": {"seeds": [0]}})
    cfg = loader.load_files([root / "config/quick.yaml"], {"experiments": {"seeds": [1]}}, layer=layer)
    assert cfg["methods"]["CD-GTMLL"]["alpha"] == 0.2  # the layer over the profile
    assert cfg["experiments"]["seeds"] == [1]            # --config over the layer
    # another profile, or the profile with a second config file: DVC's settings do not apply
    shutil.copy2(ROOT / "config/config.yaml", root / "config/config.yaml")
    assert dvc_params.settings_layer([root / "config/config.yaml"], root) is None
    assert dvc_params.settings_layer([root / "config/quick.yaml", root / "config/config.yaml"], root) is None
    assert dvc_params.settings_layer([root / "config/quick.yaml"], tmp_path / "elsewhere") is None  # no params.yaml


def test_a_bad_setting_names_the_layer(tmp_path):
    root = _root(tmp_path, "profile: config/quick.yaml\nsettings:\n  methods:\n    CD-GTMLL:\n      alpah: 0.2\n")
    layer = dvc_params.settings_layer([root / "config/quick.yaml"], root)
    with pytest.raises(ConfigError, match=r"quick.yaml \+ params.yaml settings.*alpah"):
        loader.load_files([root / "config/quick.yaml"], layer=layer)


@pytest.mark.parametrize(("text", "message"), [
    ("profile: config/quick.yaml\nmethods: {}\n", r"params.yaml: unknown key\(s\) \['methods'\].*'\+\+settings.methods"),
    ("settings: {}\n", r"params.yaml: 'profile' must be the path of a config file"),
    ("profile: config/quick.yaml\nsettings: [1]\n", r"params.yaml: 'settings' must be a mapping"),
    ("profile: a\nprofile: b\n", r"params.yaml: duplicate key 'profile'"),
    ("- profile\n", r"params.yaml: expected a mapping"),
])
def test_malformed_params_name_file_and_field(tmp_path, text, message):
    root = _root(tmp_path, text)
    with pytest.raises(ConfigError, match=message):
        dvc_params.read_params(root)


def test_profile_command_prints_the_profile(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(_root(tmp_path, "profile: config/quick.yaml\nsettings: {}\n"))
    assert dvc_params.main(["profile"]) == 0
    assert capsys.readouterr().out == "config/quick.yaml\n"
    (tmp_path / "params.yaml").unlink()
    assert dvc_params.main(["profile"]) == 2
    assert "params.yaml not found" in capsys.readouterr().err


def test_null_settings_run_the_profile_as_it_is(tmp_path):
    """`dvc exp run -S 'settings=null'` writes `settings:` (null): no layer."""
    root = _root(tmp_path, "profile: config/quick.yaml\nsettings:\n")
    assert dvc_params.read_params(root) == {"profile": "config/quick.yaml", "settings": {}}
    assert dvc_params.settings_layer([root / "config/quick.yaml"], root) is None
