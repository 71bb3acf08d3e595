"""The one interface every method implements, and the name -> class registry.

A method is trained by :meth:`Method.fit` on :class:`FitData` (train and validation
rows of one dataset variant, plus label statistics computed on the training rows)
and scored by :meth:`Method.predict_proba`, which returns probabilities in [0, 1]
of shape ``[n, L]``. Thresholding and metrics happen outside the method, in
:mod:`cdgtmll.evaluate`, identically for every method, so that only the method
differs between rows of a table.

Hyper-parameters come from config (``methods.<name>`` in config.yaml) as keyword
arguments of the constructor; unknown keys are an error.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cdgtmll.labels import label_counts, tail_labels


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
    #: are (:class:`cdgtmll.nn.image_input.ImageSource`); None for feature matrices.
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
    progress: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class NotRunnable(RuntimeError):
    """A method that cannot run in this environment (e.g. it needs a pretrained encoder
    that is not configured). The pipeline does not schedule it; tables say why."""


class Method(ABC):
    """Base class. Subclasses set ``name`` and implement ``fit`` and ``predict_proba``."""

    name: str = ""
    #: free text shown in the methods page and tables' footnotes
    description: str = ""

    @abstractmethod
    def fit(self, data: FitData, ctx: RunContext) -> "Method": ...

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

    def extra_outputs(self) -> dict[str, Any]:
        """JSON-able diagnostics saved beside the run (e.g. the CD-GTMLL partition)."""
        return {}


def image_input_reason(method: Method) -> str | None:
    """Why ``method`` cannot run on fine-tuned image inputs, or None."""
    if method.supports_images():
        return None
    return (f"{method.name} needs feature vectors; with image_backbone.mode finetune its inputs would be "
            "images (mode frozen runs it on ResNet-50 features)")


_REGISTRY: dict[str, type[Method]] = {}


def register(name: str) -> Callable[[type[Method]], type[Method]]:
    def deco(cls: type[Method]) -> type[Method]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"method '{name}' registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def available() -> list[str]:
    return sorted(_REGISTRY)


def get(name: str) -> type[Method]:
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
    return cls(**hparams)
