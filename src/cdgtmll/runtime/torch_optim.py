"""torch's optimizers without importing ``torch._dynamo`` (eager execution only).

What it works around (torch 2.14.1): ``Optimizer.zero_grad``/``state_dict``/``load_state_dict``/
``add_param_group`` are wrapped by ``torch._compile._disable_dynamo``, which imports
``torch._dynamo`` at the first call only to build ``torch._dynamo.disable(fn)`` and caches it on
``fn`` as ``__dynamo_disable`` (the cache came with pytorch/pytorch#127325,
https://github.com/pytorch/pytorch/pull/127325). That wrapper tells ``torch.compile`` not to
trace ``fn``; in eager execution it just calls ``fn``. Every optimizer's ``step`` is wrapped by
``_use_grad_for_differentiable``, which imports ``torch._dynamo`` and calls its
``graph_break()`` (a no-op in eager execution) around the update it runs with gradients off,
and by ``Optimizer.profile_hook_step``, which runs the step hooks. Importing ``torch._dynamo``
brings sympy and the compiler's configuration; upstream's own work on not importing it
unconditionally: pytorch/pytorch#162595 (https://github.com/pytorch/pytorch/pull/162595).

* :func:`eager_optimizer_methods` seeds the ``__dynamo_disable`` cache with ``fn`` itself: the
  same calls, no import;
* :func:`optimizer_step` runs the optimizer's own ``step`` under ``torch.no_grad()`` and records
  ``opt._opt_called`` (what the LR scheduler's wrapper of ``opt.step`` records), where no hook is
  registered and the optimizer is not ``differentiable``: bit-identical to ``opt.step()``
  (tests/unit/runtime/test_torch_optim.py).

Measured gain (docs/benchmarks.md, "Run-time workarounds"; ``benchmarks/bench_runtime_workarounds.py
--only torch``): with :mod:`cdgtmll.runtime.torch_determinism`, a training process stays free of
``torch._dynamo`` and sympy, 1.5-1.8 s of CPU per training process (2026-11-28, 2 cores under
load 8-9: 2.2-2.4 s with both, 3.7-4.2 s without); the CPU per step does not change. Either
bypass alone gains nothing (the other path imports ``torch._dynamo``).

Guard: both bypasses apply only where the four upstream functions they stand in for are exactly
the sources they were written against (:data:`UPSTREAM_SHA256`), and only while
``torch._dynamo`` is not imported (then torch's own path costs nothing more); otherwise the
public calls run (the fallback). tests/unit/runtime/test_torch_optim.py fails on the locked
torch if they stop applying, so that an upgrade re-checks them.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable

import torch
import torch._compile
from torch.optim import lr_scheduler
from torch.optim import optimizer as optimizer_module

from cdgtmll.runtime.guard import source_is

#: the :class:`torch.optim.Optimizer` methods torch wraps with ``torch._compile._disable_dynamo``
DYNAMO_WRAPPED = ("zero_grad", "state_dict", "load_state_dict", "add_param_group")

#: sha256 of ``inspect.getsource`` of each upstream function the bypasses stand in for, torch 2.14.1
UPSTREAM_SHA256 = {
    "torch._compile._disable_dynamo": "ef3642a9e93efe6bcced49b030494c1620dadb4c595277051d24c0d384085cf7",
    "torch.optim.optimizer._use_grad_for_differentiable":
        "d0f1dfc940581f41ed5ca7ac151775cec6b36ff504e4ae3ce20747a37558ab38",
    "torch.optim.optimizer.Optimizer.profile_hook_step":
        "f692ce91e88c5496b04f1469972aff119bd8cc61f8b7a2233bf17c7c68370124",
    "torch.optim.lr_scheduler.LRScheduler.__init__": "b9c01b4cebb2f2f99ab4505d617c944da08373338422b40bcd41bb73563e791c",
}


def _upstream() -> dict[str, Callable | None]:
    opt = optimizer_module
    return {
        "torch._compile._disable_dynamo": getattr(torch._compile, "_disable_dynamo", None),
        "torch.optim.optimizer._use_grad_for_differentiable": getattr(opt, "_use_grad_for_differentiable", None),
        "torch.optim.optimizer.Optimizer.profile_hook_step": getattr(opt.Optimizer, "profile_hook_step", None),
        "torch.optim.lr_scheduler.LRScheduler.__init__": getattr(lr_scheduler.LRScheduler, "__init__", None),
    }


@functools.lru_cache(maxsize=4)
def _as_written(functions: tuple[tuple[str, Callable | None], ...]) -> bool:
    return all(source_is(fn, UPSTREAM_SHA256.get(name)) for name, fn in functions)


def bypass_applies() -> bool:
    """Whether the bypasses apply in this process now (module docstring, "Guard")."""
    return "torch._dynamo" not in sys.modules and _as_written(tuple(_upstream().items()))


def eager_optimizer_methods() -> bool:
    """Seed the ``__dynamo_disable`` cache of :data:`DYNAMO_WRAPPED` with the methods themselves,
    where the guard allows (module docstring); returns whether it did."""
    if not bypass_applies():
        return False
    for name in DYNAMO_WRAPPED:
        fn = getattr(getattr(torch.optim.Optimizer, name, None), "__wrapped__", None)
        if fn is not None and getattr(fn, "__dynamo_disable", None) is None:
            setattr(fn, "__dynamo_disable", fn)
    return True


def optimizer_step(opt: torch.optim.Optimizer) -> None:
    """``opt.step()``, without torch's per-step wrappers where the guard allows and they would
    do nothing but import ``torch._dynamo``: no step hook registered (the optimizer's or a
    global one), not ``differentiable``, ``opt.step`` torch's own or the LR scheduler's
    wrapper of it."""
    hooks = (opt._optimizer_step_pre_hooks, opt._optimizer_step_post_hooks,
             getattr(optimizer_module, "_global_optimizer_pre_hooks", None),
             getattr(optimizer_module, "_global_optimizer_post_hooks", None))
    step = getattr(opt.step, "__func__", None)
    own = step is type(opt).step or getattr(opt.step, "_wrapped_by_lr_sched", False)
    if not bypass_applies() or opt.defaults.get("differentiable") or any(h is None or h for h in hooks) or not own:
        opt.step()
        return
    with torch.no_grad():
        inspect.unwrap(type(opt).step)(opt)
    opt._opt_called = True  # what the LR scheduler's wrapper of opt.step records
