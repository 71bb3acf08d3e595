"""Divergence detection for the trainer: the first step whose loss or gradient norm is
NaN or infinite stops training at once (:class:`TrainingDiverged`), with a message that
names the epoch, the step, the non-finite loss terms and the learning rates
(:func:`divergence_notes` adds the inputs and which checkpoint is left).
:class:`FiniteWatch` finds that step without a per-step device sync on CUDA."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn


class TrainingDiverged(FloatingPointError):
    """The loss or the gradient norm of a training step is NaN or infinite.

    Raised at that step (see the module docstring); attributes: ``epoch`` and ``step``
    (1-based, within the epoch), ``steps_per_epoch``, ``global_step``/``total_steps``,
    ``loss``, ``grad_norm`` (None if not checked), ``terms`` (the task's logged terms at
    that step), ``lrs`` (per parameter group, at that step), ``notes`` (context added by
    :func:`train`: method, inputs, checkpoint) and ``method``.
    """

    def __init__(self, epoch: int, step: int, steps_per_epoch: int, global_step: int, total_steps: int,
                 loss: float, grad_norm: float | None, terms: dict[str, float], lrs: dict[str, float]) -> None:
        self.epoch, self.step, self.steps_per_epoch = epoch, step, steps_per_epoch
        self.global_step, self.total_steps = global_step, total_steps
        self.loss, self.grad_norm, self.terms, self.lrs = loss, grad_norm, terms, lrs
        self.method: str | None = None
        self.notes: list[str] = []
        super().__init__(epoch, step)

    @property
    def bad_terms(self) -> list[str]:
        return [k for k, v in self.terms.items() if not math.isfinite(v)]

    def __str__(self) -> str:
        loss_bad = not math.isfinite(self.loss)
        grad_bad = self.grad_norm is not None and not math.isfinite(self.grad_norm)
        if loss_bad and grad_bad:
            what = f"the loss is {self.loss} and the gradient norm is {self.grad_norm}"
        elif loss_bad:
            what = f"the loss is {self.loss}"
        else:
            what = f"the gradient norm is {self.grad_norm} (the loss, {self.loss:.6g}, is finite)"
        msg = (f"{self.method + ': ' if self.method else ''}training diverged at epoch {self.epoch}, step "
               f"{self.step} of {self.steps_per_epoch} (global step {self.global_step} of {self.total_steps}): "
               f"{what}.")
        if self.terms:
            bad = self.bad_terms
            msg += (" Non-finite loss term(s): " + ", ".join(f"{k}={self.terms[k]}" for k in bad) + "."
                    if bad else " All logged loss terms are finite.")
        msg += " Learning rates at that step: " + ", ".join(f"{k}={v:.4g}" for k, v in self.lrs.items()) + "."
        for note in self.notes:
            msg += " " + note
        return msg


def divergence_notes(e: TrainingDiverged, Xtr: Any, Ytr: Any, rows: list[dict[str, Any]],
                      ckpt_path: Path, ckpt_epoch: int | None = None) -> list[str]:
    """What :func:`train` adds to a :class:`TrainingDiverged` message (failure path only):
    non-finite training inputs, and which checkpoint is left (``ckpt_epoch``: the epoch of
    the last checkpoint written, default the last finished epoch)."""
    bad_inputs = [f"{name} holds {what}." for name, a in (("X_train", Xtr), ("Y_train", Ytr))
                  if (what := nonfinite_summary(a))]
    if ckpt_epoch is None and rows:
        ckpt_epoch = int(rows[-1]["epoch"])
    if rows and ckpt_epoch:
        kept = (f"Training stopped at once: nothing was written for epoch {e.epoch}; {ckpt_path} still holds "
                f"epoch {ckpt_epoch} (finite).")
    else:
        kept = f"Training stopped at once: no checkpoint of this run was written ({ckpt_path})."
    advice = "Fix the non-finite inputs." if bad_inputs else "Lower the learning rate(s) or check the inputs' scale."
    return [*bad_inputs, kept, advice]


def nonfinite_summary(a: Any) -> str:
    """'N non-finite value(s) (first at row r, column c)' for a dense or CSR array; '' if
    all finite or not an array (images)."""
    if sp.issparse(a):
        a = a.tocsr()
        bad = ~np.isfinite(a.data)
        if not bad.any():
            return ""
        k = int(np.flatnonzero(bad)[0])
        r = int(np.searchsorted(a.indptr, k, side="right") - 1)
        return f"{int(bad.sum())} non-finite value(s) (first at row {r}, column {int(a.indices[k])})"
    if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
        return ""
    bad = ~np.isfinite(a).reshape(a.shape[0], -1)
    if not bad.any():
        return ""
    r, c = divmod(int(np.flatnonzero(bad)[0]), bad.shape[1])
    return f"{int(bad.sum())} non-finite value(s) (first at row {r}, column {c})"


def grad_norm(model: nn.Module) -> torch.Tensor:
    """Global 2-norm of the gradients (a device tensor; not read on the host)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:  # on the parameters' device, so that keeping it there copies nothing
        return torch.zeros((), device=next((p.device for p in model.parameters()), None))
    get_total_norm = getattr(nn.utils, "get_total_norm", None)
    if get_total_norm is not None:
        return get_total_norm(grads)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))


