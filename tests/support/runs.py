"""Real runs made the way the pipeline's jobs make them, for tests that need a ``metrics.json``
or ``predictions.npz`` without Snakemake: the real Yeast prepared by ``prepare``'s command line,
and seeds trained by :func:`cdgtmll.train.run_seed` (``from tests.support.runs import ...``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from cdgtmll.config.run_spec import RunSpec
from tests.support.specs import clean_spec


def prepared_yeast(root: Path, mirror: Path):
    """``(ProcessedData, path)`` of MULAN Yeast prepared from ``mirror`` into
    ``root/data/yeast/processed.npz`` by ``python -m cdgtmll.data.prepare``'s main, with the
    default profile's split settings."""
    from cdgtmll.data import prepare
    from cdgtmll.data.processed import ProcessedData

    path = root / "data" / "yeast" / "processed.npz"
    mp = pytest.MonkeyPatch()
    mp.setenv("CDGTMLL_DATA_MIRROR", str(mirror))
    try:
        assert prepare.main(["--dataset", "yeast", "--raw-dir", str(root / "raw"), "--out", str(path),
                             "--mirror", str(mirror), "--no-download", "--val-fraction", "0.1",
                             "--split-seed", "0", "--min-split-rows", "10"]) == 0
    finally:
        mp.undo()
    return ProcessedData.load(path), path


def yeast_fit_data(root: Path, mirror: Path):
    """The real Yeast of :func:`prepared_yeast` as a method's ``FitData``: the train and
    validation parts, the label names and the tail (bottom 20% by training frequency)."""
    import numpy as np

    from cdgtmll.labels import tail_labels
    from cdgtmll.methods.base import FitData

    clean, _ = prepared_yeast(root, mirror)
    (X_tr, Y_tr), (X_va, Y_va) = clean.part("train"), clean.part("val")
    return FitData(np.asarray(X_tr), np.asarray(Y_tr), np.asarray(X_va), np.asarray(Y_va), list(clean.label_names),
                   tail=tail_labels(np.asarray(Y_tr)))


def train_seeds(clean, clean_path: Path, rundir: Path, method: str, seeds: Sequence[int], training: dict) -> Path:
    """Train ``method`` on ``clean`` for each seed into ``rundir/seed<k>`` as rule ``train`` does
    (the spec's other keys as the plan writes them for a clean run); returns ``rundir``."""
    from cdgtmll import train
    from cdgtmll.labels import tail_labels

    spec = clean_spec(clean.name, method, seeds=seeds, training=training)
    tail = tail_labels(clean.part("train")[1])
    for seed in seeds:
        train.run_seed(clean, tail, spec, seed, rundir / f"seed{seed}", {"data": clean_path, "clean": clean_path})
    return rundir


def train_and_evaluate(data, data_path: Path, clean_path: Path, rundir: Path, spec: RunSpec) -> Path:
    """Train every seed of ``spec`` on ``data`` into ``rundir/seed<k>`` (rule ``train``), then
    evaluate them against the clean split (rule ``evaluate``); returns ``rundir``."""
    from cdgtmll import train
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run

    tail = tail_labels(data.part("train")[1])
    for seed in spec.seeds:
        train.run_seed(data, tail, spec, seed, rundir / f"seed{seed}", {"data": data_path, "clean": clean_path})
    assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir),
                              "--seeds", *map(str, spec.seeds)]) == 0
    return rundir

