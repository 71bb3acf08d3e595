"""The entry modules of a training job's code identity (:mod:`cdgtmll.lineage.code`).

A training job's roots are the trainer (``cdgtmll.train``), the module that defines its method
(the registered spec's ``impl``, read without importing it) and the module of the loss it trains
with (``resolved_hparams.loss``: built-in loss ``name`` lives in ``cdgtmll.nn.losses.<name>``, a
plugin's loss in the module that registered it). Finding them needs the method and loss
registries, which :mod:`cdgtmll.lineage.code` does not import: every job that records provenance
imports that module (the package hash), and its closure would hold the registries too.
"""

from __future__ import annotations

import sys

from cdgtmll.config.run_spec import RunSpec
from cdgtmll.lineage.code import LOSS_PACKAGE, ROOT_PACKAGE, module_file


def method_module(method: str) -> str | None:
    """The module that defines registered method ``method`` (its spec's ``impl``: no import), or None."""
    from cdgtmll.methods import base

    spec = base.registered().get(method)
    return spec.module if spec is not None else None


def train_roots(spec: RunSpec) -> list[str]:
    """Entry modules of a training job: the trainer, the method's module and its loss's module."""
    roots = [f"{ROOT_PACKAGE}.train", method_module(spec.registered)]
    loss = (spec.resolved_hparams or {}).get("loss")
    if isinstance(loss, str):
        roots.append(f"{LOSS_PACKAGE}.{loss}" if module_file(f"{LOSS_PACKAGE}.{loss}") else _plugin_loss_module(loss))
    return [r for r in roots if r]


def _plugin_loss_module(name: str) -> str | None:
    if "torch" not in sys.modules:  # a plugin loss is registered only once its module was imported
        return None
    from cdgtmll.nn.losses.registry import loss_module

    return loss_module(name)
