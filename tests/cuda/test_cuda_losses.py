"""Every loss of the registry on a CUDA device: its per-label constants follow ``.to("cuda")``,
and the loss and its gradient equal the CPU's. The CPU checks are in
tests/unit/nn/test_losses.py."""

from __future__ import annotations

import pytest
import torch

from cdgtmll.nn.losses.registry import build_loss
from tests.support.losses import ALL_CONFIGS, COUNTS, N_TRAIN, random_batch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name,hp", ALL_CONFIGS, ids=lambda v: str(v))
def test_cuda_matches_cpu(name, hp):
    loss_cpu = build_loss(name, COUNTS, N_TRAIN, **hp)
    loss_gpu = build_loss(name, COUNTS, N_TRAIN, **hp).to("cuda")
    for buf in loss_gpu.buffers():
        assert buf.is_cuda
    z, y = random_batch(8, 3, seed=10)
    zc = z.clone().requires_grad_(True)
    zg = z.cuda().requires_grad_(True)
    lc, lg = loss_cpu(zc, y), loss_gpu(zg, y.cuda())
    assert lg.is_cuda
    lc.backward()
    lg.backward()
    torch.testing.assert_close(lg.cpu(), lc, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(zg.grad.cpu(), zc.grad, rtol=1e-5, atol=1e-6)
