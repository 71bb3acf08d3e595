"""Load, validate and resolve the pipeline configuration.

Validation happens in two layers before any job starts:

1. the JSON schema ``schemas/config.schema.yaml`` (types, ranges, no unknown keys;
   defaults are filled in), and
2. semantic checks the schema cannot express: dataset names exist in the dataset
   registry (or ``data.custom``), method names exist in the method registry, every
   method's hyper-parameters are accepted by its constructor and lie in the range or
   type its class declares (``hparam_space``, :func:`cdgtmll.methods.base.check_hparams`),
   wherever they are set: ``methods``, ``aliases``, ``dataset_overrides`` or an
   ``@key=value`` override.

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


#: figures.pr_curve.highlight default: the methods the paper's PR paragraph compares
#: (Sec. 5, Fig. pr_tail: "+5 pp over MLC-NC, +8 pp over ASL, +14 pp over BCE").
PR_HIGHLIGHT_PAPER = ("CD-GTMLL", "MLC-NC", "ASL", "BCE")


def pr_highlight(config: dict) -> list[str] | None:
    """The methods the PR figure draws in colour (None: all of them)."""
    h = config["figures"].get("pr_curve", {}).get("highlight")
    if h == "all":
        return None
    return list(PR_HIGHLIGHT_PAPER if h is None else h)


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


def plugin_dirs(config_path: str | Path | None = None) -> list[Path]:
    """Folders the pipeline imports a config's ``plugins`` from (besides installed packages
    and ``PYTHONPATH``), so that ``cdgtmll check-config`` finds the same modules:

    * the working directory: Snakemake runs every job there as ``python -m cdgtmll.run``,
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

    from cdgtmll.methods import base  # the built-ins first: what a plugin adds is its own

    dirs = [Path(d) for d in (search or [])]
    for d in reversed(dirs):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    importlib.invalidate_caches()  # a plugin file written after this process started
    added: dict[str, list[str]] = {}
    for i, mod in enumerate(modules):
        before = set(base.available())
        try:
            importlib.import_module(mod)
        except Exception as exc:  # noqa: BLE001 - any import failure is a config error here
            raise ConfigError(f"{source}: config error at 'plugins[{i}]': "
                              f"{_plugin_failure(mod, exc, dirs)}") from None
        added[mod] = sorted(set(base.available()) - before)
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
    pattern = _schema()["properties"]["plugins"]["items"]["pattern"]
    for i, mod in enumerate(plugins):
        if not isinstance(mod, str) or not re.match(pattern, mod):
            raise ConfigError(f"{path}: config error at 'plugins[{i}]': expected a dotted module name, got {mod!r}")
    return plugins


