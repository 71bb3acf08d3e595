"""cdgtmll.runtime.torch_optim: torch's optimizers without ``torch._dynamo`` on the locked torch:
the same bytes as ``opt.step()``; torch's own calls wherever the guard does not hold."""

from __future__ import annotations

import warnings

import pytest
import torch

from cdgtmll.runtime import torch_optim


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01, foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    return model, opt, sched


def _train(step, steps: int = 5) -> tuple[bytes, list[float]]:
    model, opt, sched = _setup()
    x, y = torch.randn(16, 6, generator=torch.Generator().manual_seed(1)), torch.rand(16, 3)
    lrs = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the LR scheduler warns when it sees no optimizer step
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
            step(opt)
            sched.step()
            lrs.append(sched.get_last_lr()[0])
    return b"".join(p.detach().numpy().tobytes() for p in model.parameters()), lrs


def test_the_locked_torch_is_the_source_the_bypasses_were_written_against():
    """An upgrade that changes one of the four upstream functions fails here (the bypasses would
    silently fall back), so that they are re-checked."""
    assert torch_optim._as_written(tuple(torch_optim._upstream().items()))


def test_the_unwrapped_step_trains_the_same_bytes_as_torchs_step(monkeypatch):
    monkeypatch.setattr(torch_optim, "bypass_applies", lambda: True)  # even where torch._dynamo is imported
    unwrapped = []
    real_unwrap = torch_optim.inspect.unwrap
    monkeypatch.setattr(torch_optim.inspect, "unwrap", lambda fn: unwrapped.append(fn) or real_unwrap(fn))
    assert _train(torch_optim.optimizer_step) == _train(lambda opt: opt.step())
    assert unwrapped, "the bypass was not taken"


def test_a_step_hook_takes_torchs_own_step(monkeypatch):
    monkeypatch.setattr(torch_optim, "bypass_applies", lambda: True)
    _, opt, _ = _setup()
    seen = []
    opt.register_step_pre_hook(lambda *a: seen.append("pre"))
    for p in opt.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    torch_optim.optimizer_step(opt)
    assert seen == ["pre"]


@pytest.mark.parametrize("change", ["changed", "missing"])
def test_a_changed_or_missing_upstream_function_takes_torchs_own_calls(monkeypatch, change):
    """The guard: another torch's ``_use_grad_for_differentiable`` (or none) turns both bypasses
    off; the step is then torch's ``opt.step()`` (never the unwrapped one) and trains the same."""
    if change == "changed":
        monkeypatch.setattr(torch_optim.optimizer_module, "_use_grad_for_differentiable", lambda func: func)
    else:
        monkeypatch.delattr(torch_optim.optimizer_module, "_use_grad_for_differentiable")
    assert not torch_optim.bypass_applies()
    assert torch_optim.eager_optimizer_methods() is False

    def no_unwrap(fn):
        raise AssertionError("the bypass ran although the guard does not hold")

    monkeypatch.setattr(torch_optim.inspect, "unwrap", no_unwrap)
    assert _train(torch_optim.optimizer_step) == _train(lambda opt: opt.step())
