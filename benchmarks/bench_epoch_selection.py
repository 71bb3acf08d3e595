"""Which epoch should a neural row keep? ``select_epoch: last`` against ``best_val`` on Yeast.

Trains BCE and CD-GTMLL (the shipped default config's hyper-parameters and Yeast training
protocol: 100 epochs, B = 256, eta_0 = 2e-3) on the clean Yeast split, 3 seeds, once per rule,
through the pipeline's own per-seed job (:func:`cdgtmll.train.run_seed`) and evaluation
(:func:`cdgtmll.metrics.evaluate_run.evaluate_run`), and prints test Micro-F1, Macro-F1, Rare-F1
(threshold 0.5 and validation-tuned per-label thresholds) and mAP as mean ± sample std over the
seeds, with the kept epochs. Both rules train the same trajectory (same seed, same updates), so
the difference is only which epoch's weights predict; the script checks that the two runs'
``train_log.csv`` agree.

    python benchmarks/bench_epoch_selection.py --data results/data/yeast/processed.npz \\
        [--out /tmp/epoch-selection] [--seeds 0 1 2] [--jobs 2] [--epochs 100]

``--data``: a processed clean Yeast file (``make data`` / the ``prepare`` rule writes it).
The last line is a JSON object with every number (``results.json`` in ``--out`` too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

METHODS = ("BCE", "CD-GTMLL")
RULES = ("last", "best_val")
METRICS = ("micro_f1", "macro_f1", "rare_f1", "mAP")


def spec_for(method: str, rule: str, seeds: list[int], epochs: int | None):
    from cdgtmll.config import loader
    from cdgtmll.config.run_spec import RunSpec
    from cdgtmll.methods.base import resolved_hparams

    cfg = loader.load(Path(__file__).resolve().parents[1] / "config" / "config.yaml")
    training = dict(cfg["training"]["default"])
    if epochs is not None:
        training["epochs"] = epochs
    hp = {**(cfg["methods"].get(method) or {}), "select_epoch": rule}
    return RunSpec(dataset="yeast", variant="clean", method=method, registered_method=method,
                   seeds=tuple(seeds), hparams=hp, resolved_hparams=resolved_hparams(method, hp, training),
                   device="cpu", training=training, plugins=(),
                   data={k: cfg["data"][k] for k in ("val_fraction", "split_seed")},
                   r_variants={k: cfg["r_variants"][k] for k in ("tail_fraction", "tie_seed")})


def one(job: tuple[str, str, int, str, str, int | None]) -> dict:
    method, rule, seed, data_path, out, epochs = job
    import torch

    torch.set_num_threads(1)
    from cdgtmll import train
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics.evaluate_run import evaluate_run

    spec = spec_for(method, rule, [seed], epochs)
    data = ProcessedData.load(data_path)
    tail = tail_labels(data.part("train")[1], q=spec.r_variants["tail_fraction"],
                       tie_seed=spec.r_variants["tie_seed"])
    seed_dir = Path(out) / method / rule / f"seed{seed}"
    pred = train.run_seed(data, tail, spec, seed, seed_dir, {"clean": Path(data_path)})
    m = evaluate_run(data, pred, tail, 0.5)
    prov = json.loads((seed_dir / "provenance.json").read_text())
    return {"method": method, "rule": rule, "seed": seed, "selection": prov["epoch_selection"],
            "global": {k: m["global@0.5"][k] for k in METRICS},
            "adaptive": {k: m["adaptive"][k] for k in METRICS},
            "train_log": (seed_dir / "train_log.csv").read_text()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", default="/tmp/epoch-selection")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--epochs", type=int, default=None, help="override the protocol's epochs (smoke runs)")
    args = ap.parse_args(argv)
    jobs = [(m, r, s, args.data, args.out, args.epochs) for m in METHODS for r in RULES for s in args.seeds]
    with ProcessPoolExecutor(args.jobs) as ex:
        runs = list(ex.map(one, jobs))
    out: dict = {"runs": [{k: v for k, v in r.items() if k != "train_log"} for r in runs], "summary": {}}
    for m in METHODS:
        logs = {r["seed"]: r["train_log"] for r in runs if r["method"] == m and r["rule"] == "last"}
        for r in runs:
            if r["method"] == m and r["rule"] == "best_val":
                # same trajectory under both rules (timing columns aside)
                strip = lambda t: [",".join(line.split(",")[:-2]) for line in t.splitlines()]  # noqa: E731
                assert strip(r["train_log"]) == strip(logs[r["seed"]]), f"{m} seed {r['seed']}: logs differ"
    print(f"{'method':9s} {'rule':8s} {'epochs kept':14s} " + " ".join(f"{k + ' @0.5':>16s}" for k in METRICS[:3])
          + " " + " ".join(f"{k + ' tuned':>16s}" for k in METRICS[:3]) + f" {'mAP':>16s}")
    for m in METHODS:
        for rule in RULES:
            rs = [r for r in runs if r["method"] == m and r["rule"] == rule]
            row = {"epochs": [r["selection"]["epoch"] for r in rs]}
            for mode in ("global", "adaptive"):
                for k in METRICS:
                    v = np.array([r[mode][k] for r in rs], dtype=float)
                    row[f"{k}_{mode}"] = [float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan")]
            out["summary"][f"{m}/{rule}"] = row
            cell = lambda key, row=row: f"{100 * row[key][0]:7.2f} ± {100 * row[key][1]:5.2f}"  # noqa: E731
            print(f"{m:9s} {rule:8s} {','.join(map(str, row['epochs'])):14s} "
                  + " ".join(cell(f"{k}_global") for k in METRICS[:3]) + " "
                  + " ".join(cell(f"{k}_adaptive") for k in METRICS[:3]) + " " + cell("mAP_global"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "results.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
