"""Image operations shared by the data code (:mod:`cdgtmll.images.datasets`,
:mod:`cdgtmll.images.features`) and the fine-tuning input pipeline
(:mod:`cdgtmll.images.trainer_input`): decoding a file, the train / eval transforms, the
ImageNet normalisation and the occlusion patch (Sec. 5.3 "Occ-gamma").

It imports nothing from ``cdgtmll`` (torch, torchvision and PIL only inside the
functions), so both ``cdgtmll.data`` and ``cdgtmll.nn`` can import it without either
importing the other.
"""

from __future__ import annotations

import math
import os
from typing import Any

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: input resolution for VOC/COCO, as in ML-GCN (Chen et al. 2019) and ASL (Ridnik et al. 2021)
DEFAULT_IMAGE_SIZE = 448


class ImageNotFoundError(FileNotFoundError):
    """Image files of a dataset could not be found; the message names a missing file and
    every place that was searched."""


# --------------------------------------------------------------------------- transforms
def occlude(img: Any, gamma: float, generator: Any = None) -> Any:
    """Copy of image tensor ``img`` (``[..., H, W]``, pixels in [0, 1], i.e. *before*
    normalisation) with one black ``k x k`` square, ``k = round(sqrt(gamma * H * W))``
    (clipped to ``min(H, W)``), at a position drawn uniformly with ``generator``
    (``torch.Generator``; top-left corner in ``[0, H-k] x [0, W-k]``). ``gamma = 0``
    returns an unchanged copy. For the robustness study (Occ-gamma, Sec. 5.3), applied to
    training images only through :func:`cdgtmll.images.trainer_input.occlude_image`."""
    import torch

    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"occlusion fraction gamma must be in [0, 1], got {gamma}")
    H, W = int(img.shape[-2]), int(img.shape[-1])
    k = min(int(round(math.sqrt(gamma * H * W))), H, W)
    out = img.clone()
    if k == 0:
        return out
    top = int(torch.randint(0, H - k + 1, (1,), generator=generator))
    left = int(torch.randint(0, W - k + 1, (1,), generator=generator))
    out[..., top : top + k, left : left + k] = 0
    return out


def train_transform(size: int = DEFAULT_IMAGE_SIZE, normalize: bool = True) -> Any:
    """RandomResizedCrop(size) -> RandomHorizontalFlip -> ToTensor -> Normalize(ImageNet
    mean/std): "standard random crop-flip augmentation" (Sec. 5.1). Occlusion is applied
    to the decoded image before this (:func:`cdgtmll.images.trainer_input.occlude_image`).
    ``normalize=False`` stops at a uint8 ``[3, size, size]`` tensor (PILToTensor); then
    :func:`to_normalized` gives the same float values, e.g. on the GPU."""
    from torchvision import transforms as T

    crop = [T.RandomResizedCrop(size), T.RandomHorizontalFlip()]
    if not normalize:
        return T.Compose([*crop, T.PILToTensor()])
    return T.Compose([*crop, T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def eval_transform(size: int = DEFAULT_IMAGE_SIZE, resize_ratio: float = 1.0, normalize: bool = True) -> Any:
    """Resize(shorter side -> round(size / resize_ratio)) -> CenterCrop(size) -> ToTensor
    -> Normalize. ``resize_ratio=1`` (default) keeps the whole shorter side; 0.875 is the
    ImageNet-evaluation convention (resize 256, crop 224). ``normalize=False``: uint8
    output, as in :func:`train_transform`."""
    from torchvision import transforms as T

    geom = [T.Resize(int(round(size / resize_ratio))), T.CenterCrop(size)]
    if not normalize:
        return T.Compose([*geom, T.PILToTensor()])
    return T.Compose([*geom, T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def to_normalized(x: Any) -> Any:
    """uint8 image tensor(s) ``[..., 3, H, W]`` -> float32 ``(x / 255 - mean) / std``
    (ImageNet): the same operations, hence the same values, as ToTensor -> Normalize, on
    whatever device ``x`` is (the fine-tuning pipeline ships uint8 batches, 4x fewer bytes,
    and normalises on the training device)."""
    import torch

    # built on the host and copied without waiting (a blocking copy would sync every batch)
    mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(3, 1, 1).to(x.device, non_blocking=True)
    std = torch.tensor(IMAGENET_STD, dtype=torch.float32).view(3, 1, 1).to(x.device, non_blocking=True)
    return x.float().div(255).sub_(mean).div_(std)


def load_image(path: str | os.PathLike) -> Any:
    """RGB PIL image; errors name the file."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except FileNotFoundError:
        raise ImageNotFoundError(f"{path}: image file not found") from None
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ValueError(f"{path}: unreadable image: {exc}") from None
