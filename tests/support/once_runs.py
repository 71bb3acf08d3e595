"""Runs of deterministic and seeded methods on Yeast, trained and evaluated as the workflow's
rules do (``from tests.support.once_runs import trained_runs``): each method with the run spec
planning gives it under the default profile (a deterministic one: one seed), so the tables and
claims are tested on what a run of the pipeline writes."""

from __future__ import annotations

import dataclasses
from pathlib import Path


def trained_runs(root: Path, methods: dict[str, dict]) -> list[Path]:
    """Train and evaluate ``methods`` ({name: hyper-parameters over the profile's}) on the first
    600 rows of Yeast under ``root/runs``; the metrics files of every seed of each."""
    from cdgtmll import train
    from cdgtmll.config import loader, plan
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run
    from tests.support.mirror import yeast_processed_npz
    from tests.support.paths import ROOT

    clean_path = yeast_processed_npz(root / "processed.npz")
    data = ProcessedData.load(clean_path)
    tail = tail_labels(data.part("train")[1])
    cfg = loader.load(ROOT / "config/config.yaml")
    paths = []
    for method, hp in methods.items():
        cfg["methods"][method] = {**cfg["methods"].get(method, {}), **hp}
        spec = dataclasses.replace(plan.run_spec(cfg, "yeast", "clean", method), device="cpu")
        rundir = root / "runs" / "yeast" / "clean" / method
        for seed in spec.seeds:
            train.run_seed(data, tail, spec, seed, rundir / f"seed{seed}", {"data": clean_path, "clean": clean_path})
        assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir), "--seeds",
                                  *map(str, spec.seeds), "--threshold", "0.5", "--tail-fraction", "0.2"]) == 0
        paths += [rundir / f"seed{s}" / "metrics.json" for s in spec.seeds]
    return paths
