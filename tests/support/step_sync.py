"""Guards for the trainer's step loop (:func:`cdgtmll.nn.trainer.run_steps`), used by the CPU
proxy test (tests/unit/nn/test_step_sync.py) and the CUDA test (tests/cuda/test_cuda_sync.py).

:class:`HostReadGuard` is a torch function mode that raises :class:`HostRead` on every read of a
tensor's value on the host (``item``, ``float()``, ``int()``, ``bool()``, ``tolist``, ``cpu``,
``numpy``) and on every tensor built from host data for the training device (``torch.tensor`` /
``torch.as_tensor`` of numbers or lists with a ``device=`` other than the literal ``"cpu"``):
on CUDA each of these waits for the device. Tensors the step builds on the host without a device (the optimizer's step counter of
torch's for-loop AdamW, which lives on the CPU on every device) may be read. The batch loader
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

from cdgtmll.nn import trainer

READS = {torch.Tensor.__bool__, torch.Tensor.__float__, torch.Tensor.__int__, torch.Tensor.__index__,
         torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.numpy}
FROM_HOST = {torch.tensor, torch.as_tensor}


class HostRead(AssertionError):
    """A step read a tensor on the host, or copied host data to the device."""


class HostReadGuard(TorchFunctionMode):
    def __init__(self, host_tensors: list[torch.Tensor] = ()) -> None:
        super().__init__()
        self.paused = False
        self.host = list(host_tensors)  # kept alive, so that their ids stay theirs
        self.host_ids = {id(t) for t in self.host}

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not self.paused:
            if func in READS and not (args and id(args[0]) in self.host_ids):
                raise HostRead(f"host read in the step loop: Tensor.{func.__name__}")
            if func in FROM_HOST and args and not isinstance(args[0], torch.Tensor) and _for_device(kwargs):
                raise HostRead(f"host-to-device copy in the step loop: torch.{func.__name__}({args[0]!r:.40})")
        out = func(*args, **kwargs)
        if func in FROM_HOST and not _for_device(kwargs) and isinstance(out, torch.Tensor):
            self.host.append(out)  # a host tensor (e.g. AdamW's step count): reading it waits for nothing
            self.host_ids.add(id(out))
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
