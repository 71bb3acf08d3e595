"""What planning needs to know of each method, without importing the methods.

Planning (``snakemake -n``, ``cdgtmll check-config``, the Snakefile's parse before every run)
checks each configured method's hyper-parameters, finds what cannot run here and writes each
job's run spec. Asking the method classes would import their modules, i.e. torch and
scikit-learn (about 3.5 s of CPU with compiled bytecode, 10 s without), on every parse. The
*catalog* holds the same facts as data:

* per built-in method: its module and class, the hyper-parameters its constructor accepts
  (``open`` when it also takes free keywords, e.g. a loss's), their code defaults, their declared
  space, whether it trains on images end to end, what it needs to run (an isolated library
  environment, a pretrained encoder) and the constant entries its ``hparams()`` adds to the
  resolved hyper-parameters (e.g. ``loss: asl`` and the loss's defaults), whether it trains a
  torch model on the run's device (``neural``: a cluster run asks a GPU for its training jobs),
  the method whose trained model is its first stage (``builds_on``: PE, ETU, LSFA read BCE's run)
  and whether its fit does not depend on the seed (``deterministic``: its run is trained once);
* ``derived``: entries of ``hparams()`` whose value depends on a constructor argument (ML-Decoder's
  ``loss_hparams`` follows ``loss``). They are left out of the run spec here; the training job
  records them (``resolved_hparams`` in its provenance).

The catalog is built by importing every built-in module once (:func:`build_catalog`) and kept in
``$XDG_CACHE_HOME/cdgtmll/`` (default ``~/.cache``) under the sha256 of the package's source: a
changed source file gives a new key, so the catalog can never be older than the code. ``make
venv`` builds it (``python -m cdgtmll.methods.catalog``); the first parse after a code change
builds it again (and imports torch once). Plugin methods (the config's ``plugins``) are
user modules: they are imported and asked directly (:mod:`cdgtmll.methods.base`).

``tests/unit/methods/test_catalog.py`` checks that every answer here equals the classes' own
(:func:`cdgtmll.methods.base.build`, ``resolved_hparams``, ``not_runnable_reason``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from cdgtmll.io import atomic_write, canonical_json
from cdgtmll.methods import base
from cdgtmll.methods.requirements import encoder_reason, env_hparams, env_reason

#: the modules that define the built-in methods (each registers its methods when imported;
#: :func:`load_builtins`)
BUILTIN_MODULES = (
    "cdgtmll.methods.classic", "cdgtmll.methods.neural", "cdgtmll.methods.cdgtmll.model",
    "cdgtmll.methods.loss_methods", "cdgtmll.methods.two_step", "cdgtmll.methods.lcifs",
    "cdgtmll.methods.xmc.baselines", "cdgtmll.methods.xmc.peers", "cdgtmll.methods.architectures.common",
    "cdgtmll.methods.architectures.label_graph", "cdgtmll.methods.architectures.attention",
    "cdgtmll.methods.mlcnc", "cdgtmll.methods.data_side.balancemix", "cdgtmll.methods.data_side.mlbote",
    "cdgtmll.methods.data_side.lsfa",
)

FORMAT = 1
PACKAGE = Path(__file__).resolve().parents[1]


def source_sha256(root: Path = PACKAGE) -> str:
    """sha256 over every ``.py`` file of the package (path and bytes, in path order)."""
    h = hashlib.sha256(f"catalog-format-{FORMAT}".encode())
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def cache_path(sha: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "cdgtmll" / f"method-catalog-{sha[:20]}.json"


def _jsonable(value: Any) -> Any:
    return json.loads(canonical_json(value))


def describe_class(cls: type[base.Method]) -> dict[str, Any]:
    """The catalog entry of one method class (what :mod:`cdgtmll.methods.base` finds by
    introspection and by building it with its defaults)."""
    accepted, open_ = base.hparam_names(cls)
    defaults = base.constructor_defaults(cls)
    space = base.hparam_space_of(cls)
    m = cls()
    own = dict(m.hparams()) if callable(getattr(m, "hparams", None)) else {}
    env = getattr(cls, "env_name", None)
    if env is not None:
        own = {k: v for k, v in own.items() if k not in env_hparams(env)}
    derived: dict[str, list[str]] = {}
    for arg, frag in space.items():  # an argument with a few possible values: does any own entry follow it?
        for alt in frag.get("enum", [True, False] if frag.get("type") == "boolean" else []):
            if alt == defaults.get(arg):
                continue
            try:
                other = cls(**{arg: alt}).hparams()
            except Exception:  # noqa: BLE001 - an alternative the constructor refuses: nothing to compare
                continue
            for k, v in own.items():
                if k not in accepted and other.get(k) != v:
                    derived.setdefault(k, []).append(arg)
    static = {k: v for k, v in own.items() if k not in derived and (k not in defaults or defaults[k] != v)}
    return {
        "module": cls.__module__, "class": cls.__qualname__, "description": getattr(cls, "description", ""),
        "accepted": sorted(accepted), "open": open_, "defaults": _jsonable(defaults), "space": _jsonable(space),
        "supports_images": bool(m.supports_images()), "neural": bool(cls.neural),
        "deterministic": bool(cls.deterministic), "env": env,
        "needs_encoder": bool(getattr(cls, "needs_encoder", False)), "builds_on": getattr(cls, "builds_on", None),
        "static_hparams": _jsonable(static), "derived": {k: sorted(set(v)) for k, v in derived.items()},
    }


def build_catalog() -> dict[str, Any]:
    load_builtins()
    builtin = set(BUILTIN_MODULES)
    methods = {name: describe_class(base.get(name)) for name in base.registered()
               if base.get(name).__module__ in builtin}
    return {"format": FORMAT, "source_sha256": source_sha256(), "methods": methods}


@functools.lru_cache(maxsize=1)
def catalog() -> dict[str, Any]:
    """The catalog of this source tree: from the cache, else built and cached."""
    sha = source_sha256()
    path = cache_path(sha)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("source_sha256") == sha and data.get("format") == FORMAT:
            return data
    except (OSError, ValueError):
        pass
    data = build_catalog()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(data, indent=1, sort_keys=True))
    except OSError as exc:  # a read-only cache: still correct, only slower next time
        print(f"[cdgtmll] method catalog not cached ({path}: {exc})", file=sys.stderr)
    return data


def cached_module(name: str) -> str | None:
    """The module that defines built-in method ``name``, from this source tree's cached catalog
    only (never built here: building imports every method); None when there is no cached
    catalog or it does not list ``name``."""
    try:
        sha = source_sha256()
        data = json.loads(cache_path(sha).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("source_sha256") != sha or data.get("format") != FORMAT:
        return None
    entry = (data.get("methods") or {}).get(name)
    return entry.get("module") if isinstance(entry, dict) else None


def _entry(name: str) -> dict[str, Any] | None:
    return catalog()["methods"].get(name)


def available() -> list[str]:
    """Every method name: the built-ins and the plugins imported so far."""
    return sorted(set(catalog()["methods"]) | set(base.registered()))


def description(name: str) -> str:
    entry = _entry(name)
    return entry["description"] if entry is not None else base.get(name).description


def is_neural(name: str) -> bool:
    """Whether the method trains a torch model on the run's device (``Method.neural``)."""
    entry = _entry(name)
    return bool(entry["neural"]) if entry is not None else bool(base.get(name).neural)