class FiniteWatch:
    """Finds the first step of an epoch whose loss or gradient norm is NaN/inf.

    ``immediate`` (CPU, where reading a scalar is no device sync, and the GradScaler path,
    which syncs every step anyway): each step's loss and norm are read at once, so
    training stops at the bad step. Otherwise (CUDA) no step waits for the device: the
    step's ``[loss, *terms]`` and norm tensors are only kept (no copy, no kernel); every
    :data:`POLL_SECONDS` the latest loss and norm go to pinned host memory
    (``non_blocking``) and are read once their CUDA event has completed, so training
    stops within about that time of a bad step; the kept tensors, read on such a hit or
    after the epoch's existing sync (``finish``), give the first bad step. Call
    ``start(steps)`` per epoch; results are ``(step index, [loss, *terms], grad norm or
    None)``.
    """

    POLL_SECONDS = 0.25

    def __init__(self, device: torch.device, immediate: bool) -> None:
        self.immediate = immediate
        self.poll = not immediate and device.type == "cuda"
        self.host = torch.empty(2, dtype=torch.float64).pin_memory() if self.poll else None  # reused
        self.event = torch.cuda.Event() if self.poll else None
        self.start(0)

    def start(self, n_steps: int) -> None:
        self.vecs: list[torch.Tensor] = []
        self.gnorms: list[torch.Tensor | None] = []
        self.pending, self.last_poll = False, time.perf_counter()

    def observe(self, b: int, loss: torch.Tensor, vec: torch.Tensor,
                gnorm: torch.Tensor | None) -> tuple[int, list[float], float | None] | None:
        if self.immediate:
            lv = loss.detach().item()
            gv = None if gnorm is None else float(torch.as_tensor(gnorm).detach())
            if math.isfinite(lv) and (gv is None or math.isfinite(gv)):
                return None
            return b, vec.tolist(), gv
        gnorm = None if gnorm is None else torch.as_tensor(gnorm, device=vec.device).detach()
        self.vecs.append(vec)
        self.gnorms.append(gnorm)
        if self.poll:
            if self.pending and self.event.query():
                self.pending = False
                if not all(math.isfinite(v) for v in self.host.tolist()):
                    return self._first_bad()
            if not self.pending and time.perf_counter() - self.last_poll >= self.POLL_SECONDS:
                self.host.copy_(torch.stack([vec[0], vec[0] if gnorm is None else gnorm.to(vec.dtype)]),
                                non_blocking=True)
                self.event.record()
                self.pending, self.last_poll = True, time.perf_counter()
        return None

    def finish(self) -> tuple[int, list[float], float | None] | None:
        return None if self.immediate or not self.vecs else self._first_bad()

    def _first_bad(self) -> tuple[int, list[float], float | None] | None:
        V = torch.stack(self.vecs).double()
        has_g = all(g is not None for g in self.gnorms)
        G = torch.stack([g.double() for g in self.gnorms]) if has_g else V[:, 0]
        h = torch.cat([V, G.reshape(-1, 1)], dim=1).cpu().numpy()  # the one read of the epoch
        bad = ~(np.isfinite(h[:, 0]) & np.isfinite(h[:, -1]))
        if not bad.any():
            return None
        b = int(np.flatnonzero(bad)[0])
        values = h[b].tolist()
        gv = values.pop()
        return b, values, gv if has_g else None
