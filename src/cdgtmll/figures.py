"""Figures of the paper, each from run artefacts, each with the data behind it as CSV.

``python -m cdgtmll.figures pr --runs DIR... --clean CLEAN.npz --out figures/pr_tail``

PR curve (paper Fig. "Precision-recall curves on Pascal VOC-R"): for every method, the
micro-averaged precision-recall curve over the tail labels (bottom ``q`` of labels by
clean training prevalence, App. E.4) of the test split. Each run's curve is made
monotone by the usual interpolation p(r) = max_{r' >= r} p(r') and sampled on a fixed
recall grid; the figure shows the mean over runs (training seeds x sampling seeds)
with a ±1 std band. Writes ``<out>.pdf``, ``<out>.png``, ``<out>.csv`` (the curves)
and ``<out>.sources.json`` (the prediction files with sha256).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from cdgtmll.data.processed import ProcessedData
from cdgtmll.io import atomic_path, atomic_write, sha256_file, write_json
from cdgtmll.labels import tail_labels

RECALL_GRID = np.linspace(0.0, 1.0, 101)


def tail_pr_curve(Y: np.ndarray, S: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """Interpolated micro precision over ``tail`` columns at RECALL_GRID (nan if no positives)."""
    from sklearn.metrics import precision_recall_curve

    y = np.asarray(Y)[:, tail].ravel()
    s = np.asarray(S)[:, tail].ravel()
    if y.sum() == 0:
        return np.full(RECALL_GRID.shape, np.nan)
    prec, rec, _ = precision_recall_curve(y, s)
    # interpolated precision: best precision at any recall >= r
    order = np.argsort(rec)
    rec, prec = rec[order], prec[order]
    best = np.maximum.accumulate(prec[::-1])[::-1]
    idx = np.searchsorted(rec, RECALL_GRID, side="left")
    out = np.where(idx < len(rec), best[np.minimum(idx, len(rec) - 1)], 0.0)
    return out


def pr_figure(runs: dict[str, list[Path]], clean: ProcessedData, q: float, tie_seed: int,
              out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    tail = tail_labels(clean.part("train")[1], q=q, tie_seed=tie_seed)
    Y_test = np.asarray(clean.part("test")[1])
    rows, sources = [], {}
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    colors = plt.get_cmap("tab20").colors
    styles = ("-", "--", ":", "-.")
    for i, (method, preds) in enumerate(runs.items()):
        curves = []
        for p in preds:
            with np.load(p, allow_pickle=False) as z:
                curves.append(tail_pr_curve(Y_test, z["test"], tail))
            sources.setdefault(method, []).append({"path": str(p), "sha256": sha256_file(p)})
        C = np.vstack(curves)
        mean = np.nanmean(C, axis=0)
        std = np.nanstd(C, axis=0, ddof=1) if len(C) > 1 else np.zeros_like(mean)
        line, = ax.plot(RECALL_GRID, mean, label=f"{method} (n={len(C)})", color=colors[i % len(colors)],
                        linestyle=styles[(i // len(colors)) % len(styles)] if len(runs) <= len(colors) else
                        styles[i % len(styles)], linewidth=2.0 if method == "CD-GTMLL" else 1.2)
        ax.fill_between(RECALL_GRID, np.clip(mean - std, 0, 1), np.clip(mean + std, 0, 1),
                        color=line.get_color(), alpha=0.15, linewidth=0)
        for r, m, s in zip(RECALL_GRID, mean, std):
            rows.append({"method": method, "recall": round(float(r), 4), "precision_mean": float(m),
                         "precision_std": float(s), "n_runs": len(C)})
    ax.set(xlabel="recall (tail labels, micro)", ylabel="interpolated precision", xlim=(0, 1), ylim=(0, 1.02),
           title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    for ext in ("pdf", "png"):
        with atomic_path(out.with_suffix(f".{ext}"), suffix=f".{ext}") as tmp:
            fig.savefig(tmp, format=ext, dpi=150)
    plt.close(fig)
    atomic_write(out.with_suffix(".csv"), pd.DataFrame(rows).to_csv(index=False))
    write_json(out.with_suffix(".sources.json"), {
        "figure": out.name, "tail_labels": [clean.label_names[t] for t in tail], "runs": sources})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="fig", required=True)
    pr = sub.add_parser("pr", help="tail PR curves on an R-variant")
    pr.add_argument("--predictions", nargs="+", required=True, type=Path,
                    help=".../<method>/seed<k>/predictions.npz files; grouped by <method>")
    pr.add_argument("--clean", required=True, type=Path)
    pr.add_argument("--q", type=float, default=0.2)
    pr.add_argument("--tie-seed", type=int, default=0)
    pr.add_argument("--title", default="")
    pr.add_argument("--out", required=True, type=Path, help="output path without extension")
    args = ap.parse_args(argv)
    if args.fig == "pr":
        runs: dict[str, list[Path]] = {}
        for p in args.predictions:
            runs.setdefault(p.parent.parent.name, []).append(p)
        pr_figure(runs, ProcessedData.load(args.clean), args.q, args.tie_seed, args.out, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
