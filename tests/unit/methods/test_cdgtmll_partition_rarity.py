"""CD-GTMLL: the ``rarity`` reading of Eq. 6's freq(l), the partition's
``partition_order`` (who receives the extra tail labels) and the per-pair validation AP of
``player_val_acc.npz``, on real Yeast (the split the pipeline's ``prepare`` makes)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from cdgtmll.labels import ascending_order, label_counts, prevalence, tail_labels
from cdgtmll.methods.base import FitData, RunContext, build, spec_of
from cdgtmll.methods.cdgtmll.model import CDGTMLL, PLAYER_ACC_FILE, RARITIES, rarity_weights
from cdgtmll.methods.cdgtmll.partition import PARTITION_ORDERS, Partition, make_partition
from tests.support.runs import yeast_fit_data

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def yeast(tmp_path_factory, mirror) -> FitData:
    return yeast_fit_data(tmp_path_factory.mktemp("yeast40"), mirror)


def old_make_partition(Y_train, n_players: int, rho: float, tail, seed: int) -> Partition:
    """make_partition with the players dealt in index order, no permutation drawn: the
    reference ``partition_order: fixed`` must equal (verbatim, less the argument checks)."""
    L, N = int(Y_train.shape[1]), int(n_players)
    order = ascending_order(Y_train)
    owner = np.empty(L, dtype=np.int64)
    owner[order] = np.arange(L) % N
    members = [sorted(np.flatnonzero(owner == i).tolist()) for i in range(N)]
    tail = np.sort(np.asarray(tail, dtype=np.int64))
    if N >= 2 and rho > 0 and tail.size:
        in_tail = np.zeros(L, dtype=bool)
        in_tail[tail] = True
        tail_asc = order[in_tail[order]]
        n_extra = min(int(math.floor(rho * L + 0.5)), tail_asc.size)
        loads = np.array([len(m) for m in members], dtype=np.int64)
        rng = np.random.default_rng(seed)
        for lab in tail_asc[:n_extra]:
            eligible = np.array([i for i in range(N) if i != owner[lab]])
            least = eligible[loads[eligible] == loads[eligible].min()]
            j = int(least[rng.integers(least.size)])
            members[j].append(int(lab))
            loads[j] += 1
    return Partition(tuple(np.array(sorted(m), dtype=np.int64) for m in members), L, tail)


def fit(data: FitData, workdir: Path, seed: int = 0, **hp) -> CDGTMLL:
    m = build("CD-GTMLL", {"epochs": 3, "hidden_dim": 64, "batch_size": 256, **hp})
    m.fit(data, RunContext(seed=seed, workdir=workdir))
    return m


# ------------------------------------------------------------------------------ rarity


def test_rarity_reading_is_registered_with_prevalence_the_default():
    assert RARITIES == ("prevalence", "count") and CDGTMLL().rarity == "prevalence"
    assert spec_of("CD-GTMLL").hparams["rarity"].space == {"enum": ["prevalence", "count"]}
    assert CDGTMLL(rarity="count").hparams()["rarity"] == "count"
    with pytest.raises(ValueError, match="rarity must be one of"):
        CDGTMLL(rarity="inverse")


def test_rarity_weights_on_real_yeast(yeast):
    """r_l = 1/(1 + freq(l)): freq the prevalence (Sec. 3.1) or the training count; the weight
    ratio is recomputed from the label counts, and the model's curiosity weights (c_pair) and
    ``payoff_weights: rarity`` weights are the chosen reading's."""
    n = label_counts(yeast.Y_train).astype(np.float64)
    M = yeast.Y_train.shape[0]
    for rarity, freq in (("prevalence", n / M), ("count", n)):
        r = rarity_weights(yeast.Y_train, rarity)
        np.testing.assert_array_equal(r, 1.0 / (1.0 + freq))
        assert r.max() / r.min() == pytest.approx((1 + freq.max()) / (1 + freq.min()), rel=1e-12)
        m = CDGTMLL(hidden_dim=16, rarity=rarity, payoff_weights="rarity")
        m.prepare(yeast, RunContext(seed=0, workdir=Path(".")))
        model = m.build_model(yeast.X_train, yeast.Y_train)
        pl = model.pair_label.numpy()
        np.testing.assert_array_equal(model.c_pair.numpy(), r[pl].astype(np.float32))
        w = r / r.sum()  # payoff_scale 'mean': w_l = L r_l / sum r, then / sum w
        ws = model.w_single.numpy()
        np.testing.assert_allclose(ws, (len(r) * r / r.sum() / (len(r) * r / r.sum()).sum())[model.single_labels.numpy()],
                                   rtol=1e-6)
        np.testing.assert_allclose(ws, w[model.single_labels.numpy()], rtol=1e-6)
    ratio = {k: (lambda r: r.max() / r.min())(rarity_weights(yeast.Y_train, k)) for k in RARITIES}
    assert ratio["prevalence"] < 2 < 40 < ratio["count"]  # [1/2, 1] against ~1/n_l


