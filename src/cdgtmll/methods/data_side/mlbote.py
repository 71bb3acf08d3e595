"""MLBOTE (data-side baseline, :mod:`cdgtmll.methods.data_side`): borderline
oversampling of the training feature vectors before BCE training."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.neighbors import NearestNeighbors

from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.data_side.common import _BCEDataSide, _dense_labels, _derived_seed
from cdgtmll.nn.trainer import as_float32

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
    while need:
        k = min(need, key=lambda j: (need[j], j))
        m = need.pop(k)
        inner = pos_pool[k][~is_border[pos_pool[k]]]
        if inner.size == 0:
            inner = pos_pool[k]
        seeds = rng.choice(inner, size=m, replace=True)
        part = _interpolate(X, Yb, zones, seeds, np.full(m, k), INTERIOR, pos_pool, step_size, rng)
        parts.append(part)
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

    def __init__(
        self,
        *,
        k_border: int,
        k_weight: int,
        ovr_threshold: float,
        resample_ratio: float,
        cross_threshold: float,
        interior_ratio: float,
        size_penalty: float,
        step_size: float,
        standardize: bool,
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

    def fit(self, data: FitData, ctx: RunContext) -> MLBOTEMethod:
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
