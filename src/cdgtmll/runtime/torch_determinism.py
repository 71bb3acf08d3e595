"""Deterministic algorithms on without importing torch's compiler stack.

What it works around (torch 2.14.1): ``torch.use_deterministic_algorithms(mode)`` first imports
``torch._inductor.config`` (which brings ``torch._dynamo`` and sympy) only to set
``torch._inductor.config.deterministic``, a flag that matters to ``torch.compile``'s generated
kernels alone; upstream made it do so in pytorch/pytorch#165950
(https://github.com/pytorch/pytorch/pull/165950). The package never compiles. The flag eager
kernels read (``torch.are_deterministic_algorithms_enabled()``) is set by
``torch._C._set_deterministic_algorithms``, which is what :func:`set_deterministic` calls; the
inductor flag is still set when that module is already imported, so code that compiles gets it.

Measured gain (docs/benchmarks.md, "Run-time workarounds"; ``benchmarks/bench_runtime_workarounds.py
--only torch``): together with :mod:`cdgtmll.runtime.torch_optim` it keeps a training process
free of ``torch._dynamo`` and sympy, 1.5-1.8 s of CPU per training process (2026-11-28, 2 cores
under load 8-9: 2.2-2.4 s with both, 3.7-4.2 s without). Alone it gains nothing: torch's
optimizers import ``torch._dynamo`` (and with it the compiler's configuration) unless that
module's bypasses apply too.

Guard: the bypass is taken only where ``torch._C._set_deterministic_algorithms`` exists and
``torch.use_deterministic_algorithms`` is exactly the source it was written against
(:data:`UPSTREAM_SHA256`); anything else calls the public function (the fallback: the same
flags, plus the compiler stack's import). tests/unit/runtime/test_torch_determinism.py fails on
the locked torch if the bypass stops applying, so that an upgrade re-checks it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import torch

from cdgtmll.runtime.guard import source_is

#: sha256 of ``inspect.getsource(torch.use_deterministic_algorithms)`` in torch 2.14.1
UPSTREAM_SHA256 = "d487404c86f9e76e6d57c2796d5bcdb84c514fcc616c1b50ed48ec8ff32e577b"


@functools.lru_cache(maxsize=4)
def _bypass_applies(public: Callable, setter: Callable | None) -> bool:
    if setter is None:
        return False
    return source_is(public, UPSTREAM_SHA256)


def bypass_applies() -> bool:
    """Whether :func:`set_deterministic` takes the bypass in this process (module docstring)."""
    return _bypass_applies(torch.use_deterministic_algorithms, getattr(torch._C, "_set_deterministic_algorithms", None))


def set_deterministic(mode: bool, warn_only: bool = False) -> None:
    """What ``torch.use_deterministic_algorithms(mode, warn_only=warn_only)`` does for eager
    execution, without importing the compiler stack where the guard allows (module docstring)."""
    if not bypass_applies():
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        return
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
    inductor_config = sys.modules.get("torch._inductor.config")
    if inductor_config is not None:
        inductor_config.deterministic = mode
