"""Guards for the trainer's step loop (:func:`cdgtmll.nn.trainer.run_steps`), used by the CPU
proxy test (tests/unit/nn/test_step_sync.py) and the CUDA test (tests/cuda/test_cuda_sync.py).

:class:`HostReadGuard` is a torch function mode that raises :class:`HostRead` on every read of a
tensor's value on the host (``item``, ``float()``, ``int()``, ``bool()``, ``tolist``, ``cpu``,
``numpy``) of a device tensor, on every tensor built from host data for the training device
(``torch.tensor`` / ``torch.as_tensor`` of numbers or lists with a ``device=`` other than the
literal ``"cpu"``), and on every blocking copy of a host tensor to it (``.to(device)`` without
``non_blocking``): on CUDA each of these waits for the device. Tensors the step makes on the host
(the step counter of torch's for-loop AdamW, which lives on the CPU on every device, a CPU
generator's draws) may be read (:class:`HostReadGuard` says how they are told apart). The batch loader
runs unguarded (its work is on the host by design; on CUDA its copies are non-blocking).

:func:`guard_steps` wraps ``run_steps`` for one test with a guard per epoch and counts the
guarded epochs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from cdgtmll.nn import trainer

READS = {torch.Tensor.__bool__, torch.Tensor.__float__, torch.Tensor.__int__, torch.Tensor.__index__,
         torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.numpy}
FROM_HOST = {torch.tensor, torch.as_tensor}


class HostRead(AssertionError):
    """A step read a tensor on the host, or copied host data to the device."""


class HostReadGuard(TorchFunctionMode):
    """Host tensors are told from device tensors by where they come from: a tensor made in the
    step by a factory without a device (or with the literal ``"cpu"``), ``torch.from_numpy``, or
    an operation on host tensors only, is on the host (on CUDA too: e.g. a CPU generator's draws);
    everything else, the model, the data and what is computed from them, is on the device.
    Reading a host tensor is free; copying one to the device (``.to(device)``) must not block."""

    def __init__(self, host_tensors: list[torch.Tensor] = ()) -> None:
        super().__init__()
        self.paused = False
        self.host = list(host_tensors)  # kept alive, so that their ids stay theirs
        self.host_ids = {id(t) for t in self.host}

    def is_host(self, t: Any) -> bool:
        return id(t) in self.host_ids

    def _mark_host(self, out: Any) -> None:
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not self.is_host(t):
                self.host.append(t)
                self.host_ids.add(id(t))

    def __enter__(self) -> HostReadGuard:
        # torch.from_numpy does not pass through torch function modes: its results are marked here
        self._from_numpy = torch.from_numpy

        def from_numpy(a: Any) -> torch.Tensor:
            out = self._from_numpy(a)
            if not self.paused:
                self._mark_host(out)
            return out

        torch.from_numpy = from_numpy
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        torch.from_numpy = self._from_numpy
        super().__exit__(*exc)

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        data_from_host = func in FROM_HOST and args and not isinstance(args[0], torch.Tensor)
        if func in READS and not (args and self.is_host(args[0])):
            raise HostRead(f"host read in the step loop: Tensor.{func.__name__}")
        if data_from_host and _for_device(kwargs):
            raise HostRead(f"host-to-device copy in the step loop: torch.{func.__name__}({args[0]!r:.40})")
        to_device = func is torch.Tensor.to and _to_device(self, args, kwargs)
        if to_device and self.is_host(args[0]) and not (kwargs.get("non_blocking") or True in args[2:]):
            raise HostRead("blocking host-to-device copy in the step loop: Tensor.to")
        out = func(*args, **kwargs)
        if to_device:
            on_host = False
            if out is args[0] and self.is_host(out):  # a copy on CUDA, a no-op on the CPU: made a copy here
                out = out.clone()
        elif data_from_host or not tensors:  # a factory
            on_host = not _for_device(kwargs)
        else:
            on_host = all(self.is_host(t) for t in tensors) and not _for_device(kwargs)
        if on_host:  # e.g. AdamW's step count, a CPU generator's draws: reading them waits for nothing
            self._mark_host(out)
        return out

    def unguarded(self, batches: Any) -> Iterator:
        """``batches`` with the guard paused while each batch is fetched (the loader)."""
        it = iter(batches)
        while True:
            self.paused = True
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self.paused = False
            yield item


def _to_device(guard: HostReadGuard, args: tuple, kwargs: dict) -> bool:
    """Whether a ``Tensor.to`` call moves to the training device: a ``torch.device`` (or a device
    string other than ``"cpu"``), or the device of a tensor that is not on the host."""
    target = kwargs.get("device", args[1] if len(args) > 1 else None)
    if isinstance(target, torch.Tensor):
        return not guard.is_host(target)
    if isinstance(target, torch.device):
        return True
    return isinstance(target, str) and target != "cpu"


def _for_device(kwargs: dict) -> bool:
    """Whether a factory call names the training device: a ``device`` other than the literal
    ``"cpu"`` (code that means the host says so, as torch's AdamW does for its step counter;
    code that means the training device passes a ``torch.device``, the CPU one in this proxy)."""
    return kwargs.get("device") is not None and kwargs["device"] != "cpu"


def optimizer_host_steps(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The optimizer's per-parameter step counters that live on the host (torch's for-loop and
    foreach AdamW keep them on the CPU on every device)."""
    return [st["step"] for st in opt.state.values()
            if isinstance(st.get("step"), torch.Tensor) and st["step"].device.type == "cpu"]


def guard_steps(monkeypatch: Any, guard: Callable[[torch.optim.Optimizer], contextlib.AbstractContextManager],
                unguard_loader: bool = False, skip: int = 0) -> list[int]:
    """Run every :func:`trainer.run_steps` call under ``guard(opt)``; returns a list that gets
    one entry (the number of batches) per guarded epoch. ``unguard_loader``: the guard has an
    ``unguarded(batches)`` and the loader runs outside it. ``skip``: the first ``skip`` calls
    run unguarded (cuDNN's autotuner times each new input shape once, in the first epoch)."""
    orig = trainer.run_steps
    epochs: list[int] = []
    calls = [0]

    def wrapped(task, model, opt, sched, batches, *rest):
        calls[0] += 1
        if calls[0] <= skip:
            return orig(task, model, opt, sched, batches, *rest)
        with guard(opt) as g:
            counted = []

            def counting(it):
                for item in it:
                    counted.append(1)
                    yield item

            src = g.unguarded(batches) if unguard_loader else batches
            out = orig(task, model, opt, sched, counting(src), *rest)
        epochs.append(len(counted))
        return out

    monkeypatch.setattr(trainer, "run_steps", wrapped)
    return epochs


@contextlib.contextmanager
def cpu_proxy(opt: torch.optim.Optimizer) -> Iterator[HostReadGuard]:
    with HostReadGuard(optimizer_host_steps(opt)) as g:
        yield g


@contextlib.contextmanager
def cuda_sync_error(opt: torch.optim.Optimizer) -> Iterator[Any]:
    """``torch.cuda.set_sync_debug_mode("error")`` for the steps (restored after)."""
    torch.cuda.synchronize()
    prev = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield None
    finally:
        torch.cuda.set_sync_debug_mode(prev)
