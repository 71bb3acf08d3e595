"""``cdgtmll`` command line: helpers around the Snakemake pipeline.

  cdgtmll check-config config/config.yaml     validate a config (schema, registries, plugins)
  cdgtmll methods [--config FILE]             list registered methods, the config's plugins included
  cdgtmll datasets [--config FILE]            list the datasets: each file's source and sha256
  cdgtmll audit PATH [--cell ROW COLUMN]      a table cell's value and each run's, then the cell
                                              (or figure) traced to its inputs

A config's ``plugins`` are imported as the pipeline imports them: from the working directory
and the folder holding the Snakefile (besides PYTHONPATH and the installed packages), so a
plugin module beside the Snakefile needs no PYTHONPATH. Importing a plugin runs its code:
``check-config`` names the modules before it imports them. Without --config, ``methods`` and
``datasets`` read the default config/config.yaml when the working directory has one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_CONFIG = Path("config/config.yaml")


def _config_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--config", type=Path, default=None,
                   help=f"config whose {what} to include (default: {DEFAULT_CONFIG} when it exists)")


def _default_config(given: Path | None) -> Path | None:
    if given is not None:
        return given
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def _load_plugins(path: Path | None) -> dict[str, list[str]]:
    """Import the plugins of the config at ``path`` the way the pipeline does; module ->
    method names it registered."""
    from cdgtmll.config.plugins import import_plugins, plugin_dirs, read_plugins

    if path is None:
        return {}
    return import_plugins(read_plugins(path), source=str(path), search=plugin_dirs(path))


def _check_config(path: Path) -> int:
    """Validate the config at ``path``. A config's plugins are code that runs here and in every
    job, so the modules are named before they are imported: whoever checks an unknown config sees
    what it would run (config/README.md, docs/plugins.md: a config is trusted as a Snakefile is)."""
    from cdgtmll.config.loader import load
    from cdgtmll.config.plugins import read_plugins
    from cdgtmll.config.schema import ConfigError

    try:
        modules = read_plugins(path)
        if modules:
            print(f"{path}: importing plugin module(s) {', '.join(modules)}: a config's plugins are Python "
                  "code that runs here and in every job; trust the config as you would a Snakefile", flush=True)
        added = _load_plugins(path)  # before load(): it imports them too, but without these folders
        cfg = load(path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{path}: valid (profile '{cfg['name']}', datasets {cfg['experiments']['datasets']}, "
          f"methods {cfg['experiments']['methods']})")
    for mod, names in added.items():
        where = getattr(sys.modules.get(mod), "__file__", None) or "?"
        print(f"  plugin {mod} ({where}): registers {', '.join(names) if names else 'no method'}")
    return 0


def _methods(config: Path | None) -> int:
    from cdgtmll.config.schema import ConfigError
    from cdgtmll.methods import base

    try:
        added = _load_plugins(config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    plugin_of = {name: mod for mod, names in added.items() for name in names}
    for name in base.available():
        tag = f"  [plugin {plugin_of[name]}, {config}]" if name in plugin_of else ""
        print(f"{name:16s} {base.spec_of(name).description}{tag}")
    return 0


def _custom_specs(config: Path | None) -> list:
    """The ``data.custom`` datasets of a config (checked by the registry's own parser)."""
    import yaml

    from cdgtmll.config.schema import ConfigError
    from cdgtmll.data.registry import spec_from_config

    if config is None:
        return []
    try:
        cfg = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        custom = (cfg.get("data") or {}).get("custom") or {}
        return [spec_from_config(name, c) for name, c in custom.items()]
    except (OSError, yaml.YAMLError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{config}: {exc}") from None



def _image_archives(spec) -> tuple:
    """The image archives an image dataset's loader fetches on demand, only when no extracted
    image folder is found (so they are not in ``spec.files``). Here, not in the registry, because
    ``cdgtmll.data.coco`` imports the registry."""
    from cdgtmll.data import registry

    if spec.name == "voc2007":
        return registry.voc_image_archives()
    if spec.name == "coco2014":
        from cdgtmll.data.coco import IMAGE_ARCHIVES

        return tuple(IMAGE_ARCHIVES.values())
    return ()

def _datasets(config: Path | None) -> int:
    """Each dataset, then each raw file: its sha256 (or why it is unknown) and where it comes
    from (official URL first, or how to get it by hand), then any packaged copy."""
    from cdgtmll.config.schema import ConfigError
    from cdgtmll.data import registry

    try:
        custom = _custom_specs(config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    for spec in [registry.get_spec(n) for n in registry.available()] + custom:
        extra = f"  (data.custom in {config})" if spec in custom else ""
        print(f"{spec.name:16s} {spec.kind:8s} {spec.format:12s} L={spec.n_labels}  {spec.loader}{extra}")
        print(f"    mirror folder <mirror>/{spec.folder}/")
        archives = _image_archives(spec)
        for f in spec.files + archives:
            sha = f.sha256 or "unknown (not published)"
            src = " ".join(f.urls) if f.urls else f"no direct URL: {f.manual or 'none known'}"
            when = "  (images: fetched only when no extracted copy is found)" if f in archives else ""
            print(f"    {f.name}  sha256 {sha}  source {src}{when}")
        for c in spec.packaged:
            print(f"    {c.name}  sha256 {c.sha256}  source packaged copy {c.distribution}=={c.version}:{c.path} "
                  f"(stands in for {', '.join(c.replaces)})")
    return 0


def _envs(path: Path) -> int:
    """Print, one per line, the environments (``.venv/xmc/<name>``) that the methods of the
    config at ``path`` run in, studies included."""
    from cdgtmll.config import loader, plan
    from cdgtmll.config.schema import ConfigError
    from cdgtmll.methods import base

    try:
        cfg = loader.load(path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    names = list(cfg["experiments"]["methods"]) + [m for jobs in plan.study_jobs(cfg).values() for _, _, m in jobs]
    envs = {base.spec_of(plan.resolve_method(cfg, m)[0]).env for m in names}
    print("\n".join(sorted(e for e in envs if e)))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cdgtmll", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("check-config", help="validate a config file")
    p.add_argument("path", type=Path)
    _config_arg(sub.add_parser("methods", help="list registered methods, with a config's plugins"), "plugins")
    _config_arg(sub.add_parser("datasets", help="list the datasets: each file's source and sha256"),
                "data.custom datasets")
    p = sub.add_parser("envs", help="the isolated XMC library environments a config's methods need "
                       "(what `make all` builds first)")
    p.add_argument("path", type=Path)
    p = sub.add_parser("audit", help="trace a table cell or a figure back to its inputs, re-verifying hashes",
                       description="For a table cell: first its value as the table shows it (mean ± sample std "
                                   "in percent, n runs), recomputed from the metrics.json files behind it, and "
                                   "each run's value (run folder, variant, sampling and training seed) in the "
                                   "table's threshold mode, checked against the table's CSV; then the lineage of "
                                   "every run down to the raw data files, re-verifying every recorded hash. "
                                   "Exit 1 when the table differs from its sources, a file is missing or "
                                   "modified, a run was made by code that differs from the code on disk or the "
                                   "config now gives a run another spec or settings (STALE CONFIG), or the runs "
                                   "come from several commits or a tree with uncommitted changes to code (an "
                                   "edited params.yaml or profile is an input, not a change to code; see "
                                   "--allow-stale, --allow-mixed).")
    p.add_argument("path", help="a table (.md/.csv/.tex) or figure (.pdf/.png/.csv) written by the pipeline")
    p.add_argument("--cell", nargs=2, metavar=("ROW", "COLUMN"), help='e.g. CD-GTMLL "Yeast Rare-F1"')
    p.add_argument("--allow-stale", action="store_true",
                   help="a run made by code that differs from the code on disk, or that the config now would "
                        "make otherwise (STALE CONFIG), is a warning, not a failure")
    p.add_argument("--allow-mixed", action="store_true",
                   help="runs of several commits or of a working tree with uncommitted changes to code are a "
                        "warning, not a failure")
    args = ap.parse_args(argv)

    if args.cmd == "check-config":
        return _check_config(args.path)
    if args.cmd == "envs":
        return _envs(args.path)
    if args.cmd == "audit":
        from cdgtmll.lineage.audit import audit

        try:
            rep = audit(args.path, tuple(args.cell) if args.cell else None, allow_stale=args.allow_stale,
                        allow_mixed=args.allow_mixed)
        except (FileNotFoundError, KeyError) as exc:
            print(f"audit: {exc}", file=sys.stderr)
            return 2
        print("\n".join(rep.lines))
        if rep.warnings:
            print("\nAUDIT WARNINGS:", file=sys.stderr)
            for w in rep.warnings:
                print(f"  {w}", file=sys.stderr)
        if rep.problems:
            print("\nAUDIT FAILED:", file=sys.stderr)
            for p_ in rep.problems:
                print(f"  {p_}", file=sys.stderr)
            return 1
        return 0
    if args.cmd == "methods":
        return _methods(_default_config(args.config))
    if args.cmd == "datasets":
        return _datasets(_default_config(args.config))
    return 1


if __name__ == "__main__":
    sys.exit(main())
