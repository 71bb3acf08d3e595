"""The one interface every method implements, and the name -> class registry.

A method is trained by :meth:`Method.fit` on :class:`FitData` (train and validation
rows of one dataset variant, plus label statistics computed on the training rows)
and scored by :meth:`Method.predict_proba`, which returns probabilities in [0, 1]
of shape ``[n, L]``. Thresholding and metrics happen outside the method, in
:mod:`cdgtmll.metrics.evaluate_run`, identically for every method, so that only the method
differs between rows of a table.

Each method is declared once, as data (:class:`cdgtmll.methods.spec.MethodSpec`: the
built-ins in :mod:`cdgtmll.methods.builtin`, a plugin's passed to :func:`register`). The
registry maps a name to its spec, and to its class once the class's module is imported
(:func:`get` imports only that module). Planning and config validation read the specs alone
(:func:`check_hparams`, :func:`resolved_hparams`, :func:`not_runnable`), so they import neither
torch nor scikit-learn. Hyper-parameters come from config (``methods.<name>`` in config.yaml);
unknown names and values outside their declared space stop config validation, naming the
method, the hyper-parameter, the value and the range; :func:`build` calls the class with every
default of the spec filled in.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from abc import ABC, ABCMeta, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import jsonschema
import numpy as np

from cdgtmll.labels import label_counts, tail_labels
from cdgtmll.methods.builtin import BUILTIN
from cdgtmll.methods.requirements import encoder_reason, env_hparams, env_reason
from cdgtmll.methods.spec import MethodSpec

if TYPE_CHECKING:
    from cdgtmll.nn.progress import RunProgress


@dataclass
class FitData:
    """Training inputs of one run. ``Y_*`` are dense uint8 (or CSR for XMC)."""

    X_train: Any
    Y_train: Any
    X_val: Any
    Y_val: Any
    label_names: list[str]
    #: tail labels (bottom 20% by *clean* training prevalence, App. E.3/E.4);
    #: for an R-variant this is the tail of the original training split.
    tail: np.ndarray | None = None
    #: image datasets fine-tuned end to end: where the images of the row ids in ``X_*``
    #: are (:class:`cdgtmll.images.trainer_input.ImageSource`); None for feature matrices.
    images: Any = None

    def __post_init__(self) -> None:
        if self.tail is None:
            self.tail = tail_labels(self.Y_train)

    @property
    def n_labels(self) -> int:
        return int(self.Y_train.shape[1])

    @property
    def n_train(self) -> int:
        return int(self.Y_train.shape[0])

    @property
    def counts(self) -> np.ndarray:
        """n_k: positives per label in the (possibly down-sampled) training rows."""
        return label_counts(self.Y_train)


@dataclass
class RunContext:
    """Where and how a run executes."""

    seed: int
    workdir: Path  # checkpoints, train_log.csv and method artefacts go here
    device: str = "cpu"
    epochs: int | None = None  # overrides a method's default when set (e.g. tiny CI configs)
    batch_size: int | None = None
    progress: bool | RunProgress = False  # cdgtmll.nn.progress.RunProgress: per-epoch log lines
    extra: dict[str, Any] = field(default_factory=dict)


class NotRunnable(RuntimeError):
    """A method that cannot run in this environment (e.g. it needs a pretrained encoder
    that is not configured). The pipeline does not schedule it; tables say why."""


class _SpecDefaults(ABCMeta):
    """Calling a method class fills in its spec's defaults (:meth:`MethodSpec.arguments`): a
    constructor declares its hyper-parameters without defaults, and ``CDGTMLL()`` is CD-GTMLL
    with the defaults of its spec, as :func:`build` makes it."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        spec = getattr(cls, "spec", None)
        if spec is not None:
            kwargs = spec.arguments(kwargs)
        return super().__call__(*args, **kwargs)


