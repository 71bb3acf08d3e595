"""Data-side baselines: the BCE row (shared MLP backbone + one linear head, BCE, the
shared trainer and its hyper-parameters) with a different *data path*.

* **BalanceMix** -- minority-augmented mixup with label-wise management of the targets
  (the training inputs and targets of each batch change; model, loss and trainer are BCE's).
* **MLBOTE** -- borderline oversampling of the training feature vectors before training
  (BCE is then trained on real + synthetic rows).
* **LSFA** -- BCE, then a feature generator fitted on head labels produces synthetic
  backbone features for tail labels, and the linear head is retrained on real + synthetic
  features with the backbone frozen.

Each method's docstring cites its paper and lists what differs from the original, and
what was reconstructed rather than taken from the paper. Inputs here are tabular feature
vectors (the papers use images, MULAN data and text respectively).

Every random draw is seeded from ``RunContext.seed`` (own ``torch.Generator`` /
``numpy.random.Generator`` objects, never the global RNG outside the shared trainer), so
the same seed gives identical predictions on CPU.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from sklearn.mixture import GaussianMixture
from sklearn.neighbors import NearestNeighbors
from torch import nn

from cdgtmll.losses import reduce
from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.neural import LossHeadMethod
from cdgtmll.nn.trainer import PREDICT_CHUNK, TrainConfig, TrainTask, as_float32, train

_BACKBONE = "MLP backbone (2x512, ReLU) + linear head, BCE (as the BCE row)"


def _derived_seed(seed: int, tag: int) -> int:
    """A seed for one of a method's own RNG streams, distinct from the trainer's shuffle
    generator (which is seeded with ``seed`` itself)."""
    return int((int(seed) * 1_000_003 + int(tag) * 7_919 + 0x5EED) % (2**63 - 1))


def _dense_labels(Y: Any) -> np.ndarray:
    if sp.issparse(Y):
        Y = Y.toarray()
    return np.asarray(Y)


class _BCEDataSide(LossHeadMethod):
    """The BCE row (loss 'bce', same model/trainer); subclasses change the data path."""

    loss_name = "bce"
    loss_defaults: dict[str, Any] = {}

    def __init__(
        self,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)

    def supports_images(self) -> bool:
        """BalanceMix mixes input vectors, MLBOTE interpolates them and LSFA generates
        feature vectors: all three treat ``X`` as vectors (see ``Method.supports_images``)."""
        return False


# =====================================================================================
# BalanceMix
# =====================================================================================


def sample_mix_lambda(alpha: float, size: int, gen: torch.Generator) -> torch.Tensor:
    """``lambda = max(lambda', 1 - lambda')``, ``lambda' ~ Beta(alpha, alpha)`` (Eq. 5),
    shape ``[size]``, float32 on CPU. The Beta draws come from a numpy generator seeded by
    one draw of ``gen``, so ``gen`` alone carries the state (torch has no seeded Beta)."""
    if alpha <= 0:
        raise ValueError(f"mix_alpha must be > 0, got {alpha}")
    sub_seed = int(torch.randint(0, 2**62, (1,), generator=gen).item())
    lam = np.random.default_rng(sub_seed).beta(alpha, alpha, size=int(size))
    return torch.from_numpy(np.maximum(lam, 1.0 - lam)).float()


def mix_pair(
    x_r: torch.Tensor, x_m: torch.Tensor, y_r: torch.Tensor, y_m: torch.Tensor, lam: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup of a random-sampler instance (``x_r, y_r``) with a minority-sampler instance
    (``x_m, y_m``): ``lam * r + (1 - lam) * m`` for inputs and targets (Eq. 5); ``lam``
    is ``[B]`` or ``[B, 1]``."""
    lam = lam.reshape(-1, 1).to(x_r)
    return lam * x_r + (1.0 - lam) * x_m, lam * y_r + (1.0 - lam) * y_m


