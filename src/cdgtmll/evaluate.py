"""Score a run's predictions with the metrics of Appendix E.4, identically for every method.

``python -m cdgtmll.evaluate --clean CLEAN.npz --rundir DIR --seeds 0 1 2``

For each seed directory, reads ``predictions.npz`` and writes ``metrics.json``
with two blocks: ``global@<tau>`` (one threshold for every label, default 0.5)
and ``adaptive`` (per-label thresholds tuned on the validation split, fixed at
test; App. E.1 "Thresholds and calibration"), plus a ``method`` block for methods
whose decision rule is part of the method (plug-in estimators: PE, SRB). Ground truth for validation and
test always comes from the *clean* processed data (R-variants edit training
labels only), and Rare-F1's tail is the bottom ``tail_fraction`` of labels by
clean training prevalence (App. E.4), i.e. the same labels an R-variant
down-samples. The record also holds the sha256 of every input, so an audit can
check that the metrics were computed from the files beside them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from cdgtmll import metrics, provenance
from cdgtmll.data.processed import ProcessedData
from cdgtmll.io import sha256_file, write_json
from cdgtmll.labels import label_counts, tail_labels


def evaluate_run(clean: ProcessedData, pred_path: Path, tail: np.ndarray, threshold: float) -> dict:
    with np.load(pred_path, allow_pickle=False) as z:
        s_val, s_test = z["val"], z["test"]
        own = z["method_thresholds"] if "method_thresholds" in z.files else None
        for split, key in (("val", "idx_val"), ("test", "idx_test")):
            if not np.array_equal(z[key], clean.splits[split]):
                raise ValueError(f"{pred_path}: field '{key}' does not match the {split} rows of the clean data")
    _, Y_val = clean.part("val")
    _, Y_test = clean.part("test")
    Y_val, Y_test = np.asarray(Y_val), np.asarray(Y_test)
    result = metrics.evaluate_all(Y_test, s_test, Y_val, s_val, tail, global_threshold=threshold)
    if own is not None:  # the method's own decision rule (PE, SRB): see Method.decision_thresholds
        result["method"] = metrics.evaluate(Y_test, s_test, tail, own)
        result["method_thresholds"] = [float(t) for t in own]
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clean", required=True, type=Path)
    ap.add_argument("--rundir", required=True, type=Path)
    ap.add_argument("--seeds", required=True, type=int, nargs="+")
    ap.add_argument("--tail-fraction", type=float, default=0.2)
    ap.add_argument("--tie-seed", type=int, default=0)
    ap.add_argument("--threshold", type=float, default=0.5)
    args = ap.parse_args(argv)
    clean = ProcessedData.load(args.clean)
    Y_train = clean.part("train")[1]
    tail = tail_labels(Y_train, q=args.tail_fraction, tie_seed=args.tie_seed)
    clean_sha = sha256_file(args.clean)
    for seed in args.seeds:
        d = args.rundir / f"seed{seed}"
        pred = d / "predictions.npz"
        result = evaluate_run(clean, pred, tail, args.threshold)
        result.update({
            "tail_labels": [int(t) for t in tail],
            "tail_label_names": [clean.label_names[t] for t in tail],
            "train_counts": [int(c) for c in label_counts(Y_train)],
            "inputs": {
                "predictions": {"path": str(pred), "sha256": sha256_file(pred)},
                "provenance": {"path": str(d / "provenance.json"), "sha256": sha256_file(d / "provenance.json")},
                "clean_data": {"path": str(args.clean), "sha256": clean_sha},
            },
            "evaluated": provenance.now(),
            "git": provenance.git_state(),
        })
        write_json(d / "metrics.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