def _semantic_checks(config: dict, source: str) -> None:
    from cdgtmll.data.registry import get_spec
    from cdgtmll.methods import base as methods

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
    for a, spec in aliases.items():
        if a in methods.available() or "@" in a:
            fail(f"aliases.{a}", "an alias must not shadow a registered method or contain '@'")
        if spec["method"] not in methods.available():
            fail(f"aliases.{a}.method", f"unknown method '{spec['method']}'; registered: {', '.join(methods.available())}")

    def check_method(m: str, key: str, dataset: str | None = None) -> None:
        try:
            registered, _ = resolve_method(config, m)
        except ConfigError as exc:
            fail(key, str(exc).split(": ", 1)[-1])
        if registered not in methods.available():
            fail(key, f"unknown method '{m}'; registered: {', '.join(methods.available())}"
                      + (f"; aliases: {', '.join(sorted(aliases))}" if aliases else ""))
        try:
            methods.build(registered, method_hparams(config, dataset or "", m))
        except methods.HparamError as exc:  # out of range: name the key that set it, down to the parameter
            base_name, at_over = split_method(m)
            d_over = config.get("dataset_overrides", {}).get(dataset or "", {})
            sources = [(f"dataset_overrides.{dataset}.{m}", d_over.get(m, {}) if m != registered else {}),
                       (f"dataset_overrides.{dataset}.{registered}", d_over.get(registered, {})),
                       (f"methods.{m}", config["methods"].get(m, {}) if m != registered else {}),
                       (key, at_over), (f"aliases.{base_name}.hparams", aliases.get(base_name, {}).get("hparams", {})),
                       (f"methods.{registered}", config["methods"].get(registered, {}))]  # method_hparams, reversed
            where = next((k for k, hp in sources if exc.param in hp), key)
            fail(f"{where}.{exc.param}", f"expected {exc.expected}, got {methods.format_value(exc.value)}"
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


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def config_hash(obj: Any) -> str:
    """sha256 of the canonical JSON form (key order and whitespace do not matter)."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


# ---------------------------------------------------------------- resolution


#: kinds of training variant: id prefix -> the number in the id (R-variants App. E.3;
#: label noise and occlusion Sec. 5.3). Ids are ``<kind><value:.2f>-s<seed>``.
VARIANT_KINDS = {"R": "severity", "N": "rate", "O": "gamma"}


def _variant_name(kind: str, value: float, seed: int) -> str:
    return f"{kind}{float(value):.2f}-s{int(seed)}"


def _parse_kind(variant: str, kind: str) -> tuple[float, int] | None:
    """``<kind>0.40-s1`` -> (0.40, 1); None for another kind or the clean data."""
    if variant == CLEAN or not variant.startswith(kind):
        return None
    try:
        value, seed = variant[1:].split("-s")
        return float(value), int(seed)
    except ValueError:
        raise ConfigError(f"variant '{variant}': expected '{CLEAN}' or '{kind}<{VARIANT_KINDS[kind]}>-s<seed>'") from None


def variant_id(severity: float, sampling_seed: int) -> str:
    """Wildcard value of an R-variant, e.g. ``R0.40-s1``."""
    return _variant_name("R", severity, sampling_seed)


def noise_id(rate: float, seed: int) -> str:
    """Label-noise variant, e.g. ``N0.10-s0``."""
    return _variant_name("N", rate, seed)


def occlusion_id(gamma: float, seed: int) -> str:
    """Occluded-training-images variant, e.g. ``O0.30-s0``."""
    return _variant_name("O", gamma, seed)


def parse_variant(variant: str) -> tuple[float, int] | None:
    """Inverse of :func:`variant_id`; ``None`` for the clean data and other kinds."""
    return _parse_kind(variant, "R")


def parse_noise(variant: str) -> tuple[float, int] | None:
    """``N0.10-s0`` -> (0.10, 0); None for other variants."""
    return _parse_kind(variant, "N")


def parse_occlusion(variant: str) -> tuple[float, int] | None:
    """``O0.10-s0`` -> (0.10, 0) (occluded training images, Sec. 5.3); None for other variants."""
    return _parse_kind(variant, "O")


def variant_setting(variant: str) -> str:
    """The table setting a variant belongs to: 'clean', 'R@0.40' (pooled over sampling
    seeds), 'N@0.10' (label noise) or 'O@0.10' (occlusion)."""
    if variant == CLEAN:
        return CLEAN
    for kind in VARIANT_KINDS:
        parsed = _parse_kind(variant, kind)
        if parsed is not None:
            return f"{kind}@{parsed[0]:.2f}"
    raise ConfigError(f"variant '{variant}': unknown kind")


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


def split_method(name: str) -> tuple[str, dict]:
    """``'CD-GTMLL@alpha=0.2,n_players=4'`` -> ``('CD-GTMLL', {'alpha': 0.2, 'n_players': 4})``.

    The ``@key=value`` suffix names a variant of a method with some hyper-parameters
    overridden (sensitivity sweeps); values are parsed as YAML scalars."""
    if "@" not in name:
        return name, {}
    base_name, _, spec = name.partition("@")
    over = {}
    for item in spec.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"method '{name}': expected '<method>@<key>=<value>[,<key>=<value>]'")
        over[key] = yaml.safe_load(value)
    return base_name, over


def resolve_method(config: dict, name: str) -> tuple[str, dict]:
    """(registered method, hyper-parameter overrides) for a method name, an alias from
    ``aliases`` (ablations: No-Curiosity, Single-Predictor, ...) or a ``@key=value`` variant."""
    base_name, over = split_method(name)
    alias = config.get("aliases", {}).get(base_name)
    if alias is not None:
        return alias["method"], {**alias.get("hparams", {}), **over}
    return base_name, over


def method_hparams(config: dict, dataset: str, method: str) -> dict:
    """methods.<registered> <- aliases/@-overrides <- methods.<name> <- dataset_overrides.<dataset>.<name>."""
    registered, over = resolve_method(config, method)
    hp = dict(config["methods"].get(registered, {}))
    hp.update(over)
    if method != registered:
        hp.update(config["methods"].get(method, {}))
    overrides = config.get("dataset_overrides", {}).get(dataset, {})
    hp.update(overrides.get(registered, {}))
    if method != registered:
        hp.update(overrides.get(method, {}))
    return hp


def is_image_dataset(config: dict, dataset: str) -> bool:
    """Whether ``dataset`` trains on images through a ResNet-50 (protocol backbone resnet50)."""
    return training_protocol(config, dataset).get("backbone") == "resnet50"


def finetunes_images(config: dict, dataset: str) -> bool:
    """Whether ``dataset`` trains a ResNet-50 end to end on its images (protocol backbone
    resnet50 and ``image_backbone.mode: finetune``) rather than on frozen features."""
    return is_image_dataset(config, dataset) and config.get("image_backbone", {}).get("mode", "finetune") == "finetune"


def not_runnable(config: dict, dataset: str, method: str) -> str | None:
    """The method's own reason it cannot run on this dataset here (e.g. no pretrained
    encoder, or it needs feature vectors while the dataset is fine-tuned on images)."""
    from cdgtmll.methods import base

    registered, _ = resolve_method(config, method)
    m = base.build(registered, method_hparams(config, dataset, method))
    reason = m.not_runnable_reason()
    if reason is None and finetunes_images(config, dataset):
        reason = base.image_input_reason(m)
    return reason


def _resolved_hparams(config: dict, dataset: str, method: str) -> dict:
    """Every hyper-parameter the job's method uses, code defaults included
    (:func:`cdgtmll.methods.base.resolved_hparams`): a changed default re-runs the job."""
    from cdgtmll.methods import base

    registered, _ = resolve_method(config, method)
    hp = base.resolved_hparams(registered, method_hparams(config, dataset, method), training_protocol(config, dataset))
    return json.loads(canonical_json(hp))


def run_spec(config: dict, dataset: str, variant: str, method: str) -> dict:
    """Everything that determines the result of one (dataset, variant, method) job."""
    spec = {
        "dataset": dataset,
        "variant": variant,
        "method": method,
        "registered_method": resolve_method(config, method)[0],
        "hparams": method_hparams(config, dataset, method),
        "resolved_hparams": _resolved_hparams(config, dataset, method),
        "training": training_protocol(config, dataset),
        "seeds": list(config["experiments"]["seeds"]),
        "device": config["experiments"].get("device", "auto"),
        "data": {k: config["data"][k] for k in ("val_fraction", "split_seed")},
        "r_variants": {k: config["r_variants"][k] for k in ("tail_fraction", "tie_seed")},
        "plugins": list(config.get("plugins", [])),
    }
    if is_image_dataset(config, dataset):
        spec["image_backbone"] = dict(config.get("image_backbone", {}))
    return spec


# ---------------------------------------------------------------- studies (figures)

SWEEP_PARAMS = {"alpha": "alpha", "players": "n_players"}


def study_methods(config: dict, study: str) -> list[str]:
    """Methods a study runs; sweeps expand to ``<method>@<param>=<value>``."""
    spec = config.get("studies", {}).get(study, {})
    if study == "diagnostics":
        return [spec.get("method", "CD-GTMLL")]
    if study in SWEEP_PARAMS:
        base_method = spec.get("method", "CD-GTMLL")
        return [f"{base_method}@{SWEEP_PARAMS[study]}={v}" for v in spec.get("values", [])]
    return list(spec.get("methods", []))


def study_jobs(config: dict) -> dict[str, list[tuple[str, str, str]]]:
    """(dataset, variant, method) jobs of each configured study."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for study, spec in config.get("studies", {}).items():
        d = spec["dataset"]
        ms = study_methods(config, study)
        if study == "noise":
            vs = [CLEAN] + [noise_id(r, s) for r in spec["rates"] for s in spec.get("sampling_seeds", [0])]
        elif study == "occlusion":
            # occluded training images exist only for image datasets; on tabular data only
            # the clean runs are made and the figure states that occlusion does not apply
            vs = [CLEAN]
            if is_image_dataset(config, d):
                vs += [occlusion_id(g, s) for g in spec["levels"] for s in spec.get("sampling_seeds", [0])]
        else:
            vs = [spec.get("variant", CLEAN)]
        out[study] = [(d, v, m) for v in vs for m in ms]
    return out
