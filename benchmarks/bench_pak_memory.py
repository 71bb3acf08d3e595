"""Peak memory of P@1/3/5 at XMC scale without ever holding the dense score matrix.

    python benchmarks/bench_pak_memory.py [--rows 306782] [--labels 13330] [--chunk 256]
                                          [--labels-per-row 5] [--topk 100] [--seed 0]

Defaults are AmazonCat-13K's test split (306,782 x 13,330). Y is a random CSR matrix
with ``--labels-per-row`` positives per row; scores are generated chunk by chunk
(uniform [0, 1) float64, +0.3 on the row's positives so that P@k is not trivial),
seeded per chunk so both phases see identical scores.

Phase 1 "dense chunks": per chunk, :func:`cdgtmll.metrics.definitions.precision_at_k` on the
chunk's dense scores (what evaluating a dense predictions file costs, minus the file).
Phase 2 "top-K": per chunk, top-K selection (:func:`cdgtmll.metrics.definitions.topk_from_scores`,
what ``run.py`` stores for L > 2000), then P@k from the stored ``[n, K]`` arrays
(:func:`cdgtmll.metrics.definitions.precision_at_k_topk`, what ``evaluate.py`` does).

Printed per phase: tracemalloc peak (numpy buffers are traced) and the growth of the
process's ru_maxrss (a high-water mark, so it only shows growth beyond earlier phases),
both against the size of the dense float64 score matrix (what ``predictions.npz`` held
per split before) and the ratio. Both phases must give identical P@k.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp

from cdgtmll.metrics import definitions
from cdgtmll.metrics.definitions import precision_at_k_topk, topk_from_scores

MB = 1024.0**2


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def make_labels(n: int, L: int, per_row: int, seed: int) -> sp.csr_matrix:
    """``per_row`` uniform labels per row (drawn with replacement; the rare duplicates are
    merged, so a few rows have fewer)."""
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, L, size=(n, per_row), dtype=np.int32)
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int64)
    Y = sp.csr_matrix((np.ones(n * per_row, dtype=np.uint8), cols.ravel(), indptr), shape=(n, L))
    Y.sum_duplicates()
    Y.data[:] = 1
    return Y


def scores(Y: sp.csr_matrix, a: int, b: int, seed: int) -> np.ndarray:
    s = np.random.default_rng([seed, a]).random((b - a, Y.shape[1]))
    y = Y[a:b].tocoo()
    s[y.row, y.col] = np.minimum(s[y.row, y.col] + 0.3, 1.0)
    return s


def phase(name: str, fn, dense_mb: float) -> dict:
    rss0 = maxrss_mb()
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_mb = peak / MB
    rss_growth = maxrss_mb() - rss0
    print(f"{name:<14} tracemalloc peak {peak_mb:9.1f} MB  ({100 * peak_mb / dense_mb:6.2f}% of dense, "
          f"ratio 1:{dense_mb / max(peak_mb, 1e-9):.0f})   maxrss growth {rss_growth:8.1f} MB   "
          f"time {dt:6.1f} s   " + "  ".join(f"{k}={v:.6f}" for k, v in out["pak"].items()), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=306_782)
    ap.add_argument("--labels", type=int, default=13_330)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--labels-per-row", type=int, default=5)
    ap.add_argument("--topk", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n, L, C = args.rows, args.labels, args.chunk
    dense_mb = n * L * 8 / MB
    print(f"problem: {n} x {L}, {args.labels_per_row} labels/row, chunk {C} rows, top-K {args.topk}")
    t0 = time.perf_counter()
    Y = make_labels(n, L, args.labels_per_row, args.seed)
    y_mb = (Y.data.nbytes + Y.indices.nbytes + Y.indptr.nbytes) / MB
    print(f"sparse Y: nnz {Y.nnz}, {y_mb:.1f} MB (built in {time.perf_counter() - t0:.1f} s)")
    print(f"dense score matrix: {dense_mb:,.1f} MB float64 ({dense_mb / 2:,.1f} MB float32) -- never allocated")
    print(f"one score chunk: {C * L * 8 / MB:.1f} MB float64; baseline maxrss {maxrss_mb():.1f} MB")

    def dense_chunks() -> dict:
        hits = {1: 0.0, 3: 0.0, 5: 0.0}
        for a in range(0, n, C):
            b = min(n, a + C)
            p = definitions.precision_at_k(Y[a:b], scores(Y, a, b, args.seed), ks=(1, 3, 5), chunk=C)
            for k in hits:
                hits[k] += round(p[f"p@{k}"] * (b - a) * k)  # back to the integer hit count
        return {"pak": {f"p@{k}": hits[k] / (n * k) for k in hits}}

    def topk() -> dict:
        K = min(args.topk, L)
        idx = np.empty((n, K), dtype=np.int32)
        val = np.empty((n, K), dtype=np.float32)
        for a in range(0, n, C):
            b = min(n, a + C)
            idx[a:b], val[a:b] = topk_from_scores(scores(Y, a, b, args.seed), K)
        stored_mb = (idx.nbytes + val.nbytes) / MB
        return {"pak": precision_at_k_topk(Y, idx, ks=(1, 3, 5)), "stored_mb": stored_mb}

    r1 = phase("dense chunks", dense_chunks, dense_mb)
    r2 = phase("top-K", topk, dense_mb)
    print(f"top-K arrays stored per split: {r2['stored_mb']:.1f} MB (int32 + float32, K={min(args.topk, L)}) = "
          f"{100 * r2['stored_mb'] / dense_mb:.2f}% of the dense float64 matrix")
    same = all(r1["pak"][k] == r2["pak"][k] for k in r1["pak"])
    print(f"P@k identical in both phases: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
