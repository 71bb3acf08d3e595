"""BCE's element-wise terms on CPU: torch's ``binary_cross_entropy_with_logits`` against
:func:`cdgtmll.nn.losses.common.bce_terms` (vectorised forward, torch's gradient), side by side.

Two measures, CPU time of this process at one torch thread, interleaved (A, B, B, A, ...;
median per side):

1. the terms' forward and backward through the project's reduction on one ``[B, L]`` batch
   (Delicious' shape by default: 256 x 983), ``--steps`` repetitions per round;
2. the project's BCE fit (``build("BCE").fit``, trainer defaults) on a MULAN train file for
   ``--epochs`` epochs, with the loss module's ``bce_terms`` swapped for torch's op on side A.
   Both sides must give the same validation mAP, to the bit (the gradient is torch's on both):
   the script says so, or exits with 1.

    python benchmarks/bench_bce_terms.py                       # Delicious, 3 epochs, 4 rounds
    python benchmarks/bench_bce_terms.py --dataset yeast --epochs 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cdgtmll_cost import DATASETS, load_mulan  # noqa: E402
from bench_floor import interleaved, project_fit, split  # noqa: E402

import cdgtmll.nn.losses.bce as bce_mod  # noqa: E402
from cdgtmll.nn.losses.common import bce_terms, reduce  # noqa: E402


def torch_terms(z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(z, y, reduction="none")


SIDES = {"torch": torch_terms, "bce_terms": bce_terms}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="delicious", choices=sorted(DATASETS))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=200, help="batches per round of measure 1")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per fit of measure 2")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--mirror", type=Path, default=Path(os.environ.get("CDGTMLL_DATA_MIRROR", "/work/shared/datasets")))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    X, Y = load_mulan(args.mirror / DATASETS[args.dataset][0], DATASETS[args.dataset][1])
    print(f"torch {torch.__version__}, 1 thread, CPU time; {args.dataset} ({X.shape[0]} x {Y.shape[1]} labels); "
          f"load average {os.getloadavg()[0]:.2f} at start; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")

    g = torch.Generator().manual_seed(0)
    rows = torch.randint(0, X.shape[0], (args.batch,), generator=g)
    y = torch.from_numpy(Y[rows.numpy()].astype("float32"))
    z0 = 3 * torch.randn(y.shape, generator=g)

    def step(fn):
        def run():
            for _ in range(args.steps):
                z = z0.clone().requires_grad_(True)
                reduce(fn(z, y)).backward()
        return run

    for fn in SIDES.values():
        step(fn)()  # warm-up
    t = interleaved({k: step(fn) for k, fn in SIDES.items()}, args.rounds)
    med = {k: statistics.median(c for c, _ in v) / args.steps * 1e3 for k, v in t.items()}
    print(f"1. forward + backward of one {args.batch} x {Y.shape[1]} batch: torch {med['torch']:.3f} ms, "
          f"bce_terms {med['bce_terms']:.3f} ms, ratio {med['bce_terms'] / med['torch']:.3f}")

    data = split(X, Y)
    scores: dict[str, set[float]] = {k: set() for k in SIDES}

    def fit(side: str):
        def run():
            bce_mod.bce_terms = SIDES[side]
            try:
                scores[side].add(project_fit(data, args.epochs))
            finally:
                bce_mod.bce_terms = bce_terms
        return run

    for side in SIDES:
        bce_mod.bce_terms = SIDES[side]
        project_fit(data, 1)  # warm-up
    bce_mod.bce_terms = bce_terms
    t = interleaved({k: fit(k) for k in SIDES}, args.rounds)
    med = {k: statistics.median(c for c, _ in v) / args.epochs for k, v in t.items()}
    same = scores["torch"] == scores["bce_terms"] and len(scores["torch"]) == 1
    print(f"2. BCE fit, {args.epochs} epochs, CPU s per epoch (median of {args.rounds}): torch {med['torch']:.3f}, "
          f"bce_terms {med['bce_terms']:.3f}, ratio {med['bce_terms'] / med['torch']:.3f}; "
          f"last-epoch val mAP {sorted(scores['torch'])} vs {sorted(scores['bce_terms'])}: "
          f"{'identical' if same else 'DIFFERENT'}")
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
