"""DVC's parameters file, ``params.yaml`` at the workflow root (docs/dvc.md).

It holds what DVC tracks and what ``dvc exp run -S`` changes, so that DVC never rewrites a
profile (``-S config/quick.yaml:key=value`` would re-dump that file in DVC's YAML style):

* ``profile`` -- the config file dvc.yaml's stage runs (``${profile}`` there), e.g.
  ``dvc exp run -S profile=config/quick.yaml``;
* ``settings`` -- a mapping laid over that profile, e.g.
  ``dvc exp run -S '++settings.methods.CD-GTMLL.alpha=0.2'``.

The Snakefile merges ``settings`` over the config files when, and only when, the run's config
files are exactly ``profile`` (:func:`settings_layer`), so that a plain
``snakemake all --configfile <profile>`` sees what ``dvc repro`` ran, and another profile is
never changed by DVC's settings. ``--config KEY=VALUE`` still wins over both.

``python -m cdgtmll.config.dvc_params profile`` prints the profile.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import yaml

from cdgtmll.config import yaml12
from cdgtmll.config.schema import ConfigError

PARAMS_FILE = "params.yaml"


def read_params(root: str | Path = ".") -> dict | None:
    """``{"profile": str, "settings": dict}`` from ``root/params.yaml``, or None when there is
    no such file. Raises ConfigError naming the file and field when it is not of that form."""
    path = Path(root) / PARAMS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read DVC's parameters: {exc}") from exc
    try:
        doc = yaml12.load(text)
    except yaml12.DuplicateKeyError as exc:
        raise ConfigError(f"{path}: duplicate key '{exc.key}' {exc.where()}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot parse DVC's parameters: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping with 'profile' and 'settings', got {type(doc).__name__}")
    unknown = sorted(set(doc) - {"profile", "settings"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown} (allowed: profile, settings; a setting of the "
                          f"profile goes under 'settings', e.g. dvc exp run -S '++settings.{unknown[0]}=...')")
    profile = doc.get("profile")
    if not isinstance(profile, str) or not profile.strip():
        raise ConfigError(f"{path}: 'profile' must be the path of a config file (e.g. config/config.yaml), "
                          f"got {profile!r}")
    settings = doc.get("settings") or {}
    if not isinstance(settings, dict):
        raise ConfigError(f"{path}: 'settings' must be a mapping of config keys laid over the profile "
                          f"(or {{}}), got {type(settings).__name__}")
    return {"profile": profile, "settings": settings}


def settings_layer(configfiles: Iterable[str | Path], root: str | Path) -> tuple[str, dict] | None:
    """``(source, settings)`` when ``configfiles`` is exactly the profile of ``root/params.yaml``
    and its ``settings`` are not empty; else None. ``source`` names the layer in messages."""
    params = read_params(root)
    if params is None or not params["settings"]:
        return None
    files = [Path(f).resolve() for f in configfiles]
    if files != [(Path(root) / params["profile"]).resolve()]:
        return None
    return f"{PARAMS_FILE} settings", params["settings"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["profile"]:
        print("usage: python -m cdgtmll.config.dvc_params profile", file=sys.stderr)
        return 2
    try:
        params = read_params()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if params is None:
        print(f"{PARAMS_FILE} not found in {Path.cwd()}: run this in the workflow's root", file=sys.stderr)
        return 2
    print(params["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