def test_rarity_prevalence_leaves_the_default_run_byte_identical(yeast, tmp_path):
    """``rarity: prevalence`` is the default: a run that names it equals, byte for byte, one that
    does not; its curiosity weights are ``1/(1 + prevalence)`` exactly;
    ``count`` changes the predictions."""
    runs = {name: fit(yeast, tmp_path / name, **hp) for name, hp in
            (("default", {}), ("prevalence", {"rarity": "prevalence"}), ("count", {"rarity": "count"}))}
    P = {k: np.ascontiguousarray(m.predict_proba(yeast.X_val)) for k, m in runs.items()}
    digest = {k: hashlib.sha256(v.tobytes()).hexdigest() for k, v in P.items()}
    assert digest["prevalence"] == digest["default"] and digest["count"] != digest["default"]
    old_r = 1.0 / (1.0 + prevalence(yeast.Y_train))  # Eq. 6's freq(l) as the label's training prevalence
    model = runs["default"].model
    assert torch.equal(model.c_pair.cpu(), torch.as_tensor(old_r[model.pair_label.cpu().numpy()], dtype=torch.float32))


# --------------------------------------------------------------------------- partition


def test_partition_order_is_registered_with_shuffled_the_default():
    assert PARTITION_ORDERS == ("shuffled", "fixed") and CDGTMLL().partition_order == "shuffled"
    assert spec_of("CD-GTMLL").hparams["partition_order"].space == {"enum": ["shuffled", "fixed"]}
    with pytest.raises(ValueError, match="partition_order must be one of"):
        CDGTMLL(partition_order="random")
    with pytest.raises(ValueError, match="partition_order must be one of"):
        make_partition(np.eye(4, dtype=np.uint8), 2, 0.2, np.array([0]), 0, order="random")


def test_fixed_order_reproduces_the_old_partition(yeast):
    """``partition_order: fixed`` = the index-order deal, on real Yeast and synthetic label sets."""
    rng = np.random.default_rng(0)
    cases = [(yeast.Y_train, N) for N in (2, 3, 4, 5)]
    cases += [((rng.random((300, L)) < rng.uniform(0.01, 0.5, L)).astype(np.uint8), N) for L in (14, 50, 101)
              for N in (3, 7)]
    for Y, N in cases:
        tail = tail_labels(Y)
        for seed in range(10):
            new, old = make_partition(Y, N, 0.2, tail, seed, order="fixed"), old_make_partition(Y, N, 0.2, tail, seed)
            assert len(new.players) == len(old.players)
            assert all(np.array_equal(a, b) for a, b in zip(new.players, old.players))


def _extras_and_loads(Y, order: str, seeds) -> tuple[list[dict[int, int]], list[np.ndarray], list[Partition]]:
    tail = tail_labels(Y)
    parts = [make_partition(Y, 3, 0.2, tail, s, order=order) for s in seeds]
    return [p.extra_of for p in parts], [np.array([len(x) for x in p.players]) for p in parts], parts


