"""The declaration of a method, as data: what planning, validation and building read.

A method is one :class:`MethodSpec` and one class. The spec says everything that is known
without importing the class (and so without torch or scikit-learn): its name, the class that
implements it (``impl = "module:Class"``, imported only when a run is built), a description, each
hyper-parameter with its default and its valid values (:class:`HParam`), and what the method is
(``neural``: it trains a torch model on the run's device; ``trainer``: it takes the shared
trainer's hyper-parameters, :func:`trainer_hparams`; ``supports_images``, ``builds_on``,
``deterministic``) and needs (``env``: an isolated library environment; ``needs_encoder``: a
pretrained encoder). The built-in specs are :data:`cdgtmll.methods.builtin.BUILTIN`; a plugin
passes its own to :func:`cdgtmll.methods.base.register`.

From a spec derive (:mod:`cdgtmll.methods.base`): the keyword arguments the class is called
with (every default filled in: :meth:`MethodSpec.arguments`), the check of configured values
(unknown names, values outside their space), and the run spec's ``resolved_hparams``
(:meth:`MethodSpec.resolved`): the defaults, the protocol keys the method takes, the constant
entries ``fixed`` and the configured values, so that a changed default re-runs exactly the
affected jobs, as a changed config value does.

This module imports nothing of the methods, nor torch.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any


class _Unset:
    """The default of a hyper-parameter whose value the implementation chooses (a loss's own
    default): the class is not given it unless configured, and the run spec records it only
    then."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class HParam:
    """One hyper-parameter: its default (or :data:`UNSET`), its valid values as a JSON-schema
    fragment (``{"type": "number", "exclusiveMinimum": 0}``; numbers must also be finite) and
    where the default comes from, in one of the forms :mod:`cdgtmll.methods.builtin` lists
    (``"paper App. E.1/E.2 (Yeast)"``, ``"official code <owner/repo> <file>@<commit>"``,
    ``"ours: <why>"``, ``"unverified: <what the docs say>"``)."""

    default: Any
    space: dict[str, Any]
    source: str = ""


#: The shared trainer's hyper-parameters (:class:`cdgtmll.methods.neural.NeuralMethod`) and
#: their defaults; their spaces are the config schema's ``training`` block (one source of truth,
#: whether set under ``training.<dataset>`` or ``methods.<name>``), where ``lr_head`` and
#: ``grad_clip`` may also be None (eta_head = eta_0; no clipping). ``select_epoch: last`` is the
#: paper's protocol (App. E.1/E.2 train a fixed number of epochs with cosine decay and use the
#: validation split only to tune thresholds); ``best_val`` is a reading of ours
#: (docs/methods.md "Epoch selection").
TRAINER_DEFAULTS: dict[str, Any] = {
    "epochs": 100, "batch_size": 256, "lr_backbone": 2e-3, "lr_head": None, "weight_decay": 1e-4,
    "grad_clip": 5.0, "hidden_dim": 512, "select_epoch": "last", "optimizer_impl": "auto",
    "allow_tf32": False, "cudnn_benchmark": "auto",
}  # fmt: skip
TRAINER_NULLABLE = ("lr_head", "grad_clip")
#: where a trainer default comes from, where it is not the paper's Yeast value (App. E.1/E.2)
TRAINER_SOURCES = {
    "lr_head": "ours: None is eta_0 (the paper gives no tabular eta_head)",
    "select_epoch": "paper protocol: the last epoch (App. E.1/E.2); best_val is ours",
    "optimizer_impl": "ours: by device", "allow_tf32": "ours: CUDA numerics", "cudnn_benchmark": "ours: CUDA numerics",
}
#: trainer settings an instance reports (``hparams()``, the checkpoint fingerprint) only when
#: not their default, as the fingerprints of runs trained before the settings existed did
TRAINER_WHEN_SET = ("optimizer_impl", "allow_tf32", "cudnn_benchmark")


@functools.cache
def _training_properties() -> dict[str, dict]:
    from cdgtmll.config.schema import schema_document  # the schema imports nothing of the methods

    return schema_document()["$defs"]["training"]["properties"]


def training_space(name: str, nullable: bool = False) -> dict[str, Any]:
    """The config schema's ``training`` block fragment of ``name`` (its description left out);
    ``nullable`` also accepts None."""
    frag = {k: v for k, v in copy.deepcopy(_training_properties()[name]).items() if k != "description"}
    if nullable:
        frag["type"] = [frag["type"], "null"]
    return frag


