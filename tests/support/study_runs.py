"""Synthetic run folders in the pipeline's exact layout (``<root>/<dataset>/<variant>/<method>/
seed<k>/``: metrics.json, player_val_acc.npz, train_log.csv) for the study figures, and a toy
player/label accuracy table (3 players, 6 labels)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from cdgtmll.io import write_json

BLOCK_KEYS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")


# ----------------------------------------------------------------- synthetic runs


def write_metrics(d: Path, glob: dict[str, float], adaptive: dict[str, float] | None = None,
                  train_counts=(50, 3, 20, 1, 40, 7), tail=(1, 3)) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    g = {k: 0.5 for k in BLOCK_KEYS} | glob
    a = {k: 0.4 for k in BLOCK_KEYS} | (adaptive or {})
    write_json(d / "metrics.json", {"global@0.5": g, "adaptive": a, "adaptive_thresholds": [0.5] * len(train_counts),
                                    "tail_labels": list(tail), "train_counts": list(train_counts)})
    return d


def write_player_acc(d: Path, player, label, acc) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    acc = np.atleast_2d(np.asarray(acc, dtype=np.float32))
    with open(d / "player_val_acc.npz", "wb") as fh:
        np.savez(fh, epoch=np.arange(1, acc.shape[0] + 1), player=np.asarray(player), label=np.asarray(label),
                 accuracy=acc)
    return d


def write_train_log(d: Path, phi, beta=None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    beta = beta if beta is not None else [0.3] * len(phi)
    with open(d / "train_log.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["epoch", "loss", "R", "C_loglik", "C_div", "Phi", "beta", "lr_backbone", "lr_head", "val_mAP",
                    "val_microF1", "epoch_time", "val_time"])
        for e, (f, b) in enumerate(zip(phi, beta), 1):
            w.writerow([e, -f, f, 0.0, 0.0, f, b, 1e-3, 1e-3, 0.5, 0.5, 0.01, 0.01])
    return d


def run(root: Path, ds: str, var: str, method: str, seed: int) -> Path:
    return root / ds / var / method / f"seed{seed}"


# 3 players, 6 labels; labels 1 and 3 (the tail by train_counts) and 4 are contested
TOY_PLAYER = np.array([0, 1, 2, 0, 1, 2, 0, 1, 0, 2])
TOY_LABEL = np.array([0, 1, 2, 3, 4, 5, 1, 3, 4, 3])
#                       l0   l1   l2   l3   l4   l5   l1   l3   l4   l3
TOY_ACC = np.array([0.9, 0.7, 0.8, 0.6, 0.5, 0.9, 0.8, 0.6, 0.5, 0.4])
