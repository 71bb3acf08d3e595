"""Throughput of tabular training on one device: training rows per second of the trainer's own
epoch loop (:func:`cdgtmll.nn.trainer.train_epoch`: batch gather, objective, backward, clipping,
AdamW as ``optimizer_impl: auto`` takes it on the device, cosine step, divergence watch), and of
the model step alone (the same forward, backward, clipping and AdamW step over the epoch's
batches gathered beforehand: no gather, no watch, no per-epoch read), so that the loop's share of the
model step shows what the loop adds. Per method and dataset, in one process, after one warm-up
epoch; wall time with the device synchronised at each end (CUDA), plus the peak GPU memory.

    python benchmarks/bench_tabular_throughput.py --device cuda [--datasets yeast,delicious]
        [--methods BCE,CD-GTMLL] [--epochs 3] [--batch-size 256]

Datasets: MULAN train files under ``$CDGTMLL_DATA_MIRROR`` (default /work/shared/datasets);
Yeast (1,500 x 103, 14 labels) and Delicious (12,920 x 500, 983 labels).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cdgtmll_cost import DATASETS, load_mulan  # noqa: E402

from cdgtmll.methods.base import FitData, RunContext, build  # noqa: E402
from cdgtmll.nn.divergence import FiniteWatch  # noqa: E402
from cdgtmll.nn.trainer import TrainConfig, make_optimizer, resolve_device, seed_everything, train_epoch  # noqa: E402
from cdgtmll.runtime.torch_optim import optimizer_step  # noqa: E402


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def measure(method: str, X: np.ndarray, Y: np.ndarray, dev: torch.device, epochs: int, B: int) -> dict:
    data = FitData(X, Y, None, None, [f"l{k}" for k in range(Y.shape[1])])
    m = build(method, {"batch_size": B})
    m.device = dev
    m.prepare(data, RunContext(seed=0, workdir=Path("."), device=str(dev)))
    seed_everything(0)
    model = m.build_model(X, Y.astype(np.float32)).to(dev)
    n = X.shape[0]
    steps = math.ceil(n / B)
    cfg = TrainConfig(batch_size=B)
    opt, sched = make_optimizer(m, model, cfg, steps * (epochs + 1))
    X_t = torch.from_numpy(X).to(dev)
    Y_t = m.train_targets(model, torch.from_numpy(Y.astype(np.float32)).to(dev))
    gen = torch.Generator().manual_seed(0)
    watch = FiniteWatch(dev, immediate=dev.type == "cpu")
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for e in range(epochs + 1):  # the first is the warm-up
        perm = torch.randperm(n, generator=gen).to(dev)
        sync(dev)
        t = time.perf_counter()
        train_epoch(m, model, opt, sched, X_t, Y_t, perm, B, e * steps, steps * (epochs + 1), cfg.grad_clip,
                    epoch=e + 1, watch=watch)
        sync(dev)
        times.append(time.perf_counter() - t)
    loop_rate = n * epochs / sum(times[1:])
    perm = torch.randperm(n, generator=gen).to(dev)
    batches = [(X_t.index_select(0, i), Y_t.index_select(0, i)) for i in perm.split(B)]  # gathered beforehand

    def step(xb: torch.Tensor, yb: torch.Tensor) -> None:
        loss, _ = m.training_step(model, xb, yb, 0.5)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        m.clip_gradients(model, cfg.grad_clip)
        optimizer_step(opt)

    step(*batches[0])
    sync(dev)
    t = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in batches:
            step(xb, yb)
    sync(dev)
    step_rate = n * epochs / (time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else float("nan")
    return {"loop_rows_s": loop_rate, "step_rows_s": step_rate, "share": loop_rate / step_rate, "peak_gib": peak}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cpu | cuda | auto (default cuda)")
    ap.add_argument("--datasets", default="yeast,delicious")
    ap.add_argument("--methods", default="BCE,CD-GTMLL")
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per method (after 1 warm-up)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--mirror", default=os.environ.get("CDGTMLL_DATA_MIRROR", "/work/shared/datasets"))
    args = ap.parse_args(argv)
    dev = resolve_device(args.device)
    gpu = f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""
    print(f"# {_dt.datetime.now(_dt.UTC).isoformat(timespec='seconds')}, device {dev}{gpu}, torch {torch.__version__}, "
          f"load {os.getloadavg()[0]:.2f}, batch {args.batch_size}, {args.epochs} timed epochs")
    print(f"{'dataset':10} {'method':9} {'loop rows/s':>12} {'step alone rows/s':>18} {'loop/step':>9} {'peak GiB':>8}")
    for name in args.datasets.split(","):
        X, Y = load_mulan(Path(args.mirror) / DATASETS[name][0], DATASETS[name][1])
        for method in args.methods.split(","):
            r = measure(method, X, Y, dev, args.epochs, args.batch_size)
            print(f"{name:10} {method:9} {r['loop_rows_s']:12.0f} {r['step_rows_s']:18.0f} {r['share']:9.2f} "
                  f"{r['peak_gib']:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
