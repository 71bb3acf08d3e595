"""CPU time per seed of the four costly rows on Yeast (C-Tran, LSFA, ML-Decoder, MLC-NC) and BCE,
single thread, one process, as a training job runs a seed (:func:`cdgtmll.train.run_seed`: fit,
predictions, outputs), with the default profile's protocol at ``--epochs``.

C-Tran, ML-Decoder, MLC-NC and LSFA run twice per repeat, interleaved, as the code runs them
(``after``) and as before (``before``): C-Tran, ML-Decoder and MLC-NC with torch's
``nn.MultiheadAttention`` in place of
:class:`~cdgtmll.methods.architectures.common.PackedAttention`, LSFA with its generator's Adam
on torch's per-tensor loop instead of ``foreach``. Both have the same arithmetic (bit-identical
training: tests/unit/methods/test_methods_architectures.py, test_methods_data_side.py), so the
val mAP printed per seed is the same for both.

    python benchmarks/bench_expensive_methods.py --data results/data/yeast/processed.npz --epochs 20
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from cdgtmll.config import loader, plan
from cdgtmll.data.processed import ProcessedData
from cdgtmll.labels import tail_labels
from cdgtmll.methods.architectures import common
from cdgtmll.methods.data_side import lsfa
from cdgtmll.train import run_seed

METHODS = ("BCE", "C-Tran", "LSFA", "ML-Decoder", "MLC-NC")
CHANGED = ("C-Tran", "LSFA", "ML-Decoder", "MLC-NC")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("results/data/yeast/processed.npz"))
    ap.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = loader.load(a.config)
    cfg["training"]["default"]["epochs"] = a.epochs
    data = ProcessedData.load(a.data)
    tail = tail_labels(data.part("train")[1], q=cfg["r_variants"]["tail_fraction"], tie_seed=cfg["r_variants"]["tie_seed"])
    inputs = {"data": a.data, "clean": a.data}
    runs = []
    for m in a.methods:
        runs += [(m, "before"), (m, "after")] if m in CHANGED else [(m, "")]
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for method, variant in runs:
                spec = plan.run_spec(cfg, "yeast", "clean", method)
                before = variant == "before"
                common.PackedAttention.forward = nn.MultiheadAttention.forward if before else PACKED_FORWARD
                lsfa.train_feature_generator = functools.partial(GENERATOR, foreach=False) if before else GENERATOR
                out = Path(tmp) / f"{method}-{variant}-{r}" / "seed0"
                t0 = time.process_time()
                run_seed(data, tail, spec, 0, out, inputs, False)
                cpu.setdefault(f"{method}{' (' + variant + ')' if variant else ''}", []).append(time.process_time() - t0)
    common.PackedAttention.forward = PACKED_FORWARD
    lsfa.train_feature_generator = GENERATOR
    print(f"Yeast, {a.epochs} epochs, 1 thread, CPU seconds per seed (median of {a.repeats}); load {os.getloadavg()[0]:.2f}")
    for k, v in cpu.items():
        print(f"  {k:22s} {statistics.median(v):7.2f}   runs {', '.join(f'{x:.2f}' for x in v)}")
    print(json.dumps({k: statistics.median(v) for k, v in cpu.items()}))
    return 0


PACKED_FORWARD = common.PackedAttention.forward
GENERATOR = lsfa.train_feature_generator

if __name__ == "__main__":
    raise SystemExit(main())
