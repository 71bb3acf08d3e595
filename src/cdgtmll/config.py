"""Load, validate and resolve the pipeline configuration.

Validation happens in two layers before any job starts:

1. the JSON schema ``schemas/config.schema.yaml`` (types, ranges, no unknown keys;
   defaults are filled in), and
2. semantic checks the schema cannot express: dataset names exist in the dataset
   registry (or ``data.custom``), method names exist in the method registry, every
   method's hyper-parameters are accepted by its constructor.

Every error names the offending key as a dotted path, e.g.
``config error at 'training.yeast.epocs': unknown key (allowed: batch_size, epochs, ...)``.

The *run spec* of one (dataset, variant, method) job is the part of the config
that determines its result; its sha256 is recorded in the run's provenance and
is what Snakemake's params-based rerun trigger watches, so that a config change
re-runs only the affected jobs.
"""

from __future__ import annotations

import copy
import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CLEAN = "clean"


class ConfigError(ValueError):
    """A configuration problem; the message names the key."""


def _schema() -> dict:
    text = resources.files("cdgtmll").joinpath("schemas/config.schema.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _with_defaults(validator_cls: type) -> type:
    validate_props = validator_cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_cls, {"properties": set_defaults})


def _path(error: jsonschema.ValidationError) -> str:
    parts = []
    for p in error.absolute_path:
        parts.append(f"[{p}]" if isinstance(p, int) else (("." if parts else "") + str(p)))
    return "".join(parts) or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    where = _path(error)
    if error.validator == "additionalProperties" and error.validator_value is False:
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        key = f"{where}.{extra[0]}" if where != "<top level>" else extra[0]
        return f"config error at '{key}': unknown key (allowed: {', '.join(allowed)})"
    return f"config error at '{where}': {error.message}"


def validate(config: dict, source: str = "config") -> dict:
    """Validate ``config`` in place (filling defaults) and return it. Raises ConfigError."""
    schema = _schema()
    Validator = _with_defaults(jsonschema.Draft202012Validator)
    errors = sorted(Validator(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(f"{source}: " + "; ".join(_describe(e) for e in errors[:5]))
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


def pr_curve_enabled(config: dict) -> bool:
    pr = config["figures"].get("pr_curve", {})
    return bool(config["experiments"].get("r_variants", True) and "dataset" in pr and "severity" in pr
                and pr["dataset"] in config["experiments"]["datasets"]
                and pr["severity"] in config["r_variants"]["severities"].get(pr["dataset"], []))


def _semantic_checks(config: dict, source: str) -> None:
    from cdgtmll.data.registry import get_spec
    from cdgtmll.methods import base as methods

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
    for d in config["r_variants"]["severities"]:
        check_dataset(d, f"r_variants.severities.{d}")
    for d in config["training"]:
        if d != "default":
            check_dataset(d, f"training.{d}")
    for i, m in enumerate(config["experiments"]["methods"]):
        if m not in methods.available():
            fail(f"experiments.methods[{i}]", f"unknown method '{m}'; registered: {', '.join(methods.available())}")
    for m, hp in config["methods"].items():
        if m not in methods.available():
            fail(f"methods.{m}", f"unknown method '{m}'; registered: {', '.join(methods.available())}")
        try:
            methods.build(m, hp)
        except (TypeError, ValueError) as exc:
            fail(f"methods.{m}", str(exc))
    for d, per_method in config.get("dataset_overrides", {}).items():
        check_dataset(d, f"dataset_overrides.{d}")
        for m, hp in per_method.items():
            if m not in methods.available():
                fail(f"dataset_overrides.{d}.{m}", f"unknown method '{m}'; registered: {', '.join(methods.available())}")
            try:
                methods.build(m, method_hparams(config, d, m))
            except (TypeError, ValueError) as exc:
                fail(f"dataset_overrides.{d}.{m}", str(exc))
    pr = config.get("figures", {}).get("pr_curve")
    if pr and "dataset" in pr:
        check_dataset(pr["dataset"], "figures.pr_curve.dataset")


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


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def config_hash(obj: Any) -> str:
    """sha256 of the canonical JSON form (key order and whitespace do not matter)."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


# ---------------------------------------------------------------- resolution


def variant_id(severity: float, sampling_seed: int) -> str:
    """Wildcard value of an R-variant, e.g. ``R0.40-s1``."""
    return f"R{severity:.2f}-s{sampling_seed}"


def parse_variant(variant: str) -> tuple[float, int] | None:
    """Inverse of :func:`variant_id`; ``None`` for the clean data."""
    if variant == CLEAN:
        return None
    try:
        sev, seed = variant[1:].split("-s")
        return float(sev), int(seed)
    except ValueError:
        raise ConfigError(f"variant '{variant}': expected '{CLEAN}' or 'R<severity>-s<seed>'") from None


def variants(config: dict, dataset: str) -> list[str]:
    out = [CLEAN]
    if config["experiments"].get("r_variants", True):
        rv = config["r_variants"]
        for sev in rv["severities"].get(dataset, []):
            out += [variant_id(sev, s) for s in rv["sampling_seeds"]]
    return out


def training_protocol(config: dict, dataset: str) -> dict:
    proto = dict(config["training"]["default"])
    proto.update(config["training"].get(dataset, {}))
    return proto


def method_hparams(config: dict, dataset: str, method: str) -> dict:
    """methods.<method> with dataset_overrides.<dataset>.<method> merged over it."""
    hp = dict(config["methods"].get(method, {}))
    hp.update(config.get("dataset_overrides", {}).get(dataset, {}).get(method, {}))
    return hp


def not_runnable(config: dict, dataset: str, method: str) -> str | None:
    """The method's own reason it cannot run on this dataset here (e.g. no pretrained encoder)."""
    from cdgtmll.methods import base

    return base.build(method, method_hparams(config, dataset, method)).not_runnable_reason()


def run_spec(config: dict, dataset: str, variant: str, method: str) -> dict:
    """Everything that determines the result of one (dataset, variant, method) job."""
    return {
        "dataset": dataset,
        "variant": variant,
        "method": method,
        "hparams": method_hparams(config, dataset, method),
        "training": training_protocol(config, dataset),
        "seeds": list(config["experiments"]["seeds"]),
        "device": config["experiments"].get("device", "auto"),
        "data": {k: config["data"][k] for k in ("val_fraction", "split_seed")},
        "r_variants": {k: config["r_variants"][k] for k in ("tail_fraction", "tie_seed")},
    }
