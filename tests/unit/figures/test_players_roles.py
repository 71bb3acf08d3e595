"""Player diagnostics: per-(player, label) validation AP beside accuracy@0.5, and player
roles named by what they cover (owner / extra coverer), on exact toys and real Yeast runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cdgtmll.figures.studies import players
from cdgtmll.methods.cdgtmll.partition import make_partition
from tests.support.runs import prepared_yeast, train_seeds


def test_roles_and_coverage_on_a_known_partition():
    player = np.array([0, 1, 2, 0, 1, 2, 2, 1])
    label = np.array([0, 1, 2, 3, 4, 5, 4, 5])
    owner = [0, 1, 2, 0, 1, 2]
    extra = {4: 2, 5: 1}
    roles = players.pair_roles(player, label, owner, extra)
    assert roles.tolist() == ["sole", "sole", "sole", "sole", "owner", "owner", "extra coverer", "extra coverer"]
    cov = players.player_coverage(owner, extra, tail=[4, 5], n_players=3)
    assert cov == [{"n_owned": 2, "n_tail_owned": 0, "n_extra": 0, "n_extra_tail": 0},
                   {"n_owned": 2, "n_tail_owned": 1, "n_extra": 1, "n_extra_tail": 1},
                   {"n_owned": 2, "n_tail_owned": 1, "n_extra": 1, "n_extra_tail": 1}]
    score = np.array([0.9, 0.9, 0.9, 0.9, 0.6, 0.3, 0.4, 0.3])
    assert players.role_outcomes(score, label, roles) == {"owner_best": 1, "extra_best": 0, "tied": 1, "n": 2}
    score[4] = np.nan  # AP NaN: the label leaves the scope
    assert players.role_outcomes(score, label, roles) == {"owner_best": 0, "extra_best": 0, "tied": 1, "n": 1}


def test_roles_from_make_partition_match_its_label_sets():
    rng = np.random.default_rng(3)
    Y = (rng.random((200, 20)) < np.linspace(0.02, 0.5, 20)).astype(np.uint8)
    from cdgtmll.labels import tail_labels

    part = make_partition(Y, 3, 0.2, tail_labels(Y), seed=5)
    pl = np.concatenate([np.full(len(p), i) for i, p in enumerate(part.players)])
    lab = np.concatenate(part.players)
    roles = players.pair_roles(pl, lab, part.owner, part.extra_of)
    assert "other" not in roles.tolist()
    for k in range(len(lab)):
        if roles[k] == "extra coverer":
            assert part.extra_of[int(lab[k])] == pl[k]
        elif roles[k] == "owner":
            assert part.owner[lab[k]] == pl[k] and int(lab[k]) in part.extra_of
    cov = players.player_coverage(part.owner, part.extra_of, part.tail, 3)
    assert [c["n_owned"] + c["n_extra"] for c in cov] == [len(p) for p in part.players]


def test_ap_separates_players_that_tie_on_accuracy():
    """Every covering player predicts every validation row negative on the contested labels:
    accuracy@0.5 ties (credit split, all ranks tied), AP picks the player that ranks the positives
    higher."""
    player = np.array([0, 1, 2, 0, 1, 2, 1, 0])
    label = np.array([0, 1, 2, 3, 4, 4, 5, 5])
    acc = np.array([0.9, 0.8, 0.7, 0.6, 0.95, 0.95, 0.97, 0.97])  # labels 4, 5: both coverers tie
    ap = np.array([0.9, 0.8, 0.7, 0.6, 0.20, 0.55, 0.40, 0.10])
    contested = [4, 5]
    sh_acc, n = players.specialization_shares(acc, player, label, contested_only=True)
    sh_ap, n_ap = players.specialization_shares(ap, player, label, contested_only=True)
    assert n == n_ap == 2
    np.testing.assert_allclose(sh_acc, [0.25, 0.5, 0.25])  # ties split
    np.testing.assert_allclose(sh_ap, [0.0, 0.5, 0.5])  # label 4: player 2; label 5: player 1
    assert players.n_all_tied(acc, label, contested) == 2 and players.n_all_tied(ap, label, contested) == 0
    np.testing.assert_allclose(players.mean_ranks(acc, player, label, contested)[0], [1.5, 1.5, 1.5])
    np.testing.assert_allclose(players.mean_ranks(ap, player, label, contested)[0], [2.0, 1.5, 1.0])
    ap_nan = ap.copy()
    ap_nan[[4, 5]] = np.nan  # label 4 has no validation positive: out of the AP scope
    sh, n = players.specialization_shares(ap_nan, player, label, contested_only=True)
    assert n == 1 and sh.tolist() == [0.0, 1.0, 0.0]


@pytest.fixture(scope="module")
def yeast_cdgtmll(tmp_path_factory, mirror) -> list[Path]:
    """Two seeds of CD-GTMLL (3 epochs, hidden 64) on real Yeast as the train and evaluate jobs make them."""
    from cdgtmll.metrics import evaluate_run

    root = tmp_path_factory.mktemp("players40")
    clean, clean_path = prepared_yeast(root, mirror)
    rundir = train_seeds(clean, clean_path, root / "runs" / "yeast" / "clean" / "CD-GTMLL", "CD-GTMLL", (0, 1),
                         {"epochs": 3, "batch_size": 256, "lr_backbone": 2e-3, "hidden_dim": 64})
    assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir), "--seeds", "0", "1"]) == 0
    return [rundir / "seed0", rundir / "seed1"]


def test_real_yeast_figures_carry_ap_and_roles(yeast_cdgtmll, tmp_path):
    rows = players.specialization_figure(yeast_cdgtmll, tmp_path / "spec", labels="contested")
    df = pd.DataFrame(rows)
    for col in ("share_mean", "share_ap_mean", "n_labels_ap"):
        assert col in df and df[col].notna().all()
    for _, g in df.groupby("epoch"):
        assert g["share_ap_mean"].sum() == pytest.approx(1.0)
    assert (tmp_path / "spec.png").is_file()
    players.ranks_figures(yeast_cdgtmll, tmp_path / "ranks", tail_fraction=0.2)
    heat = pd.read_csv(tmp_path / "ranks_heatmap.csv")
    assert {"mean_rank_mean", "mean_rank_ap_mean", "n_all_tied_labels_ap_mean"} <= set(heat.columns)
    cov = pd.read_csv(tmp_path / "ranks_coverage.csv")
    roles = pd.read_csv(tmp_path / "ranks_roles.csv")
    for d in yeast_cdgtmll:
        seed = int(d.name[4:])
        part = json.loads((d / "method_outputs.json").read_text())["partition"]
        extra = {int(k): v for k, v in part["extra_of"].items()}
        mine = cov[cov.seed == seed].sort_values("player")
        want = players.player_coverage(part["owner"], extra, part["tail_labels"], 3)
        assert mine[["n_owned", "n_tail_owned", "n_extra", "n_extra_tail"]].to_dict("records") == want
        with np.load(d / "player_val_acc.npz") as z:
            ap, acc, pl, lab = z["ap"][-1], z["accuracy"][-1], z["player"], z["label"]
        pr = players.pair_roles(pl, lab, part["owner"], extra)
        for ms, sc in (("accuracy", acc), ("ap", ap)):
            got = roles[(roles.seed == seed) & (roles.measure == ms)].iloc[0]
            assert got[["owner_best", "extra_best", "tied", "n"]].tolist() == list(
                players.role_outcomes(sc, lab, pr).values())
        assert got["n"] == len(extra)  # Yeast's two tail labels have validation positives
