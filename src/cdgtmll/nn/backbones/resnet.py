"""The image backbone for VOC2007 / COCO2014 (App. E.2 "Images (VOC/COCO): backbone ResNet-50
(ImageNet init), d' = 2048"): torchvision ResNet-50 without its classifier, frozen
(:mod:`cdgtmll.images.features`) or fine-tuned end to end (:class:`FineTuneBackbone`).

``ResNet50Backbone(x)`` maps ``[B, 3, H, W]`` ImageNet-normalised images to the 2048-d
global-average-pooled features (``torchvision.models.resnet50`` with ``fc`` replaced by
``Identity``); ``out_dim = 2048`` (the attribute heads use, as for ``MLPBackbone``).

Weights (ImageNet-1k, torchvision ``IMAGENET1K_V1`` by default, the weights ML-GCN/ASL
start from as ``pretrained=True``) are read from a local file, never downloaded:

1. ``weights=PATH``: a ``state_dict`` saved with ``torch.save`` (``.pth``); wrappers
   ``{'state_dict': ...}`` / ``{'model': ...}`` and ``module.`` prefixes are accepted,
   ``fc.*`` entries are ignored;
2. else torchvision's cache, ``torch.hub.get_dir()/checkpoints/<file>`` (i.e.
   ``$TORCH_HOME/hub/checkpoints``, default ``~/.cache/torch/hub/checkpoints``), file
   ``resnet50-0676ba61.pth`` (V1) or ``resnet50-11ad3fa6.pth`` (V2).

A torchvision-named file (``resnet50-<8 hex>.pth``) must have a sha256 starting with
those 8 hex digits (torch.hub's convention). Nothing found and ``pretrained=True``:
:class:`WeightsNotFound` naming every place looked at. ``pretrained=False``: random
initialisation (torchvision's, from a seeded RNG), recorded as ``'random init'``.

Mixed precision: :func:`autocast` is ``torch.autocast('cuda', bfloat16 or float16)`` on
CUDA and a no-op elsewhere (CPU runs in float32); it runs the frozen backbone.

Fine-tuning (:func:`build_finetune_backbone`, from the ``image_backbone`` config):
:class:`FineTuneBackbone` runs the ResNet-50 under ``torch.autocast`` on CUDA (bfloat16 where
supported, else float16; config ``amp``) and returns float32 features, so heads, fusion and every
loss stay in float32. With float16 the trainer (:mod:`cdgtmll.nn.trainer`) scales the loss with a
``torch.amp.GradScaler`` (:func:`needs_grad_scaler`). CPU runs are float32.

BatchNorm policy: the ResNet's BatchNorm layers are trained as in torchvision
fine-tuning (batch statistics in training mode, running statistics updated; eval mode
for validation and prediction). Their affine parameters are in the ``backbone`` group
(eta_0) with the same AdamW weight decay as every other parameter.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cdgtmll.io import sha256_file

FEATURE_DIM = 2048
ARCH = "resnet50"
TORCHVISION_FILES = {"IMAGENET1K_V1": "resnet50-0676ba61.pth", "IMAGENET1K_V2": "resnet50-11ad3fa6.pth"}
DEFAULT_VARIANT = "IMAGENET1K_V1"
RANDOM_INIT = "random init"
_HUB_NAME = re.compile(r"^resnet50-([0-9a-f]{8})\.pth$")


class WeightsNotFound(FileNotFoundError):
    """No ImageNet weights file was found; the message lists where we looked."""


def torchvision_cache_dir() -> Path:
    """Where torchvision caches downloaded weights (honours ``$TORCH_HOME``)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def find_weights(weights: str | Path | None = None, variant: str = DEFAULT_VARIANT) -> Path:
    """The weights file to load (module docstring); raises :class:`WeightsNotFound`."""
    if weights is not None:
        p = Path(weights).expanduser()
        if p.is_file():
            return p
        raise WeightsNotFound(f"ResNet-50 weights file {p} not found (configured weights path)")
    if variant not in TORCHVISION_FILES:
        raise ValueError(f"unknown ResNet-50 weights variant {variant!r}; known: {sorted(TORCHVISION_FILES)}")
    p = torchvision_cache_dir() / TORCHVISION_FILES[variant]
    if p.is_file():
        return p
    raise WeightsNotFound(
        f"ImageNet weights for ResNet-50 ({variant}) not found: looked for {p} (torchvision cache, "
        "$TORCH_HOME/hub/checkpoints) and no weights path was configured. This machine may be offline: put "
        f"the file there (torchvision's {variant} URL) or pass a state_dict file (weights: PATH / --weights), "
        "or use pretrained: false / --no-pretrained for a randomly initialised backbone"
    )


@functools.lru_cache(maxsize=8)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def weights_sha256(path: str | Path) -> str:
    """sha256 of a weights file, computed once per (path, size, mtime) in a process: the
    fingerprint, the torch.hub name check and the provenance record all need it, for every
    seed of a job (a ResNet-50 file is about 100 MB)."""
    p = Path(path).resolve()
    st = p.stat()
    return _sha256_of(str(p), st.st_size, st.st_mtime_ns)


