"""The one interface every method implements, and the name -> class registry.

A method is trained by :meth:`Method.fit` on :class:`FitData` (train and validation
rows of one dataset variant, plus label statistics computed on the training rows)
and scored by :meth:`Method.predict_proba`, which returns probabilities in [0, 1]
of shape ``[n, L]``. Thresholding and metrics happen outside the method, in
:mod:`cdgtmll.metrics.evaluate_run`, identically for every method, so that only the method
differs between rows of a table.

Hyper-parameters come from config (``methods.<name>`` in config.yaml) as keyword
arguments of the constructor; unknown keys are an error. Each method class declares
the valid range of every hyper-parameter as a JSON-schema fragment
(:attr:`Method.hparam_space`, next to its ``__init__``); :func:`build` checks the given
values against them (:func:`check_hparams`) before the constructor runs, so a bad value
stops config validation, naming the method, the hyper-parameter, the value and the range.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import jsonschema
import numpy as np

from cdgtmll.labels import label_counts, tail_labels

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


class Method(ABC):
    """Base class. Subclasses set ``name`` and implement ``fit`` and ``predict_proba``."""

    name: str = ""
    #: free text shown in the methods page and tables' footnotes
    description: str = ""
    #: valid values of the hyper-parameters this class's ``__init__`` adds: one JSON-schema
    #: fragment per name, e.g. ``{"C": {"type": "number", "exclusiveMinimum": 0}}``.
    #: Subclasses inherit their parents' (:func:`hparam_space_of` merges them along the
    #: ``**trainer`` chain); every hyper-parameter of a registered method has one.
    hparam_space: ClassVar[dict[str, dict]] = {}
    #: whether ``fit`` trains on ``RunContext.device`` (a torch model: a GPU speeds it up).
    #: A cluster run asks a GPU for exactly these methods' training jobs
    #: (:func:`cdgtmll.config.plan.train_gpus`); the others (linear models, external
    #: libraries) run on CPUs.
    neural: ClassVar[bool] = False
    #: the registered method whose trained model this method's first stage is, bit for bit
    #: (PE, ETU and LSFA: ``"BCE"``), or None. Planning then gives the run the base method's run
    #: of the same dataset, variant, settings and seeds as an input (``base_run`` in the run
    #: spec: :func:`cdgtmll.config.plan.base_run`) and the method reads that run's model instead
    #: of training it again (:meth:`cdgtmll.methods.neural.NeuralMethod.fit`).
    builds_on: ClassVar[str | None] = None
    #: whether ``fit`` and the predictions provably do not depend on ``RunContext.seed`` (nor on
    #: any generator :func:`cdgtmll.train.set_seed` seeds): every seed would write the same bytes.
    #: Planning then trains such a method's run once, on the first seed of its list, and every
    #: table, claim and figure reads it as one run (n = 1: :func:`cdgtmll.config.plan.fit_seeds`).
    #: Declared per class only after reading its code; ``tests/unit/methods/test_deterministic.py``
    #: trains each declared method with two seeds on real data and compares the bytes.
    deterministic: ClassVar[bool] = False

    @classmethod
    def open_hparam_space(cls) -> dict[str, dict]:
        """Spaces of the free keywords an open ``__init__`` takes (e.g. a loss-head
        method's loss hyper-parameters, :class:`cdgtmll.methods.neural.LossHeadMethod`)."""
        return {}

    @abstractmethod
    def fit(self, data: FitData, ctx: RunContext) -> Method: ...

    @abstractmethod
    def predict_proba(self, X: Any) -> np.ndarray: ...

    def supports_images(self) -> bool:
        """Whether the method can train end to end on images (``FitData.images``): a
        method that treats ``X`` as feature vectors (interpolates, selects or samples
        them, or fits a linear model on them) cannot, and is not scheduled on an image
        dataset with ``image_backbone.mode: finetune`` (:func:`image_input_reason`)."""
        return False

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


_REGISTRY: dict[str, type[Method]] = {}

#: imports the built-in method modules: :func:`cdgtmll.methods.catalog.load_builtins`, set when that
#: package is imported (always before this module); this module imports none of them
_BUILTIN_LOADER: list[Callable[..., None]] = []


def set_builtin_loader(load: Callable[..., None]) -> None:
    _BUILTIN_LOADER[:] = [load]


def _load_builtins(name: str | None = None) -> None:
    """Import the built-in method modules: all of them, or (``name``) the one that defines ``name``
    where that is known without importing (:func:`cdgtmll.methods.catalog.load_builtins`)."""
    for load in _BUILTIN_LOADER:
        load(name)


def registered() -> dict[str, type[Method]]:
    """The methods registered so far (built-ins only once something loaded them; plugins
    once imported), without importing anything."""
    return dict(_REGISTRY)


def register(name: str) -> Callable[[type[Method]], type[Method]]:
    """Register a method class under ``name``. The name becomes a run folder and a Snakemake
    wildcard value, so it must be one :func:`cdgtmll.config.names.name_problem` accepts; a
    plugin registering another is refused here, naming its module, before any job is planned."""
    from cdgtmll.config.names import name_problem

    def deco(cls: type[Method]) -> type[Method]:
        problem = name_problem(name, "method")
        if problem is not None:
            raise ValueError(f"{cls.__module__}.{cls.__qualname__}: register({name!r}): {problem}")
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"method '{name}' registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def available() -> list[str]:
    """Every registered method: the built-ins (imported now if need be) and the plugins imported."""
    _load_builtins()
    return sorted(_REGISTRY)


def get(name: str) -> type[Method]:
    if name not in _REGISTRY:
        _load_builtins(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown method '{name}'; registered methods: {', '.join(available())}") from None


FORWARDED = "trainer"  # a ``**trainer`` parameter passes its keys on to the parent class


def hparam_names(cls: type) -> tuple[set[str], bool]:
    """Hyper-parameters a method class accepts: the named parameters of its ``__init__``
    and, through ``**trainer``, of its parents' (so subclasses of NeuralMethod need not
    repeat the trainer's). ``open`` is True when some ``__init__`` takes other free
    keywords (e.g. a loss's hyper-parameters), which that class validates itself."""
    names: set[str] = set()
    open_ = False
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        var_kw = [p.name for p in params if p.kind is p.VAR_KEYWORD]
        if not var_kw:
            break
        open_ = open_ or any(n != FORWARDED for n in var_kw)
    return names, open_


def build(name: str, hparams: dict[str, Any] | None = None) -> Method:
    """Instantiate a registered method; unknown hyper-parameters name themselves."""
    cls = get(name)
    hparams = dict(hparams or {})
    names, open_ = hparam_names(cls)
    if not open_:
        unknown = sorted(set(hparams) - names)
        if unknown:
            raise ValueError(f"method '{name}': unknown hyper-parameter(s) {unknown}; allowed: {sorted(names)}")
    check_hparams(name, hparams)
    return cls(**hparams)


def build_for_protocol(name: str, hparams: dict[str, Any], training: dict[str, Any]) -> Method:
    """Instantiate ``name`` with its hyper-parameters plus those keys of the dataset's
    training protocol (epochs, batch_size, learning rates, ...) that its constructor
    accepts; classical methods accept none of them and ignore the protocol."""
    accepted, _ = hparam_names(get(name))
    merged = {k: v for k, v in training.items() if k in accepted}
    merged.update(hparams)
    return build(name, merged)


def constructor_defaults(cls: type) -> dict[str, Any]:
    """Default values of the constructor parameters along the ``**trainer`` chain
    (the most derived class wins), as :func:`hparam_names` walks it."""
    out: dict[str, Any] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        params = inspect.signature(init).parameters.values()
        for p in params:
            if p.default is not p.empty and p.name != "self":
                out.setdefault(p.name, p.default)
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return out


def resolved_hparams(name: str, hparams: dict[str, Any], training: dict[str, Any]) -> dict[str, Any]:
    """Every hyper-parameter value a run of ``name`` actually uses: the constructor
    defaults, overlaid by the protocol keys and the configured values, plus what the
    method itself reports (``hparams()``, e.g. a loss's own defaults). Part of the run
    spec, so that a changed *code default* re-runs exactly the affected jobs, as a
    changed config value does."""
    m = build_for_protocol(name, hparams, training)
    accepted, _ = hparam_names(type(m))
    out = {**constructor_defaults(type(m)), **{k: v for k, v in training.items() if k in accepted}, **hparams}
    own = getattr(m, "hparams", None)
    if callable(own):
        out.update(own())
    return out


# ------------------------------------------------------------- hyper-parameter ranges


class HparamError(ValueError):
    """A hyper-parameter value outside its declared space. ``owner`` is e.g.
    ``"method 'BR-LogReg'"``; ``expected`` describes the space (``"a number > 0"``)."""

    def __init__(self, owner: str, param: str, value: Any, expected: str) -> None:
        self.owner, self.param, self.value, self.expected = owner, param, value, expected
        super().__init__(f"{owner}: hyper-parameter '{param}' = {format_value(value)}: expected {expected}")


def hparam_space_of(cls: type) -> dict[str, dict]:
    """The hyper-parameter space of a method class: the ``hparam_space`` declarations
    merged along the chain :func:`hparam_names` walks (the most derived class wins), plus
    the spaces of an open ``__init__``'s free keywords (:meth:`Method.open_hparam_space`)."""
    out: dict[str, dict] = {}
    for klass in cls.__mro__:
        if klass is object:
            continue
        for k, frag in klass.__dict__.get("hparam_space", {}).items():
            out.setdefault(k, frag)
        init = klass.__dict__.get("__init__")
        if init is not None and not any(
            p.kind is p.VAR_KEYWORD for p in inspect.signature(init).parameters.values()
        ):
            break
    extra = getattr(cls, "open_hparam_space", None)
    for k, frag in (extra() if callable(extra) else {}).items():
        out.setdefault(k, frag)
    return out


def check_hparams(name: str, hparams: dict[str, Any]) -> None:
    """Check the given hyper-parameter values of method ``name`` against its declared
    space; raises :class:`HparamError` (a ValueError) naming the first bad one, e.g.
    ``method 'BR-LogReg': hyper-parameter 'C' = -1: expected a number > 0``. Keys
    without a declared space are left to the constructor (unknown keys are reported
    by :func:`build`)."""
    check_values(f"method '{name}'", hparam_space_of(get(name)), hparams)


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


@functools.cache
def _training_properties() -> dict[str, dict]:
    from cdgtmll.config.schema import schema_document

    return schema_document()["$defs"]["training"]["properties"]


def training_hparam_space(names: Iterable[str], nullable: Iterable[str] = ()) -> dict[str, dict]:
    """The config schema's ``training`` block fragments of ``names`` (the shared
    trainer's hyper-parameters): one source of truth for their ranges, whether set under
    ``training.<dataset>`` or ``methods.<name>``. ``nullable`` names also accept None."""
    props, nullable = _training_properties(), set(nullable)
    out = {}
    for n in names:
        frag = {k: v for k, v in copy.deepcopy(props[n]).items() if k != "description"}
        if n in nullable:
            frag["type"] = [frag["type"], "null"]
        out[n] = frag
    return out
