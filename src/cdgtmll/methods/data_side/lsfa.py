"""LSFA (data-side baseline, :mod:`cdgtmll.methods.data_side`): BCE, a feature
generator fitted on head labels, synthetic tail-label features, and the linear head
retrained on real + synthetic features with the backbone frozen."""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.data_side.common import _BCEDataSide, _dense_labels, _derived_seed
from cdgtmll.nn.losses.common import bce_terms
from cdgtmll.nn.progress import RunProgress, fmt_seconds
from cdgtmll.nn.trainer import PREDICT_CHUNK, TrainConfig, TrainTask, as_float32, epoch_selection, train


def label_prototypes(H: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-label prototypes ``[L, d]``: the mean feature of the label's positives (NaN row
    for a label without positives), and the positive counts ``[L]``."""
    H = np.asarray(H, dtype=np.float64)
    Yf = (np.asarray(Y) > 0.5).astype(np.float64)
    counts = Yf.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        P = (Yf.T @ H) / counts[:, None]
    P[counts == 0] = np.nan
    return P, counts.astype(np.int64)


def split_head_tail(counts: np.ndarray, head_min_count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(head, tail, empty)`` label indices: head ``n_k >= head_min_count``, tail
    ``1 <= n_k < head_min_count``, empty ``n_k = 0`` (no prototype: not augmented)."""
    counts = np.asarray(counts)
    return (
        np.flatnonzero(counts >= head_min_count),
        np.flatnonzero((counts >= 1) & (counts < head_min_count)),
        np.flatnonzero(counts == 0),
    )