class Method(ABC, metaclass=_SpecDefaults):
    """Base class. Subclasses set ``name`` and implement ``fit`` and ``predict_proba``."""

    #: the method's declaration (:class:`~cdgtmll.methods.spec.MethodSpec`); :func:`register` and
    #: :func:`get` set it, and the attributes below, from the spec: a class declares none of them
    spec: ClassVar[MethodSpec | None] = None
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    neural: ClassVar[bool] = False
    builds_on: ClassVar[str | None] = None
    deterministic: ClassVar[bool] = False

    @abstractmethod
    def fit(self, data: FitData, ctx: RunContext) -> Method: ...

    @abstractmethod
    def predict_proba(self, X: Any) -> np.ndarray: ...

    def supports_images(self) -> bool:
        """Whether the method can train end to end on images (``FitData.images``): a
        method that treats ``X`` as feature vectors (interpolates, selects or samples
        them, or fits a linear model on them) cannot, and is not scheduled on an image
        dataset with ``image_backbone.mode: finetune`` (:func:`image_input_reason`). Its
        spec's ``supports_images``."""
        return bool(self.spec is not None and self.spec.supports_images)

    def not_runnable_reason(self) -> str | None:
        """Why this configured method cannot run here (checked before scheduling), or None.
        Such rows appear in the tables as 'not run: <reason>', never as a substitute."""
        return None

    def decision_thresholds(self) -> np.ndarray | None:
        """Per-label thresholds of a method whose decision rule is part of the method
        (plug-in estimators tune them on validation, e.g. PE and SRB). ``None`` for
        the others. Evaluation reports them as the ``method`` block, and the tables'
        global-threshold mode uses them in place of the constant for that row (with a
        footnote), so that a two-step method is scored by its own rule."""
        return None

    @classmethod
    def table_note(cls, hparams: dict[str, Any]) -> str | None:
        """A footnote for the tables: how a run with these hyper-parameters differs from
        the method's paper (docs/methods.md has the full list). None: nothing to say."""
        return None

    def decision_thresholds_by_rule(self) -> dict[str, np.ndarray] | None:
        """Thresholds of each plug-in decision rule, for methods whose rule depends on the
        metric (PE, SRB: ``{"micro": [L] one shared value, "macro": [L] per label}``).
        Saved in ``predictions.npz`` as ``method_thresholds_<rule>``; evaluation scores
        Micro-F1 with the micro rule and Macro-/Rare-F1 with the macro rule. None for
        the others."""
        return None

    def extra_outputs(self) -> dict[str, Any]:
        """JSON-able diagnostics saved beside the run (e.g. the CD-GTMLL partition)."""
        return {}


def image_reason_text(name: str) -> str:
    """Why a method that needs feature vectors does not run on fine-tuned image inputs."""
    return (f"{name} needs feature vectors; with image_backbone.mode finetune its inputs would be "
            "images (mode frozen runs it on ResNet-50 features)")


def image_input_reason(method: Method) -> str | None:
    """Why ``method`` cannot run on fine-tuned image inputs, or None."""
    return None if method.supports_images() else image_reason_text(method.name)


#: name -> spec of every method: the built-ins (:data:`cdgtmll.methods.builtin.BUILTIN`, in their
#: order) and the plugins registered so far
_SPECS: dict[str, MethodSpec] = {s.name: s for s in BUILTIN}
#: name -> class of the methods whose implementation is imported
_CLASSES: dict[str, type[Method]] = {}


def builtin_names() -> list[str]:
    """The built-in methods, in the order of :data:`cdgtmll.methods.builtin.BUILTIN` (the figures')."""
    return [s.name for s in BUILTIN]


def registered() -> dict[str, MethodSpec]:
    """Every method's spec: the built-ins and the plugins imported so far. Imports nothing."""
    return dict(_SPECS)


def spec_of(name: str) -> MethodSpec:
    """The spec of method ``name``; a KeyError naming the registered methods otherwise."""
    try:
        return _SPECS[name]
    except KeyError:
        raise KeyError(f"unknown method '{name}'; registered methods: {', '.join(available())}") from None


