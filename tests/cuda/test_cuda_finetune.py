"""ResNet-50 fine-tuning on a CUDA device with each AMP mode (bf16, fp16, off): the run records
its AMP dtype, its predictions are finite, and only fp16 keeps a gradient scaler in the
checkpoint. The CPU runs on the same toy images are in tests/unit/images/test_finetune.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cdgtmll.data.processed import ProcessedData
from cdgtmll.labels import tail_labels
from cdgtmll.train import run_seed
from tests.support.finetune import make_image_data, spec


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> ProcessedData:
    return make_image_data(tmp_path_factory.mktemp("img") / "JPEGImages")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only")
@pytest.mark.parametrize("amp", ["bf16", "fp16", "off"])
def test_cuda_amp_finetuning(data, tmp_path, amp):
    s = spec("CD-GTMLL", device="cuda", amp=amp, epochs=2)
    out = tmp_path / amp
    run_seed(data, tail_labels(data.part("train")[1]), s, 0, out, {}, False)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["backbone"]["amp"] == {"bf16": "bfloat16", "fp16": "float16", "off": None}[amp]
    pred = np.load(out / "predictions.npz")["test"]
    assert np.isfinite(pred).all()
    ck = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert (ck["grad_scaler"] is not None) == (amp == "fp16")