class FeatureCVAE(nn.Module):
    """Conditional VAE over backbone features, conditioned on a label prototype (LSFA's
    feature generator), layer for layer the official ``FeatsVAE`` (stxupengyu/LSFA
    ``transfer/transfer_model.py``, commit cd21f09de97cd1f3a5de9f18735112ed4cae4088):
    encoder ``[h, p] -> Linear -> LeakyReLU``; ``mu`` and ``logvar`` each
    ``Linear -> ReLU`` (so ``mu >= 0`` and ``logvar >= 0``, i.e. posterior std >= 1);
    generator ``[z, p] -> Linear -> LeakyReLU -> Linear``, then ``BatchNorm1d`` and
    ``ReLU`` on its output (official ``self.relu(self.bn1(recon_feats))``, also at
    generation time, ``transfer/generator.py``). The final ReLU is applied when
    ``relu_output`` (our backbones' features are post-ReLU, so it always is in the
    pipeline); ``relu_output=False`` leaves it out for signed features. Linear weights and
    biases initialised ``N(0, 0.02)`` as in the official ``init_weights``; BatchNorm keeps
    PyTorch's defaults (eps 1e-5, momentum 0.1), as the official code."""

    def __init__(self, feat_dim: int, hidden_dim: int = 512, latent_dim: int | None = None, relu_output: bool = True) -> None:
        super().__init__()
        self.feat_dim = int(feat_dim)
        self.latent_dim = int(latent_dim or feat_dim)
        self.relu_output = bool(relu_output)
        self.encoder = nn.Sequential(nn.Linear(2 * self.feat_dim, hidden_dim), nn.LeakyReLU())
        self.mu = nn.Sequential(nn.Linear(hidden_dim, self.latent_dim), nn.ReLU())
        self.logvar = nn.Sequential(nn.Linear(hidden_dim, self.latent_dim), nn.ReLU())
        self.generator = nn.Sequential(
            nn.Linear(self.latent_dim + self.feat_dim, hidden_dim), nn.LeakyReLU(), nn.Linear(hidden_dim, self.feat_dim)
        )
        self.bn = nn.BatchNorm1d(self.feat_dim)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                nn.init.normal_(m.bias, 0.0, 0.02)

    def decode(self, z: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        out = self.bn(self.generator(torch.cat([z, p], dim=1)))
        return F.relu(out) if self.relu_output else out

    def forward(self, h: torch.Tensor, p: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        e = self.encoder(torch.cat([h, p], dim=1))
        mu, logvar = self.mu(e), self.logvar(e)
        eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype)
        return self.decode(mu + eps * torch.exp(0.5 * logvar), p), mu, logvar

    @torch.no_grad()
    def generate(self, p: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
        """``n`` features from prototype ``p`` (``[d]``): ``z ~ N(0, I)`` through the decoder,
        in eval mode (BatchNorm with its running statistics), as the official ``generate``."""
        was_training = self.training
        self.eval()
        z = torch.randn((int(n), self.latent_dim), generator=gen)
        out = self.decode(z, p.reshape(1, -1).expand(int(n), -1))
        self.train(was_training)
        return out


def cvae_loss(recon: torch.Tensor, h: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor, kl_weight: float) -> torch.Tensor:
    """Official ``VAE_loss``: mean-over-dims MSE + ``kl_weight`` * KL(q(z|h,p) || N(0, I)),
    both averaged over the batch."""
    recon_loss = ((recon - h) ** 2).mean(dim=1).mean()
    kl = (-0.5 * (1.0 + logvar - mu.pow(2) - logvar.exp()).sum(dim=1)).mean()
    return recon_loss + kl_weight * kl


def train_feature_generator(
    H: np.ndarray,
    P: np.ndarray,
    seed: int,
    epochs: int = 100,
    batch_size: int = 256,
    lr: float = 1e-3,
    hidden_dim: int = 512,
    kl_weight: float = 0.005,
    patience: int = 10,
    val_frac: float = 0.1,
    foreach: bool = True,
) -> tuple[FeatureCVAE, dict[str, Any]]:
    """Fit a :class:`FeatureCVAE` on pairs ``(H[i], P[i])`` (a head label's positive feature
    and that label's prototype), on CPU, fully seeded. Adam; a seeded ``val_frac`` split for
    early stopping (``patience`` epochs without improvement; the best state is kept), as in
    the official ``transfer_train``. ``foreach``: Adam's multi-tensor implementation (on CPU
    torch defaults to the per-tensor loop); the same arithmetic, bit for bit
    (tests/unit/methods/test_methods_data_side.py), and ~10% less CPU for the generator on Yeast."""
    H_t = torch.as_tensor(np.asarray(H, dtype=np.float32))
    P_t = torch.as_tensor(np.asarray(P, dtype=np.float32))
    n, d = H_t.shape
    gen = torch.Generator().manual_seed(_derived_seed(seed, 3))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_derived_seed(seed, 4))
        model = FeatureCVAE(d, hidden_dim=hidden_dim, relu_output=bool((H_t >= 0).all()))
    perm = torch.randperm(n, generator=gen)
    n_val = int(round(val_frac * n)) if n >= 10 else 0
    val_idx, tr_idx = perm[:n_val], perm[n_val:]
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=foreach)
    best, best_state, bad, history = math.inf, copy.deepcopy(model.state_dict()), 0, []
    for epoch in range(1, int(epochs) + 1):
        model.train()
        order = tr_idx[torch.randperm(tr_idx.numel(), generator=gen)]
        tot = 0.0
        for s in range(0, order.numel(), batch_size):
            b = order[s : s + batch_size]
            if b.numel() < 2:  # BatchNorm cannot train on one row: a last batch of 1 is skipped
                continue
            recon, mu, logvar = model(H_t[b], P_t[b], gen)
            loss = cvae_loss(recon, H_t[b], mu, logvar, kl_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * b.numel()
        model.eval()
        with torch.no_grad():
            ev = val_idx if n_val > 0 else tr_idx
            recon, mu, logvar = model(H_t[ev], P_t[ev], gen)
            monitor = float(cvae_loss(recon, H_t[ev], mu, logvar, kl_weight))
        history.append({"epoch": epoch, "train_loss": tot / max(tr_idx.numel(), 1), "monitor_loss": monitor})
        if monitor < best - 1e-12:
            best, best_state, bad = monitor, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    return model, {"n_pairs": int(n), "epochs_run": len(history), "best_monitor_loss": best, "history": history}


def generate_tail_features(
    model: FeatureCVAE, P: np.ndarray, tail: np.ndarray, n_per_label: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``n_per_label`` synthetic features per tail label from its prototype; returns
    ``(features [T*n, d], label index [T*n])``."""
    gen = torch.Generator().manual_seed(_derived_seed(seed, 5))
    feats, labels = [], []
    for k in np.asarray(tail).tolist():
        feats.append(model.generate(torch.as_tensor(P[k], dtype=torch.float32), n_per_label, gen).numpy())
        labels.append(np.full(n_per_label, k, dtype=np.int64))
    if not feats:
        return np.zeros((0, model.feat_dim), np.float32), np.zeros(0, np.int64)
    return np.concatenate(feats).astype(np.float32), np.concatenate(labels)


class _LSFAHeadTask(TrainTask):
    """Stage 3 of LSFA through the shared trainer: a fresh linear head on frozen backbone
    features. Targets are ``[y (L) | mask (L) | is_synthetic (1)]``: real rows count on
    every label; a synthetic row counts only on its own tail label (positive), and only
    from epoch ``calib_warmup + 1`` on, weighted by ``calib_weight``. The batch loss is the
    project reduction (sum over labels) averaged over the rows that count."""

    def __init__(self, n_labels: int, in_dim: int, calib_warmup: int, calib_weight: float) -> None:
        self.n_labels, self.in_dim = int(n_labels), int(in_dim)
        self.calib_warmup, self.calib_weight = int(calib_warmup), float(calib_weight)
        self.epochs_done = 0

    def build_model(self, X_train, Y_train):
        return nn.Linear(self.in_dim, self.n_labels)

    def param_groups(self, model):
        return {"head": list(model.parameters())}

    def training_step(self, model, xb, yb, progress):
        L = self.n_labels
        y, mask, syn = yb[:, :L], yb[:, L : 2 * L], yb[:, 2 * L : 2 * L + 1]
        active = 1.0 if self.epochs_done >= self.calib_warmup else 0.0
        row_w = torch.where(syn > 0.5, torch.full_like(syn, active * self.calib_weight), torch.ones_like(syn))
        ell = bce_terms(model(xb), y) * mask * row_w
        n_rows = ((syn <= 0.5) | (active > 0)).sum().clamp(min=1)
        # logged per epoch by the trainer as (active synthetic rows seen) / (rows)
        return ell.sum() / n_rows, {"synthetic_frac": (syn > 0.5).float().mean() * active}

    def predict(self, model, x):
        return torch.sigmoid(model(x))

    def epoch_end(self, model, epoch, X_val, Y_val, workdir):
        self.epochs_done = int(epoch)
        return {}

    def extra_state(self):
        return {"epochs_done": self.epochs_done}

    def load_extra_state(self, state):
        self.epochs_done = int(state["epochs_done"])


@register("LSFA")
class LSFAMethod(_BCEDataSide):
    r"""LSFA: Xu, Zhang, Li, Zeng, Zhang, Wang, "Label-Specific Feature Augmentation for
    Long-Tailed Multi-Label Text Classification", AAAI 2023. Reconstructed from the notes
    and the official code (github stxupengyu/LSFA: ``transfer/collector.py``,
    ``transfer_model.py``, ``transfer_train.py``, ``generator.py``, ``calibration.py``,
    defaults of ``main.py``); section/equation numbers of the paper are not cited because
    its text was not available to us.

    1. Stage 1 is exactly the BCE row (same model, trainer and seed): read from the BCE run's
       checkpoint when the run spec names one (``base_run``, :meth:`NeuralMethod._read_base_run`),
       else trained here in ``ctx.workdir``.
    2. Backbone features ``h(x)`` of the training rows (eval mode); prototype of label k =
       mean ``h`` of its positives (official ``get_prototype``); head labels have
       ``n_k >= head_min_count`` (the notes; the official code uses ``> threshold``), tail
       labels ``1 <= n_k < head_min_count``. A conditional VAE (official ``FeatsVAE``:
       encoder ``[h, p_k] -> (mu, logvar)``, decoder ``[z, p_k] -> h``) is fitted on every
       (positive feature, prototype) pair of the head labels with the official loss, MSE +
       0.005 KL, Adam, a 10 % split for early stopping (patience 10). ``n_synthetic`` (10,
       official ``da_number``) features per tail label are decoded from ``z ~ N(0, I)`` and
       the tail label's prototype.
    3. A fresh linear head (official: a new ``Classifier``) is trained on the frozen
       features with the shared trainer (same epochs unless ``calib_epochs``): BCE on the
       real rows, plus, after ``calib_warmup`` epochs (official 5), the synthetic rows,
       each supervising **only its own tail label as a positive** (official
       ``calibration_loss`` sets the other labels' targets to the detached prediction,
       i.e. zero gradient: we mask them), weight ``calib_weight`` (official 1). The
       stage-3 log and checkpoint live in ``ctx.workdir/lsfa_stage3``. Prediction:
       ``sigmoid(new_head(h(x)))``.

    If there is no tail label (or no head label to fit the generator on), stages 2-3 are
    skipped and LSFA *is* the BCE model; ``extra_outputs()['lsfa']['fallback']`` says so.

    Differences from the original: the paper's features are *label-specific* (a per-label
    attention over a BiLSTM text encoder), ours are the shared backbone's ``h(x)``, so a
    label's "label-specific features" are its positives' ``h`` and all labels share one
    feature space; the paper additionally trains with a contrastive loss, not used here
    (only the augmentation is the baseline's data path). The generator is the official
    ``FeatsVAE`` (:class:`FeatureCVAE`: ReLU on ``mu`` and ``logvar``, BatchNorm + ReLU on
    the output; a final ReLU only when the features are non-negative, which our
    backbones' features always are; a last training batch of a single row is skipped,
    as BatchNorm cannot normalise one row). Training details that differ from the
    official code: batch 256 and lr 1e-3 instead of 40 and 1e-4 (CPU cost); synthetic rows are shuffled into the real batches
    instead of separate calibration passes; stage 3 uses the shared trainer (AdamW,
    cosine, clipping) and runs a fixed number of epochs (official: early stopping on
    validation P@k); the generator trains on CPU.
    """

    def __init__(
        self,
        *,
        head_min_count: int,
        n_synthetic: int,
        gen_epochs: int,
        gen_batch_size: int,
        gen_lr: float,
        gen_hidden_dim: int,
        kl_weight: float,
        gen_patience: int,
        calib_epochs: int | None,
        calib_warmup: int,
        calib_weight: float,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if head_min_count < 1 or n_synthetic < 1:
            raise ValueError("LSFA: head_min_count and n_synthetic must be >= 1")
        if gen_epochs < 1 or gen_batch_size < 1 or gen_patience < 1:
            raise ValueError("LSFA: gen_epochs, gen_batch_size and gen_patience must be >= 1")
        if calib_epochs is not None and calib_epochs < 1:
            raise ValueError("LSFA: calib_epochs must be >= 1 or None")
        self.lsfa_params: dict[str, Any] = {
            "head_min_count": int(head_min_count),
            "n_synthetic": int(n_synthetic),
            "gen_epochs": int(gen_epochs),
            "gen_batch_size": int(gen_batch_size),
            "gen_lr": float(gen_lr),
            "gen_hidden_dim": int(gen_hidden_dim),
            "kl_weight": float(kl_weight),
            "gen_patience": int(gen_patience),
            "calib_epochs": None if calib_epochs is None else int(calib_epochs),
            "calib_warmup": int(calib_warmup),
            "calib_weight": float(calib_weight),
        }
        self._summary: dict[str, Any] = {}
        self.stage3_log: list[dict[str, Any]] = []

    def hparams(self) -> dict[str, Any]:
        return {**super().hparams(), **self.lsfa_params}

    @torch.no_grad()
    def features(self, X: Any) -> np.ndarray:
        """Backbone features ``h(x)`` (eval mode), float32 ``[n, d']``."""
        self.model.eval()
        Xf = as_float32(X)
        out = [
            self.model.backbone(torch.from_numpy(Xf[s : s + PREDICT_CHUNK]).to(self.device)).float().cpu()
            for s in range(0, Xf.shape[0], PREDICT_CHUNK)
        ]
        return torch.cat(out).numpy()

    def fit(self, data: FitData, ctx: RunContext) -> LSFAMethod:
        super().fit(data, ctx)  # stage 1: the BCE row
        hp = self.lsfa_params
        Y = (_dense_labels(data.Y_train) > 0.5).astype(np.uint8)
        H = self.features(data.X_train)
        P, counts = label_prototypes(H, Y)
        head, tail, empty = split_head_tail(counts, hp["head_min_count"])
        self._summary = {
            "head_labels": head.tolist(),
            "tail_labels": tail.tolist(),
            "empty_labels": empty.tolist(),
            "n_synthetic_per_tail_label": hp["n_synthetic"],
            "n_synthetic_total": 0,
            "fallback": None,
        }
        if tail.size == 0 or head.size == 0:
            why = "no tail labels" if tail.size == 0 else "no head labels to fit the generator on"
            self._summary["fallback"] = f"{why} (head_min_count={hp['head_min_count']}): LSFA = the stage-1 BCE model"
            return self

        # stage 2: generator on head labels, synthetic features for tail labels
        rows, labs = np.nonzero(Y[:, head])
        t_gen = time.perf_counter()
        cvae, gen_info = train_feature_generator(
            H[rows], P[head[labs]], seed=ctx.seed, epochs=hp["gen_epochs"], batch_size=hp["gen_batch_size"],
            lr=hp["gen_lr"], hidden_dim=hp["gen_hidden_dim"], kl_weight=hp["kl_weight"], patience=hp["gen_patience"],
        )
        H_syn, lab_syn = generate_tail_features(cvae, P, tail, hp["n_synthetic"], seed=ctx.seed)
        if isinstance(ctx.progress, RunProgress):  # the job log's line for this stage (no RNG touched)
            ctx.progress.note(f"LSFA/generator: {gen_info['epochs_run']} of {hp['gen_epochs']} epochs, "
                              f"best monitor loss {gen_info['best_monitor_loss']:.5f}, "
                              f"{lab_syn.size} synthetic features, {fmt_seconds(time.perf_counter() - t_gen)}")
        self._summary["generator"] = {k: v for k, v in gen_info.items() if k != "history"}
        self._summary["n_synthetic_total"] = int(lab_syn.size)

        # stage 3: fresh linear head on frozen features, real + synthetic
        L, m = Y.shape[1], lab_syn.size
        onehot = np.zeros((m, L), np.float32)
        onehot[np.arange(m), lab_syn] = 1.0
        T_real = np.hstack([Y.astype(np.float32), np.ones_like(Y, dtype=np.float32), np.zeros((Y.shape[0], 1), np.float32)])
        T_syn = np.hstack([onehot, onehot, np.ones((m, 1), np.float32)])
        H_all = np.vstack([H, H_syn])
        T_all = np.vstack([T_real, T_syn])
        has_val = data.X_val is not None and data.Y_val is not None and np.shape(data.Y_val)[0] > 0
        H_val = self.features(data.X_val) if has_val else None
        Y_val = _dense_labels(data.Y_val) if has_val else None
        task = _LSFAHeadTask(L, H.shape[1], hp["calib_warmup"], hp["calib_weight"])
        base = self.train_config(ctx)
        cfg = TrainConfig(
            epochs=hp["calib_epochs"] or base.epochs, batch_size=base.batch_size, lr_backbone=base.lr_backbone,
            lr_head=base.lr_head, weight_decay=base.weight_decay, grad_clip=base.grad_clip,
            select_epoch=base.select_epoch, optimizer_impl=base.optimizer_impl, allow_tf32=base.allow_tf32,
            cudnn_benchmark=base.cudnn_benchmark,
        )
        ctx3 = dataclasses.replace(ctx, workdir=Path(ctx.workdir) / "lsfa_stage3")
        fp = {"method": f"{self.name or 'LSFA'}/stage3", "hparams": self.hparams()}
        head_model, self.stage3_log = train(task, H_all, T_all, H_val, Y_val, cfg, ctx3, fp)
        self._summary["stage3_epoch_selection"] = epoch_selection(self.stage3_log, cfg.select_epoch)
        self.model.head.load_state_dict(head_model.state_dict())
        self.model.eval()
        return self

    def extra_outputs(self) -> dict[str, Any]:
        return {"lsfa": self._summary, "hparams": self.hparams()}
