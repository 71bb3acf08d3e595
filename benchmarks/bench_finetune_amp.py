"""Throughput of end-to-end ResNet-50 fine-tuning through the project's own input
pipeline and trainer, per autocast mode, measured in one process.

    python benchmarks/bench_finetune_amp.py [--device cuda] [--images 1024] [--size 448]
        [--batch 64] [--workers 12] [--epochs 2] [--modes off,bf16,fp16] [--method BCE]

Writes ``--images`` random-noise JPEGs (500 x 375, VOC's typical size) with random labels
(20 labels), then for each mode trains ``--method`` for ``--epochs`` epochs with
``image_backbone.amp = mode`` (random initialisation; nothing is downloaded) and prints
training images per second (epochs after the first, so start-up and cuDNN autotuning
are excluded when ``--epochs`` >= 2), the peak GPU memory, and each mode's throughput
ratio to ``off`` (float32), with the date and the host's load. Also prints the throughput of decoding + augmentation
alone (DataLoader, no model) and of the model step alone (ResNet-50 + linear head +
AdamW on random tensors already on the device, per mode), so that an input-bound
setting is visible and the autocast speed-up of the model itself is measured too, and each
mode's training throughput as a share of its model step alone.
``--smooth`` writes smooth gradient images (decode cost closer to photographs) instead of
noise.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from cdgtmll.data.processed import ProcessedData
from cdgtmll.images.trainer_input import ImageSource
from cdgtmll.methods import base
from cdgtmll.methods.base import FitData, RunContext


def make_data(root: Path, n: int, n_labels: int = 20, seed: int = 0, smooth: bool = False) -> ProcessedData:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    yy, xx = np.mgrid[0:375, 0:500]
    for i in range(n):
        if smooth:
            c = rng.random((3, 3))
            a = np.stack([(c[k, 0] * xx / 500 + c[k, 1] * yy / 375 + c[k, 2]) % 1.0 for k in range(3)], axis=-1)
            a = (a * 255).astype(np.uint8)
        else:
            a = rng.integers(0, 255, (375, 500, 3), dtype=np.uint8)
        Image.fromarray(a).save(root / f"{i:06d}.jpg", quality=90)
        paths.append(f"{i:06d}.jpg")
    Y = (rng.random((n, n_labels)) < 0.1).astype(np.uint8)
    n_val = max(1, n // 10)
    return ProcessedData("bench", np.arange(n, dtype=np.float32).reshape(n, 1), Y, [f"l{k}" for k in range(n_labels)],
                         {"train": np.arange(n - n_val), "val": np.arange(n - n_val, n), "test": np.arange(0)},
                         {"x_kind": "image-row-id", "image_root": str(root), "image_paths": paths})


def model_step_rate(mode: str, dev: torch.device, size: int, batch: int, steps: int) -> float:
    """Images per second of forward + backward + AdamW step of ResNet-50 + a 20-label linear
    head on random device tensors (no input pipeline), autocast ``mode``."""
    from cdgtmll.nn.backbones.resnet import build_finetune_backbone, needs_grad_scaler

    bb = build_finetune_backbone({"pretrained": False, "amp": mode}, dev)
    model = torch.nn.Sequential(bb, torch.nn.Linear(bb.out_dim, 20)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(dev.type) if needs_grad_scaler(model) else None
    x = torch.randn(batch, 3, size, size, device=dev)
    if dev.type == "cuda":
        x = x.contiguous(memory_format=torch.channels_last)
    y = (torch.rand(batch, 20, device=dev) < 0.1).float()

    def step() -> None:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

    for _ in range(3):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return steps * batch / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--size", type=int, default=448)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--modes", default="off,bf16,fp16")
    ap.add_argument("--method", default="BCE")
    ap.add_argument("--smooth", action="store_true")
    ap.add_argument("--model-steps", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device(args.device)
    print(f"{_dt.datetime.now(_dt.UTC).isoformat(timespec='seconds')}, load {os.getloadavg()[0]:.2f}, "
          f"device {dev}" + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "")
          + f", torch {torch.__version__}, {args.images} images {args.size}px, batch {args.batch}, "
          f"{args.workers} workers, method {args.method}")
    with tempfile.TemporaryDirectory() as tmp:
        data = make_data(Path(tmp) / "img", args.images, smooth=args.smooth)
        src = ImageSource.from_data(data)
        (X_tr, Y_tr), (X_va, Y_va) = data.part("train"), data.part("val")
        n_train = X_tr.shape[0]

        inp = src.input(X_tr, train=True, image_size=args.size, workers=args.workers)
        for epoch in (1, 2):  # the second pass is timed (the first warms the page cache)
            t = time.perf_counter()
            batches = inp.iter_batches(torch.randperm(n_train), args.batch, epoch, dev)
            next(batches)
            first = time.perf_counter() - t
            for _ in batches:
                pass
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
        print(f"input pipeline alone (decode + crop/flip, transfer, normalise on {dev.type}; no model): "
              f"{n_train / (time.perf_counter() - t):.0f} img/s; first batch of an epoch after {first:.2f} s")

        if args.model_steps:
            model_rates = {m: model_step_rate(m, dev, args.size, args.batch, args.model_steps)
                           for m in args.modes.split(",")}
            for mode, r in model_rates.items():
                print(f"model step alone amp={mode:4s}: {r:7.1f} img/s"
                      + (f" (ratio to off {r / model_rates['off']:.2f})" if "off" in model_rates else ""))

        rates: dict[str, float] = {}
        for mode in args.modes.split(","):
            cfg = {"mode": "finetune", "pretrained": False, "image_size": args.size, "batch_size": args.batch,
                   "workers": args.workers, "amp": mode, "init_seed": 0}
            method = base.build(args.method, {"epochs": args.epochs, "batch_size": args.batch,
                                              "lr_backbone": 1e-4, "lr_head": 3e-4})
            ctx = RunContext(seed=0, workdir=Path(tmp) / f"run-{mode}", device=args.device,
                             extra={"training": {"backbone": "resnet50"}, "image_backbone": cfg})
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(dev)
            method.fit(FitData(X_tr, Y_tr, X_va, Y_va, data.label_names, images=src), ctx)
            log = method.train_log
            timed = log[1:] if len(log) > 1 else log
            rate = n_train * len(timed) / sum(float(r["epoch_time"]) for r in timed)
            rates[mode] = rate
            peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else float("nan")
            print(f"amp={mode:4s} ({method.backbone_info.get('amp')}): {rate:7.1f} train img/s, "
                  f"final loss {float(log[-1]['loss']):.4f}, peak GPU memory {peak:.1f} GiB")
        if "off" in rates:
            for mode, r in rates.items():
                print(f"ratio {mode}/off: {r / rates['off']:.2f}")
        if args.model_steps:  # what the input pipeline and the trainer leave of the model's own speed
            for mode, r in rates.items():
                print(f"amp={mode:4s}: training / model step alone = {r / model_rates[mode]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
