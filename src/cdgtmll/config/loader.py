"""Load, validate and resolve the pipeline configuration.

Validation happens in two layers before any job starts:

1. the JSON schema ``schema.yaml`` (:mod:`cdgtmll.config.schema`) (types, ranges, no unknown keys;
   defaults are filled in), and
2. semantic checks the schema cannot express: every name that becomes a folder and a Snakemake
   wildcard value (``data.custom`` datasets, aliases, method entries) matches the one pattern of
   :mod:`cdgtmll.config.names`, dataset names exist in the dataset
   registry (or ``data.custom``), method names exist in the method registry, every
   method's hyper-parameters are declared by its spec and lie in the range or type declared
   there (:class:`cdgtmll.methods.spec.HParam`, :func:`cdgtmll.methods.base.check_hparams`),
   wherever they are set: ``methods``, ``aliases``, ``dataset_overrides`` or an
   ``@key=value`` override.

Config files are read with :mod:`cdgtmll.config.yaml12` (YAML 1.2 floats: ``1e-3`` is a number;
a key set twice in one mapping is an error naming the file and both lines), by :func:`load` and
by the Snakefile (:func:`load_files`).

Every error names the offending key as a dotted path, e.g.
``config error at 'training.yeast.epocs': unknown key (allowed: batch_size, epochs, ...)``.

Run specs and study jobs are planned in :mod:`cdgtmll.config.plan`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from cdgtmll.config import yaml12
from cdgtmll.config.names import name_problem
from cdgtmll.config.plan import method_hparams, resolve_method, run_spec, split_method, study_datasets, study_methods
from cdgtmll.config.plugins import import_plugins
from cdgtmll.config.schema import ConfigError, validate_schema


def validate(config: dict, source: str = "config") -> dict:
    """Validate ``config`` in place (filling defaults) and return it. Raises ConfigError."""
    validate_schema(config, source)
    _semantic_checks(config, source)
    _default_figures(config)
    _check_pr_curve(config, source)
    return config


def _default_figures(config: dict) -> None:
    """figures.pr_curve: the first run dataset with severities, at its largest severity."""
    pr = config["figures"].setdefault("pr_curve", {})
    if "dataset" in pr and "severity" in pr:
        return
    sev = config["r_variants"]["severities"]
    candidates = [d for d in config["experiments"]["datasets"] if sev.get(d)]
    if "dataset" not in pr and candidates:
        pr["dataset"] = candidates[0]
    if "dataset" in pr and "severity" not in pr and sev.get(pr["dataset"]):
        pr["severity"] = max(sev[pr["dataset"]])


def _semantic_checks(config: dict, source: str) -> None:
    from cdgtmll.data.registry import get_spec
    from cdgtmll.methods import base

    import_plugins(config.get("plugins", []), source)

    def fail(key: str, msg: str) -> None:
        raise ConfigError(f"{source}: config error at '{key}': {msg}")

    from cdgtmll.data.registry import spec_from_config

    custom = config["data"].get("custom", {})
    known = set(custom)
    for name, cfg in custom.items():
        if (problem := name_problem(name, "dataset")) is not None:
            fail(f"data.custom.{name}", problem)
        try:
            spec_from_config(name, cfg)
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    def check_dataset(name: str, key: str) -> None:
        if name in known:
            return
        try:
            get_spec(name)
        except KeyError as exc:
            fail(key, str(exc).strip("'\""))

    for i, d in enumerate(config["experiments"]["datasets"]):
        check_dataset(d, f"experiments.datasets[{i}]")
    if config["experiments"].get("r_variants", True):
        # a custom dataset without an entry here would silently get clean runs only
        severities = config["r_variants"]["severities"]
        for i, d in enumerate(config["experiments"]["datasets"]):
            if d in custom and d not in severities:
                fail(f"r_variants.severities.{d}",
                     f"custom dataset '{d}' (experiments.datasets[{i}]) has no R-variant severities, but "
                     f"experiments.r_variants is true; give them (e.g. r_variants.severities.{d}: [0.4, 0.5]), "
                     f"or [] to run '{d}' clean only, or set experiments.r_variants: false")
    for d in config["r_variants"]["severities"]:
        check_dataset(d, f"r_variants.severities.{d}")
    for d in config["training"]:
        if d != "default":
            check_dataset(d, f"training.{d}")
    aliases = config.get("aliases", {})
    known_methods = base.available()
    for a, spec in aliases.items():
        if (problem := name_problem(a, "alias")) is not None:
            fail(f"aliases.{a}", problem)
        if a in known_methods or "@" in a:
            fail(f"aliases.{a}", "an alias must not shadow a registered method or contain '@'")
        if spec["method"] not in known_methods:
            fail(f"aliases.{a}.method", f"unknown method '{spec['method']}'; registered: {', '.join(known_methods)}")

    def check_method(m: str, key: str, dataset: str | None = None) -> None:
        if (problem := name_problem(m, "method-entry")) is not None:
            fail(key, problem)
        try:
            registered, _ = resolve_method(config, m)
        except ConfigError as exc:
            fail(key, str(exc).split(": ", 1)[-1])
        if registered not in known_methods:
            fail(key, f"unknown method '{m}'; registered: {', '.join(known_methods)}"
                      + (f"; aliases: {', '.join(sorted(aliases))}" if aliases else ""))
        try:
            base.check_hparams(registered, method_hparams(config, dataset or "", m))
        except base.HparamError as exc:  # out of range: name the key that set it, down to the parameter
            base_name, at_over = split_method(m)
            d_over = config.get("dataset_overrides", {}).get(dataset or "", {})
            sources = [(f"dataset_overrides.{dataset}.{m}", d_over.get(m, {}) if m != registered else {}),
                       (f"dataset_overrides.{dataset}.{registered}", d_over.get(registered, {})),
                       (f"methods.{m}", config["methods"].get(m, {}) if m != registered else {}),
                       (key, at_over), (f"aliases.{base_name}.hparams", aliases.get(base_name, {}).get("hparams", {})),
                       (f"methods.{registered}", config["methods"].get(registered, {}))]  # method_hparams, reversed
            where = next((k for k, hp in sources if exc.param in hp), key)
            fail(f"{where}.{exc.param}", f"expected {exc.expected}, got {base.format_value(exc.value)}"
                 + (f" (in '{m}')" if where == key and m != registered else ""))
        except (TypeError, ValueError) as exc:
            fail(key, str(exc))

    for m in config["methods"]:  # hyper-parameter errors point at their definition first
        check_method(m, f"methods.{m}")
    for i, m in enumerate(config["experiments"]["methods"]):
        check_method(m, f"experiments.methods[{i}]")
    for d, per_method in config.get("dataset_overrides", {}).items():
        check_dataset(d, f"dataset_overrides.{d}")
        for m in per_method:
            check_method(m, f"dataset_overrides.{d}.{m}", d)
    for study, spec in config.get("studies", {}).items():
        datasets = study_datasets(spec) if "dataset" in spec else [None]
        for j, d in enumerate(datasets):
            where = f"studies.{study}.dataset" + ("" if isinstance(spec.get("dataset"), str) else f"[{j}]")
            if d is not None:
                check_dataset(d, where)
            try:
                ms = study_methods(config, study)
            except ConfigError as exc:  # a bad studies.<study>.under, named by its key
                raise ConfigError(f"{source}: {exc}") from None
            for i, m in enumerate(ms):
                check_method(m, f"studies.{study}.methods[{i}]", d)
    pr = config.get("figures", {}).get("pr_curve")
    if pr and "dataset" in pr:
        check_dataset(pr["dataset"], "figures.pr_curve.dataset")
    if pr and isinstance(pr.get("highlight"), list):
        for i, m in enumerate(pr["highlight"]):
            check_method(m, f"figures.pr_curve.highlight[{i}]")
    _check_distinct_runs(config, fail)


def _check_distinct_runs(config: dict, fail) -> None:
    """Two ``experiments.methods`` entries that make the same run on a dataset (an alias or an
    ``@key=value`` variant equal to its base) would be two table rows of one experiment. The
    run specs (:func:`cdgtmll.config.plan.run_spec`) are compared without the method's name and
    its configured ``hparams``, which ``resolved_hparams`` holds with the code defaults, so
    ``M@x=<M's value of x>`` is the same run as ``M``. Study runs are not compared: a sweep
    point may be a listed run (studies share runs)."""
    from cdgtmll.methods import base

    methods = config["experiments"]["methods"]
    for d in config["experiments"]["datasets"]:
        specs = []
        for i, m in enumerate(methods):
            try:
                spec = run_spec(config, d, "clean", m)
            except (base.HparamError, TypeError, ValueError) as exc:
                fail(f"experiments.methods[{i}]", f"on dataset '{d}': {exc}")
            spec = {k: v for k, v in spec.to_dict().items() if k not in ("method", "hparams")}
            for j, other in enumerate(specs):
                if other == spec:
                    fail(
                        f"experiments.methods[{i}]",
                        f"'{m}' makes the same run as experiments.methods[{j}] '{methods[j]}' on dataset '{d}' "
                        f"(same method, hyper-parameters and protocol): list one of them",
                    )
            specs.append(spec)


def _check_pr_curve(config: dict, source: str) -> None:
    """figures.pr_curve on a dataset that is run with R-variants must name one of its configured
    severities (after :func:`_default_figures`), or the PR figure would silently not be made
    (:func:`cdgtmll.config.plan.pr_curve_enabled`)."""
    pr = config["figures"].get("pr_curve", {})
    d = pr.get("dataset")
    if not config["experiments"].get("r_variants", True) or d not in config["experiments"]["datasets"]:
        return
    configured = config["r_variants"]["severities"].get(d, [])
    shown = f"r_variants.severities.{d}: [{', '.join(f'{s:g}' for s in configured)}]"
    if "severity" in pr and pr["severity"] not in configured:
        raise ConfigError(
            f"{source}: config error at 'figures.pr_curve.severity': {pr['severity']:g} is not a "
            f"configured severity of '{d}' ({shown}); the PR figure would not be made"
        )
    if "severity" not in pr:  # _default_figures found no severity for the dataset named
        raise ConfigError(
            f"{source}: config error at 'figures.pr_curve.dataset': '{d}' has no R-variant "
            f"severities ({shown}); the PR figure would not be made"
        )


def read_yaml(path: str | Path) -> dict:
    """One config file, parsed with :class:`cdgtmll.config.yaml12.Yaml12Loader`. Raises
    ConfigError naming the file (and for a duplicate key its path, both lines and the key)."""
    path = Path(path)
    try:
        config = yaml12.load(path.read_text(encoding="utf-8"))
    except yaml12.DuplicateKeyError as exc:
        raise ConfigError(f"{path}: config error at '{exc.path}': duplicate key '{exc.key}' {exc.where()}") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(config).__name__}")
    return config


def load_files(paths: Iterable[str | Path], overrides: Mapping | None = None, source: str | None = None,
               layer: tuple[str, Mapping] | None = None) -> dict:
    """Read config files with :func:`read_yaml`, merge them in order (a later file's keys win,
    as Snakemake merges several ``--configfile`` files), merge ``layer`` (``(name, mapping)``,
    e.g. the settings of DVC's params.yaml, :func:`cdgtmll.config.dvc_params.settings_layer`)
    and then ``overrides`` over them (e.g. Snakemake's ``--config KEY=VALUE``) and validate the
    result. ``source`` prefixes every validation error; by default the files (relative to the
    working directory where under it), ``+ <layer name>`` and ``+ --config`` when given."""
    paths = [Path(p) for p in paths]
    if source is None:  # relative to the working directory where under it (Snakemake makes them absolute)
        paths = [Path(os.path.relpath(p)) if p.is_absolute() and Path.cwd() in p.parents else p for p in paths]
    if not paths:
        raise ConfigError("no config file given")
    config: dict = {}
    for p in paths:
        config = deep_merge(config, read_yaml(p))
    if layer:
        config = deep_merge(config, _plain(layer[1]))
    if overrides:
        config = deep_merge(config, _plain(overrides))
    if source is None:
        source = (" + ".join(map(str, paths)) + (f" + {layer[0]}" if layer else "")
                  + (" + --config" if overrides else ""))
    return validate(config, source=source)


def _plain(obj):
    """Mappings (Snakemake keeps ``--config`` in immutable maps) as dicts, recursively."""
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def load(path: str | Path, overrides: dict | None = None) -> dict:
    """Read a YAML config file (:func:`read_yaml`), apply ``overrides`` (deep merge) and validate it."""
    return load_files([path], overrides, source=str(Path(path)))


def deep_merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out