def test_shuffled_order_spreads_the_extra_tail_labels_over_players_on_yeast(yeast):
    """E.1 (iii): "add overlap by assigning each tail label to an additional player chosen uniformly
    at random subject to per-player load balance". Yeast (L = 14, N = 3): the fixed deal leaves
    player 2 one label short for every seed, so load balance gives it an extra tail label for every
    seed; shuffled, the receiver changes with the seed. Loads stay within the documented bounds
    and every overlap label is covered by exactly its owner and its extra player."""
    Y = yeast.Y_train
    tail = tail_labels(Y)
    order = ascending_order(Y)
    fixed, _, _ = _extras_and_loads(Y, "fixed", range(10))
    assert all(2 in ex.values() for ex in fixed)  # the artefact: player 2 gets extras for every seed
    extras, loads, parts = _extras_and_loads(Y, "shuffled", range(10))
    receivers = [set(ex.values()) for ex in extras]
    assert len(set.union(*receivers)) == 3 and len(set.intersection(*receivers)) == 0
    first = {ex[int(order[np.isin(order, tail)][0])] for ex in extras}  # the rarest label's extra player
    assert len(first) > 1
    for part, ld in zip(parts, loads):
        rr = np.bincount(part.owner, minlength=3)
        assert rr.max() - rr.min() <= 1  # round-robin
        assert ld.max() - ld.min() <= 2  # after the extras (module docstring)
        assert sorted(part.extra_of) == sorted(tail.tolist()) == part.overlap.tolist()
        for lab, j in part.extra_of.items():
            covering = {i for i, p in enumerate(part.players) if lab in p}
            assert covering == {int(part.owner[lab]), j} and j != part.owner[lab]
        js = part.to_json()
        assert js["owner"] == part.owner.tolist() and js["extra_of"] == {str(k): v for k, v in part.extra_of.items()}


def test_shuffled_short_player_is_uniform_over_seeds(yeast):
    """Which player the round-robin leaves short (and so receives the first extra) is each of the
    3 with frequency near 1/3 over 300 seeds (a binomial(300, 1/3) lies in [70, 130] with
    probability > 0.9999); fixed: always player 2."""
    Y = yeast.Y_train
    tail = tail_labels(Y)
    short = {o: np.zeros(3, dtype=int) for o in PARTITION_ORDERS}
    for seed in range(300):
        for o in PARTITION_ORDERS:
            short[o][int(np.argmin(np.bincount(make_partition(Y, 3, 0.2, tail, seed, o).owner, minlength=3)))] += 1
    assert short["fixed"].tolist() == [0, 0, 300]
    assert (short["shuffled"] >= 70).all() and (short["shuffled"] <= 130).all()


# -------------------------------------------------------------------------- player AP


def test_player_file_ap_equals_sklearn_on_the_players_scores(yeast, tmp_path):
    """``player_val_acc.npz`` ``ap [E, P]``: per pair, sklearn's average_precision_score of the
    label's validation targets against the player's own probability, recomputed here from the
    trained model (final epoch); NaN exactly where the label has no validation positive.
    ``accuracy`` is still the 0.5-threshold accuracy."""
    m = fit(yeast, tmp_path, seed=1)
    with np.load(tmp_path / PLAYER_ACC_FILE) as z:
        ap, acc, pl, lab = z["ap"], z["accuracy"], z["player"], z["label"]
    assert ap.shape == acc.shape == (3, len(lab))
    with torch.no_grad():
        _, zlog = m.model.pair_logits(torch.as_tensor(yeast.X_val, dtype=torch.float32))
    p = torch.sigmoid(zlog.double()).numpy()
    Yp = yeast.Y_val[:, lab] > 0.5
    for k in range(len(lab)):
        if not Yp[:, k].any():
            assert np.isnan(ap[-1, k])
            continue
        assert ap[-1, k] == pytest.approx(average_precision_score(Yp[:, k], p[:, k]), rel=1e-6)
        assert acc[-1, k] == pytest.approx(((p[:, k] > 0.5) == Yp[:, k]).mean(), abs=1e-6)
    np.testing.assert_array_equal(pl, m.model.pair_player.numpy())
    assert m.extra_outputs()["partition"]["extra_of"]  # the roles travel with the run