def builds_on(name: str) -> str | None:
    """The method whose trained model is this method's first stage (``Method.builds_on``), or None."""
    entry = _entry(name)
    return entry.get("builds_on") if entry is not None else getattr(base.get(name), "builds_on", None)


def is_deterministic(name: str) -> bool:
    """Whether the method's fit and predictions do not depend on the seed (``Method.deterministic``):
    planning trains its run once (:func:`cdgtmll.config.plan.fit_seeds`)."""
    entry = _entry(name)
    return bool(entry.get("deterministic", False)) if entry is not None else bool(base.get(name).deterministic)


def check(name: str, hparams: dict[str, Any]) -> None:
    """What :func:`cdgtmll.methods.base.build` checks before building: unknown hyper-parameters
    (ValueError) and values outside their declared space (:class:`~cdgtmll.methods.base.HparamError`)."""
    entry = _entry(name)
    if entry is None:
        base.build(name, hparams)
        return
    if not entry["open"]:
        unknown = sorted(set(hparams) - set(entry["accepted"]))
        if unknown:
            raise ValueError(f"method '{name}': unknown hyper-parameter(s) {unknown}; allowed: {entry['accepted']}")
    base.check_values(f"method '{name}'", entry["space"], hparams)


def resolved_hparams(name: str, hparams: dict[str, Any], training: dict[str, Any]) -> dict[str, Any]:
    """:func:`cdgtmll.methods.base.resolved_hparams` from the catalog: code defaults, the
    protocol keys the constructor accepts, the configured values and the constant entries of
    ``hparams()`` (an external library's environment and pin included); ``derived`` entries
    are left out (module docstring)."""
    entry = _entry(name)
    if entry is None:
        return base.resolved_hparams(name, hparams, training)
    check(name, {**{k: v for k, v in training.items() if k in entry["accepted"]}, **hparams})
    out = {**entry["defaults"], **{k: v for k, v in training.items() if k in entry["accepted"]}}
    out.update(entry["static_hparams"])
    out.update(hparams)
    if entry["env"]:
        out.update(env_hparams(entry["env"]))
    return out


def not_runnable(name: str, hparams: dict[str, Any], finetunes_images: bool) -> str | None:
    """Why ``name`` with ``hparams`` cannot run here, or None: what its class's
    ``not_runnable_reason`` says, then :func:`cdgtmll.methods.base.image_input_reason` on a
    dataset fine-tuned on images. Nothing is built or downloaded to find out."""
    entry = _entry(name)
    if entry is None:
        m = base.build(name, hparams)
        reason = m.not_runnable_reason()
        return reason if reason is not None or not finetunes_images else base.image_input_reason(m)
    reason = None
    if entry["needs_encoder"]:
        reason = encoder_reason({**entry["defaults"], **hparams}.get("encoder"))
    elif entry["env"]:
        reason = env_reason(entry["env"])
    if reason is None and finetunes_images and not entry["supports_images"]:
        reason = base.image_reason_text(name)
    return reason


def load_builtins(name: str | None = None) -> None:
    """Import every built-in method module (a no-op once they are imported). With ``name``, only
    the module that defines that method when the method catalog of this source tree is cached
    (``make venv`` caches it): a training job then imports its own method and
    not the others (scikit-learn alone is about 1.1 s of CPU per process). Every module is
    imported when the catalog is not cached or does not name ``name``."""
    if name is not None:
        mod = cached_module(name)
        if mod is not None:
            importlib.import_module(mod)
            if name in base.registered():
                return
    for mod in BUILTIN_MODULES:
        importlib.import_module(mod)


def main() -> int:
    """Build (or find) the catalog of this source tree and print where it is."""
    data = catalog()
    print(f"{cache_path(data['source_sha256'])}: {len(data['methods'])} built-in methods")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

