r"""CD-GTMLL: curiosity-driven game-theoretic multi-label learning (Sections 3-4, App. E.1).

Model
-----
A shared backbone ``h(x; theta_0)`` (:class:`~cdgtmll.nn.backbones.mlp.MLPBackbone`) feeds N
players. Player i is a linear head with bias over its label subset ``L_i`` with sigmoid
outputs. All players together are **one** ``nn.Linear(d', P)`` over the
``P = sum_i |L_i|`` (player, label) *pairs*, with index maps ``pair_player`` and
``pair_label``; player i's parameters theta_i are the rows ``{r: pair_player[r] == i}``
of that Linear (weight and bias) - disjoint blocks. Rows are laid out with the pairs of
singly-covered labels first (in label order) and the overlap pairs after them (grouped
by label), so the hot path uses slices instead of gathers.

Fusion (Eq. 4, E.1): per label, ``omega_{i,l} = softmax`` over the covering players of
learnable logits (initialised to 0 = uniform); ``p_hat_l = sum_i omega_{i,l} p_{i,l}``
(``index_add`` over the overlap pairs; when every overlap label has exactly two players,
as :func:`make_partition` always gives, the same sum over adjacent columns and the
two-way softmax as a sigmoid of the logit difference), clipped to ``[eps, 1 - eps]``
(Assumption 2(i)). A label with a single player has omega = 1 exactly (the softmax of
one logit; its gradient is 0), so logits are stored only for overlap pairs. The clip is
part of the training objective only; predictions are the unclipped fused probabilities
(:meth:`CDGTMLLNet.forward`), so clipping introduces no ties in the rankings.

Objective (maximised; the trainer minimises ``-Phi``)
-----------------------------------------------------
* ``R = E_B[ M ]``, ``M = (1/Z) sum_l w_l (y_l log p_hat_l + (1 - y_l) log(1 - p_hat_l))``,
  ``Z = sum_l w_l`` - the logistic utility of Eq. 5 in Theorem 1(3)'s form, a *mean* over labels,
  on the fused, clipped probabilities (``payoff_scale='mean'``, default). ``payoff_scale='sum'``
  is the earlier reading ``R = L * E_B[M]`` (the project's BCE scale: sum over labels, mean over
  the batch); since C_i (Eq. 6) is a sum over the player's labels in both, alpha under 'sum'
  means the paper's alpha / L (1/14 on Yeast, 1/80 on COCO).
  ``payoff_weights='uniform'`` (default): ``w_l = 1`` (``Z = L``), the plain logistic
  utility. Rarity then enters the objective **only** through ``alpha * C_i``, so the
  No-Curiosity ablation (alpha = 0) removes all rarity emphasis, as the paper's
  ablation intends ("curiosity bonuses inject gradient on under-represented tags without
  hand-tuned class weights", abstract).
  ``'rarity'``: ``w_l = L * r_l / sum_k r_k`` with ``r_l = 1 / (1 + freq(l))`` (the
  curiosity weights of Eq. 6; ``Z = sum_l r_l``), the "rarity-weighted logistic utility"
  that Theorem 1(3) analyses. Caveat, measured by
  ``benchmarks/bench_curiosity_direction.py``: with these weights the gradient of Phi on a
  singly-covered label's logit is proportional to ``r_l (y - p)`` for every alpha (``r_l (1 /
  sum r + alpha)`` under 'mean'), so alpha only rescales it and the alpha ablation/sweep measure
  nothing on those labels. With the uniform default the factor is ``1/L + alpha r_l`` ('mean';
  ``1 + alpha r_l`` under 'sum'): alpha re-weights labels against each other, and under the
  paper's mean the curiosity term is L times stronger against R than under 'sum'.
  For singly-covered labels ``p_hat = clip(sigmoid(z)) = sigmoid(clamp(z, logit(eps),
  logit(1-eps)))`` and the term is evaluated in log-sigmoid form on the clamped logit
  (same value and gradient - 0 on clipped entries - as the clipped probability form,
  computed stably). Targets are binary (uint8 Y), which the overlap-label term uses:
  ``y log p + (1-y) log(1-p) = log(p (2y-1) + 1-y)``.
* ``C_i = sum_{l in L_i} 1/(1+freq(l)) [y log p_il + (1-y) log(1-p_il)]
  + beta * sum_{l in O_i} D(p_il, pbar_{-i,l}^stop)`` (Eq. 6), ``O_i`` = player i's labels
  covered by another player. ``freq`` is the hyper-parameter ``rarity``, used in every
  ``r_l = 1/(1+freq(l))`` (these curiosity weights and ``payoff_weights='rarity'``):
  ``'prevalence'`` (default): the training prevalence in [0, 1], Sec. 3.1's definition,
  "freq(l) = Pr_{(x,y)~D}[y_l = 1] be the marginal prevalence of label l" (E.3 computes it as
  "freq(l) = (1/M) sum_m y_ml on the original training set"); the weights then lie in
  [1/2, 1] (max/min ratio 1.73 on Yeast). ``'count'``: freq(l) = n_l, the number of training
  positives (weights ~ 1/n_l, ratio ~51 on Yeast): the reading under which "curiosity
  bonuses inject gradient on under-represented tags" (abstract) act as a strong re-weighting;
  it contradicts Sec. 3.1's definition and is kept as a measured alternative.
  D is ``'jsd'`` (default, E.1) or ``'kl'`` (``KL(Bern(p_il) || Bern(pbar))``, Eq. 6's
  example), per label on Bernoulli distributions. As in the paper, ``+beta D`` is a
  *bonus*: maximising C_i rewards disagreeing with the (stop-gradient) peers.
* ``Phi = R + alpha * sum_i E_B[C_i]`` (Eq. 8). ``beta`` warms up linearly from 0 to
  ``beta_max`` over the first ``beta_warmup`` (10%) of training steps; alpha is fixed.

Peer average and its EMA
------------------------
``pbar_{-i,l}(x)`` is the mean of the other covering players' probabilities on the same
batch rows, detached (Alg. 1 lines 6 and 10), clipped to ``[eps, 1-eps]``. E.1 says it is
"optionally smoothed by an EMA with decay 0.99". An EMA across batches of a
*per-instance* quantity is undefined (consecutive batches hold different rows), and
smoothing only a batch mean would replace the per-instance peer by a per-label constant.
We therefore smooth the function that produces it: the peers' head parameters. Buffers
hold an exponential moving average of the overlap rows of the pair-Linear (weight and
bias), updated after every optimiser step with decay ``min(ema_decay, 1 - 1/(t+1))``
(t = updates so far; the mean-teacher ramp of Tarvainen & Valpola 2017, so the average
is not dominated by the random initialisation early on), and the peer probabilities are
``sigmoid(h(x).detach() @ W_ema^T + b_ema)`` on the same batch features. This keeps
``pbar`` per-instance, from the same batch, detached, and temporally smoothed; it costs
one forward-only ``B x d' x |O|`` matmul (|O| = overlap pairs, Theta(rho L)); on
Delicious that is ~7% of a BCE step. ``ema_decay = 0`` disables it: the peers are then
exactly the current detached probabilities (Alg. 1 as written).

Per-batch update vs Algorithm 1
-------------------------------
Per batch we do one shared forward (backbone, all pair logits, fusion, R, sum_i C_i with
detached peers), **one** backward of ``-Phi``, per-block gradient clipping, and one
AdamW step over all parameter groups (heads at eta_head, backbone and fusion at eta_0).

* Heads: in Alg. 1, ``R_B`` is computed once before the player loop (line 8) and each
  ``J_i = R_B + alpha E_B[C_i]`` uses the cached detached peers (lines 6, 10), so
  ``grad_{theta_i} J_i`` is evaluated at the batch-start parameters no matter which
  players were updated before i. Since C_j (j != i) does not depend on theta_i (stop-grad
  peers, disjoint rows), ``grad_{theta_i} Phi = grad_{theta_i} J_i`` exactly (the
  block-gradient identity, tested with autograd). One backward of Phi therefore gives
  every block its own ``grad J_i``; AdamW and decoupled weight decay act element-wise,
  and with ``clip_scope='block'`` each player's rows are clipped to norm 5 by their own norm,
  as N separate steps would be, so the single step over the heads equals the N sequential
  block steps of lines 9-14 exactly. The default is ``clip_scope='global'``, as E.1 writes
  ("Gradient clipping (global norm 5) is enabled"): one norm over every parameter.
* Backbone/fusion (line 15): we ascend ``grad_{theta_0, omega} Phi`` from the same
  forward, i.e. at the batch-start heads, clipped jointly as one block. A literal reading
  that re-evaluates Phi after the N head updates would differ by O(eta_head) terms and
  needs a second full forward/backward per batch; we do not do that.
* If R were recomputed after each head update (true Gauss-Seidel: player i sees the
  already updated players j < i inside ``p_hat``), the head gradients would also differ
  by O(eta_head) terms and need N forward/backward passes per batch; Alg. 1 does not do
  this (R_B is fixed before the loop).

Separate backbones (``player_backbones``)
-----------------------------------------
``'shared'`` (default) reads E.1, "All players share a single backbone encoder theta_0 that
produces features h(x)", and Alg. 1 line 3, "Shared forward: compute features h(x; theta_0)".
``'separate'`` reads the Conclusion, "Our implementation still relies on a fixed overlap
schedule and an extra forward pass per player": player i gets its own backbone
``h_i(x; theta_0^i)`` (same architecture, its own initialisation, built one after the other
from the run's generator), and its pair rows read ``h_i``. It is the only reading under
which N changes the model class (with one backbone, N and rho only re-partition one linear
layer). Fusion, R, C_i and the peers are unchanged; the EMA peers use each peer's own
features. The backbones form the parameter group ``backbone`` (eta_0) and, under
``clip_scope='block'``, one block together with the fusion logits. Cost: N backbone
forwards and backwards per batch.

Partition (E.1) - :func:`~cdgtmll.methods.cdgtmll.partition.make_partition`
------------------------------------------------------------------------
Labels sorted by training frequency are dealt round-robin to the N players (in a random
order of the players, ``partition_order='shuffled'``, default; ``'fixed'``: 0..N-1); the
rarest ``round(rho L)`` tail labels each get one extra, least-loaded player. The exact rule and its
load guarantees are in :mod:`cdgtmll.methods.cdgtmll.partition`. The partition is fixed for
the run and reported by :meth:`CDGTMLL.extra_outputs`.

Cost
----
The hot path avoids per-batch column gathers (targets are re-laid once per run by
:meth:`CDGTMLLNet.target_layout`), evaluates the log-likelihood terms in log-sigmoid form
(:class:`_LogLikColumns`), and computes the divergence only on the overlap pairs with a
closed-form gradient (:class:`_OverlapCuriosity`); no Python loop over players or labels.
``benchmarks/bench_cdgtmll_cost.py`` measures the per-epoch time ratio to BCE.

Per epoch the train log has ``R``, ``C_loglik`` (sum_i of the log-likelihood parts),
``C_div`` (sum_i of the D parts, before beta), ``Phi``, ``beta`` (sample-weighted means
of the per-batch values), and
``player_val_acc.npz`` in the workdir holds, per epoch and pair, the validation accuracy
of thresholding the player's own probability at 0.5 and the validation average precision
of the player's own scores (arrays ``epoch [E]``, ``player [P]``, ``label [P]``,
``accuracy [E, P]``, ``ap [E, P]``); it is written with each checkpoint. ``ap`` is
``sklearn.metrics.average_precision_score`` per pair (computed by the trainer's vectorised
equal, :func:`cdgtmll.nn.val_metrics.average_precision_per_label`) on the pair logits (the
ranking of the exact probabilities; float32 sigmoids would tie where they saturate), NaN
where the label has no validation positive, and NaN everywhere above
``nn.sparse.DENSE_VAL_MAX_CELLS`` validation cells (as the log's ``val_mAP``). Accuracy at
0.5 ties whenever every covering player predicts all validation rows negative (Enron's
contested labels); AP ranks them anyway.

The trainer's ``grad_norm_max``/``clipped_steps`` columns read, under ``clip_scope='block'``,
the largest block norm (:meth:`CDGTMLL.clip_statistic`): a step counts as clipped if any block
(backbone+fusion, or one player's rows) was clipped.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cdgtmll.images.trainer_input import iter_rows
from cdgtmll.io import atomic_path
from cdgtmll.labels import label_counts, prevalence, tail_labels
from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.cdgtmll.partition import PARTITION_ORDERS, Partition, cumulative_tail, make_partition
from cdgtmll.methods.cdgtmll.terms import DIVERGENCE_FNS, DIVERGENCES, _LogLikColumns, _OverlapCuriosity
from cdgtmll.methods.neural import NeuralMethod
from cdgtmll.nn import device_sync
from cdgtmll.nn.backbones.mlp import MLPBackbone
from cdgtmll.nn.sparse import DENSE_VAL_MAX_CELLS
from cdgtmll.nn.val_metrics import average_precision_per_label

PLAYER_ACC_FILE = "player_val_acc.npz"
PAYOFF_WEIGHTS = ("uniform", "rarity")
#: readings of the paper that it leaves open; each is a hyper-parameter (docs/methods.md, the
#: ``readings`` study). The first value of each is the default.
PAYOFF_SCALES = ("mean", "sum")
CLIP_SCOPES = ("global", "block")
DIVERGENCE_FORMS = ("per_label", "vector")
PEER_SMOOTHING = ("parameters", "predictions")
TAIL_RULES = ("bottom_fraction", "cumulative")
PLAYER_BACKBONES = ("shared", "separate")
RARITIES = ("prevalence", "count")


# ----------------------------------------------------------------------------- model


class CDGTMLLNet(nn.Module):
    """Backbone + pair-Linear players + label-wise softmax fusion.

    Buffers: ``pair_player``/``pair_label`` [P]; ``single_labels`` [L1] (labels with one
    player, whose pairs are rows ``0..L1-1``); ``ov_labels`` [n_ov] (overlap labels),
    ``ov_group`` [|O|] (overlap pair -> index into ``ov_labels``; rows ``L1..P-1``),
    ``ov_peers`` [|O|] (coverage - 1); ``c_pair`` [P] curiosity weights 1/(1+freq) (``freq``:
    the prevalences or, under ``rarity='count'``, the training counts, as the caller passes them);
    ``w_single`` [L1], ``w_ov`` [n_ov] payoff weights; EMA buffers ``ema_weight``
    [|O|, d'], ``ema_bias`` [|O|], ``ema_steps`` (scalar).
    """

    def __init__(
        self,
        backbone: MLPBackbone | list[nn.Module],
        partition: Partition,
        freq: np.ndarray,
        payoff_weights: str = "uniform",
        eps: float = 1e-6,
        ema_decay: float = 0.99,
        divergence: str = "jsd",
        payoff_scale: str = "mean",
        divergence_form: str = "per_label",
        peer_smoothing: str = "parameters",
    ) -> None:
        super().__init__()
        L = partition.n_labels
        cov = partition.coverage
        single = np.flatnonzero(cov == 1)
        ov_labels = np.flatnonzero(cov > 1)
        owner_of = {}
        for i, labs in enumerate(partition.players):
            for lab in labs.tolist():
                owner_of.setdefault(lab, []).append(i)
        pair_label = list(single) + [lab for lab in ov_labels for _ in owner_of[lab]]
        pair_player = [owner_of[lab][0] for lab in single] + [i for lab in ov_labels for i in owner_of[lab]]
        ov_group = [k for k, lab in enumerate(ov_labels) for _ in owner_of[lab]]
        P = len(pair_label)
        self.n_labels, self.n_players, self.n_single, self.n_pairs = L, partition.n_players, len(single), P
        self.eps = float(eps)
        self.ema_decay = float(ema_decay)
        self.divergence = divergence
        self.divergence_form = divergence_form
        self.peer_smoothing = peer_smoothing
        # player_backbones 'separate': one backbone per player (a list, one per player); player i's
        # pair rows read its own features h_i(x). 'shared' (default): one module, E.1/Alg. 1.
        self.separate = isinstance(backbone, (list, tuple))
        if self.separate and len(backbone) != partition.n_players:
            raise ValueError(f"need one backbone per player: {partition.n_players} players, {len(backbone)} backbones")
        self.backbone = nn.ModuleList(backbone) if self.separate else backbone
        out_dim = backbone[0].out_dim if self.separate else backbone.out_dim
        self.heads = nn.Linear(out_dim, P)  # all players' heads, one row per pair
        self.fusion_logits = nn.Parameter(torch.zeros(P - len(single)))  # overlap pairs only
        long = lambda a: torch.as_tensor(np.asarray(a, dtype=np.int64))  # noqa: E731
        flt = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float32))  # noqa: E731
        self.register_buffer("pair_label", long(pair_label))
        self.register_buffer("pair_player", long(pair_player))
        # separate backbones: the pair rows of each player (for the per-player matmuls) and the
        # inverse permutation that puts the players' column blocks back in pair order
        order = np.argsort(np.asarray(pair_player, dtype=np.int64), kind="stable") if self.separate else np.zeros(0)
        self._row_blocks = (np.bincount(np.asarray(pair_player, dtype=np.int64), minlength=partition.n_players).tolist()
                            if self.separate else [])
        self.register_buffer("rows_by_player", long(order))
        self.register_buffer("rows_inverse", long(np.argsort(order, kind="stable") if self.separate else []))
        # the same for the overlap pairs alone (the EMA peers' rows, :meth:`linear_rows`): laid out once,
        # so that no step looks them up (a lookup by value waits for the device); not checkpointed
        ov_player = np.asarray(pair_player, dtype=np.int64)[len(single) :]
        ov_order = np.argsort(ov_player, kind="stable") if self.separate else np.zeros(0)
        self._ov_row_blocks = np.bincount(ov_player, minlength=partition.n_players).tolist() if self.separate else []
        self.register_buffer("ov_rows_by_player", long(ov_order), persistent=False)
        self.register_buffer("ov_rows_inverse", long(np.argsort(ov_order, kind="stable") if self.separate else []),
                             persistent=False)
        self.register_buffer("single_labels", long(single))
        self.register_buffer("ov_labels", long(ov_labels))
        self.register_buffer("ov_group", long(ov_group))
        self.register_buffer("ov_peers", flt(cov[ov_labels][ov_group] - 1 if len(ov_group) else []))
        # every overlap label has exactly two players (always so for make_partition):
        # partner = the other pair of the same label (adjacent rows) -> cheaper fast path
        self.pairs_of_two = bool(len(ov_labels)) and bool((cov[ov_labels] == 2).all())
        self.register_buffer("ov_partner", long(np.arange(len(ov_group)) ^ 1 if self.pairs_of_two else []))
        freq = np.asarray(freq, dtype=np.float64)
        r = 1.0 / (1.0 + freq)
        w = L * r / r.sum() if payoff_weights == "rarity" else np.ones(L)
        if payoff_scale == "mean":  # Eq. 5 / Theorem 1(3): M = (1/Z) sum_l w_l [...], Z = sum_l w_l
            w = w / w.sum()
        self.register_buffer("c_pair", flt(r[pair_label]))
        self.register_buffer("w_single", flt(w[single]))
        self.register_buffer("w_ov", flt(w[ov_labels]))
        n_ov_pairs = P - len(single)
        use_ema = self.ema_decay > 0 and n_ov_pairs > 0 and peer_smoothing == "parameters"
        self.register_buffer("ema_weight", self.heads.weight.detach()[len(single) :].clone() if use_ema else None)
        self.register_buffer("ema_bias", self.heads.bias.detach()[len(single) :].clone() if use_ema else None)
        self.register_buffer("ema_steps", torch.zeros((), dtype=torch.long))
        # peer_smoothing 'predictions': an EMA of the per-label batch mean of the peer average
        use_pred_ema = self.ema_decay > 0 and n_ov_pairs > 0 and peer_smoothing == "predictions"
        self.register_buffer("ema_peer", torch.full((n_ov_pairs,), 0.5) if use_pred_ema else None)
        self.logit_lo = math.log(self.eps) - math.log1p(-self.eps)

    # -- pieces ------------------------------------------------------------------------
    def fusion_weights(self) -> torch.Tensor:
        """omega for the overlap pairs [|O|]: softmax over the players covering each label."""
        a = self.fusion_logits
        if a.numel() == 0:
            return a
        if self.pairs_of_two:  # softmax over two logits = sigmoid of their difference
            return torch.sigmoid(a - a[self.ov_partner])
        amax = torch.zeros(self.ov_labels.numel(), dtype=a.dtype, device=a.device)
        amax = amax.scatter_reduce(0, self.ov_group, a.detach(), reduce="amax", include_self=False)
        e = torch.exp(a - amax[self.ov_group])
        s = torch.zeros_like(amax).index_add(0, self.ov_group, e)
        return e / s[self.ov_group]

    def all_fusion_weights(self) -> torch.Tensor:
        """omega for every pair [P] (1 for singly-covered labels)."""
        ones = torch.ones(self.n_single, device=self.fusion_logits.device)
        return torch.cat([ones, self.fusion_weights().detach()])

    def fuse_overlap(self, p_ov: torch.Tensor) -> torch.Tensor:
        """Fused probabilities of the overlap labels [B, n_ov] from overlap-pair probs."""
        wp = p_ov * self.fusion_weights()
        if self.pairs_of_two:  # the pairs of a label are adjacent columns
            return wp.view(wp.shape[0], -1, 2).sum(-1)
        return wp.new_zeros(wp.shape[0], self.ov_labels.numel()).index_add(1, self.ov_group, wp)

    def peer_mean(self, h: torch.Tensor, z_ov: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Detached peer average ``pbar_{-i,l}`` per overlap pair [B, |O|], clipped to
        ``[eps, 1-eps]``, and its logit. Peers are the EMA heads on ``h`` when the EMA is on,
        else the current (detached) overlap logits ``z_ov``."""
        hi = -self.logit_lo
        with torch.no_grad():
            if self.ema_weight is not None:
                z_ov = self.linear_rows(h, self.ema_weight, self.ema_bias, self.n_single)
            if self.pairs_of_two:  # the only peer is the partner pair
                zq = z_ov.index_select(1, self.ov_partner).clamp_(-hi, hi)
                return torch.sigmoid(zq), zq
            p_ov = torch.sigmoid(z_ov)
            s = p_ov.new_zeros(p_ov.shape[0], self.ov_labels.numel()).index_add_(1, self.ov_group, p_ov)
            q = ((s[:, self.ov_group] - p_ov) / self.ov_peers).clamp_(self.eps, 1 - self.eps)
            return q, torch.log(q) - torch.log1p(-q)

    @torch.no_grad()
    def smooth_peers(self, q: torch.Tensor, zq: torch.Tensor, update: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """peer_smoothing 'predictions': the peer average replaced by an EMA over batches of its
        per-label batch mean (a per-label constant; decay ramp as :meth:`update_ema`); ``update``
        advances the EMA with this batch (training steps only)."""
        if self.ema_peer is None:
            return q, zq
        if update:
            self.ema_peer.lerp_(q.mean(0).to(self.ema_peer), self._ema_rate(self.ema_peer))
            self.ema_steps += 1
        qs = self.ema_peer.to(q).clamp(self.eps, 1 - self.eps).expand_as(q)
        return qs, torch.log(qs) - torch.log1p(-qs)

    @torch.no_grad()
    def update_ema(self) -> None:
        if self.ema_weight is None:
            return
        rate = self._ema_rate(self.ema_weight)
        self.ema_weight.lerp_(self.heads.weight[self.n_single :], rate)
        self.ema_bias.lerp_(self.heads.bias[self.n_single :], rate)
        self.ema_steps += 1

    def _ema_rate(self, like: torch.Tensor) -> float | torch.Tensor:
        """``1 - d_t`` with ``d_t = min(ema_decay, 1 - 1/(t+1))``, ``t`` = ``ema_steps``: a Python
        float from the buffer where reading it is free (the CPU), else the same arithmetic in
        float64 on the device, cast to ``like``'s dtype (no host read; :mod:`cdgtmll.nn.device_sync`)."""
        if device_sync.host_reads_free(self.ema_steps.device):
            t = int(self.ema_steps)
            return 1.0 - min(self.ema_decay, 1.0 - 1.0 / (t + 1))
        t1 = self.ema_steps.double() + 1.0
        return (1.0 - torch.clamp(1.0 - 1.0 / t1, max=self.ema_decay)).to(like.dtype)

    # -- forward -----------------------------------------------------------------------
    def features(self, x: torch.Tensor) -> torch.Tensor:
        """h(x) [B, d'] from the shared backbone, or [N, B, d'] (player i's h_i(x)) when each
        player has its own (``player_backbones='separate'``)."""
        if self.separate:
            return torch.stack([b(x) for b in self.backbone])
        return self.backbone(x)

    def linear_rows(self, h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, first: int = 0) -> torch.Tensor:
        """Logits ``h_{player(r)} . weight_r + bias_r`` for the pair rows ``first..P-1`` that
        ``weight``/``bias`` hold. Shared backbone: one matmul. Separate backbones: one matmul per
        player over its rows, put back in pair order."""
        if not self.separate:
            return F.linear(h, weight, bias)
        if first == self.n_single:  # the overlap pairs: their per-player layout is precomputed
            rows = self.ov_rows_by_player
            blocks = [F.linear(h[i], weight[r], bias[r]) for i, r in enumerate(rows.split(self._ov_row_blocks))]
            return torch.cat(blocks, dim=1).index_select(1, self.ov_rows_inverse)
        players = self.pair_player[first:]
        out = h.new_empty(h.shape[1], players.numel())
        for i in range(self.n_players):
            rows = (players == i).nonzero().squeeze(1)
            if rows.numel():
                out[:, rows] = F.linear(h[i], weight[rows], bias[rows])
        return out

    def pair_logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.features(x)
        if not self.separate:
            return h, self.heads(h)
        rows, w, b = self.rows_by_player, self.heads.weight, self.heads.bias
        blocks = [F.linear(h[i], w[r], b[r]) for i, r in enumerate(rows.split(self._row_blocks))]
        return h, torch.cat(blocks, dim=1).index_select(1, self.rows_inverse)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Fused probabilities p_hat [B, L] for prediction, **not** clipped.

        Clipping to ``[eps, 1-eps]`` belongs to the training objective (Assumption 2(i):
        bounded log-likelihoods; :meth:`potential_terms`). At prediction time it would map
        every score below eps to the same value and create ties that lower mAP and P@k
        (measured on Yeast test: 18.6% of the scores at exactly 1e-6, mAP 0.4743 clipped
        vs 0.4761 unclipped). The scores are therefore the raw fused sigmoids, as every
        baseline outputs: for a singly-covered label exactly ``sigmoid(z)``; for an
        overlap label the omega-weighted mean of its players' sigmoids. Both are monotone
        in the logits, so no ranking is changed."""
        _, z = self.pair_logits(x)
        out = z.new_empty(z.shape[0], self.n_labels)
        out[:, self.single_labels] = torch.sigmoid(z[:, : self.n_single])
        if self.ov_labels.numel():
            out[:, self.ov_labels] = self.fuse_overlap(torch.sigmoid(z[:, self.n_single :]))
        return out

    def target_columns(self) -> torch.Tensor:
        """The label of each column of :meth:`target_layout`: ``[pair_label | ov_labels]``."""
        return torch.cat([self.pair_label, self.ov_labels])

    def target_layout(self, y: torch.Tensor) -> torch.Tensor:
        """Training targets re-laid once per run: ``[y[:, pair_label] | y[:, ov_labels]]``
        (``[n, P + n_ov]``), so a batch needs no column gathers."""
        return y[:, self.target_columns()]

    def potential_terms(self, x: torch.Tensor, yt: torch.Tensor) -> dict[str, torch.Tensor]:
        """Batch estimates of R, sum_i E_B[C_i]'s log-likelihood part and its D part (before
        beta), from one shared forward; ``Phi = R + alpha (C_loglik + beta C_div)``.
        ``yt`` = :meth:`target_layout` rows."""
        B, L1, P = x.shape[0], self.n_single, self.n_pairs
        hi = -self.logit_lo  # p_hat in [eps, 1-eps]  <=>  z in [-hi, hi] for a single player
        h, z = self.pair_logits(x)
        z1, z_ov = z.split([L1, P - L1], dim=1)
        y1, y_ov, y_lab = yt.split([L1, P - L1, yt.shape[1] - P], dim=1)
        # singly-covered labels: p_hat = clip(p); one pass gives the per-label log-likelihood
        # sums for curiosity (unclipped) and for R (clipped)
        ll1, llc1 = _LogLikColumns.apply(z1, y1, hi)
        R = (llc1 @ self.w_single) / B
        c_ll = (ll1 @ self.c_pair[:L1]) / B
        if P == L1:  # no overlap (rho = 0 or N = 1)
            return {"R": R, "C_loglik": c_ll, "C_div": z.new_zeros(())}
        # overlap pairs: fusion and R (binary targets: y log p + (1-y) log(1-p) = log(p (2y-1) + 1-y))
        p_ov = torch.sigmoid(z_ov)
        p_hat = self.fuse_overlap(p_ov).clamp(self.eps, 1 - self.eps)
        R = R + (torch.addcmul(1 - y_lab, p_hat, 2 * y_lab - 1).log_().sum(0) @ self.w_ov) / B
        # ... curiosity log-likelihood and divergence to the detached peers
        q, zq = self.smooth_peers(*self.peer_mean(h.detach(), z_ov.detach()), update=self.training)
        if self.divergence_form == "per_label":
            ll_ov, c_div = _OverlapCuriosity.apply(z_ov, y_ov, q, zq, self.divergence, p_ov.detach())
        else:
            ll_ov = -F.binary_cross_entropy_with_logits(z_ov, y_ov, reduction="none").sum(0)
            c_div = self.vector_divergence(torch.sigmoid(z_ov), q)
        c_ll = c_ll + (ll_ov @ self.c_pair[L1:]) / B
        return {"R": R, "C_loglik": c_ll, "C_div": c_div / B}

    def vector_divergence(self, p_ov: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """divergence_form 'vector': D between player i's vector of overlap probabilities and its
        peers' vector, each normalised over O_i to a distribution on O_i (App. E.1: "D as
        Jensen-Shannon divergence over the overlap set O_i"), summed over players and batch rows."""
        pl = self.pair_player[self.n_single :]
        tiny = torch.finfo(p_ov.dtype).tiny
        sp = p_ov.new_zeros(p_ov.shape[0], self.n_players).index_add(1, pl, p_ov)
        sq = q.new_zeros(q.shape[0], self.n_players).index_add(1, pl, q)
        P, Q = p_ov / sp[:, pl], q / sq[:, pl]
        if self.divergence == "kl":
            return (P * (torch.log(P + tiny) - torch.log(Q + tiny))).sum()
        M = 0.5 * (P + Q)
        logm = torch.log(M + tiny)
        return 0.5 * (P * (torch.log(P + tiny) - logm) + Q * (torch.log(Q + tiny) - logm)).sum()

    def per_player_curiosity(self, x: torch.Tensor, y: torch.Tensor, beta: float) -> torch.Tensor:
        """E_B[C_i] for each player [N] (diagnostics and tests; not the training path)."""
        B, L1 = x.shape[0], self.n_single
        h, z = self.pair_logits(x)
        ll = -F.binary_cross_entropy_with_logits(z, y[:, self.pair_label], reduction="none") * self.c_pair
        per_pair = ll.sum(0) / B
        if self.ov_labels.numel():
            q, _ = self.peer_mean(h.detach(), z[:, L1:].detach())
            div = DIVERGENCE_FNS[self.divergence](z[:, L1:], q)
            per_pair = per_pair + beta * torch.cat([per_pair.new_zeros(L1), div.sum(0) / B])
        return per_pair.new_zeros(self.n_players).index_add(0, self.pair_player, per_pair)


# ---------------------------------------------------------------------------- method


def rarity_freq(Y_train: Any, rarity: str = "prevalence") -> np.ndarray:
    """``freq(l)`` of Eq. 6's ``r_l = 1 / (1 + freq(l))`` under the ``rarity`` reading (module
    docstring): ``'prevalence'`` = (1/M) sum_m y_ml (Sec. 3.1, E.3), ``'count'`` = sum_m y_ml."""
    if rarity == "prevalence":
        return prevalence(Y_train)
    if rarity == "count":
        return label_counts(Y_train).astype(np.float64)
    raise ValueError(f"rarity must be one of {RARITIES}, got {rarity!r}")


def rarity_weights(Y_train: Any, rarity: str = "prevalence") -> np.ndarray:
    """``r_l = 1 / (1 + freq(l))`` ``[L]`` (Eq. 6), as :class:`CDGTMLLNet` computes them."""
    return 1.0 / (1.0 + np.asarray(rarity_freq(Y_train, rarity), dtype=np.float64))



@register("CD-GTMLL")
class CDGTMLL(NeuralMethod):
    """CD-GTMLL (Sections 3-4, Alg. 1, App. E.1) on the shared MLP backbone.

    Hyper-parameters (defaults = App. E.1/E.2 for Yeast): ``n_players=3``, ``rho=0.2``,
    ``alpha=0.4``, ``beta_max=0.3``, ``beta_warmup=0.1`` (fraction of training steps),
    ``ema_decay=0.99`` (0 disables), ``divergence='jsd'`` ('kl'), ``payoff_weights=
    'uniform'`` ('rarity'), ``eps=1e-6``, ``tail_fraction=None`` (None: FitData.tail),
    ``partition_seed=None`` (None: the run seed), plus the trainer's (see
    :mod:`cdgtmll.methods.neural`). The readings the paper leaves open, first value the
    default (module docstring, docs/methods.md): ``payoff_scale='mean'`` ('sum'),
    ``clip_scope='global'`` ('block'), ``divergence_form='per_label'`` ('vector'),
    ``peer_smoothing='parameters'`` ('predictions'), ``tail_rule='bottom_fraction'``
    ('cumulative', with ``head_mass=0.1``), ``player_backbones='shared'`` ('separate'),
    ``rarity='prevalence'`` ('count': freq(l) = training count in r_l = 1/(1+freq(l))),
    ``partition_order='shuffled'`` ('fixed': the round-robin deals to players 0..N-1 in order;
    :mod:`~cdgtmll.methods.cdgtmll.partition`).
    Ablations: ``alpha=0`` No-Curiosity, ``n_players=1`` Single-Predictor, ``rho=0``
    No-Overlap, ``beta_max=0`` no disagreement.
    """

    def __init__(
        self,
        *,
        n_players: int,
        rho: float,
        alpha: float,
        beta_max: float,
        beta_warmup: float,
        ema_decay: float,
        divergence: str,
        payoff_weights: str,
        eps: float,
        tail_fraction: float | None,
        partition_seed: int | None,
        clip_scope: str,
        payoff_scale: str,
        divergence_form: str,
        peer_smoothing: str,
        tail_rule: str,
        head_mass: float,
        player_backbones: str,
        rarity: str,
        partition_order: str,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if divergence not in DIVERGENCES:
            raise ValueError(f"divergence must be one of {DIVERGENCES}, got '{divergence}'")
        if payoff_weights not in PAYOFF_WEIGHTS:
            raise ValueError(f"payoff_weights must be one of {PAYOFF_WEIGHTS}, got '{payoff_weights}'")
        for name, value, allowed in (("clip_scope", clip_scope, CLIP_SCOPES), ("payoff_scale", payoff_scale, PAYOFF_SCALES),
                                     ("divergence_form", divergence_form, DIVERGENCE_FORMS),
                                     ("peer_smoothing", peer_smoothing, PEER_SMOOTHING), ("tail_rule", tail_rule, TAIL_RULES),
                                     ("player_backbones", player_backbones, PLAYER_BACKBONES),
                                     ("rarity", rarity, RARITIES), ("partition_order", partition_order, PARTITION_ORDERS)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got '{value}'")
        if not 0 < head_mass < 1:
            raise ValueError(f"head_mass must be in (0, 1), got {head_mass}")
        if alpha < 0 or beta_max < 0 or not 0 <= beta_warmup <= 1:
            raise ValueError("need alpha >= 0, beta_max >= 0, 0 <= beta_warmup <= 1")
        if not 0 <= ema_decay < 1 or not 0 < eps < 0.5:
            raise ValueError("need 0 <= ema_decay < 1 and 0 < eps < 0.5")
        if not 0 <= rho < 1 or int(n_players) < 1:
            raise ValueError("need 0 <= rho < 1 and n_players >= 1")
        self.n_players, self.rho = int(n_players), float(rho)
        self.alpha, self.beta_max, self.beta_warmup = float(alpha), float(beta_max), float(beta_warmup)
        self.ema_decay, self.divergence, self.payoff_weights = float(ema_decay), divergence, payoff_weights
        self.eps, self.clip_scope = float(eps), clip_scope
        self.payoff_scale, self.divergence_form, self.peer_smoothing = payoff_scale, divergence_form, peer_smoothing
        self.tail_rule, self.head_mass = tail_rule, float(head_mass)
        self.player_backbones = player_backbones
        self.rarity, self.partition_order = rarity, partition_order
        self.tail_fraction = None if tail_fraction is None else float(tail_fraction)
        self.partition_seed = None if partition_seed is None else int(partition_seed)
        self.partition: Partition | None = None
        self._freq: np.ndarray | None = None
        self._player_acc: list[np.ndarray] = []
        self._player_ap: list[np.ndarray] = []
        self._pairs: tuple[np.ndarray, np.ndarray] | None = None  # (pair_player, pair_label)

    @classmethod
    def table_note(cls, hparams: dict[str, Any]) -> str | None:
        payoff = hparams.get("payoff_weights", "uniform")
        R = ("the uniform logistic utility (w_l = 1), so rarity enters only through alpha C_i" if payoff == "uniform"
             else "the rarity-weighted logistic utility of Theorem 1(3)")
        scale = hparams.get("payoff_scale", "mean")
        over = ("a mean over labels (Eq. 5)" if scale == "mean"
                else "a sum over labels (payoff_scale: sum: alpha reads as alpha/L)")
        peers = ("an EMA of their head parameters" if hparams.get("peer_smoothing", "parameters") == "parameters"
                 else "an EMA of their per-label mean prediction")
        bb = ("; one backbone per player (player_backbones: separate)"
              if hparams.get("player_backbones", "shared") == "separate" else "")
        bb += ("; rarity weights 1/(1 + training count) (rarity: count)"
               if hparams.get("rarity", "prevalence") == "count" else "")
        return (f"{cls.name}: payoff R is {R} (payoff_weights: {payoff}), {over}{bb}; scores are the unclipped fused "
                f"probabilities; gradients clipped by {hparams.get('clip_scope', 'global')} norm; peers from {peers} "
                f"(ema_decay {hparams.get('ema_decay', 0.99)}). See docs/methods.md.")

    def fingerprint(self) -> dict[str, Any]:
        return {**super().fingerprint(), "partition": self.partition.to_json() if self.partition else None}

    def beta(self, progress: float) -> float:
        """Linear warm-up 0 -> beta_max over the first ``beta_warmup`` of training."""
        if self.beta_warmup <= 0:
            return self.beta_max
        return self.beta_max * min(1.0, progress / self.beta_warmup)

    # -- TrainTask -----------------------------------------------------------------------
    def prepare(self, data: FitData, ctx: RunContext) -> None:
        if self.tail_rule == "cumulative":
            tail = cumulative_tail(data.Y_train, self.head_mass)
        else:
            tail = data.tail if self.tail_fraction is None else tail_labels(data.Y_train, self.tail_fraction)
        seed = ctx.seed if self.partition_seed is None else self.partition_seed
        self.partition = make_partition(data.Y_train, self.n_players, self.rho, tail, seed, self.partition_order)
        self._freq = rarity_freq(data.Y_train, self.rarity)
        self._player_acc, self._player_ap = [], []

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> CDGTMLLNet:
        """``player_backbones='separate'``: N backbones, built one after the other from the run's
        generator (player 0's is the one the shared reading would build)."""
        n = self.partition.n_players
        backbone = [self.backbone(X_train) for _ in range(n)] if self.player_backbones == "separate" else None
        return CDGTMLLNet(
            backbone or self.backbone(X_train), self.partition, self._freq, self.payoff_weights, self.eps, self.ema_decay,
            self.divergence, self.payoff_scale, self.divergence_form, self.peer_smoothing,
        )  # fmt: skip

    def param_groups(self, model: CDGTMLLNet) -> dict[str, list[nn.Parameter]]:
        return {
            "backbone": list(model.backbone.parameters()),
            "head": list(model.heads.parameters()),
            "fusion": [model.fusion_logits],
        }

    def training_step(self, model: CDGTMLLNet, xb, yb, progress):
        beta = self.beta(progress)
        t = model.potential_terms(xb, yb)  # yb: rows of train_targets = target_layout(Y)
        phi = t["R"] + self.alpha * (t["C_loglik"] + beta * t["C_div"])
        return -phi, {**t, "Phi": phi.detach(), "beta": beta}

    def clip_gradients(self, model: CDGTMLLNet, max_norm: float) -> torch.Tensor | None:
        """'block': backbone+fusion clipped jointly; each player's rows of the pair-Linear
        clipped by their own norm (= the N+1 separate steps of Alg. 1). 'global': one norm.
        Returns the global gradient norm before clipping (from the block norms, no extra
        pass), which the trainer checks for NaN/inf. Under 'block' the norm that decides
        whether the step was clipped is the **largest block norm** (backbone+fusion, or a
        player's rows), kept for :meth:`clip_statistic`: a step is clipped iff some block was."""
        if self.clip_scope == "global":
            return super().clip_gradients(model, max_norm)
        rest = [p for p in (*model.backbone.parameters(), model.fusion_logits) if p.grad is not None]
        rest_norm = (nn.utils.clip_grad_norm_(rest, max_norm) if rest
                     else torch.zeros((), device=model.fusion_logits.device))
        gw, gb = model.heads.weight.grad, model.heads.bias.grad
        if gw is None:
            self._block_norm_max = rest_norm
            return rest_norm
        sq = torch.linalg.vector_norm(gw, dim=1).square_() + gb.square()
        player_sq = sq.new_zeros(model.n_players).index_add_(0, model.pair_player, sq)
        rest_norm = rest_norm.to(sq)
        total = torch.sqrt(rest_norm.square() + player_sq.sum())
        norms = player_sq.sqrt_()
        self._block_norm_max = torch.maximum(norms.max(), rest_norm)
        coef = (max_norm / (norms + 1e-6)).clamp_(max=1.0)[model.pair_player]
        gw.mul_(coef.unsqueeze(1))
        gb.mul_(coef)
        return total

    def clip_statistic(self) -> torch.Tensor | None:
        """Under ``clip_scope='block'``: the largest block norm before clipping of the last
        :meth:`clip_gradients` call (the trainer logs it as ``grad_norm_max``/``clipped_steps``);
        'global': None (the returned global norm is the one compared with the clip)."""
        return getattr(self, "_block_norm_max", None) if self.clip_scope == "block" else None

    def train_targets(self, model: CDGTMLLNet, Y: torch.Tensor) -> torch.Tensor:
        return model.target_layout(Y)

    def train_target_columns(self, model: CDGTMLLNet) -> torch.Tensor:
        return model.target_columns()

    def after_optimizer_step(self, model: CDGTMLLNet) -> None:
        model.update_ema()

    def predict(self, model: CDGTMLLNet, x: torch.Tensor) -> torch.Tensor:
        return model(x)

    def epoch_end(self, model: CDGTMLLNet, epoch: int, X_val, Y_val, workdir: Path) -> dict[str, float]:
        """Per pair: validation accuracy of ``p_il > 0.5`` and validation average precision
        of the player's own scores (module docstring, ``player_val_acc.npz``)."""
        if X_val is None:
            return {}
        correct = torch.zeros(model.n_pairs, dtype=torch.float64, device=Y_val.device)
        n_val = int(X_val.shape[0])
        keep = n_val * model.n_pairs <= DENSE_VAL_MAX_CELLS  # else AP is NaN (as the log's val_mAP)
        zs, ys = [], []
        s = 0
        for xb in iter_rows(X_val, 8192, Y_val.device):
            _, z = model.pair_logits(xb)
            yb = Y_val[s : s + xb.shape[0], model.pair_label] > 0.5
            correct += ((z > 0) == yb).sum(0)
            if keep:
                zs.append(z.double().cpu())
                ys.append(yb.cpu())
            s += xb.shape[0]
        self._player_acc.append((correct / n_val).float().cpu().numpy())
        ap = (average_precision_per_label(torch.cat(ys).numpy(), torch.cat(zs).numpy()) if keep and zs
              else np.full(model.n_pairs, np.nan))
        self._player_ap.append(ap.astype(np.float32))
        self._pairs = (model.pair_player.cpu().numpy(), model.pair_label.cpu().numpy())
        return {}

    def write_artifacts(self, workdir: Path) -> None:
        """``player_val_acc.npz`` with every epoch so far; the trainer calls this with each
        checkpoint (it was rewritten after every epoch: 3.7% of a Yeast fit)."""
        if not self._player_acc or self._pairs is None:
            return
        with atomic_path(Path(workdir) / PLAYER_ACC_FILE, suffix=".npz") as tmp:
            np.savez(
                tmp,
                epoch=np.arange(1, len(self._player_acc) + 1),
                player=self._pairs[0],
                label=self._pairs[1],
                accuracy=np.stack(self._player_acc),
                ap=np.stack(self._player_ap),
            )

    def extra_state(self) -> dict[str, Any]:
        return {"player_acc": list(self._player_acc), "player_ap": list(self._player_ap)}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self._player_acc = list(state.get("player_acc", []))
        self._player_ap = list(state.get("player_ap", []))

    # -- Method ----------------------------------------------------------------------------
    def extra_outputs(self) -> dict[str, Any]:
        if self.partition is None:
            return {}
        out: dict[str, Any] = {"partition": self.partition.to_json(), "hparams": self.hparams()}
        if self.model is not None:
            m = self.model
            out["fusion_weights"] = {
                "pair_player": m.pair_player.tolist(),
                "pair_label": m.pair_label.tolist(),
                "omega": m.all_fusion_weights().cpu().tolist(),
            }
        return out