@functools.cache
def trainer_hparams() -> dict[str, HParam]:
    """The shared trainer's hyper-parameters (:data:`TRAINER_DEFAULTS`), every method with
    ``trainer=True`` takes them."""
    return {k: HParam(d, training_space(k, k in TRAINER_NULLABLE), TRAINER_SOURCES.get(k, "paper App. E.1/E.2 (Yeast)"))
            for k, d in TRAINER_DEFAULTS.items()}


@dataclass(frozen=True)
class MethodSpec:
    """One method, declared once (module docstring)."""

    name: str
    #: ``"package.module:Class"``: the class that implements the method, imported on first build;
    #: a plugin's may be left empty (:func:`cdgtmll.methods.base.register` fills it in)
    impl: str = ""
    description: str = ""
    #: the method's own hyper-parameters (the trainer's come with ``trainer``)
    hparams: dict[str, HParam] = field(default_factory=dict)
    #: takes the shared trainer's hyper-parameters (:func:`trainer_hparams`)
    trainer: bool = False
    #: trains a torch model on ``RunContext.device``: a cluster run asks a GPU for exactly these
    #: methods' training jobs (:func:`cdgtmll.config.plan.train_gpus`)
    neural: bool = False
    #: can train end to end on images (``FitData.images``); a method that treats ``X`` as feature
    #: vectors cannot, and is not scheduled on a dataset fine-tuned on images
    supports_images: bool = False
    #: the method whose trained model this method's first stage is, bit for bit (PE, ETU and
    #: LSFA: ``"BCE"``), or None: planning gives the run that method's run as an input
    #: (:func:`cdgtmll.config.plan.base_run`)
    builds_on: str | None = None
    #: fit and predictions provably do not depend on the seed: planning trains the run once, on
    #: the first seed (:func:`cdgtmll.config.plan.fit_seeds`); declared only after reading the
    #: code, ``tests/unit/methods/test_deterministic.py`` compares the bytes of two seeds
    deterministic: bool = False
    #: the isolated library environment (``.venv/xmc/<env>``) the method runs in, or None; its
    #: lock and the library's pin are part of the resolved hyper-parameters
    env: str | None = None
    #: needs a pretrained encoder (hyper-parameter ``encoder``)
    needs_encoder: bool = False
    #: constant entries of the resolved hyper-parameters that are no argument (``loss: bce``)
    fixed: dict[str, Any] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return self.impl.partition(":")[0]

    @property
    def class_name(self) -> str:
        return self.impl.partition(":")[2]

    def all_hparams(self) -> dict[str, HParam]:
        """Every hyper-parameter the method takes: the trainer's (with ``trainer``), then its own
        (which may redeclare one of the trainer's)."""
        return {**(trainer_hparams() if self.trainer else {}), **self.hparams}

    def accepted(self) -> list[str]:
        return sorted(self.all_hparams())

    def space(self) -> dict[str, dict[str, Any]]:
        return {k: h.space for k, h in self.all_hparams().items()}

    def defaults(self) -> dict[str, Any]:
        """The defaults of every hyper-parameter that has one (not :data:`UNSET`)."""
        return {k: h.default for k, h in self.all_hparams().items() if h.default is not UNSET}

    def from_protocol(self, training: dict[str, Any]) -> dict[str, Any]:
        """The keys of a dataset's training protocol that the method takes as arguments."""
        accepted = self.all_hparams()
        return {k: v for k, v in training.items() if k in accepted}

    def unknown(self, hparams: dict[str, Any]) -> list[str]:
        accepted = self.all_hparams()
        return sorted(k for k in hparams if k not in accepted)

    def arguments(self, hparams: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments the class is called with: every default, overlaid by ``hparams``."""
        return {**self.defaults(), **hparams}

    def resolved(self, hparams: dict[str, Any], training: dict[str, Any]) -> dict[str, Any]:
        """Every hyper-parameter value a run uses, as the run spec records it (without an
        environment's entries: :func:`cdgtmll.methods.base.resolved_hparams` adds them)."""
        return {**self.defaults(), **self.from_protocol(training), **self.fixed, **hparams}
