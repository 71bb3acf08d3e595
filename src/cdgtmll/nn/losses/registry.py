"""Loss registry: one signature, one reduction convention for every loss-based method.

Signature: ``loss(logits, targets) -> scalar``, ``logits`` and ``targets`` float
tensors of shape ``[B, L]``. Reduction: **sum over labels, mean over the batch**
(the ASL convention, :func:`cdgtmll.nn.losses.common.reduce`), for every loss, so that loss
magnitudes and learning rates are comparable across methods.

Label statistics reach a loss only through its constructor: ``label_counts``
(n_k, positives per label in the training rows) and ``n_train`` (N).
Build a loss by name with :func:`build_loss`.

Every loss class declares the valid values of its own hyper-parameters (the constructor
arguments other than ``label_counts`` and ``n_train``) as JSON-schema fragments in
``hparam_space``, next to its ``__init__``; :func:`build_loss` and the loss-head
methods (:class:`cdgtmll.methods.neural.LossHeadMethod`, checked when the method is
built, i.e. at config validation) reject a value outside them, naming it.

The built-in losses live one per module (:data:`BUILTIN`) and are imported when first asked
for, so a training job imports only the loss it trains with: that is what makes a loss's
source an input of exactly its jobs (:mod:`cdgtmll.lineage.code`). A plugin registers more
with :func:`register_loss`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
from torch import nn

#: name -> module that defines (and registers) the built-in loss
BUILTIN: dict[str, str] = {name: f"cdgtmll.nn.losses.{name}" for name in ("bce", "focal", "asl", "dbl", "cb", "ldam", "logit_adjust")}

LOSSES: dict[str, type[nn.Module]] = {}


def register_loss(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    def deco(cls: type[nn.Module]) -> type[nn.Module]:
        if name in LOSSES:
            raise ValueError(f"loss '{name}' registered twice")
        LOSSES[name] = cls
        return cls

    return deco


def loss_module(name: str) -> str | None:
    """The module that defines loss ``name``: built-in (without importing it) or registered."""
    if name in BUILTIN:
        return BUILTIN[name]
    cls = LOSSES.get(name)
    return cls.__module__ if cls is not None else None


def loss_names() -> list[str]:
    """Every loss: the built-ins (imported now) and those plugins registered."""
    for module in BUILTIN.values():
        importlib.import_module(module)
    return sorted(LOSSES)


def loss_class(name: str) -> type[nn.Module]:
    """The class of loss ``name``, importing its built-in module on first use."""
    if name not in LOSSES and name in BUILTIN:
        importlib.import_module(BUILTIN[name])
    try:
        return LOSSES[name]
    except KeyError:
        raise KeyError(f"unknown loss '{name}'; registered: {', '.join(loss_names())}") from None


def loss_hparam_space(name: str) -> dict[str, dict[str, Any]]:
    """Declared spaces of loss ``name``'s hyper-parameters (``hparam_space`` of its class
    and its bases, the most derived winning)."""
    out: dict[str, dict[str, Any]] = {}
    for klass in loss_class(name).__mro__:
        for k, frag in vars(klass).get("hparam_space", {}).items():
            out.setdefault(k, frag)
    return out


def build_loss(name: str, label_counts: np.ndarray, n_train: int, **hparams) -> nn.Module:
    """Instantiate a registered loss. Every loss constructor accepts
    ``(label_counts, n_train, **hparams)``; unknown hyper-parameters raise, and so does
    a value outside the loss's declared ``hparam_space``."""
    cls = loss_class(name)
    params = set(inspect.signature(cls.__init__).parameters) - {"self", "label_counts", "n_train"}
    unknown = sorted(set(hparams) - params)
    if unknown:
        raise ValueError(f"loss '{name}': unknown hyper-parameter(s) {unknown}; allowed: {sorted(params)}")
    from cdgtmll.methods.base import check_values  # lazy: cdgtmll.methods imports this module

    check_values(f"loss '{name}'", loss_hparam_space(name), hparams)
    return cls(label_counts=np.asarray(label_counts), n_train=int(n_train), **hparams)
