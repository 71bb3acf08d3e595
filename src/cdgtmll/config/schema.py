"""The configuration's JSON schema (``schema.yaml`` beside this file: types, ranges, no unknown
keys; defaults are filled in) and the error every configuration problem raises."""

from __future__ import annotations

import copy
from importlib import resources

import jsonschema
import yaml


class ConfigError(ValueError):
    """A configuration problem; the message names the key."""


def schema_document() -> dict:
    """The parsed ``schema.yaml``."""
    text = resources.files("cdgtmll.config").joinpath("schema.yaml").read_text(encoding="utf-8")
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


def validate_schema(config: dict, source: str = "config") -> None:
    """Check ``config`` against the schema in place, filling defaults. Raises ConfigError naming
    up to five offending keys."""
    schema = schema_document()
    Validator = _with_defaults(jsonschema.Draft202012Validator)
    errors = sorted(Validator(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(f"{source}: " + "; ".join(_describe(e) for e in errors[:5]))
