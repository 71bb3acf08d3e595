"""Load, validate and resolve the pipeline configuration.

Validation happens in two layers before any job starts:

1. the JSON schema ``schema.yaml`` (:mod:`cdgtmll.config.schema`) (types, ranges, no unknown keys;
   defaults are filled in), and
2. semantic checks the schema cannot express: dataset names exist in the dataset
   registry (or ``data.custom``), method names exist in the method registry, every
   method's hyper-parameters are accepted by its constructor and lie in the range or
   type its class declares (``hparam_space``, :func:`cdgtmll.methods.base.check_hparams`),
   wherever they are set: ``methods``, ``aliases``, ``dataset_overrides`` or an
   ``@key=value`` override.

Every error names the offending key as a dotted path, e.g.
``config error at 'training.yeast.epocs': unknown key (allowed: batch_size, epochs, ...)``.

Run specs and study jobs are planned in :mod:`cdgtmll.config.plan`.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from cdgtmll.config.plan import method_hparams, resolve_method, split_method, study_methods
from cdgtmll.config.plugins import import_plugins
from cdgtmll.config.schema import ConfigError, validate_schema


def validate(config: dict, source: str = "config") -> dict:
    """Validate ``config`` in place (filling defaults) and return it. Raises ConfigError."""
    validate_schema(config, source)
    _semantic_checks(config, source)
    _default_figures(config)
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
    from cdgtmll.methods import base, catalog

    import_plugins(config.get("plugins", []), source)

    def fail(key: str, msg: str) -> None:
        raise ConfigError(f"{source}: config error at '{key}': {msg}")

    from cdgtmll.data.registry import spec_from_config

    custom = config["data"].get("custom", {})
    known = set(custom)
    for name, cfg in custom.items():
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
    known_methods = catalog.available()
    for a, spec in aliases.items():
        if a in known_methods or "@" in a:
            fail(f"aliases.{a}", "an alias must not shadow a registered method or contain '@'")
        if spec["method"] not in known_methods:
            fail(f"aliases.{a}.method", f"unknown method '{spec['method']}'; registered: {', '.join(known_methods)}")

    def check_method(m: str, key: str, dataset: str | None = None) -> None:
        try:
            registered, _ = resolve_method(config, m)
        except ConfigError as exc:
            fail(key, str(exc).split(": ", 1)[-1])
        if registered not in known_methods:
            fail(key, f"unknown method '{m}'; registered: {', '.join(known_methods)}"
                      + (f"; aliases: {', '.join(sorted(aliases))}" if aliases else ""))
        try:
            catalog.check(registered, method_hparams(config, dataset or "", m))
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
        if "dataset" in spec:
            check_dataset(spec["dataset"], f"studies.{study}.dataset")
        for i, m in enumerate(study_methods(config, study)):
            check_method(m, f"studies.{study}.methods[{i}]", spec.get("dataset"))
    pr = config.get("figures", {}).get("pr_curve")
    if pr and "dataset" in pr:
        check_dataset(pr["dataset"], "figures.pr_curve.dataset")
    if pr and isinstance(pr.get("highlight"), list):
        for i, m in enumerate(pr["highlight"]):
            check_method(m, f"figures.pr_curve.highlight[{i}]")


def load(path: str | Path, overrides: dict | None = None) -> dict:
    """Read a YAML config file, apply ``overrides`` (deep merge) and validate it."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(config).__name__}")
    if overrides:
        config = deep_merge(config, overrides)
    return validate(config, source=str(path))


def deep_merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out
