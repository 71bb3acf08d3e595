"""Plugins: the config's ``plugins`` list of modules that register methods or losses, where they
are imported from, and the error that names a failed one."""

from __future__ import annotations

from pathlib import Path

import yaml

from cdgtmll.config.schema import ConfigError, schema_document


def plugin_dirs(config_path: str | Path | None = None) -> list[Path]:
    """Folders the pipeline imports a config's ``plugins`` from (besides installed packages
    and ``PYTHONPATH``), so that ``cdgtmll check-config`` finds the same modules:

    * the working directory: Snakemake runs every job there as ``python -m cdgtmll.train``,
      which puts it first on ``sys.path``;
    * the workflow folder, the one holding the ``Snakefile``: Snakemake puts it on
      ``sys.path`` before the Snakefile validates the config. Found as the nearest folder
      above ``config_path`` with a ``Snakefile`` (``config/x.yaml`` -> the checkout).
    """
    dirs = [Path.cwd().resolve()]
    if config_path is not None:
        for d in Path(config_path).resolve().parents:
            if (d / "Snakefile").is_file():
                if d not in dirs:
                    dirs.append(d)
                break
    return dirs


def _plugin_failure(mod: str, exc: BaseException, search: list[Path]) -> str:
    """Why ``mod`` could not be imported, in words: not found (and where it was looked
    for), or the file and line where importing it failed."""
    import importlib.util
    import traceback

    if isinstance(exc, ModuleNotFoundError) and exc.name and (mod == exc.name or mod.startswith(exc.name + ".")):
        where = "".join(f"{d}, " for d in search)
        return (f"cannot import '{mod}': no module '{exc.name}' found (looked in {where}PYTHONPATH and the "
                f"installed packages). A plugin is a file {mod.replace('.', '/')}.py (or a package) in the "
                "folder you run snakemake from, beside the Snakefile")
    if isinstance(exc, SyntaxError) and exc.filename:
        at = f"{exc.filename}:{exc.lineno}"
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen")]
        at = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
    try:
        spec = importlib.util.find_spec(mod)
        origin = f" ({spec.origin})" if spec is not None and spec.origin else ""
    except Exception:  # noqa: BLE001 - a parent package that fails to import: no origin to show
        origin = ""
    return f"cannot import '{mod}'{origin}: {type(exc).__name__}: {exc} (at {at})"


def import_plugins(modules: list[str], source: str = "config",
                   search: list[str | Path] | None = None) -> dict[str, list[str]]:
    """Import the config's ``plugins`` (modules that register methods or losses) and return,
    per module, the method names it registered. ``search``: folders put first on
    ``sys.path`` (and left there, as in a pipeline job, so that a plugin can import its own
    modules later), e.g. :func:`plugin_dirs`. A failed import is a :class:`ConfigError`
    naming ``plugins[i]``, the module and why (not found, or the file and line that failed)."""
    import importlib
    import sys

    from cdgtmll.methods import base

    builtin = set(base.builtin_names())

    dirs = [Path(d) for d in (search or [])]
    for d in reversed(dirs):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    importlib.invalidate_caches()  # a plugin file written after this process started
    added: dict[str, list[str]] = {}
    for i, mod in enumerate(modules):
        before = set(base.registered())
        try:
            importlib.import_module(mod)
        except Exception as exc:  # noqa: BLE001 - any import failure is a config error here
            raise ConfigError(f"{source}: config error at 'plugins[{i}]': "
                              f"{_plugin_failure(mod, exc, dirs)}") from None
        now = base.registered()
        added[mod] = sorted(set(now) - before)
        clash = [n for n in added[mod] if n in builtin]
        if clash:
            raise ConfigError(f"{source}: config error at 'plugins[{i}]': '{mod}' registers {clash}, "
                              "the name of a built-in method")
    return added


def read_plugins(path: str | Path) -> list[str]:
    """The ``plugins`` list of a config file, checked but without validating the rest (so
    that ``cdgtmll methods --config`` lists methods even while the config has other errors)."""
    import re

    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    plugins = config.get("plugins", []) if isinstance(config, dict) else []
    if not isinstance(plugins, list):
        raise ConfigError(f"{path}: config error at 'plugins': expected a list of module names, "
                          f"got {type(plugins).__name__}")
    pattern = schema_document()["properties"]["plugins"]["items"]["pattern"]
    for i, mod in enumerate(plugins):
        if not isinstance(mod, str) or not re.match(pattern, mod):
            raise ConfigError(f"{path}: config error at 'plugins[{i}]': expected a dotted module name, got {mod!r}")
    return plugins
