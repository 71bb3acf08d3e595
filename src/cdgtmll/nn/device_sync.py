"""Where reading a tensor's value on the host costs a device synchronisation.

The trainer's step loop (:func:`cdgtmll.nn.trainer.train_epoch`) reads no value of a training
tensor on the host on a device where that read waits for the device (CUDA): no ``.item()``,
``float()``, ``bool()``, ``.tolist()``, ``.cpu()`` or ``.numpy()`` of a step's tensors, and
no tensor built from host data (``torch.tensor``/``torch.as_tensor`` of Python numbers or
lists, a blocking copy that waits too). Scalars that change per step reach the device as
kernel arguments (``torch.full``) or stay there. On the CPU a read is free, so code that can
skip work by reading a value (CD-GTMLL's ``z > 80`` test, the EMA step count) reads it there
and takes the read-free path elsewhere; both paths give the same values (tested).

:func:`host_reads_free` is the one place that decides; the CPU proxy test of the step loop
(tests/unit/nn/test_step_sync.py) makes it answer False, so that the code a CUDA run takes
runs on the CPU under a mode that fails on any host read (tests/cuda/test_cuda_sync.py runs
the same steps under ``torch.cuda.set_sync_debug_mode("error")``).
"""

from __future__ import annotations

import torch


def host_reads_free(device: torch.device | str) -> bool:
    """True when reading a tensor on ``device`` on the host needs no device sync (the CPU)."""
    return torch.device(device).type == "cpu"
