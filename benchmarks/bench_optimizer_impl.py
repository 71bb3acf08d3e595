"""AdamW's implementations on the CPU: ``for_loop`` (torch's per-tensor path,
its CPU default), ``foreach`` (multi-tensor, its CUDA default) and ``fused``, on the default
profile's CPU models: BCE's MLP and CD-GTMLL on Yeast (hidden 512, batch 256, lr 2e-3, the
trainer's defaults). What ``optimizer_impl: auto`` takes on the CPU rests on these numbers
(:data:`cdgtmll.nn.trainer.AUTO_OPTIMIZER_IMPL`).

All timings are CPU seconds of this process (``time.process_time``) at ``--threads`` torch
threads, the implementations measured side by side in one run and interleaved (A, B, C, C, B,
A, ...; median per side), so that a change of the machine's load falls on every side alike:

* ``step``: the optimiser step alone (:func:`cdgtmll.runtime.torch_optim.optimizer_step`, as the trainer
  calls it) on the method's model with fixed random gradients, ``--steps`` steps per sample;
* ``fit``: the project's fit (``build(method).fit``: ``--epochs`` epochs, validation, log and
  checkpoint included), one fit per sample;
* ``bytes``: whether the fit's validation predictions are bit-identical to ``for_loop``'s, and
  the largest absolute difference (changing the CPU default changes every CPU number).

Ratios are ``median(impl) / median(for_loop)``; below 1 is faster.

    python benchmarks/bench_optimizer_impl.py                  # about 2 min on one core
    python benchmarks/bench_optimizer_impl.py --epochs 2 --rounds 2 --steps 50   # quick
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cdgtmll_cost import DATASETS, load_mulan  # noqa: E402

from cdgtmll.data.splits import carve_validation  # noqa: E402
from cdgtmll.methods.base import FitData, RunContext, build  # noqa: E402
from cdgtmll.nn.trainer import TrainConfig, make_optimizer, seed_everything  # noqa: E402
from cdgtmll.runtime.torch_optim import optimizer_step  # noqa: E402

IMPLS = ("for_loop", "foreach", "fused")
METHODS = ("BCE", "CD-GTMLL")


def yeast(mirror: Path) -> FitData:
    """Yeast's train file with the validation rows carved as the pipeline carves them (10%, seed 0)."""
    X, Y = load_mulan(mirror / DATASETS["yeast"][0], DATASETS["yeast"][1])
    tr, va = carve_validation(Y, fraction=0.1, seed=0)
    return FitData(X[tr], Y[tr], X[va], Y[va], [f"l{k}" for k in range(Y.shape[1])])


def interleaved(fns: dict, rounds: int) -> dict[str, list[float]]:
    """CPU seconds of each of ``fns`` per round, the order reversed every other round."""
    out: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(rounds):
        for side in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            c0 = time.process_time()
            fns[side]()
            out[side].append(time.process_time() - c0)
    return out


def step_timer(method: str, data: FitData, impl: str, steps: int):
    """A callable running ``steps`` optimiser steps of ``method``'s model with ``impl``."""
    m = build(method, {"optimizer_impl": impl})
    m.device = torch.device("cpu")
    m.prepare(data, RunContext(seed=0, workdir=Path(".")))
    seed_everything(0)
    model = m.build_model(data.X_train.astype(np.float32), data.Y_train.astype(np.float32))
    opt, _ = make_optimizer(m, model, TrainConfig(optimizer_impl=impl), 10**6)
    g = torch.Generator().manual_seed(0)
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.randn(p.shape, generator=g) * 1e-2
    optimizer_step(opt)  # state allocated outside the timing

    def run() -> None:
        for _ in range(steps):
            optimizer_step(opt)

    return run, sum(1 for p in model.parameters() if p.requires_grad)


def fit(method: str, data: FitData, impl: str, epochs: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as wd:
        m = build(method, {"epochs": epochs, "optimizer_impl": impl}).fit(data, RunContext(seed=0, workdir=Path(wd)))
        return m.predict_proba(data.X_val)


def measure(method: str, data: FitData, epochs: int, rounds: int, steps: int) -> dict:
    timers = {}
    for impl in IMPLS:
        timers[impl], n_tensors = step_timer(method, data, impl, steps)
    step = interleaved(timers, rounds)
    preds: dict[str, np.ndarray] = {}

    def fitter(impl: str):
        return lambda: preds.__setitem__(impl, fit(method, data, impl, epochs))

    fit(method, data, "for_loop", 1)  # warm-up (lazy imports, allocator)
    fits = interleaved({impl: fitter(impl) for impl in IMPLS}, rounds)
    out = {"parameter_tensors": n_tensors, "impls": {}}
    for impl in IMPLS:
        s, f = statistics.median(step[impl]), statistics.median(fits[impl])
        diff = float(np.abs(preds[impl] - preds["for_loop"]).max())
        out["impls"][impl] = {
            "step_cpu_us": 1e6 * s / steps, "step_ratio": s / statistics.median(step["for_loop"]),
            "fit_cpu_s": f, "fit_ratio": f / statistics.median(fits["for_loop"]),
            "bit_identical": bool(np.array_equal(preds[impl], preds["for_loop"])), "max_abs_diff": diff,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirror", type=Path, default=Path(os.environ.get("CDGTMLL_DATA_MIRROR", "/work/shared/datasets")))
    ap.add_argument("--epochs", type=int, default=5, help="epochs per timed fit (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="samples per implementation (default 3)")
    ap.add_argument("--steps", type=int, default=200, help="optimiser steps per step sample (default 200)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the workflow's jobs)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = yeast(args.mirror)
    res = {"date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "host": platform.node(),
           "cpu": platform.processor() or platform.machine(), "torch": torch.__version__, "threads": args.threads,
           "load_1min": os.getloadavg()[0], "epochs": args.epochs, "rounds": args.rounds, "steps": args.steps,
           "methods": {}}
    print(f"# {res['date']}, torch {res['torch']}, {args.threads} thread(s), load {res['load_1min']:.2f}; "
          f"CPU time, interleaved, median of {args.rounds}")
    print(f"{'method':10} {'impl':9} {'step us':>9} {'step ratio':>10} {'fit s':>8} {'fit ratio':>9}  bytes vs for_loop")
    for method in args.methods:
        r = res["methods"][method] = measure(method, data, args.epochs, args.rounds, args.steps)
        for impl, v in r["impls"].items():
            same = "identical" if v["bit_identical"] else f"differ (max |d| {v['max_abs_diff']:.2e})"
            print(f"{method:10} {impl:9} {v['step_cpu_us']:9.0f} {v['step_ratio']:10.2f} {v['fit_cpu_s']:8.2f} "
                  f"{v['fit_ratio']:9.2f}  {same}")
    res["load_1min_end"] = os.getloadavg()[0]
    print(f"# load at the end {res['load_1min_end']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