def register(spec: MethodSpec | str) -> Callable[[type[Method]], type[Method]]:
    """Register a method class: ``@register(MethodSpec("Prior", description=..., hparams=...))`` for
    a plugin (``impl`` may be left empty: it is the decorated class), ``@register("BCE")`` for a
    class that implements a spec declared already (a built-in's, :mod:`cdgtmll.methods.builtin`).
    A plain name without a declared spec registers a method without hyper-parameters.

    The name becomes a run folder and a Snakemake wildcard value, so it must be one
    :func:`cdgtmll.config.names.name_problem` accepts; a plugin registering another is refused
    here, naming its module, before any job is planned."""
    from cdgtmll.config.names import name_problem

    def deco(cls: type[Method]) -> type[Method]:
        impl = f"{cls.__module__}:{cls.__qualname__}"
        if isinstance(spec, str):
            declared = _SPECS.get(spec) or MethodSpec(spec, impl=impl, description=cls.description)
        else:
            declared = dataclasses.replace(spec, impl=spec.impl or impl)
        name = declared.name
        problem = name_problem(name, "method")
        if problem is not None:
            raise ValueError(f"{cls.__module__}.{cls.__qualname__}: register({name!r}): {problem}")
        if declared.impl != impl:
            raise ValueError(f"method '{name}' is declared as {declared.impl}, not {impl}")
        if (name in _CLASSES and _CLASSES[name] is not cls) or (name in _SPECS and _SPECS[name] != declared):
            raise ValueError(f"method '{name}' registered twice")
        _bind(cls, declared)
        _SPECS[name] = declared
        _CLASSES[name] = cls
        return cls

    return deco


def _bind(cls: type[Method], spec: MethodSpec) -> None:
    """Give the class what its spec says of it (the class declares none of it itself)."""
    cls.spec = spec
    cls.name = spec.name
    cls.description = spec.description
    cls.neural = spec.neural
    cls.builds_on = spec.builds_on
    cls.deterministic = spec.deterministic


def available() -> list[str]:
    """Every registered method: the built-ins and the plugins imported so far. Imports nothing."""
    return sorted(_SPECS)


def get(name: str) -> type[Method]:
    """The class of method ``name``, its module imported on first use (only that one)."""
    if name not in _CLASSES:
        spec = spec_of(name)
        module = importlib.import_module(spec.module)
        if name not in _CLASSES:  # a class without @register: bind it here
            cls = getattr(module, spec.class_name)
            _bind(cls, spec)
            _CLASSES[name] = cls
    return _CLASSES[name]


def check_hparams(name: str, hparams: dict[str, Any]) -> None:
    """Check configured hyper-parameters of method ``name`` against its spec: an unknown name is a
    ValueError naming the allowed ones; a value outside its space is an :class:`HparamError`
    (a ValueError), e.g. ``method 'BR-LogReg': hyper-parameter 'C' = -1: expected a number > 0``."""
    spec = spec_of(name)
    unknown = spec.unknown(hparams)
    if unknown:
        raise ValueError(f"method '{name}': unknown hyper-parameter(s) {unknown}; allowed: {spec.accepted()}")
    check_values(f"method '{name}'", spec.space(), hparams)


def build(name: str, hparams: dict[str, Any] | None = None) -> Method:
    """Instantiate method ``name``: its hyper-parameters checked, every default of its spec filled
    in (:meth:`~cdgtmll.methods.spec.MethodSpec.arguments`), its class imported and called."""
    hparams = dict(hparams or {})
    check_hparams(name, hparams)
    return get(name)(**spec_of(name).arguments(hparams))


def build_for_protocol(name: str, hparams: dict[str, Any], training: dict[str, Any]) -> Method:
    """Instantiate ``name`` with its hyper-parameters plus those keys of the dataset's
    training protocol (epochs, batch_size, learning rates, ...) that it takes; classical
    methods take none of them and ignore the protocol."""
    return build(name, {**spec_of(name).from_protocol(training), **hparams})


def resolved_hparams(name: str, hparams: dict[str, Any], training: dict[str, Any]) -> dict[str, Any]:
    """Every hyper-parameter value a run of ``name`` uses, from its spec alone (nothing imported):
    the defaults, overlaid by the protocol keys it takes, its ``fixed`` entries and the configured
    values, plus an external library's environment entries (folder, lock and its sha256, pin).
    Part of the run spec, so that a changed *default* re-runs exactly the affected jobs, as a
    changed config value does. Entries of a class's ``hparams()`` that depend on an argument
    (ML-Decoder's ``loss_hparams`` follow ``loss``) are not here; the class reports them."""
    spec = spec_of(name)
    check_hparams(name, {**spec.from_protocol(training), **hparams})
    out = spec.resolved(hparams, training)
    if spec.env:
        out.update(env_hparams(spec.env))
    return out


