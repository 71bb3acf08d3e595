"""Does curiosity change the direction of CD-GTMLL's head update, or only its scale?

On one Yeast training batch, with CD-GTMLL built from the shipped default config
(``config/config.yaml``: hyper-parameters, training protocol), the same initial
parameters and the same batch, this computes ``grad -Phi`` w.r.t. the head rows of the
singly-covered labels (the pair-Linear rows ``0 .. L1-1``, weight and bias) twice: at
``alpha = 0`` (the No-Curiosity ablation) and at the config's alpha. It prints the
cosine between the two flattened gradients, and the same per row.

Why it matters: on a singly-covered label l the gradient of Phi w.r.t. its
logit is ``(w_l + alpha r_l)(y - p)`` (R's payoff weight ``w_l``, curiosity weight
``r_l = 1/(1 + freq_l)``). With ``payoff_weights='rarity'`` (``w_l = L r_l / sum r``)
this is ``r_l (L / sum r + alpha)(y - p)``: alpha only rescales the whole gradient, which
Adam ignores, so the ablation and the alpha sweep measure (almost) nothing, and the
cosine is 1. With the uniform payoff (``w_l = 1``) alpha re-weights labels by
``1 + alpha r_l``, so the flattened gradient turns towards the rare labels.

Each head row keeps its own direction in both cases (a per-row scalar): the per-row
cosines are 1 up to entries clipped in R but not in C. What curiosity changes is the
relative weight of the labels: in the shared backbone's gradient (printed too: the
cosine of the backbone gradients) and in the flattened head gradient.

Both readings of the payoff's scale are measured side by side (the same batch and initial
parameters): ``payoff_scale='mean'`` (the paper's Eq. 5 / Theorem 1(3): ``R = E[(1/Z) sum_l
w_l ll_l]``, the default) and ``'sum'`` (``R = L E[M]``, the earlier reading, under which alpha
means the paper's alpha / L). The gradient factor of a singly-covered label is then ``w_l/Z +
alpha r_l`` instead of ``w_l + alpha r_l``: curiosity weighs L times more against R.

    python benchmarks/bench_curiosity_direction.py [--config config/config.yaml] [--payoff uniform|rarity]

One line per scale with the cosines (all head rows, the backbone, the singly-covered rows);
the last line is ``cosine <value>`` (all head rows, the config's scale).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import torch

from cdgtmll.config import loader, plan
from cdgtmll.data.mulan import read_mulan_arff
from cdgtmll.methods.base import FitData, RunContext, build_for_protocol
from cdgtmll.nn.trainer import seed_everything

ROOT = Path(__file__).resolve().parents[1]


def yeast_train(mirror: Path) -> tuple[np.ndarray, np.ndarray]:
    path = mirror / "yeast" / "yeast-train.arff"
    if not path.is_file():
        sys.exit(f"bench_curiosity_direction: {path} not found (set CDGTMLL_DATA_MIRROR to the dataset mirror)")
    X, Y, _ = read_mulan_arff(path, 14)
    return np.asarray(X, dtype=np.float32), np.asarray(Y, dtype=np.uint8)


def gradients(method_hparams: dict, training: dict, X: np.ndarray, Y: np.ndarray, alpha: float, seed: int):
    """(single-label head-row gradient [L1, d'+1], backbone gradient, L1) of -Phi on the first batch."""
    m = build_for_protocol("CD-GTMLL", {**method_hparams, "alpha": alpha}, training)
    m.prepare(FitData(X, Y, None, None, [f"Class{k + 1}" for k in range(Y.shape[1])]), RunContext(seed, Path(".")))
    seed_everything(seed)
    model = m.build_model(X, Y)
    rows = torch.from_numpy(np.random.default_rng(seed).permutation(X.shape[0])[: m.batch_size])
    xb = torch.from_numpy(X)[rows]
    yb = m.train_targets(model, torch.from_numpy(Y.astype(np.float32)))[rows]
    loss, _ = m.training_step(model, xb, yb, progress=0.0)
    model.zero_grad()
    loss.backward()
    L1 = model.n_single
    head = torch.cat([model.heads.weight.grad, model.heads.bias.grad[:, None]], dim=1)
    backbone = torch.cat([p.grad.flatten() for p in model.backbone.parameters() if p.grad is not None])
    return head.double(), backbone.double(), L1


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    ap.add_argument("--dataset", default="yeast")
    ap.add_argument("--payoff", choices=("uniform", "rarity"), default=None,
                    help="override payoff_weights (default: the config's, else the method default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    config = loader.load(args.config)
    name, over = plan.resolve_method(config, "CD-GTMLL")
    hp = {**plan.method_hparams(config, args.dataset, name), **over}
    if args.payoff:
        hp["payoff_weights"] = args.payoff
    training = plan.training_protocol(config, args.dataset)
    mirror = Path(os.environ.get("CDGTMLL_DATA_MIRROR") or config.get("data", {}).get("mirror") or ROOT.parent / "shared" / "datasets")
    X, Y = yeast_train(mirror)
    alpha = float(hp.get("alpha", 0.4))
    payoff = build_for_protocol("CD-GTMLL", hp, training).payoff_weights
    own_scale = build_for_protocol("CD-GTMLL", hp, training).payoff_scale
    print(f"config {args.config}; payoff_weights {payoff}; batch {training.get('batch_size')}; seed {args.seed}; "
          f"alpha 0 vs {alpha}; L = {Y.shape[1]}")
    result = {}
    for scale in ("mean", "sum"):
        g0, b0, L1 = gradients({**hp, "payoff_scale": scale}, training, X, Y, 0.0, args.seed)
        g1, b1, _ = gradients({**hp, "payoff_scale": scale}, training, X, Y, alpha, args.seed)
        norms = (g1[:L1].norm(dim=1) / g0[:L1].norm(dim=1)).numpy()
        result[scale] = cosine(g0, g1)
        what = "the paper's, Eq. 5" if scale == "mean" else "the earlier reading, alpha/L"
        print(f"payoff_scale {scale:4s} ({what}): cosine all head rows {result[scale]:.6f}, backbone "
              f"{cosine(b0, b1):.6f}, singly-covered rows ({L1}) {cosine(g0[:L1], g1[:L1]):.6f}; per-row norm "
              f"ratio |g(alpha)|/|g(0)| {norms.min():.3f}-{norms.max():.3f}")
    print(f"cosine {result[own_scale]:.6f}")

if __name__ == "__main__":
    main()