def load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """A ResNet-50 state_dict from ``path`` without ``fc.*`` entries (module docstring)."""
    path = Path(path)
    m = _HUB_NAME.match(path.name)
    if m:
        digest = weights_sha256(path)
        if not digest.startswith(m.group(1)):
            raise ValueError(f"{path}: sha256 {digest} does not start with {m.group(1)} (corrupt download?)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
        raise ValueError(f"{path}: not a loadable state_dict: {exc}") from None
    for key in ("state_dict", "model"):
        if isinstance(obj, Mapping) and key in obj and isinstance(obj[key], Mapping):
            obj = obj[key]
    if not isinstance(obj, Mapping):
        raise ValueError(f"{path}: expected a state_dict (mapping), got {type(obj).__name__}")
    sd = {}
    for k, v in obj.items():
        k = k[len("module."):] if k.startswith("module.") else k
        if not k.startswith("fc."):
            sd[k] = v
    return sd


class ResNet50Backbone(nn.Module):
    """torchvision ResNet-50 with ``fc = Identity``: ``[B, 3, H, W] -> [B, 2048]``."""

    def __init__(self, state_dict: Mapping[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        from torchvision.models import resnet50

        net = resnet50(weights=None)
        net.fc = nn.Identity()
        if state_dict is not None:
            try:
                missing, unexpected = net.load_state_dict(dict(state_dict), strict=False)
            except RuntimeError as exc:  # shape mismatches
                raise ValueError(f"state_dict does not fit torchvision's ResNet-50: {exc}") from None
            if missing or unexpected:
                raise ValueError(
                    "state_dict does not fit torchvision's ResNet-50: "
                    f"missing {list(missing)[:5]}{' ...' if len(missing) > 5 else ''}, "
                    f"unexpected {list(unexpected)[:5]}{' ...' if len(unexpected) > 5 else ''}"
                )
        self.net = net
        self.out_dim = FEATURE_DIM

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_image_backbone(
    pretrained: bool = True,
    weights: str | Path | None = None,
    variant: str = DEFAULT_VARIANT,
    seed: int = 0,
) -> tuple[ResNet50Backbone, dict[str, Any]]:
    """``(backbone, info)``; ``info`` = ``{'backbone', 'weights_file', 'weights_sha256'}``
    (``weights_sha256 = 'random init'`` and ``init_seed`` without weights). Random
    initialisation draws from a forked RNG seeded with ``seed`` (global RNG untouched)."""
    info: dict[str, Any] = {"backbone": f"torchvision.models.{ARCH} (fc removed; {FEATURE_DIM}-d pooled features)"}
    if pretrained:
        path = find_weights(weights, variant)
        model = ResNet50Backbone(load_state_dict(path))
        info.update(weights_file=str(path), weights_sha256=weights_sha256(path),
                    weights_variant=variant if weights is None else None)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = ResNet50Backbone(None)
        info.update(weights_file=None, weights_sha256=RANDOM_INIT, init_seed=int(seed))
    return model, info


#: ``image_backbone.amp`` values
AMP_MODES = ("auto", "bf16", "fp16", "off")


def resolve_amp(mode: str, device: torch.device) -> torch.dtype | None:
    """Autocast dtype for ``image_backbone.amp`` on ``device``: None off CUDA or with
    ``off``; ``auto`` = bfloat16 where supported, else float16."""
    if mode not in AMP_MODES:
        raise ValueError(f"image_backbone.amp: expected one of {AMP_MODES}, got {mode!r}")
    if device.type != "cuda" or mode == "off":
        return None
    if mode == "bf16":
        return torch.bfloat16
    if mode == "fp16":
        return torch.float16
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def amp_dtype(device: torch.device) -> torch.dtype | None:
    """The autocast dtype on ``device`` with ``amp: auto`` (CUDA: bfloat16 when supported,
    else float16); ``None`` off CUDA (no mixed precision)."""
    return resolve_amp("auto", device)


@contextlib.contextmanager
def autocast(device: torch.device, enabled: bool = True) -> Iterator[None]:
    """``torch.autocast`` on CUDA (dtype :func:`amp_dtype`), a no-op on other devices.
    (Training in float16 also needs a ``torch.amp.GradScaler``; bfloat16 does not.)"""
    dt = amp_dtype(device) if enabled else None
    if dt is None:
        yield
        return
    with torch.autocast(device_type="cuda", dtype=dt):
        yield


# --------------------------------------------------------------------------- fine-tuning
class FineTuneBackbone(nn.Module):
    """Trainable torchvision ResNet-50 ``[B, 3, S, S] -> [B, 2048]`` float32, run under
    autocast with ``amp_dtype`` (None = float32). ``info`` records the weights."""

    def __init__(self, net: nn.Module, info: dict[str, Any], amp_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.net = net
        self.out_dim = int(net.out_dim)
        self.info = dict(info)
        self.amp_dtype = amp_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.amp_dtype is None:
            return self.net(x)
        with torch.autocast(device_type=x.device.type, dtype=self.amp_dtype):
            h = self.net(x)
        return h.float()


def build_finetune_backbone(cfg: Mapping[str, Any], device: torch.device) -> FineTuneBackbone:
    """ResNet-50 from ``image_backbone`` config (pretrained / weights / init_seed / amp);
    ImageNet weights from the configured file or torchvision's cache
    (:func:`build_image_backbone`; a clear error offline)."""
    net, info = build_image_backbone(pretrained=bool(cfg.get("pretrained", True)), weights=cfg.get("weights"),
                                     seed=int(cfg.get("init_seed", 0)))
    dtype = resolve_amp(str(cfg.get("amp", "auto")), device)
    info.update(mode="finetune", amp=None if dtype is None else str(dtype).replace("torch.", ""))
    bb = FineTuneBackbone(net, info, dtype)
    if device.type == "cuda":
        bb = bb.to(memory_format=torch.channels_last)
    return bb


def needs_grad_scaler(model: nn.Module) -> bool:
    """Whether any part of ``model`` runs in float16 autocast (then the loss is scaled)."""
    return any(getattr(m, "amp_dtype", None) == torch.float16 for m in model.modules())