def not_runnable(name: str, hparams: dict[str, Any], finetunes_images: bool) -> str | None:
    """Why ``name`` with ``hparams`` cannot run here, or None, from its spec (nothing built or
    downloaded): no usable encoder (``needs_encoder``), an environment not built (``env``), then,
    on a dataset fine-tuned on images, a method that needs feature vectors (``supports_images``)."""
    spec = spec_of(name)
    reason = None
    if spec.needs_encoder:
        reason = encoder_reason({**spec.defaults(), **hparams}.get("encoder"))
    elif spec.env:
        reason = env_reason(spec.env)
    if reason is None and finetunes_images and not spec.supports_images:
        reason = image_reason_text(name)
    return reason


# ------------------------------------------------------------- hyper-parameter ranges


class HparamError(ValueError):
    """A hyper-parameter value outside its declared space. ``owner`` is e.g.
    ``"method 'BR-LogReg'"``; ``expected`` describes the space (``"a number > 0"``)."""

    def __init__(self, owner: str, param: str, value: Any, expected: str) -> None:
        self.owner, self.param, self.value, self.expected = owner, param, value, expected
        super().__init__(f"{owner}: hyper-parameter '{param}' = {format_value(value)}: expected {expected}")


def check_values(owner: str, space: dict[str, dict], values: dict[str, Any]) -> None:
    """Validate ``values`` against the JSON-schema fragments of ``space`` (per key;
    numbers must also be finite). Raises :class:`HparamError` for the first bad value."""
    for key, value in values.items():
        frag = space.get(key)
        if frag is None:
            continue
        bad = isinstance(value, float) and not math.isfinite(value)
        if not bad:
            bad = next(jsonschema.Draft202012Validator(frag).iter_errors(value), None) is not None
        if bad:
            raise HparamError(owner, key, value, describe_space(frag))


def format_value(value: Any) -> str:
    """A value as the config (YAML) spells it: null, true/false, numbers, quoted strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


_TYPE_NAMES = {"number": "a number", "integer": "an integer", "boolean": "a boolean (true/false)",
               "string": "a string", "null": "null", "array": "a list", "object": "a mapping"}


def describe_space(frag: dict) -> str:
    """Plain-words form of a JSON-schema fragment: ``a number > 0``, ``an integer >= 1``,
    ``a number in [0, 1)``, ``one of 'jsd', 'kl'``, ``null or a number in (0, 1]``."""
    for comb in ("anyOf", "oneOf"):
        if comb in frag:
            return " or ".join(describe_space(f) for f in frag[comb])
    if "enum" in frag:
        return "one of " + ", ".join(format_value(v) for v in frag["enum"])
    if "const" in frag:
        return format_value(frag["const"])
    types = frag.get("type", [])
    types = [types] if isinstance(types, str) else list(types)

    def bound_of(inclusive: str, exclusive: str, brackets: str) -> tuple[str, Any] | None:
        if inclusive in frag:
            return brackets[0], frag[inclusive]
        return (brackets[1], frag[exclusive]) if exclusive in frag else None

    lo, hi = bound_of("minimum", "exclusiveMinimum", "[("), bound_of("maximum", "exclusiveMaximum", "])")
    if lo and hi:
        bound = f" in {lo[0]}{lo[1]}, {hi[1]}{hi[0]}"
    elif lo:
        bound = f" {'>=' if lo[0] == '[' else '>'} {lo[1]}"
    elif hi:
        bound = f" {'<=' if hi[0] == ']' else '<'} {hi[1]}"
    else:
        bound = ""
    parts = ["null"] if "null" in types else []
    parts += [_TYPE_NAMES.get(t, f"a {t}") + (bound if t in ("number", "integer") else "")
              for t in types if t != "null"]
    return " or ".join(parts) or "a value" + bound
