"""The run spec of one (dataset, variant, method) training job, typed: :class:`RunSpec`.

Planning makes it (:func:`cdgtmll.config.plan.run_spec`, with the ``base_run`` entry of a method
built on another run: :func:`cdgtmll.config.plan.base_run`); the Snakemake train rules hand it to
the job as JSON (``--spec``, :meth:`RunSpec.to_json`); the job parses it (:meth:`RunSpec.from_json`)
and records it in every seed's ``provenance.json`` as ``config``, with its sha256 as
``config_sha256`` (:meth:`RunSpec.sha256`); the audit and the lineage readers parse the recorded
one (:meth:`RunSpec.from_dict`).

The JSON form is the contract: :meth:`RunSpec.to_dict` gives exactly the mapping planning has
always produced (the same keys, an optional field only when it is set, the nested mappings as
planned), so the ``--spec`` text, the spec's sha256 and therefore every job's identity and every
recorded ``config_sha256`` are what they would be without this class. Parsing is strict: an unknown
or missing field, or a value of the wrong type, is an error (:class:`RunSpecError`) that names the
field and where the spec came from.

Optional fields (``None``: absent from the JSON form):

* ``registered_method``, ``resolved_hparams``, ``plugins``: always planned; a recorded spec
  without them is read as a spec whose ``method`` is a registered method, whose hyper-parameters
  are its configured ones and which imports no plugin;
* ``image_backbone``: the image settings of a dataset fine-tuned or featurised through ResNet-50;
* ``deterministic``: ``True`` for a method whose fit does not depend on the seed (one seed);
* ``base_run``: the run a method built on another reads its first stage from, or why it fits it
  itself (:func:`cdgtmll.config.plan.base_run`).

This module imports only the standard library and :mod:`cdgtmll.io` (Snakemake imports planning
when it parses the workflow).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdgtmll.io import config_hash


class RunSpecError(ValueError):
    """A run spec that is not one; the message names where it came from and the field."""


#: the keys of the nested mappings whose every key a job reads (the split and the tail rule), with
#: their types; planning copies exactly these keys from the config (cdgtmll.config.plan.run_spec)
DATA_KEYS = {"val_fraction": "number", "split_seed": "integer"}
R_VARIANTS_KEYS = {"tail_fraction": "number", "tie_seed": "integer"}
#: ``base_run``: ``{method, dir, spec_sha256}`` (read from that run) or ``{method, dir: null, reason}``
BASE_RUN_KEYS = ("method", "dir", "spec_sha256", "reason")


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Everything that determines the result of one (dataset, variant, method) job.

    Frozen: a field cannot be rebound (:func:`dataclasses.replace` makes a changed copy). The
    mapping fields are plain dicts so that the JSON form is the planned one; :meth:`to_dict`
    returns copies of them, and nothing may change them in place."""

    #: dataset name (the registry's, or ``data.custom``)
    dataset: str
    #: ``clean`` or an R, noise or occlusion variant id (:mod:`cdgtmll.variants.naming`)
    variant: str
    #: the name the job has in tables and figures: a registered method, an alias or an ``@`` variant
    method: str
    #: the registered method the name resolves to (:func:`cdgtmll.config.plan.resolve_method`)
    registered_method: str | None = None
    #: the configured hyper-parameters (:func:`cdgtmll.config.plan.method_hparams`)
    hparams: dict[str, Any]
    #: every hyper-parameter the method uses, code defaults included
    resolved_hparams: dict[str, Any] | None = None
    #: the protocol keys the method reads (:func:`cdgtmll.config.plan.method_protocol`)
    training: dict[str, Any]
    #: the seeds the job trains, in order
    seeds: tuple[int, ...]
    #: ``experiments.device``: ``auto``, ``cpu`` or ``cuda``
    device: str
    #: the validation split: ``{val_fraction, split_seed}``
    data: dict[str, Any]
    #: the tail rule: ``{tail_fraction, tie_seed}``
    r_variants: dict[str, Any]
    #: modules imported before the method is built (``plugins``)
    plugins: tuple[str, ...] | None = None
    #: ``image_backbone`` of an image dataset
    image_backbone: dict[str, Any] | None = None
    #: ``True`` for a method whose fit does not depend on the seed
    deterministic: bool | None = None
    #: the base run of a method built on another run
    base_run: dict[str, Any] | None = None

    # ------------------------------------------------------------------ derived

    @property
    def registered(self) -> str:
        """The registered method: ``registered_method``, else ``method`` (a spec without
        ``registered_method`` names a registered method)."""
        return self.registered_method or self.method

    @property
    def label(self) -> str:
        """``dataset/variant/method`` (the job's name in progress lines and messages)."""
        return f"{self.dataset}/{self.variant}/{self.method}"

    # ------------------------------------------------------------------ JSON form

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the fields in declaration order, an optional one only when set,
        tuples as lists, the mappings copied."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else copy.deepcopy(value)
        return out

    def to_json(self) -> str:
        """The ``--spec`` text of the train rules: ``json.dumps`` of :meth:`to_dict`, keys sorted."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def sha256(self) -> str:
        """sha256 of the canonical JSON form (:func:`cdgtmll.io.config_hash`): the job's
        ``config_sha256`` in provenance, and what a finished seed is matched by."""
        return config_hash(self.to_dict())

    @classmethod
    def from_json(cls, text: str, source: str) -> RunSpec:
        """Parse the JSON text of a run spec; ``source`` names where it came from in errors
        (``--spec``, a file)."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RunSpecError(f"run spec from {source}: not JSON ({exc})") from None
        return cls.from_dict(obj, source)

    @classmethod
    def from_dict(cls, obj: Any, source: str) -> RunSpec:
        """Parse the JSON form (:meth:`to_dict`) of a run spec, checking every field; ``source``
        names where it came from in errors (a ``provenance.json`` path, ``--spec``)."""
        where = f"run spec from {source}"
        if not isinstance(obj, Mapping):
            raise RunSpecError(f"{where}: expected a JSON object, got {_kind(obj)}")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in obj if k not in names]
        if unknown:
            raise RunSpecError(f"{where}: unknown field {', '.join(map(repr, unknown))} "
                               f"(a run spec has: {', '.join(names)})")
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        missing = [k for k in required if k not in obj]
        if missing:
            raise RunSpecError(f"{where}: missing field {', '.join(map(repr, missing))}")
        values = {}
        for name in names:
            if name not in obj:
                continue
            check = _CHECKS[name]
            value = obj[name]
            expected = check(value)
            if expected:
                raise RunSpecError(f"{where}: field '{name}': expected {expected}, got {_shown(value)}")
            values[name] = tuple(value) if name in ("seeds", "plugins") else copy.deepcopy(value)
        return cls(**values)