def class_confidences(probs: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class expected confidences (Eq. 2): ``P(k)`` = mean predicted probability over
    the instances labelled positive for k, ``A(k)`` = mean ``1 - p`` over those labelled
    negative. A class without positives (negatives) gets ``P(k) = 1`` (``A(k) = 1``); the
    value is never used, since no instance has that label value."""
    probs = np.asarray(probs, dtype=np.float64)
    Yb = np.asarray(Y) > 0.5
    n_pos = Yb.sum(axis=0)
    n_neg = Yb.shape[0] - n_pos
    with np.errstate(invalid="ignore", divide="ignore"):
        P = np.where(n_pos > 0, (probs * Yb).sum(axis=0) / np.maximum(n_pos, 1), 1.0)
        A = np.where(n_neg > 0, ((1.0 - probs) * ~Yb).sum(axis=0) / np.maximum(n_neg, 1), 1.0)
    return P, A


def minority_sampling_probs(P: np.ndarray, A: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Sampling probability of every training instance (Eqs. 3-4):
    ``Score_i = sum_k [y_ik P(k) + (1 - y_ik) A(k)]``, ``p_i = (1/Score_i) / sum_j 1/Score_j``."""
    Yf = (np.asarray(Y) > 0.5).astype(np.float64)
    score = Yf @ np.asarray(P, dtype=np.float64) + (1.0 - Yf) @ np.asarray(A, dtype=np.float64)
    inv = 1.0 / np.maximum(score, 1e-12)
    return inv / inv.sum()


GMM_MIN_COUNT = 10


def gmm_clean_probability(losses: np.ndarray, seed: int, min_count: int = GMM_MIN_COUNT) -> np.ndarray:
    """Posterior probability of the small-loss component of a 2-component univariate
    Gaussian mixture fitted (EM, sklearn, ``random_state=seed``) to ``losses`` (Eqs. 7-8).

    Losses are min-max normalised first (as DivideMix does). Fewer than ``min_count``
    losses, or losses that are all (numerically) equal, give probability 1 (all clean):
    there is nothing to separate."""
    losses = np.asarray(losses, dtype=np.float64).reshape(-1)
    if losses.size < max(int(min_count), 2):
        return np.ones_like(losses)
    lo, hi = float(losses.min()), float(losses.max())
    if not np.isfinite(hi - lo) or hi - lo < 1e-8:
        return np.ones_like(losses)
    z = ((losses - lo) / (hi - lo)).reshape(-1, 1)
    gmm = GaussianMixture(n_components=2, max_iter=100, tol=1e-3, reg_covar=5e-4, random_state=int(seed) % 2**32)
    gmm.fit(z)
    clean = int(np.argmin(gmm.means_.reshape(-1)))
    return gmm.predict_proba(z)[:, clean]


def label_wise_management(
    probs: np.ndarray, losses: np.ndarray, Y: np.ndarray, tau: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fine-grained label-wise management (Eqs. 6-10). For every class k and label value
    l in {0, 1}, a GMM on the BCE losses of the entries with ``y_k = l`` gives each entry
    its clean probability ``p_G``. Then, per entry:

    * clean (``p_G > 0.5``): target kept, weight 1 -- category 0;
    * re-labelled (not clean and ``p > tau`` -> 1, or ``p < 1 - tau`` -> 0): target set
      to the prediction, weight 1 -- category 1 (a "re-labelled" entry may keep its
      value when the model confidently agrees with it);
    * ambiguous (the rest): target kept, weight ``p_G`` -- category 2.

    Returns ``(targets, weights, category)``, each ``[n, L]``."""
    probs = np.asarray(probs, dtype=np.float64)
    losses = np.asarray(losses, dtype=np.float64)
    Yb = np.asarray(Y) > 0.5
    n, L = Yb.shape
    p_clean = np.ones((n, L))
    for k in range(L):
        for val in (0, 1):
            rows = np.flatnonzero(Yb[:, k] == bool(val))
            if rows.size:
                p_clean[rows, k] = gmm_clean_probability(losses[rows, k], _derived_seed(seed, 2 * k + val))
    clean = p_clean > 0.5
    relabel_pos = ~clean & (probs > tau)
    relabel_neg = ~clean & (probs < 1.0 - tau)
    relabeled = relabel_pos | relabel_neg
    targets = Yb.astype(np.float32)
    targets[relabel_pos] = 1.0
    targets[relabel_neg] = 0.0
    weights = np.where(clean | relabeled, 1.0, p_clean).astype(np.float32)
    category = np.where(clean, 0, np.where(relabeled, 1, 2)).astype(np.int8)
    return targets, weights, category


@register("BalanceMix")
class BalanceMixMethod(_BCEDataSide):
    r"""BalanceMix: Song, Kim, Lee, "Toward Robustness in Multi-label Classification: A
    Data Augmentation Strategy against Imbalance and Noise", AAAI 2024 (arXiv:2312.07087;
    the task brief gives ICLR 2024, the paper itself appeared at AAAI 2024). Section
    "Methodology: BalanceMix", Eqs. 2-10, Algorithm 1 (App. A), hyper-parameters App. D/E.

    Per batch (``training_step``), the trainer's shuffled batch is the *random sampler*
    ``B_R``; for each of its rows one instance is drawn from the *minority sampler* with
    probability ``p_i ∝ 1/Score_i`` (Eqs. 3-4), where
    ``Score_i = sum_k [y_ik P(k) + (1 - y_ik) A(k)]`` and ``P(k)`` / ``A(k)`` are the mean
    predicted probability of presence over k's positives / of absence over k's negatives
    (Eq. 2). The pair is mixed, inputs (the raw feature vectors) and targets alike:
    ``x = λ x_R + (1-λ) x_M``, ``y = λ y_R + (1-λ) y_M``, ``λ = max(λ', 1-λ')``,
    ``λ' ~ Beta(mix_alpha, mix_alpha)`` drawn per pair (Eq. 5), so the random instance
    dominates. Loss: BCE on the mixed batch (Eq. 1, the project reduction) during the
    ``warmup_epochs`` warm-up epochs; afterwards Eq. 10: the targets of both instances are
    the *managed* labels and every label's BCE is weighted by the reliability of the
    random instance's label (1 for clean and re-labelled labels, ``p_G`` for ambiguous
    ones; "the reliability ... follows that of the instance selected by the random
    sampler").

    Per epoch (the trainer's ``epoch_end`` hook, model in eval mode, i.e. at the end of
    epoch e for epoch e+1; Algorithm 1 lines 16-18): predictions on all training rows give
    new ``P(k)``, ``A(k)`` and sampling probabilities (also during warm-up), and, from the
    end of epoch ``warmup_epochs`` on, the label-wise management: 2K univariate GMMs on the
    per-label BCE losses of the *given* labels, separately for positive and negative
    entries of each class (Eqs. 6-8, clean if ``p_G > 0.5``), re-labelling of non-clean
    labels whose prediction is ``> tau`` (-> 1) or ``< 1 - tau`` (-> 0) (Eq. 9), the rest
    ambiguous. Epoch 1 samples minority instances uniformly (no predictions exist yet). No
    refresh runs after the last epoch.

    Defaults: ``mix_alpha=4.0`` and ``relabel_tau=0.975`` (the paper's values for
    everything but the single-positive missing-label setting); ``warmup_epochs=10``
    (decision: the paper uses 5/10/5 warm-up epochs for 20/50/40-epoch runs, i.e. 10-25 %;
    10 of our 100 epochs is at the low end, chosen because our tabular data are not noisy).

    Differences from the original: (1) the paper mixes RandAug-augmented images and
    averages the predictions of two augmented views for re-labelling (Eq. 9); tabular
    feature vectors have no such augmentation, so inputs are mixed as they are and one
    (eval-mode) prediction is used; (2) confidences, sampling probabilities and GMMs are
    computed from a full eval-mode pass over the training rows at the end of each epoch
    (the paper says the GMMs are fitted to "the loss of entire data" once per epoch but
    does not say whether training-time or a separate pass; we use a separate pass);
    (3) the GMM specifics are ours: losses min-max normalised per set, sklearn
    ``GaussianMixture`` (``reg_covar=5e-4``, ``tol=1e-3``, 100 EM iterations, seeded),
    sets with fewer than 10 entries or constant losses are all clean (as in the paper, a
    2-component GMM also splits a unimodal, noise-free loss set, so on clean data the
    higher-loss part of each set becomes "ambiguous" and is down-weighted); (4) λ is drawn per
    pair (the paper does not say per pair or per batch); (5) optimiser, schedule, epochs,
    backbone are the BCE row's (the paper fine-tunes a ResNet-50 with SGD). The
    official code (DISL-Lab/BalanceMix) was not available to us; everything is from the
    paper's text.

    State for checkpoint-resume (``extra_state``): the sampler generator, the sampling
    probabilities, managed targets / weights and the last epoch's statistics.
    """

    description = (
        f"{_BACKBONE}; BalanceMix (Song et al., AAAI 2024): confidence-based minority sampler mixed with the "
        "random batch (lambda=max(l',1-l'), l'~Beta(4,4)), label-wise GMM clean/re-label(0.975)/ambiguous "
        "management after warm-up"
    )

    hparam_space = {
        "warmup_epochs": {"type": "integer", "minimum": 0},
        "mix_alpha": {"type": "number", "exclusiveMinimum": 0},  # Beta(alpha, alpha) needs alpha > 0
        "relabel_tau": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 1},  # p > tau -> 1, p < 1 - tau -> 0
    }

    def __init__(
        self,
        warmup_epochs: int = 10,
        mix_alpha: float = 4.0,
        relabel_tau: float = 0.975,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if warmup_epochs < 0:
            raise ValueError(f"BalanceMix: warmup_epochs must be >= 0, got {warmup_epochs}")
        if mix_alpha <= 0:
            raise ValueError(f"BalanceMix: mix_alpha must be > 0, got {mix_alpha}")
        if not 0.5 < relabel_tau <= 1.0:
            raise ValueError(f"BalanceMix: relabel_tau must be in (0.5, 1], got {relabel_tau}")
        self.warmup_epochs = int(warmup_epochs)
        self.mix_alpha = float(mix_alpha)
        self.relabel_tau = float(relabel_tau)
        self._seed = 0
        self._total_epochs = 0
        self._gen = torch.Generator()
        self._X_np: np.ndarray | None = None
        self._X: torch.Tensor | None = None
        self._Y_obs: torch.Tensor | None = None
        self._probs: torch.Tensor | None = None  # [n] float64, CPU
        self._Y_ref: torch.Tensor | None = None  # [n, L] managed targets
        self._W: torch.Tensor | None = None  # [n, L] label reliabilities
        self._managed = False
        self._last_stats: dict[str, float] = {}

    def hparams(self) -> dict[str, Any]:
        return {
            **super().hparams(),
            "warmup_epochs": self.warmup_epochs,
            "mix_alpha": self.mix_alpha,
            "relabel_tau": self.relabel_tau,
        }

    # -- set-up ------------------------------------------------------------------------
    def prepare(self, data: FitData, ctx: RunContext) -> None:
        super().prepare(data, ctx)
        self._seed = int(ctx.seed)
        self._total_epochs = self.train_config(ctx).epochs
        self._gen = torch.Generator().manual_seed(_derived_seed(ctx.seed, 1))
        self._X_np = as_float32(data.X_train)
        n = self._X_np.shape[0]
        if n >= 2**24:
            raise ValueError("BalanceMix: row indices ride in float32 targets; n must be < 2**24")
        self._probs = torch.full((n,), 1.0 / n, dtype=torch.float64)
        self._Y_ref = self._W = None
        self._managed = False
        self._last_stats = {}

    def train_targets(self, model: nn.Module, Y: torch.Tensor) -> torch.Tensor:
        """Targets plus one column with the row index, so that ``training_step`` knows
        which training rows form the batch (for the managed labels and weights)."""
        dev = Y.device
        self._X = torch.from_numpy(self._X_np).to(dev)
        self._Y_obs = Y
        if self._Y_ref is not None:
            self._Y_ref, self._W = self._Y_ref.to(dev), self._W.to(dev)
        idx = torch.arange(Y.shape[0], device=dev, dtype=Y.dtype).unsqueeze(1)
        return torch.cat([Y, idx], dim=1)

    # -- per batch ---------------------------------------------------------------------
    def draw_minority(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One minority-sampler index and one mixing coefficient per batch row (CPU)."""
        m_idx = torch.multinomial(self._probs, batch, replacement=True, generator=self._gen)
        lam = sample_mix_lambda(self.mix_alpha, batch, self._gen)
        return m_idx, lam

    def training_step(self, model, xb, yb, progress):
        idx = yb[:, -1].long()
        y_obs = yb[:, :-1]
        m_idx, lam = self.draw_minority(xb.shape[0])
        m_idx, lam = m_idx.to(xb.device), lam.to(xb.device)
        if self._managed:
            y_r, y_m, w = self._Y_ref[idx], self._Y_ref[m_idx], self._W[idx]
        else:
            y_r, y_m, w = y_obs, self._Y_obs[m_idx], None
        x_mix, y_mix = mix_pair(xb, self._X[m_idx], y_r, y_m, lam)
        logits = model(x_mix)
        if w is None:
            loss = model.criterion(logits, y_mix)
        else:
            loss = reduce(w * F.binary_cross_entropy_with_logits(logits, y_mix, reduction="none"))
        return loss, {"mix_lambda": lam.mean()}

    # -- per epoch ---------------------------------------------------------------------
    _STAT_KEYS = ("bm_sampler_max_x_n", "bm_clean", "bm_relabeled", "bm_ambiguous")

    def epoch_end(self, model, epoch, X_val, Y_val, workdir) -> dict[str, float]:
        stats = {k: float("nan") for k in self._STAT_KEYS}
        if epoch >= self._total_epochs:  # nothing trains after the last epoch
            return stats
        X, Y = self._X, self._Y_obs
        logits = torch.cat([model(X[s : s + PREDICT_CHUNK]) for s in range(0, X.shape[0], PREDICT_CHUNK)])
        probs = torch.sigmoid(logits).double().cpu().numpy()
        losses = F.binary_cross_entropy_with_logits(logits, Y, reduction="none").double().cpu().numpy()
        Y_np = Y.cpu().numpy()
        P, A = class_confidences(probs, Y_np)
        p = minority_sampling_probs(P, A, Y_np)
        self._probs = torch.from_numpy(p)
        stats["bm_sampler_max_x_n"] = float(p.max() * p.size)
        if epoch >= self.warmup_epochs:
            tgt, w, cat = label_wise_management(probs, losses, Y_np, self.relabel_tau, _derived_seed(self._seed, 100 + epoch))
            self._Y_ref = torch.from_numpy(tgt).to(Y.device)
            self._W = torch.from_numpy(w).to(Y.device)
            self._managed = True
            stats.update(
                bm_clean=float((cat == 0).mean()), bm_relabeled=float((cat == 1).mean()), bm_ambiguous=float((cat == 2).mean())
            )
        self._last_stats = {"epoch": int(epoch), **stats}
        return stats

    def extra_state(self) -> dict[str, Any]:
        return {
            "gen": self._gen.get_state(),
            "probs": self._probs,
            "y_ref": None if self._Y_ref is None else self._Y_ref.cpu(),
            "w": None if self._W is None else self._W.cpu(),
            "managed": self._managed,
            "last_stats": dict(self._last_stats),
        }

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self._gen.set_state(state["gen"])
        self._probs = state["probs"]
        self._Y_ref, self._W = state["y_ref"], state["w"]
        self._managed = bool(state["managed"])
        self._last_stats = dict(state.get("last_stats", {}))

    def extra_outputs(self) -> dict[str, Any]:
        return {"balancemix": {"managed_labels": self._managed, "last_refresh": self._last_stats}, "hparams": self.hparams()}


# =====================================================================================
# MLBOTE
# =====================================================================================

SELF, CROSS, INTERIOR = "self_borderline", "cross_borderline", "interior"


def imbalance_ratios(Y: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """``IRLbl_k = max_j n_j / n_k`` and its mean over labels with ``n_k > 0`` (Charte et
    al., MLSMOTE 2015), and the one-vs-rest ratio ``ovrIR_k = (N - n_k) / n_k``; labels
    without positives get ``inf``."""
    Yb = np.asarray(Y) > 0.5
    n = Yb.sum(axis=0).astype(np.float64)
    N = float(Yb.shape[0])
    with np.errstate(divide="ignore"):
        ir = np.where(n > 0, n.max() / np.maximum(n, 1), np.inf)
        ovr = np.where(n > 0, (N - n) / np.maximum(n, 1), np.inf)
    finite = n > 0
    return ir, float(ir[finite].mean()) if finite.any() else float("nan"), ovr


def mlbote_labels_to_oversample(Y: np.ndarray, ovr_threshold: float = 10.0) -> np.ndarray:
    """Labels in need of oversampling: minority labels (``IRLbl_k > meanIR``) and labels
    imbalanced one-vs-rest (``ovrIR_k > ovr_threshold``), with at least 2 positives.
    (The official code uses ``N / n_k`` for IRLbl; the comparison with its mean selects the
    same labels as MLSMOTE's ``max_j n_j / n_k``, the two differ by a constant factor.)"""
    ir, mean_ir, ovr = imbalance_ratios(Y)
    n = (np.asarray(Y) > 0.5).sum(axis=0)
    return ((ir > mean_ir) | (ovr > ovr_threshold)) & (n > 1)


def _nn(Z: np.ndarray) -> NearestNeighbors:
    return NearestNeighbors(algorithm="brute").fit(Z)


def mlbote_label_borders(Z: np.ndarray, Y: np.ndarray, label: int, k_border: int = 3, k_weight: int = 5) -> dict[str, Any] | None:
    """Borderline structure of one label (official code: ``weight_calcu_singleprocess``).

    ``T`` = positives of the label, ``R`` = the rest (negatives).

    * cross-borderline instances ``border_R``: the rest-instances that are among the
      ``k_border`` nearest rest-instances of some positive -- instances *outside* the label
      (positives of other labels) lying on its border;
    * self-borderline instances ``border_T``: the positives among the ``k_border`` nearest
      positives of some cross-borderline instance -- the label's own instances on its border;
    * interior: the other positives.

    Weights (official code): a self-borderline seed t gets
    ``w_t = mean dist(t, its k_weight nearest positives) / mean dist(t, its k_border nearest
    negatives)`` (0 when t has an exact duplicate positive); a cross-borderline instance r
    gets the density ratio ``rho_r = (mean dist(r, k_weight nearest negatives) /
    mean dist(t*, k_weight nearest positives))^2`` with t* r's nearest positive (0 when a
    mean is 0). Returns ``None`` when the label has < 2 positives or no negative.
    All indices are row indices of ``Z``."""
    Yb = np.asarray(Y)[:, label] > 0.5
    T, R = np.flatnonzero(Yb), np.flatnonzero(~Yb)
    if T.size < 2 or R.size < 1:
        return None
    kb_R = min(k_border, R.size)
    kb_T = min(k_border, T.size - 1)
    kw_T = min(k_weight, T.size - 1)
    kw_R = min(k_weight, R.size - 1)
    nn_R, nn_T = _nn(Z[R]), _nn(Z[T])
    d_TR, i_TR = nn_R.kneighbors(Z[T], n_neighbors=kb_R)
    bR = np.unique(i_TR)
    d_RT, i_RT = nn_T.kneighbors(Z[R[bR]], n_neighbors=kb_T)
    bT = np.unique(i_RT)
    d_TT, _ = nn_T.kneighbors(n_neighbors=kw_T)  # each positive's nearest other positives
    mean_TT = d_TT.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = mean_TT[bT] / d_TR[bT].mean(axis=1)
    w[(d_TT[bT, 0] == 0) | ~np.isfinite(w)] = 0.0
    if kw_R >= 1:
        d_RR = nn_R.kneighbors(Z[R[bR]], n_neighbors=kw_R + 1)[0][:, 1:]  # drop the point itself
        mean_RR = d_RR.mean(axis=1)
        t_star = i_RT[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = (mean_RR / mean_TT[t_star]) ** 2
        rho[(d_RR[:, 0] == 0) | (mean_TT[t_star] == 0) | ~np.isfinite(rho)] = 0.0
    else:
        rho = np.zeros(bR.size)
    return {
        "T": T,
        "R": R,
        "border_T": T[bT],
        "weight_T": w,
        "border_R": R[bR],
        "ratio_R": rho,
        "interior": np.setdiff1d(T, T[bT]),
    }


def mlbote_seed_types(Z: np.ndarray, Y: np.ndarray, label: int, k_border: int = 3, k_weight: int = 5) -> dict[str, np.ndarray]:
    """Seed types of one label: ``{'self_borderline', 'cross_borderline', 'interior'}`` ->
    sorted row indices (see :func:`mlbote_label_borders`)."""
    b = mlbote_label_borders(Z, Y, label, k_border, k_weight)
    if b is None:
        T = np.flatnonzero(np.asarray(Y)[:, label] > 0.5)
        return {SELF: np.array([], dtype=int), CROSS: np.array([], dtype=int), INTERIOR: T}
    return {SELF: np.sort(b["border_T"]), CROSS: np.sort(b["border_R"]), INTERIOR: np.sort(b["interior"])}


class _NeighbourZones:
    """Reference neighbours for interpolation (official ``resamplezone_calcu``): the
    ``k_gen`` nearest instances with the *same label set* (label powerset class). A seed
    whose label set is unique falls back to its ``k_gen`` nearest instances of ``pool``
    (the positives -- or, for a cross-borderline seed, the negatives -- of the label it was
    drawn for; the official code drops such seeds, its ``_generate_sample_only1point``
    rule is this fallback)."""

    def __init__(self, Z: np.ndarray, Y: np.ndarray, k_gen: int) -> None:
        self.Z, self.k = Z, int(k_gen)
        _, self.group, counts = np.unique(np.asarray(Y) > 0.5, axis=0, return_inverse=True, return_counts=True)
        self.group = self.group.reshape(-1)
        self.group_size = counts[self.group]
        self._cache: dict[tuple[str, int], dict[int, np.ndarray]] = {}
        self.fallbacks = 0

    def _knn_within(self, key: tuple[str, int], members: np.ndarray, seed: int) -> np.ndarray:
        table = self._cache.setdefault(key, {})
        if seed not in table:
            others = members[members != seed]
            if others.size == 0:
                table[seed] = others
            else:
                k = min(self.k, others.size)
                d = np.linalg.norm(self.Z[others] - self.Z[seed], axis=1)
                order = np.lexsort((others, d))[:k]  # nearest first, ties by index
                table[seed] = others[order]
        return table[seed]

    def neighbours(self, seed: int, pool_key: tuple[str, int], pool: np.ndarray) -> tuple[np.ndarray, bool]:
        if self.group_size[seed] >= 2:
            g = int(self.group[seed])
            return self._knn_within(("lp", g), np.flatnonzero(self.group == g), seed), False
        return self._knn_within(pool_key, pool, seed), True


def _interpolate(
    X: np.ndarray,
    Y: np.ndarray,
    zones: _NeighbourZones,
    seeds: np.ndarray,
    drawn_for: np.ndarray,
    kind: str,
    pools: dict[int, np.ndarray],
    step_size: float,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """SMOTE-style generation (official ``_generate_sample``): ``x = x_s + g (x_n - x_s)``,
    ``g ~ U(0, step_size)``, n a uniformly chosen reference neighbour of seed s; labels =
    the seed's label set. Seeds without any neighbour are skipped."""
    keep_s, keep_n = [], []
    for s, lab in zip(seeds.tolist(), drawn_for.tolist()):
        nbrs, fell_back = zones.neighbours(s, (kind, lab), pools[lab])
        if nbrs.size == 0:
            continue
        zones.fallbacks += int(fell_back)
        keep_s.append(s)
        keep_n.append(int(nbrs[rng.integers(nbrs.size)]))
    s_arr = np.asarray(keep_s, dtype=np.int64)
    n_arr = np.asarray(keep_n, dtype=np.int64)
    g = rng.uniform(0.0, step_size, size=s_arr.size)
    Xs = X[s_arr].astype(np.float64)
    X_new = (Xs + g[:, None] * (X[n_arr].astype(np.float64) - Xs)).astype(np.float32)
    return {"X": X_new, "Y": np.asarray(Y)[s_arr].astype(np.uint8), "seed": s_arr, "neighbour": n_arr,
            "gap": g, "type": np.full(s_arr.size, kind, dtype=object)}


def mlbote_oversample(
    X: np.ndarray,
    Y: np.ndarray,
    seed: int,
    k_border: int = 3,
    k_weight: int = 5,
    ovr_threshold: float = 10.0,
    resample_ratio: float = 0.01,
    cross_threshold: float = 5.0,
    interior_ratio: float = 1.0,
    size_penalty: float = 1.0,
    step_size: float = 1.0,
    standardize: bool = True,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """MLBOTE oversampling of ``(X, Y)``; returns ``(X_syn, Y_syn, info)`` where
    ``info['synthetic']`` records type, seed, neighbour and gap of every synthetic row and
    ``info`` the per-stage counts. See :class:`MLBOTEMethod` for the procedure."""
    X = np.asarray(X, dtype=np.float32)
    Yb = (np.asarray(Y) > 0.5).astype(np.uint8)
    n, L = Yb.shape
    rng = np.random.default_rng(_derived_seed(seed, 2))
    if standardize:
        mu, sd = X.mean(axis=0, dtype=np.float64), X.std(axis=0, dtype=np.float64)
        Z = (X - mu) / np.where(sd < 1e-8, 1.0, sd)
    else:
        Z = X.astype(np.float64)
    counts0 = Yb.sum(axis=0)
    selected = mlbote_labels_to_oversample(Yb, ovr_threshold)
    borders = {k: mlbote_label_borders(Z, Yb, k, k_border, k_weight) for k in range(L)}
    borders = {k: b for k, b in borders.items() if b is not None}
    zones = _NeighbourZones(Z, Yb, k_weight)
    pos_pool = {k: np.flatnonzero(Yb[:, k]) for k in range(L)}
    neg_pool = {k: np.flatnonzero(Yb[:, k] == 0) for k in range(L)}
    parts: list[dict[str, np.ndarray]] = []
    info: dict[str, Any] = {"labels_oversampled": np.flatnonzero(selected).tolist()}

    # -- 1. self-borderline seeds of the selected labels ------------------------------
    sel_b = [k for k in np.flatnonzero(selected) if k in borders]
    w_inst = np.zeros(n)
    w_label = np.full(n, -1)
    if sel_b:
        nk = counts0[sel_b].astype(np.float64)
        n_min, n_max = nk.min(), nk.max()
        for k in sel_b:
            b = borders[k]
            tot = b["weight_T"].sum()
            if tot <= 0:
                continue
            large_p = 1.0 + size_penalty * (counts0[k] - n_min) / (n_max - n_min + 0.1)
            w = b["weight_T"] / tot / large_p
            better = w > w_inst[b["border_T"]]
            w_inst[b["border_T"][better]] = w[better]
            w_label[b["border_T"][better]] = k
    _, _, ovr = imbalance_ratios(Yb)
    mean_ovr = float(ovr[np.isfinite(ovr)].mean()) if np.isfinite(ovr).any() else 0.0
    n_self = int(round(min(resample_ratio * mean_ovr, 10.0) * int((w_inst > 0).sum())))
    if n_self > 0 and w_inst.sum() > 0:
        seeds = rng.choice(n, size=n_self, replace=True, p=w_inst / w_inst.sum())
        parts.append(_interpolate(X, Yb, zones, seeds, w_label[seeds], SELF, pos_pool, step_size, rng))
    info["n_self_borderline_seeds"] = int((w_inst > 0).sum())

    # -- 2. cross-borderline seeds (every label's border, density ratio > threshold) --
    rho_inst = np.full(n, np.inf)
    rho_label = np.full(n, -1)
    for k, b in borders.items():
        lower = b["ratio_R"] < rho_inst[b["border_R"]]
        rho_inst[b["border_R"][lower]] = b["ratio_R"][lower]
        rho_label[b["border_R"][lower]] = k
    rho_inst[~np.isfinite(rho_inst)] = 0.0
    cand = np.flatnonzero(rho_inst > cross_threshold)
    if cand.size:
        excess = rho_inst[cand] - 1.0
        n_cross = int(np.minimum(excess, 5.0).sum())
        if n_cross > 0:
            seeds = rng.choice(cand, size=n_cross, replace=True, p=excess / excess.sum())
            parts.append(_interpolate(X, Yb, zones, seeds, rho_label[seeds], CROSS, neg_pool, step_size, rng))
    info["n_cross_borderline_candidates"] = int(cand.size)

    # -- 3. interior seeds: top minority labels up to the least frequent other label ---
    counts = counts0 + sum(p["Y"].sum(axis=0) for p in parts) if parts else counts0.copy()
    counts = np.asarray(counts, dtype=np.int64)
    is_border = np.zeros(n, dtype=bool)
    is_border[w_inst > 0] = True
    for b in borders.values():
        is_border[b["border_R"]] = True
    ir, mean_ir, _ = imbalance_ratios(np.vstack([Yb] + [p["Y"] for p in parts]))
    very = (ir > mean_ir * interior_ratio) & (counts0 > 1) & np.isfinite(ir)
    others = ~very & (counts > 0)
    need: dict[int, int] = {}
    if very.any() and others.any():
        target = int(counts[others].min())
        need = {int(k): target - int(counts[k]) for k in np.flatnonzero(very) if target - int(counts[k]) > 0}
    n_interior = 0
    while need:
        k = min(need, key=lambda j: (need[j], j))
        m = need.pop(k)
        inner = pos_pool[k][~is_border[pos_pool[k]]]
        if inner.size == 0:
            inner = pos_pool[k]
        seeds = rng.choice(inner, size=m, replace=True)
        part = _interpolate(X, Yb, zones, seeds, np.full(m, k), INTERIOR, pos_pool, step_size, rng)
        parts.append(part)
        n_interior += part["seed"].size
        gained = part["Y"].sum(axis=0)
        need = {j: v - int(gained[j]) for j, v in need.items() if v - int(gained[j]) > 0}

    if parts:
        syn = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    else:
        syn = {"X": np.zeros((0, X.shape[1]), np.float32), "Y": np.zeros((0, L), np.uint8),
               "seed": np.zeros(0, np.int64), "neighbour": np.zeros(0, np.int64), "gap": np.zeros(0),
               "type": np.zeros(0, dtype=object)}
    info.update(
        n_synthetic=int(syn["seed"].size),
        n_per_type={t: int((syn["type"] == t).sum()) for t in (SELF, CROSS, INTERIOR)},
        neighbour_fallbacks=int(zones.fallbacks),
        synthetic=syn,
    )
    return syn["X"], syn["Y"], info


@register("MLBOTE")
class MLBOTEMethod(_BCEDataSide):
    r"""MLBOTE: Teng, Cao, Huang, Gao, Wang, "Multi-label borderline oversampling
    technique", Pattern Recognition 145 (2024) 109953. We had the abstract and the official
    code (github T-zeyuteng/MLBOTE: ``MLBOTE_class.py``, defaults of ``MLBOTE_main.py``),
    not the paper's full text, so section/equation numbers are not cited and the
    procedure below is **reconstructed from the official code** (simplified where said).

    Before training, on the training feature vectors (standardised for the neighbour
    search only; interpolation happens in the raw space, where the segments are the same):

    1. Labels to oversample: minority labels (``IRLbl_k > meanIR``, MLSMOTE's definition)
       and labels imbalanced one-vs-rest (``ovrIR_k = (N - n_k)/n_k > ovr_threshold``),
       with >= 2 positives.
    2. Seed types per label (:func:`mlbote_label_borders`): *cross-borderline* = instances
       outside the label among the ``k_border`` nearest outside-neighbours of some positive;
       *self-borderline* = positives among the ``k_border`` nearest positives of some
       cross-borderline instance; *interior* = the remaining positives (for generation:
       positives that are borderline for no label).
    3. Self-borderline oversampling: seeds drawn with probability ∝ their weight
       ``w = meandist(k_weight nearest positives) / meandist(k_border nearest negatives)``,
       normalised per label and divided by ``1 + size_penalty (n_k - n_min)/(n_max - n_min + 0.1)``
       (rarer labels get more), the max over the seed's labels; count
       ``round(min(resample_ratio * mean ovrIR, 10) * #seeds with w > 0)``.
    4. Cross-borderline oversampling: instances whose (smallest) density ratio
       ``rho = (meandist to outside-neighbours / meandist of its nearest positive to the
       positives)^2`` exceeds ``cross_threshold``, drawn ∝ ``rho - 1``, count
       ``sum min(rho - 1, 5)`` -- this also serves labels imbalanced one-vs-rest.
    5. Interior oversampling: every label with ``IRLbl_k > interior_ratio * meanIR``
       (counts include the synthetic rows of steps 3-4) is topped up to the count of the
       least frequent other label, from its interior positives (all positives if none),
       smallest need first, updating the needs with the labels of each batch.

    Generation (all types): ``x = x_s + g (x_n - x_s)``, ``g ~ U(0, step_size)``, n a
    uniformly drawn reference among the ``k_weight`` (official ``kr = kw``) nearest
    instances with the seed's label set; synthetic labels = the seed's label set. BCE is
    then trained on real + synthetic rows (the BCE row's model, trainer, epochs).

    Defaults are the official ``MLBOTE_main.py`` / class defaults: ``k_border=3`` (kb),
    ``k_weight=5`` (kw = k3 = k4 = kr), ``resample_ratio=0.01`` (alpha_s),
    ``cross_threshold=5.0`` (th_c), ``interior_ratio=1.0`` (ratio_Disjunction),
    ``ovr_threshold=10.0`` (ovrth), ``size_penalty=1.0`` (Cn), ``step_size=1.0``.

    Differences from the official code: no label-noise removal step (the official code
    first deletes labels judged noisy by a k-NN rule; we never edit the given labels);
    one round instead of ``n_lps = 10`` rounds with weights recomputed on the growing
    data (step 3's total budget is the same; step 4 runs once, so it generates up to 10x
    fewer rows); a seed with a unique label set falls back to the nearest positives
    (negatives, for cross-borderline seeds) of the label it was drawn for instead of being
    dropped; standardised Euclidean distances (official: raw); inputs are dense tabular
    features. The task brief's guess of type-dependent interpolation ranges is *not* what
    the official code does: every type interpolates with ``g ~ U(0, step_size)``; the
    types differ in seed selection, weights and counts.
    """

    description = (
        f"{_BACKBONE}; trained on real + MLBOTE synthetic rows (Teng et al., Pattern Recognit. 2024): "
        "self-borderline, cross-borderline and interior seeds, SMOTE interpolation within label sets"
    )

    hparam_space = {
        "k_border": {"type": "integer", "minimum": 1},  # neighbour counts
        "k_weight": {"type": "integer", "minimum": 1},
        "ovr_threshold": {"type": "number", "minimum": 0},  # compared with ovrIR = (N - n_k) / n_k >= 0
        "resample_ratio": {"type": "number", "minimum": 0},  # a count multiplier
        # cross-borderline seeds are drawn with probability ~ rho - 1 among rho > cross_threshold
        "cross_threshold": {"type": "number", "minimum": 1},
        "interior_ratio": {"type": "number", "minimum": 0},  # compared with IRLbl_k / meanIR > 0
        "size_penalty": {"type": "number", "minimum": 0},  # 1 + size_penalty * [0, 1) divides the weights
        "step_size": {"type": "number", "minimum": 0},  # g ~ U(0, step_size)
        "standardize": {"type": "boolean"},
    }

    def __init__(
        self,
        k_border: int = 3,
        k_weight: int = 5,
        ovr_threshold: float = 10.0,
        resample_ratio: float = 0.01,
        cross_threshold: float = 5.0,
        interior_ratio: float = 1.0,
        size_penalty: float = 1.0,
        step_size: float = 1.0,
        standardize: bool = True,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if k_border < 1 or k_weight < 1:
            raise ValueError("MLBOTE: k_border and k_weight must be >= 1")
        if step_size < 0 or resample_ratio < 0:
            raise ValueError("MLBOTE: step_size and resample_ratio must be >= 0")
        self.mlbote_params = {
            "k_border": int(k_border),
            "k_weight": int(k_weight),
            "ovr_threshold": float(ovr_threshold),
            "resample_ratio": float(resample_ratio),
            "cross_threshold": float(cross_threshold),
            "interior_ratio": float(interior_ratio),
            "size_penalty": float(size_penalty),
            "step_size": float(step_size),
            "standardize": bool(standardize),
        }
        self._summary: dict[str, Any] = {}

    def hparams(self) -> dict[str, Any]:
        return {**super().hparams(), **self.mlbote_params}

    def fit(self, data: FitData, ctx: RunContext) -> "MLBOTEMethod":
        X = as_float32(data.X_train)
        Y = (_dense_labels(data.Y_train) > 0.5).astype(np.uint8)
        X_syn, Y_syn, info = mlbote_oversample(X, Y, seed=ctx.seed, **self.mlbote_params)
        before = Y.mean(axis=0)
        Y_aug = np.vstack([Y, Y_syn])
        self._summary = {
            **{k: v for k, v in info.items() if k != "synthetic"},
            "n_real": int(Y.shape[0]),
            "prevalence_before": [float(v) for v in before],
            "prevalence_after": [float(v) for v in Y_aug.mean(axis=0)],
        }
        aug = FitData(np.vstack([X, X_syn]), Y_aug, data.X_val, data.Y_val, list(data.label_names), tail=data.tail)
        super().fit(aug, ctx)
        return self

    def extra_outputs(self) -> dict[str, Any]:
        return {"mlbote": self._summary, "hparams": self.hparams()}


# =====================================================================================
# LSFA
# =====================================================================================


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
    feature generator; official ``FeatsVAE``): encoder ``[h, p] -> Linear -> LeakyReLU ->
    (mu, logvar)``; decoder/generator ``[z, p] -> Linear -> LeakyReLU -> Linear`` (then
    ReLU when ``relu_output``, as the backbone's features are post-ReLU). Weights and
    biases initialised ``N(0, 0.02)`` as in the official code."""

    def __init__(self, feat_dim: int, hidden_dim: int = 512, latent_dim: int | None = None, relu_output: bool = True) -> None:
        super().__init__()
        self.feat_dim = int(feat_dim)
        self.latent_dim = int(latent_dim or feat_dim)
        self.relu_output = bool(relu_output)
        self.encoder = nn.Sequential(nn.Linear(2 * self.feat_dim, hidden_dim), nn.LeakyReLU())
        self.mu = nn.Linear(hidden_dim, self.latent_dim)
        self.logvar = nn.Linear(hidden_dim, self.latent_dim)
        self.generator = nn.Sequential(
            nn.Linear(self.latent_dim + self.feat_dim, hidden_dim), nn.LeakyReLU(), nn.Linear(hidden_dim, self.feat_dim)
        )
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                nn.init.normal_(m.bias, 0.0, 0.02)

    def decode(self, z: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        out = self.generator(torch.cat([z, p], dim=1))
        return F.relu(out) if self.relu_output else out

    def forward(self, h: torch.Tensor, p: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        e = self.encoder(torch.cat([h, p], dim=1))
        mu, logvar = self.mu(e), self.logvar(e)
        eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype)
        return self.decode(mu + eps * torch.exp(0.5 * logvar), p), mu, logvar

    @torch.no_grad()
    def generate(self, p: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
        """``n`` features from prototype ``p`` (``[d]``): ``z ~ N(0, I)`` through the decoder."""
        z = torch.randn((int(n), self.latent_dim), generator=gen)
        return self.decode(z, p.reshape(1, -1).expand(int(n), -1))


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
) -> tuple[FeatureCVAE, dict[str, Any]]:
    """Fit a :class:`FeatureCVAE` on pairs ``(H[i], P[i])`` (a head label's positive feature
    and that label's prototype), on CPU, fully seeded. Adam; a seeded ``val_frac`` split for
    early stopping (``patience`` epochs without improvement; the best state is kept), as in
    the official ``transfer_train``."""
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
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best, best_state, bad, history = math.inf, copy.deepcopy(model.state_dict()), 0, []
    for epoch in range(1, int(epochs) + 1):
        model.train()
        order = tr_idx[torch.randperm(tr_idx.numel(), generator=gen)]
        tot = 0.0
        for s in range(0, order.numel(), batch_size):
            b = order[s : s + batch_size]
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
        ell = F.binary_cross_entropy_with_logits(model(xb), y, reduction="none") * mask * row_w
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

    1. Stage 1 is exactly the BCE row (same model, trainer, seed, ``ctx.workdir``).
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
    (only the augmentation is the baseline's data path). Generator details that differ
    from the official code: no ReLU on ``mu``/``logvar`` and no BatchNorm on the decoder
    output (a final ReLU only when the features are non-negative); batch 256 and lr 1e-3
    instead of 40 and 1e-4 (CPU cost); synthetic rows are shuffled into the real batches
    instead of separate calibration passes; stage 3 uses the shared trainer (AdamW,
    cosine, clipping) and runs a fixed number of epochs (official: early stopping on
    validation P@k); the generator trains on CPU.
    """

    description = (
        f"{_BACKBONE}; then LSFA (Xu et al., AAAI 2023): CVAE trained on head-label features generates 10 "
        "features per tail label from its prototype, linear head retrained on frozen features (real + synthetic)"
    )

    hparam_space = {
        "head_min_count": {"type": "integer", "minimum": 1},
        "n_synthetic": {"type": "integer", "minimum": 1},
        "gen_epochs": {"type": "integer", "minimum": 1},
        "gen_batch_size": {"type": "integer", "minimum": 1},
        "gen_lr": {"type": "number", "exclusiveMinimum": 0},  # Adam step size of the CVAE
        "gen_hidden_dim": {"type": "integer", "minimum": 1},
        "kl_weight": {"type": "number", "minimum": 0},
        "gen_patience": {"type": "integer", "minimum": 1},
        "calib_epochs": {"type": ["integer", "null"], "minimum": 1},  # None: the trainer's epochs
        "calib_warmup": {"type": "integer", "minimum": 0},
        "calib_weight": {"type": "number", "minimum": 0},  # weight of the synthetic rows' loss
    }

    def __init__(
        self,
        head_min_count: int = 50,
        n_synthetic: int = 10,
        gen_epochs: int = 100,
        gen_batch_size: int = 256,
        gen_lr: float = 1e-3,
        gen_hidden_dim: int = 512,
        kl_weight: float = 0.005,
        gen_patience: int = 10,
        calib_epochs: int | None = None,
        calib_warmup: int = 5,
        calib_weight: float = 1.0,
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

    def fit(self, data: FitData, ctx: RunContext) -> "LSFAMethod":
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
        cvae, gen_info = train_feature_generator(
            H[rows], P[head[labs]], seed=ctx.seed, epochs=hp["gen_epochs"], batch_size=hp["gen_batch_size"],
            lr=hp["gen_lr"], hidden_dim=hp["gen_hidden_dim"], kl_weight=hp["kl_weight"], patience=hp["gen_patience"],
        )
        H_syn, lab_syn = generate_tail_features(cvae, P, tail, hp["n_synthetic"], seed=ctx.seed)
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
        )
        ctx3 = dataclasses.replace(ctx, workdir=Path(ctx.workdir) / "lsfa_stage3")
        fp = {"method": f"{self.name or 'LSFA'}/stage3", "hparams": self.hparams()}
        head_model, self.stage3_log = train(task, H_all, T_all, H_val, Y_val, cfg, ctx3, fp)
        self.model.head.load_state_dict(head_model.state_dict())
        self.model.eval()
        return self

    def extra_outputs(self) -> dict[str, Any]:
        return {"lsfa": self._summary, "hparams": self.hparams()}
