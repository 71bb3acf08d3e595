"""A toy image dataset for the fine-tuning tests, and the run spec of a job on it.

The images are generated: a 48 x 48 JPEG per row whose label l, when present, paints quadrant l
bright in one colour channel over dark noise, so the labels are learnable from the pixels and
from nothing else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from cdgtmll.config.run_spec import RunSpec
from cdgtmll.data.processed import ProcessedData
from tests.support.specs import clean_spec

N, L = 120, 4
PREVALENCE = np.array([0.5, 0.4, 0.3, 0.15])
IMG_CFG = {"mode": "finetune", "pretrained": False, "image_size": 32, "batch_size": 32,
           "amp": "auto", "init_seed": 0}
TRAINING = {"backbone": "resnet50", "epochs": 4, "batch_size": 16, "lr_backbone": 1e-3, "lr_head": 1e-3}


def make_image_data(root: Path, seed: int = 0) -> ProcessedData:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Y = (rng.random((N, L)) < PREVALENCE).astype(np.uint8)
    paths = []
    for i in range(N):
        a = rng.integers(0, 60, size=(48, 48, 3)).astype(np.uint8)
        for lab in np.flatnonzero(Y[i]):
            r, c = (lab // 2) * 24, (lab % 2) * 24
            a[r : r + 24, c : c + 24, lab % 3] = 230
        Image.fromarray(a).save(root / f"{i:04d}.jpg", quality=90)
        paths.append(f"{i:04d}.jpg")
    return ProcessedData("toyimg", np.arange(N, dtype=np.float32).reshape(N, 1), Y, [f"l{k}" for k in range(L)],
                         {"train": np.arange(80), "val": np.arange(80, 100), "test": np.arange(100, 120)},
                         {"x_kind": "image-row-id", "image_root": str(root), "image_paths": paths})


def spec(method: str, device: str = "cpu", amp: str | None = None, **training) -> RunSpec:
    """The run spec of ``method`` fine-tuning on the toy images (``amp``: ``image_backbone.amp``)."""
    image_backbone = dict(IMG_CFG) if amp is None else {**IMG_CFG, "amp": amp}
    return clean_spec("toyimg", method, training={**TRAINING, **training}, device=device, image_backbone=image_backbone)
