"""ResNet-50 on CPU in the two memory layouts, side by side: ``contiguous`` (NCHW, what
:mod:`cdgtmll.images.trainer_input` fine-tunes in on CPU) against ``channels_last`` (NHWC, its
layout on CUDA). It measures whether CPU fine-tuning should switch: faster steps, but other
rounding, which a randomly initialised ResNet-50 with BatchNorm amplifies within a few steps.

For each image size, both layouts start from the same random initialisation and the same
batch, and run, interleaved (A, B, B, A, ... ``--rounds`` per side), a training step
(forward, binary cross-entropy on random labels, backward, SGD) and an evaluation forward; the script prints the median CPU time per
side (one torch thread), the ratio, and how far apart the two layouts' outputs are after
``--steps`` identical training steps (the rounding differs, nothing else).

    python benchmarks/bench_resnet_layout.py                     # 32 and 64 px, batch 128
    python benchmarks/bench_resnet_layout.py --sizes 224 --batch 32 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics

import torch
import torchvision

LAYOUTS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def build(layout: str, size: int, batch: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=20).to(memory_format=LAYOUTS[layout])
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, size, size, generator=g)
    y = (torch.rand(batch, 20, generator=g) < 0.2).float()
    return model, x.contiguous(memory_format=LAYOUTS[layout]), y, torch.optim.SGD(model.parameters(), lr=1e-2)


def train_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, opt: torch.optim.Optimizer) -> None:
    model.train()
    torch.nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
    opt.step()
    opt.zero_grad()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3, help="training steps before the outputs are compared")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, batch {args.batch}, load {os.getloadavg()[0]:.2f}")
    for size in args.sizes:
        runs = {name: build(name, size, args.batch) for name in LAYOUTS}
        for name in LAYOUTS:  # warm-up: first-call allocations and kernel choice
            train_step(*runs[name])
        times: dict[str, dict[str, list[float]]] = {n: {"train": [], "eval": []} for n in LAYOUTS}
        order = [n for r in range(args.rounds) for n in (list(LAYOUTS) if r % 2 == 0 else list(LAYOUTS)[::-1])]
        for name in order:
            model, x, y, opt = runs[name]
            t0 = cpu()
            train_step(model, x, y, opt)
            times[name]["train"].append(cpu() - t0)
            model.eval()
            with torch.no_grad():
                t0 = cpu()
                model(x)
                times[name]["eval"].append(cpu() - t0)
        for what in ("train", "eval"):
            a, b = (statistics.median(times[n][what]) for n in LAYOUTS)
            print(f"RESULT size={size} measure={what} contiguous_cpu_s={a:.3f} channels_last_cpu_s={b:.3f} ratio={b / a:.3f}")
        outs = {}
        for name in LAYOUTS:  # the same steps from the same start in each layout
            model, x, y, opt = build(name, size, args.batch)
            for _ in range(args.steps):
                train_step(model, x, y, opt)
            model.eval()
            with torch.no_grad():
                outs[name] = torch.sigmoid(model(x))
        diff = (outs["contiguous"] - outs["channels_last"]).abs()
        print(f"RESULT size={size} measure=outputs steps={args.steps} max_abs_diff={diff.max().item():.3g} "
              f"mean_abs_diff={diff.mean().item():.3g} identical={bool(torch.equal(outs['contiguous'], outs['channels_last']))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
