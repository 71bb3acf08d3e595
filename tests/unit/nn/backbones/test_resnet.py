"""The ResNet-50 image backbone (cdgtmll.nn.backbones.resnet): where its ImageNet weights are
found and how they are loaded, the random initialisation, mixed precision, and the fine-tuned
wrapper's float16 loss scaling. Training on images end to end: tests/unit/images/test_finetune.py."""

from __future__ import annotations

import pytest
import torch

from cdgtmll.nn.backbones import resnet as rn


@pytest.fixture(autouse=True)
def _own_torch_home(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))  # never the user's cache


def test_backbone_weights_lookup_and_loading(tmp_path):
    cache = tmp_path / "torch_home" / "hub" / "checkpoints"
    with pytest.raises(rn.WeightsNotFound) as ei:
        rn.find_weights()
    assert str(cache / "resnet50-0676ba61.pth") in str(ei.value) and "pretrained: false" in str(ei.value)
    with pytest.raises(rn.WeightsNotFound, match=str(tmp_path / "nope.pth")):
        rn.build_image_backbone(weights=tmp_path / "nope.pth")
    rng_before = torch.get_rng_state()
    model, info = rn.build_image_backbone(pretrained=False, seed=3)
    assert torch.equal(rng_before, torch.get_rng_state())  # global RNG untouched
    assert info["weights_sha256"] == "random init" and model.out_dim == 2048
    # a state_dict file (with fc and a DataParallel prefix) is loaded, fc ignored
    sd = {f"module.{k}": v for k, v in model.net.state_dict().items()}
    sd["module.fc.weight"], sd["module.fc.bias"] = torch.zeros(1000, 2048), torch.zeros(1000)
    torch.save({"state_dict": sd}, tmp_path / "w.pth")
    loaded, info2 = rn.build_image_backbone(weights=tmp_path / "w.pth")
    assert info2["weights_file"] == str(tmp_path / "w.pth") and len(info2["weights_sha256"]) == 64
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(model.eval()(x), loaded.eval()(x)) and model(x).shape == (2, 2048)
    # torchvision cache file with a wrong hash prefix is refused before loading
    cache.mkdir(parents=True)
    (cache / "resnet50-0676ba61.pth").write_bytes(b"not weights")
    with pytest.raises(ValueError, match="does not start with 0676ba61"):
        rn.build_image_backbone()
    with pytest.raises(ValueError, match="does not fit torchvision's ResNet-50"):
        torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / "x.pth")
        rn.build_image_backbone(weights=tmp_path / "x.pth")
    assert rn.amp_dtype(torch.device("cpu")) is None
    with rn.autocast(torch.device("cpu")):
        assert not torch.is_autocast_enabled()


def test_amp_resolution():
    cpu = torch.device("cpu")
    assert all(rn.resolve_amp(m, cpu) is None for m in rn.AMP_MODES)
    with pytest.raises(ValueError, match="image_backbone.amp"):
        rn.resolve_amp("fp8", cpu)
    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    net.out_dim = 2
    bb = rn.FineTuneBackbone(net, {}, torch.float16)
    assert rn.needs_grad_scaler(torch.nn.Sequential(bb))
    assert not rn.needs_grad_scaler(torch.nn.Sequential(rn.FineTuneBackbone(net, {}, torch.bfloat16)))
