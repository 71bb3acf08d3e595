"""Frozen-backbone features of an image dataset.

    python -m cdgtmll.images.features --in PROCESSED.npz --out FEATURES.npz \\
        [--image-size 448] [--weights PATH | --no-pretrained] [--batch-size 32] \\
        [--device auto] [--workers 0|auto] [--image-root DIR] [--seed 0]

Reads an image dataset written by ``cdgtmll.data.prepare`` (``X`` = row-id column,
``meta['image_paths']``: :mod:`cdgtmll.images.datasets`), runs every row's image once
through the ResNet-50 backbone (:mod:`cdgtmll.nn.backbones.resnet`) in eval mode with the
eval transform (Resize + CenterCrop at ``--image-size``, ImageNet normalisation; no
augmentation, no occlusion) and writes a new ProcessedData with ``X`` = float32
``[n, 2048]`` features and the same ``Y``, splits and label names. Every method then
runs on it unchanged. Meta adds:

``x_kind: 'features'``, ``backbone_frozen: true``, ``backbone``, ``backbone_weights``
(file and sha256, or ``'random init'`` with ``init_seed``), ``backbone_weights_sha256``,
``image_size``, ``eval_transform``, ``features_from`` (input file and its sha256),
``feature_device`` / ``feature_amp`` (CUDA runs use autocast, so features differ from a
CPU run in the last bits), ``n_features: 2048``.

Without ``--weights`` the ImageNet weights are looked up in torchvision's cache
(``$TORCH_HOME/hub/checkpoints``); absent there, the command fails naming where it
looked, unless ``--no-pretrained``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from cdgtmll.data.processed import ProcessedData
from cdgtmll.images.datasets import image_files
from cdgtmll.images.ops import DEFAULT_IMAGE_SIZE, ImageNotFoundError
from cdgtmll.io import sha256_file


def extract_features(
    data: ProcessedData,
    image_size: int = DEFAULT_IMAGE_SIZE,
    pretrained: bool = True,
    weights: str | os.PathLike | None = None,
    batch_size: int = 32,
    device: str = "auto",
    workers: int | str = 0,
    image_root: str | os.PathLike | None = None,
    seed: int = 0,
    source: str | os.PathLike | None = None,
) -> ProcessedData:
    """Features of every row of image dataset ``data`` (module docstring)."""
    import torch

    from cdgtmll.images.trainer_input import ImageInput, Occlusion, resolve_workers
    from cdgtmll.nn.backbones.resnet import amp_dtype, autocast, build_image_backbone
    from cdgtmll.nn.trainer import resolve_device

    if image_size < 32:
        raise ValueError(f"image size {image_size} is too small for ResNet-50 (>= 32)")
    paths = image_files(data, image_root=image_root)
    missing = next((p for p in paths if not p.is_file()), None)
    if missing is not None:
        raise ImageNotFoundError(f"{data.name}: image file missing: {missing}")
    dev = resolve_device(device)
    # the number of decoding processes changes no feature (cdgtmll.images.trainer_input), so it is
    # printed for the job's log and kept out of the features file, whose bytes stay the machine's
    loader = resolve_workers(workers)
    print(f"[features] {data.name}: {loader['workers']} DataLoader worker(s) (image_backbone.workers "
          f"{loader['setting']}" + (f"; {loader['cpus']} CPUs from {loader['cpus_from']})" if loader["cpus"] else ")"),
          file=sys.stderr, flush=True)
    workers = loader["workers"]
    model, info = build_image_backbone(pretrained=pretrained, weights=weights, seed=seed)
    model = model.to(dev).eval()
    occ = Occlusion.from_meta(data.meta)
    rows = np.asarray(data.X).reshape(-1).astype(np.int64)
    train_pos = np.zeros(len(paths), dtype=bool)
    train_pos[data.splits["train"]] = True
    feats = np.empty((len(paths), model.out_dim), dtype=np.float32)
    # an occlusion variant occludes the training split's images only (cdgtmll.variants.occlusion).
    # Training rows and the other rows are always two passes, so that a validation/test
    # image meets the same batch composition (hence bit-identical features) in a clean and
    # in an occluded extraction.
    for pos, occlusion in ((np.flatnonzero(train_pos), occ), (np.flatnonzero(~train_pos), None)):
        if pos.size == 0:
            continue
        inp = ImageInput([paths[i] for i in pos], rows[pos], [str(paths[i]) for i in pos], train=False,
                         image_size=image_size, workers=workers, occlusion=occlusion, eval_batch_size=batch_size)
        with torch.inference_mode():
            for idx, xb in inp.iter_batches(None, batch_size, 0, dev):
                with autocast(dev):
                    f = model(xb)
                feats[pos[idx.cpu().numpy()]] = f.float().cpu().numpy()
    if not np.isfinite(feats).all():
        raise ValueError(f"{data.name}: non-finite features (check the weights file)")

    meta = dict(data.meta)
    dt = amp_dtype(dev)
    meta.update(
        x_kind="features",
        n_features=int(feats.shape[1]),
        backbone_frozen=True,
        backbone=info["backbone"],
        backbone_weights=info,
        backbone_weights_sha256=info["weights_sha256"],
        image_size=int(image_size),
        eval_transform=f"Resize({image_size}) -> CenterCrop({image_size}) -> ToTensor -> Normalize(ImageNet)",
        feature_device=str(dev),
        occluded_training_images=None if occ is None else {"gamma": occ.gamma, "seed": occ.seed},
        feature_amp=str(dt).replace("torch.", "") if dt is not None else "off (float32)",
        torch_version=torch.__version__,
    )
    if source is not None:
        meta["features_from"] = {"file": str(source), "sha256": sha256_file(source)}
    if image_root is not None:
        meta["image_root"] = str(Path(image_root).absolute())
    return ProcessedData(
        name=data.name,
        X=feats,
        Y=data.Y,
        label_names=list(data.label_names),
        splits={k: v.copy() for k, v in data.splits.items()},
        meta=meta,
    )


def _workers_arg(text: str) -> int | str:
    if text == "auto":
        return text
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer or 'auto', got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdgtmll.images.features", description=__doc__.split("\n\n")[0])
    ap.add_argument("--in", dest="inp", required=True, type=Path, help="processed image dataset (.npz)")
    ap.add_argument("--out", required=True, type=Path, help="processed feature dataset to write (.npz)")
    ap.add_argument("--image-size", type=int, default=DEFAULT_IMAGE_SIZE)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--weights", default=None, help="ResNet-50 ImageNet state_dict (.pth); default: torchvision cache")
    g.add_argument("--no-pretrained", action="store_true", help="randomly initialised backbone (tests, ablations)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--workers", type=_workers_arg, default=0,
                    help="DataLoader worker processes, or 'auto': the job's CPUs minus one")
    ap.add_argument("--image-root", default=None, help="override meta image_root (images moved)")
    ap.add_argument("--seed", type=int, default=0, help="initialisation seed with --no-pretrained")
    args = ap.parse_args(argv)
    try:
        data = ProcessedData.load(args.inp)
        out = extract_features(
            data,
            image_size=args.image_size,
            pretrained=not args.no_pretrained,
            weights=args.weights,
            batch_size=args.batch_size,
            device=args.device,
            workers=args.workers,
            image_root=args.image_root,
            seed=args.seed,
            source=args.inp,
        )
        out.save(args.out)
    except (OSError, ValueError) as exc:  # WeightsNotFound / ImageNotFoundError are OSErrors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{out.name}: {out.X.shape[0]} rows x {out.X.shape[1]} features "
          f"({out.meta['backbone_weights_sha256'] if out.meta['backbone_weights_sha256'] == 'random init' else 'ImageNet weights'}, "
          f"{args.image_size}px, {out.meta['feature_device']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