# ---------------------------------------------------------------------------- field checks
# Each returns what was expected when the value is not that, else ''.

def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            type(None): "null"}.get(type(value), "an object" if isinstance(value, Mapping) else type(value).__name__)


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return f"{_kind(value)} {text[:80] + '…' if len(text) > 80 else text}"


def _string(value: Any) -> str:
    return "" if isinstance(value, str) and value else "a non-empty string"


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _mapping(value: Any) -> str:
    return "" if isinstance(value, dict) and all(isinstance(k, str) for k in value) else "an object"


def _seeds(value: Any) -> str:
    return "" if isinstance(value, list) and all(_integer(s) for s in value) else "a list of integers"


def _plugins(value: Any) -> str:
    return "" if isinstance(value, list) and all(isinstance(p, str) and p for p in value) else "a list of module names"


def _true(value: Any) -> str:
    return "" if isinstance(value, bool) else "a boolean"


def _fixed(keys: dict[str, str]):
    """A mapping with exactly ``keys``, each a number or an integer."""
    want = "an object with " + ", ".join(f"{k} ({t})" for k, t in keys.items())

    def check(value: Any) -> str:
        if not isinstance(value, dict) or set(value) != set(keys):
            return want
        ok = all(_integer(value[k]) if t == "integer" else _number(value[k]) for k, t in keys.items())
        return "" if ok else want

    return check


def _base_run(value: Any) -> str:
    want = ("an object {method, dir, spec_sha256} (a base run read) or {method, dir: null, reason} "
            "(the first stage fitted by the run itself)")
    if not isinstance(value, dict) or not set(value) <= set(BASE_RUN_KEYS) or not isinstance(value.get("method"), str):
        return want
    if isinstance(value.get("dir"), str):
        return "" if set(value) == {"method", "dir", "spec_sha256"} and isinstance(value["spec_sha256"], str) else want
    return "" if "dir" in value and value["dir"] is None and isinstance(value.get("reason"), str) else want


_CHECKS = {
    "dataset": _string, "variant": _string, "method": _string, "registered_method": _string,
    "hparams": _mapping, "resolved_hparams": _mapping, "training": _mapping, "seeds": _seeds,
    "device": _string, "data": _fixed(DATA_KEYS), "r_variants": _fixed(R_VARIANTS_KEYS), "plugins": _plugins,
    "image_backbone": _mapping, "deterministic": _true, "base_run": _base_run,
}
