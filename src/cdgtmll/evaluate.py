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

Top-K predictions (``format='topk'`` in ``predictions.npz``, written by
:mod:`cdgtmll.run` when ``L > run.TOPK_MIN_LABELS``): only ``p@1``, ``p@3``, ``p@5``
are computed (:func:`precision_at_k_topk`, exactly the dense P@k when ``K >= k``; the
paper reports only P@k on XMC, and App. E.2 says label-adaptive thresholds are not used
for P@k). ``mAP``, ``micro_f1``, ``macro_f1``, ``rare_f1`` are ``null`` with
``"note": "not computed for top-K predictions"``, in both blocks and the ``method``
block; ``adaptive_thresholds`` is ``null``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from cdgtmll import metrics, provenance
from cdgtmll.data.processed import ProcessedData
from cdgtmll.io import sha256_file, write_json
from cdgtmll.labels import label_counts, tail_labels


# --------------------------------------------------------------------------- top-K format
TOPK_NOTE = "not computed for top-K predictions"
_NOT_FROM_TOPK = ("mAP", "n_labels_in_map", "micro_f1", "macro_f1", "rare_f1")


def topk_from_scores(s: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` label indices (int32) and scores (float32) of each row of the dense
    block ``s``: score descending, ties by lower label index (the order of
    :func:`cdgtmll.metrics.precision_at_k`); the ranking uses ``s``'s own precision."""
    s = np.asarray(s)
    k = min(int(k), s.shape[1])
    idx = metrics._topk_rows(s, k)
    return idx.astype(np.int32), np.take_along_axis(s, idx, axis=1).astype(np.float32)


def precision_at_k_topk(Y, topk_idx: np.ndarray, ks=(1, 3, 5), chunk: int = 65536) -> dict[str, float]:
    """P@k (Eq. E.9) from stored top-K label indices ``[n, K]`` (best first) against ``Y``
    (dense or scipy.sparse ``[n, L]``). Needs ``k <= K`` for every k. Sparse Y is never
    densified: membership of (row, label) pairs is a binary search in Y's sorted CSR
    keys, memory O(nnz(Y) + chunk x K)."""
    topk_idx = np.asarray(topk_idx)
    n, K = topk_idx.shape
    ks = [int(k) for k in ks]
    if Y.shape[0] != n:
        raise ValueError(f"top-K predictions have {n} rows, labels {Y.shape[0]}")
    if not ks or min(ks) < 1 or max(ks) > K:
        raise ValueError(f"ks must be in [1, K={K}], got {ks}")
    L = Y.shape[1]
    if topk_idx.size and (topk_idx.min() < 0 or topk_idx.max() >= L):
        raise ValueError(f"top-K label indices outside [0, {L})")
    Yc = sp.csr_matrix(Y)
    Yc.sum_duplicates()  # canonical: sorted indices, so row-major keys are sorted
    keys = (np.repeat(np.arange(n, dtype=np.int64), np.diff(Yc.indptr)) * L + Yc.indices.astype(np.int64))
    keys = keys[np.asarray(Yc.data) != 0]
    kmax = max(ks)
    hits = {k: 0 for k in ks}
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        q = np.arange(a, b, dtype=np.int64)[:, None] * L + topk_idx[a:b, :kmax].astype(np.int64)
        pos = np.searchsorted(keys, q)
        rel = (pos < keys.size) & (keys[np.minimum(pos, keys.size - 1)] == q) if keys.size else np.zeros(q.shape, bool)
        csum = np.cumsum(rel, axis=1)
        for k in ks:
            hits[k] += int(csum[:, k - 1].sum())
    return {f"p@{k}": (hits[k] / (n * k) if n else float("nan")) for k in ks}


def _topk_block(Y_test, topk_test: np.ndarray) -> dict:
    out: dict = {m: None for m in _NOT_FROM_TOPK}
    out.update(precision_at_k_topk(Y_test, topk_test, ks=(1, 3, 5)))
    out["note"] = TOPK_NOTE
    return out


def _evaluate_topk(clean: ProcessedData, z, threshold: float, own) -> dict:
    _, Y_test = clean.part("test")
    block = _topk_block(Y_test, z["test_topk_idx"])
    result = {f"global@{float(threshold):g}": block, "adaptive": dict(block), "adaptive_thresholds": None,
              "format": "topk", "topk": int(z["topk"])}
    if own is not None:
        result["method"] = dict(block)
        result["method_thresholds"] = [float(t) for t in own]
    return result


def evaluate_run(clean: ProcessedData, pred_path: Path, tail: np.ndarray, threshold: float) -> dict:
    with np.load(pred_path, allow_pickle=False) as z:
        if "format" in z.files and str(z["format"]) == "topk":
            own = z["method_thresholds"] if "method_thresholds" in z.files else None
            for split, key in (("val", "idx_val"), ("test", "idx_test")):
                if not np.array_equal(z[key], clean.splits[split]):
                    raise ValueError(f"{pred_path}: field '{key}' does not match the {split} rows of the clean data")
            return _evaluate_topk(clean, z, threshold, own)
        s_val, s_test = z["val"], z["test"]
        own = z["method_thresholds"] if "method_thresholds" in z.files else None
        for split, key in (("val", "idx_val"), ("test", "idx_test")):
            if not np.array_equal(z[key], clean.splits[split]):
                raise ValueError(f"{pred_path}: field '{key}' does not match the {split} rows of the clean data")
    _, Y_val = clean.part("val")
    _, Y_test = clean.part("test")
    Y_val, Y_test = (y if sp.issparse(y) else np.asarray(y) for y in (Y_val, Y_test))  # metrics take CSR
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
