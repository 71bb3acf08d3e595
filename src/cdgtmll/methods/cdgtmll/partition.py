r"""CD-GTMLL's label-space partition (App. E.1): which labels each player owns.

E.1: "(i) sort labels by freq(l) (ascending); (ii) round-robin assign labels to players to
balance head/tail counts per player; (iii) add overlap by assigning each tail label to an
additional player chosen uniformly at random subject to per-player load balance (target
coverage factor m ~ 1+rho, default rho=0.2); (iv) fix the partition for the entire training."

Labels sorted by training frequency ascending (:func:`cdgtmll.labels.ascending_order`,
fixed-seed ties) are dealt round-robin to the players. ``order`` (the CD-GTMLL
hyper-parameter ``partition_order``) says in which order the players are dealt to:

* ``'shuffled'`` (default): in the order of a random permutation of 0..N-1, the first draw
  of the partition's generator. Step (iii) chooses the extra player "uniformly at random
  subject to per-player load balance"; with L not a multiple of N the round-robin leaves the
  last ``N - L mod N`` players of the deal one label short, and load balance then sends them
  the first extras. Under a fixed deal that is always the same player index (Yeast, L = 14,
  N = 3: player 2 receives an extra label for every seed), so "the player that covers the
  extra tail labels" would be an artefact of the index. Shuffling the deal makes which
  player is short, and so which one receives the extras, uniform over seeds; the partition
  is the ``'fixed'`` one with the players relabelled by the permutation (same loads, same
  bounds below), apart from the random tie-breaks of step (iii).
* ``'fixed'``: players 0..N-1 in that order. No permutation is drawn, so the tie-breaks of
  step (iii) are the generator's first draws.

Overlap: the tail is ``FitData.tail`` (bottom ``floor(0.2 L)`` labels; ``tail_fraction``
recomputes it from Y_train with another q). ``n_extra = min(floor(rho L + 1/2), |tail|)``
tail labels - the least frequent ones - each get exactly one extra player, chosen uniformly
at random (``numpy`` generator seeded with ``partition_seed``, default the run seed) among
the least-loaded players that do not own the label yet. With q = rho = 0.2 every tail label
gets an extra player (coverage 2) and coverage is ``1 + n_extra / L ~ 1 + rho``; with
rho < q only the rarest ``round(rho L)`` tail labels overlap; with rho > q coverage is
capped at ``1 + |tail| / L`` (overlap stays on tail labels, as E.1 requires). rho = 0 or
N = 1: no overlap. Loads after round-robin differ by <= 1; the greedy extra assignment
keeps them within 2 when the tail is the bottom of the same frequency order (the owner
of a label is excluded, so when it is the unique least-loaded player the extra goes one
above the minimum); within 1 for N = 2. Both hold under either ``order``.

:class:`Partition` records, besides the label sets, each label's round-robin **owner** and,
for each overlap label, its **extra** player (``extra_of``), so that diagnostics can name a
player's role by what it covers rather than by its index. The partition is fixed for the
run and reported by :meth:`CDGTMLL.extra_outputs` (``Partition.to_json``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdgtmll.labels import ascending_order

#: how the round-robin deals labels to players (module docstring); the first is the default
PARTITION_ORDERS = ("shuffled", "fixed")


@dataclass(frozen=True)
class Partition:
    """Label subsets of the N players; ``players[i]`` = sorted label indices of L_i.

    ``owner`` ``[L]``: the player the round-robin deal gave each label (step (ii); None when
    the partition was built by hand); ``extra_of``: overlap label -> the player step (iii)
    added ("extra coverer")."""

    players: tuple[np.ndarray, ...]
    n_labels: int
    tail: np.ndarray
    owner: np.ndarray | None = None
    extra_of: dict[int, int] = field(default_factory=dict)

    @property
    def n_players(self) -> int:
        return len(self.players)

    @property
    def coverage(self) -> np.ndarray:
        """Number of players covering each label, ``[L]``."""
        return np.bincount(np.concatenate(self.players), minlength=self.n_labels)

    @property
    def overlap(self) -> np.ndarray:
        """Labels covered by >= 2 players (sorted)."""
        return np.flatnonzero(self.coverage > 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "n_players": self.n_players,
            "players": [p.tolist() for p in self.players],
            "overlap_labels": self.overlap.tolist(),
            "tail_labels": np.asarray(self.tail).tolist(),
            "coverage_factor": float(sum(len(p) for p in self.players) / max(self.n_labels, 1)),
            "owner": None if self.owner is None else np.asarray(self.owner).tolist(),
            # JSON object keys are strings: label index -> extra player
            "extra_of": {str(lab): int(p) for lab, p in sorted(self.extra_of.items())},
        }


def make_partition(Y_train: Any, n_players: int, rho: float, tail: np.ndarray, seed: int,
                   order: str = "shuffled") -> Partition:
    """E.1 label-space partition (see the module docstring for the exact rule); ``order`` is
    ``partition_order`` (:data:`PARTITION_ORDERS`)."""
    L = int(Y_train.shape[1])
    N = int(n_players)
    if N < 1:
        raise ValueError(f"n_players must be >= 1, got {N}")
    if N > L:
        raise ValueError(f"n_players={N} exceeds the number of labels {L}: every player needs a label")
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"overlap ratio rho must be in [0, 1), got {rho}")
    if order not in PARTITION_ORDERS:
        raise ValueError(f"partition_order must be one of {PARTITION_ORDERS}, got {order!r}")
    rng = np.random.default_rng(seed)
    deal = rng.permutation(N) if order == "shuffled" else np.arange(N)  # 'fixed': no draw
    asc = ascending_order(Y_train)
    owner = np.empty(L, dtype=np.int64)
    owner[asc] = deal[np.arange(L) % N]
    members: list[list[int]] = [sorted(np.flatnonzero(owner == i).tolist()) for i in range(N)]
    tail = np.sort(np.asarray(tail, dtype=np.int64))
    extra_of: dict[int, int] = {}
    if N >= 2 and rho > 0 and tail.size:
        in_tail = np.zeros(L, dtype=bool)
        in_tail[tail] = True
        tail_asc = asc[in_tail[asc]]  # tail labels, least frequent first
        n_extra = min(int(math.floor(rho * L + 0.5)), tail_asc.size)
        loads = np.array([len(m) for m in members], dtype=np.int64)
        for lab in tail_asc[:n_extra]:
            eligible = np.array([i for i in range(N) if i != owner[lab]])
            least = eligible[loads[eligible] == loads[eligible].min()]
            j = int(least[rng.integers(least.size)])
            members[j].append(int(lab))
            extra_of[int(lab)] = j
            loads[j] += 1
    return Partition(tuple(np.array(sorted(m), dtype=np.int64) for m in members), L, tail, owner, extra_of)


def cumulative_tail(Y, head_mass: float = 0.1) -> np.ndarray:
    """tail_rule 'cumulative' (Sec. 3.1: "We sort {freq(l)} in descending order and define a
    threshold (e.g., top 10 % cumulative frequency) to partition labels into the head L_H and the
    tail L_T = L \\ L_H"): the head is the shortest prefix of the labels by descending training
    frequency whose frequencies sum to at least ``head_mass`` of the total; the tail is every other
    label, sorted by label index. (App. E.3/E.4 instead take the bottom ``floor(0.2 L)`` labels as
    the tail, the default ``bottom_fraction``.)"""
    order = ascending_order(Y)[::-1]  # descending frequency, fixed-seed ties
    counts = np.asarray(Y.sum(0)).ravel().astype(np.float64)[order]
    total = counts.sum()
    if total <= 0:
        return np.arange(Y.shape[1])
    n_head = int(np.searchsorted(np.cumsum(counts) / total, head_mass) + 1)
    return np.sort(order[n_head:])
