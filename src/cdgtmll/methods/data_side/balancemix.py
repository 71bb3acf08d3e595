"""BalanceMix (data-side baseline, :mod:`cdgtmll.methods.data_side`): minority-augmented
mixup with label-wise management of the targets."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.mixture import GaussianMixture
from torch import nn

from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.data_side.common import _BCEDataSide, _derived_seed
from cdgtmll.nn.losses.common import bce_terms, reduce
from cdgtmll.nn.trainer import PREDICT_CHUNK, as_float32


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

    def __init__(
        self,
        *,
        warmup_epochs: int,
        mix_alpha: float,
        relabel_tau: float,
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
        # drawn on the host (seeded CPU generator); copied without waiting for the device
        m_idx, lam = m_idx.to(xb.device, non_blocking=True), lam.to(xb.device, non_blocking=True)
        if self._managed:
            y_r, y_m, w = self._Y_ref[idx], self._Y_ref[m_idx], self._W[idx]
        else:
            y_r, y_m, w = y_obs, self._Y_obs[m_idx], None
        x_mix, y_mix = mix_pair(xb, self._X[m_idx], y_r, y_m, lam)
        logits = model(x_mix)
        if w is None:
            loss = model.criterion(logits, y_mix)
        else:
            loss = reduce(w * bce_terms(logits, y_mix))
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
        # these values feed the sampler's statistics: torch's op (bce_terms' values differ in the last bits)
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
