"""cdgtmll.runtime.torch_determinism: deterministic algorithms without the compiler stack on the
locked torch, the public function anywhere else."""

from __future__ import annotations

import torch

from cdgtmll.runtime import torch_determinism


def test_the_locked_torch_gets_the_bypass_and_the_same_flags():
    """The installed torch's ``use_deterministic_algorithms`` is the source the bypass was written
    against (an upgrade that changes it fails here, so that the bypass is re-checked), and the
    bypass sets the flags eager kernels read, as the public function does."""
    assert torch_determinism.bypass_applies()
    prev = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        for mode, warn_only in ((True, False), (True, True), (False, False)):
            torch_determinism.set_deterministic(mode, warn_only=warn_only)
            assert (torch.are_deterministic_algorithms_enabled(),
                    torch.is_deterministic_algorithms_warn_only_enabled()) == (mode, warn_only)
    finally:
        torch.use_deterministic_algorithms(prev[0], warn_only=prev[1])


def test_a_missing_private_setter_or_a_changed_public_function_takes_the_public_path(monkeypatch):
    calls = []

    def public(mode, *, warn_only=False):  # another torch's use_deterministic_algorithms
        calls.append((mode, warn_only))

    monkeypatch.setattr(torch, "use_deterministic_algorithms", public)
    assert not torch_determinism.bypass_applies()
    torch_determinism.set_deterministic(True, warn_only=True)
    assert calls == [(True, True)]
    monkeypatch.undo()

    monkeypatch.delattr(torch._C, "_set_deterministic_algorithms")
    monkeypatch.setattr(torch, "use_deterministic_algorithms", public)
    assert not torch_determinism.bypass_applies()
    torch_determinism.set_deterministic(False)
    assert calls == [(True, True), (False, False)]
