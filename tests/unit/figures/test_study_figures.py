"""Study figures (ablation, robustness, sweep, specialization, ranks, potential) on synthetic
run directories written in the pipeline's exact layout, and on a real short CD-GTMLL run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cdgtmll.figures.studies import build as build_mod
from cdgtmll.figures.studies import comparison, players
from cdgtmll.io import sha256_file, write_json
from cdgtmll.labels import tail_labels
from tests.support.study_runs import TOY_ACC, TOY_LABEL, TOY_PLAYER, run, write_metrics, write_player_acc, write_train_log


def assert_outputs(out: Path) -> dict:
    for ext in ("pdf", "png", "csv", "sources.json"):
        assert Path(f"{out}.{ext}").is_file(), ext
    src = json.loads(Path(f"{out}.sources.json").read_text())
    assert src["figure"] == out.name
    for entries in src["runs"].values():
        for e in entries:
            assert sha256_file(e["path"]) == e["sha256"]
    return src


# ------------------------------------------------------------------------ ablation


def test_ablation_gaps_equal_differences_of_means(tmp_path: Path):
    root = tmp_path / "runs"
    vals = {"CD-GTMLL": [0.60, 0.64, 0.62], "No-Curiosity": [0.55, 0.57, 0.56], "Single-Predictor": [0.50, 0.54]}
    dirs = []
    for m, vs in vals.items():
        for k, v in enumerate(vs):
            dirs.append(write_metrics(run(root, "voc2007", "clean", m, k),
                                      {"rare_f1": v, "mAP": v + 0.2, "micro_f1": v + 0.1}, {"rare_f1": v - 0.1}))
    out = tmp_path / "fig" / "ablation"
    comparison.ablation_figure(dirs, out, full="CD-GTMLL", order=["No-Curiosity", "Single-Predictor", "CD-GTMLL"])
    df = pd.read_csv(f"{out}.csv")
    assert len(df) == 9
    assert list(dict.fromkeys(df["method"])) == ["No-Curiosity", "Single-Predictor", "CD-GTMLL"]
    full = df[(df.method == "CD-GTMLL")].set_index("metric")
    # every bar is a mean over the seeds all methods have (Single-Predictor has seeds 0 and 1 only)
    common = {m: np.array(v[:2]) for m, v in vals.items()}
    for _, r in df[df.method != "CD-GTMLL"].iterrows():
        off = {"rare_f1": 0.0, "mAP": 0.2, "micro_f1": 0.1}[r.metric]
        expect = np.mean(common[r.method] + off) - np.mean(common["CD-GTMLL"] + off)
        assert r.gap_to_full == pytest.approx(expect)
        assert r.gap_to_full == pytest.approx(r["mean"] - full.loc[r.metric, "mean"])
        assert r["std"] == pytest.approx(np.std(common[r.method], ddof=1))
    assert df[df.method == "CD-GTMLL"].gap_to_full.isna().all()
    assert df.n_seeds.eq(2).all()
    src = assert_outputs(out)
    assert sum(len(v) for v in src["runs"].values()) == 8
    assert "voc2007/clean/No-Curiosity" in src["runs"]
    # adaptive mode reads the other block
    comparison.ablation_figure(dirs, tmp_path / "abl_ad", mode="adaptive", metrics=["rare_f1"])
    ad = pd.read_csv(tmp_path / "abl_ad.csv").set_index("method")
    assert ad.loc["CD-GTMLL", "mean"] == pytest.approx(0.52)  # (0.60 + 0.64) / 2 - 0.1: seeds 0 and 1
    # errors: full model or an --order method without runs
    with pytest.raises(ValueError, match="full model"):
        comparison.ablation_figure(dirs, tmp_path / "x", full="Nope")
    with pytest.raises(ValueError, match="--order"):
        comparison.ablation_figure(dirs, tmp_path / "x", order=["Ghost"])


# ---------------------------------------------------------------------- robustness


def test_robustness_pairs_by_training_seed(tmp_path: Path):
    root = tmp_path / "runs"
    clean = {0: 0.50, 1: 0.30, 2: 0.40}
    noisy = {("N0.10-s0", 0): 0.48, ("N0.10-s0", 1): 0.27, ("N0.10-s0", 2): 0.39,
             ("N0.30-s0", 0): 0.40, ("N0.30-s0", 1): 0.25}
    dirs = [write_metrics(run(root, "yeast", "clean", "CD-GTMLL", k), {"rare_f1": v}) for k, v in clean.items()]
    dirs += [write_metrics(run(root, "yeast", var, "CD-GTMLL", k), {"rare_f1": v}) for (var, k), v in noisy.items()]
    # an occlusion run in the list is ignored by --kind noise
    dirs.append(write_metrics(run(root, "yeast", "O0.10-s0", "CD-GTMLL", 0), {"rare_f1": 0.0}))
    out = tmp_path / "rob"
    comparison.robustness_figure(dirs, out, kind="noise")
    df = pd.read_csv(f"{out}.csv").set_index("level")
    # paired differences: 0.02, 0.03, 0.01 -> mean 0.02, std 0.01 (unpaired pairings would differ)
    assert df.loc[0.1, "degradation_mean"] == pytest.approx(0.02)
    assert df.loc[0.1, "degradation_std"] == pytest.approx(0.01)
    assert df.loc[0.1, "pairs"] == "seed0/s0;seed1/s0;seed2/s0"
    assert df.loc[0.3, "degradation_mean"] == pytest.approx(np.mean([0.10, 0.05]))
    assert df.loc[0.3, "n_pairs"] == 2
    src = assert_outputs(out)
    assert not any("O0.10" in e["path"] for v in src["runs"].values() for e in v)
    # a corrupted run whose training seed has no clean partner is an error
    extra = write_metrics(run(root, "yeast", "N0.10-s0", "CD-GTMLL", 7), {"rare_f1": 0.1})
    with pytest.raises(ValueError, match="seed7"):
        comparison.robustness_figure([*dirs, extra], tmp_path / "x", kind="noise")
    assert comparison.corruption_level("N0.10-s0", "noise") == 0.10
    assert comparison.corruption_level("O0.20-s1", "occlusion") == 0.20
    assert comparison.corruption_level("O0.20-s1", "noise") is None
    assert comparison.corruption_level("R0.40-s0", "noise") is None


def test_robustness_occlusion_not_applicable_writes_note(tmp_path: Path):
    root = tmp_path / "runs"
    dirs = [write_metrics(run(root, "yeast", "clean", m, k), {"rare_f1": 0.3}) for m in ("BCE", "CD-GTMLL")
            for k in (0, 1)]
    dirs.append(write_metrics(run(root, "yeast", "N0.10-s0", "BCE", 0), {"rare_f1": 0.2}))
    out = tmp_path / "occ"
    assert build_mod.main(["robustness", "--kind", "occlusion", "--runs", *map(str, dirs), "--out", str(out)]) == 0
    df = pd.read_csv(f"{out}.csv")
    assert df["note"].tolist() == ["no images: occlusion not applicable to yeast"]
    src = assert_outputs(out)
    assert src["notes"] == {"yeast": "no images: occlusion not applicable to yeast"}
    # an image dataset without occlusion runs is a missing-runs error, not a note
    img = [write_metrics(run(root, "voc2007", "clean", "BCE", 0), {"rare_f1": 0.3})]
    with pytest.raises(ValueError, match="image dataset"):
        comparison.robustness_figure(img, tmp_path / "x", kind="occlusion")


# --------------------------------------------------------------------------- sweep


def test_sweep_parses_values_and_checks_hparams(tmp_path: Path):
    root = tmp_path / "runs"
    dirs = []
    for a, vs in {"0.2": [0.30, 0.34], "0.6": [0.40, 0.44]}.items():
        for k, v in enumerate(vs):
            d = write_metrics(run(root, "voc2007", "clean", f"CD-GTMLL@alpha={a}", k), {"rare_f1": v, "mAP": 0.9})
            write_json(d / "method_outputs.json", {"hparams": {"alpha": float(a)}})
            dirs.append(d)
    base = write_metrics(run(root, "voc2007", "clean", "CD-GTMLL", 0), {"rare_f1": 0.38, "mAP": 0.9})
    write_json(base / "method_outputs.json", {"hparams": {"alpha": 0.4}})
    out = tmp_path / "alpha"
    comparison.sweep_figure([*dirs, base], out, "alpha", metrics=["rare_f1", "mAP"])
    df = pd.read_csv(f"{out}.csv")
    r = df[df.metric == "rare_f1"].set_index("value")
    assert r.index.tolist() == [0.2, 0.4, 0.6]
    # every point is a mean over the seeds all points have (the base run has seed 0 only)
    assert r.loc[0.2, "mean"] == pytest.approx(0.30) and r.loc[0.6, "mean"] == pytest.approx(0.40)
    assert r.loc[0.4, "mean"] == pytest.approx(0.38) and r["n_seeds"].eq(1).all()
    assert set(r["base_method"]) == {"CD-GTMLL"}
    src = assert_outputs(out)
    assert any(e["path"].endswith("method_outputs.json") for v in src["runs"].values() for e in v)
    assert comparison.parse_sweep_method("CD-GTMLL@n_players=4") == ("CD-GTMLL", "n_players", "4")
    assert comparison.parse_sweep_method("CD-GTMLL") is None
    # a mis-wired alias (name says 0.2, hparams say 0.5) is an error
    bad = write_metrics(run(root, "voc2007", "clean", "CD-GTMLL@alpha=0.9", 0), {"rare_f1": 0.1})
    write_json(bad / "method_outputs.json", {"hparams": {"alpha": 0.5}})
    with pytest.raises(ValueError, match="records alpha=0.5"):
        comparison.sweep_figure([bad], tmp_path / "x", "alpha")
    with pytest.raises(ValueError, match="sweeps 'alpha'"):
        comparison.sweep_figure(dirs, tmp_path / "x", "n_players")


# ---------------------------------------------------- specialization / ranks (toys)


def test_specialization_shares_hand_computed_and_sum_to_one():
    sh, n = players.specialization_shares(TOY_ACC, TOY_PLAYER, TOY_LABEL)
    # l0->P0, l1->P0 (0.8>0.7), l2->P2, l3: P0,P1 tie 0.6 > P2 0.4 -> 1/2 each, l4: P1,P0 tie -> 1/2 each, l5->P2
    np.testing.assert_allclose(sh, np.array([1 + 1 + 0.5 + 0.5, 0.5 + 0.5, 1 + 1]) / 6)
    assert n == 6 and sh.sum() == pytest.approx(1.0)
    shc, nc = players.specialization_shares(TOY_ACC, TOY_PLAYER, TOY_LABEL, contested_only=True)
    np.testing.assert_allclose(shc, np.array([1 + 0.5 + 0.5, 0.5 + 0.5, 0]) / 3)
    assert nc == 3
    rng = np.random.default_rng(0)
    for _ in range(20):  # random accuracies with many ties
        acc = rng.integers(0, 4, TOY_ACC.size) / 4
        assert players.specialization_shares(acc, TOY_PLAYER, TOY_LABEL)[0].sum() == pytest.approx(1.0)
    empty, n0 = players.specialization_shares(TOY_ACC, TOY_PLAYER, TOY_LABEL, labels=[0, 2], contested_only=True)
    assert n0 == 0 and np.isnan(empty).all()


def test_ranks_equal_hand_computation():
    ranks = players.pair_ranks(TOY_ACC, TOY_LABEL)
    # single-covered labels rank 1; l1: P0(0.8)=1, P1(0.7)=2; l3: P0,P1 tie(0.6)=1.5, P2=3; l4: tie=1.5 each
    np.testing.assert_allclose(ranks, [1, 2, 1, 1.5, 1.5, 1, 1, 1.5, 1.5, 3])
    rare, freq = [1, 3], [0, 2, 4, 5]
    mr, n = players.mean_ranks(TOY_ACC, TOY_PLAYER, TOY_LABEL, rare)
    # P0: l1 rank 1, l3 rank 1.5 -> 1.25; P1: l1 2, l3 1.5 -> 1.75; P2: l3 -> 3
    np.testing.assert_allclose(mr, [1.25, 1.75, 3.0])
    np.testing.assert_array_equal(n, [2, 2, 1])
    mr_f, n_f = players.mean_ranks(TOY_ACC, TOY_PLAYER, TOY_LABEL, freq)
    # only l4 is contested among the frequent labels (single-covered l0, l2, l5 excluded)
    np.testing.assert_allclose(mr_f[:2], [1.5, 1.5])
    assert np.isnan(mr_f[2]) and n_f.tolist() == [1, 1, 0]
    assert players.n_all_tied(TOY_ACC, TOY_LABEL, freq) == 1 and players.n_all_tied(TOY_ACC, TOY_LABEL, rare) == 0


def test_tail_from_counts_matches_labels_module():
    rng = np.random.default_rng(1)
    for _ in range(5):
        Y = (rng.random((60, 15)) < rng.random(15)).astype(np.uint8)
        Y[:, 3] = Y[:, 4]  # force ties
        for q in (0.2, 0.4):
            np.testing.assert_array_equal(players.tail_from_counts(Y.sum(0), q, 0), tail_labels(Y, q, 0))


def test_ranks_and_specialization_files_on_toy_runs(tmp_path: Path):
    root = tmp_path / "runs"
    counts = [50, 3, 20, 1, 40, 7]  # tail (q=0.34 -> floor(2.04)=2 labels): 3 (1 pos), 1 (3 pos)
    dirs = []
    for k in (0, 1):
        d = run(root, "voc2007", "R0.40-s0", "CD-GTMLL", k)
        write_player_acc(d, TOY_PLAYER, TOY_LABEL, np.vstack([np.full(10, 0.5), TOY_ACC]))
        write_metrics(d, {}, train_counts=counts)
        dirs.append(d)
    out = tmp_path / "ranks"
    assert build_mod.main(["ranks", "--runs", *map(str, dirs), "--out", str(out), "--tail-fraction", "0.34"]) == 0
    hm = pd.read_csv(f"{out}_heatmap.csv").set_index(["label_group", "player"])
    assert hm.loc[("rare", 1), "mean_rank_mean"] == pytest.approx(1.25)
    assert hm.loc[("rare", 3), "mean_rank_mean"] == pytest.approx(3.0)
    assert hm.loc[("rare", 1), "mean_rank_std"] == 0.0 and hm.loc[("rare", 1), "n_seeds"] == 2
    assert np.isnan(hm.loc[("frequent", 3), "mean_rank_mean"])
    shares = pd.read_csv(f"{out}_shares.csv")
    for lg, g in shares.groupby("label_group"):
        assert g["share_mean"].sum() == pytest.approx(1.0), lg
    src = assert_outputs(Path(f"{out}_heatmap"))
    assert_outputs(Path(f"{out}_shares"))
    assert src["tail_labels"]["voc2007/R0.40-s0/CD-GTMLL seed0"] == [1, 3]
    assert {Path(e["path"]).name for e in src["runs"]["voc2007/R0.40-s0/CD-GTMLL"]} == {
        "player_val_acc.npz", "metrics.json"}

    out2 = tmp_path / "spec"
    players.specialization_figure(dirs, out2)
    df = pd.read_csv(f"{out2}.csv")
    assert set(df.columns) >= {"epoch", "player", "share_mean", "share_std"}
    for _, g in df.groupby("epoch"):
        assert g["share_mean"].sum() == pytest.approx(1.0)
    e1 = df[df.epoch == 1].set_index("player")["share_mean"]  # all tied: 1/|cover| each
    np.testing.assert_allclose(e1.values, np.array([1 + 0.5 + 1 / 3 + 0.5, 0.5 + 1 / 3 + 0.5, 1 + 1 / 3 + 1]) / 6)
    assert_outputs(out2)


# ----------------------------------------------------------------------- potential


def test_monotonicity_detector_finds_injected_decrease(tmp_path: Path):
    phi = list(np.linspace(-5, -1, 12))
    phi_bad = list(phi)
    phi_bad[7] = phi_bad[6] - 0.05  # epoch 8 decreases
    beta = [0.1, 0.2] + [0.3] * 10
    m = players.phi_monotonicity(range(1, 13), phi_bad, beta=beta)
    assert m["monotone"] is False and m["n_decreases"] == 1 and m["decrease_epochs"] == [8]
    assert m["largest_drop"] == pytest.approx(0.05)
    assert m["decrease_epochs_after_warmup"] == [8]
    assert players.phi_monotonicity(range(1, 13), phi)["monotone"] is True
    assert players.phi_monotonicity([1, 2, 3], [0, -0.01, 1], tol=0.02)["monotone"] is True
    warm = players.phi_monotonicity([1, 2, 3, 4], [0, -1, 1, 2], beta=[0.1, 0.2, 0.3, 0.3])
    assert warm["decrease_epochs"] == [2] and warm["n_decreases_after_warmup"] == 0

    root = tmp_path / "runs"
    d0 = write_train_log(run(root, "yeast", "clean", "CD-GTMLL", 0), phi, beta)
    d1 = write_train_log(run(root, "yeast", "clean", "CD-GTMLL", 1), phi_bad, beta)
    out = tmp_path / "pot"
    assert build_mod.main(["potential", "--runs", str(d0), str(d1), "--out", str(out)]) == 0
    summ = pd.read_csv(f"{out}.monotonicity.csv", dtype={"seed": str, "decrease_epochs": str}).set_index("seed")
    assert bool(summ.loc["0", "monotone"]) and not bool(summ.loc["1", "monotone"])
    assert str(summ.loc["1", "decrease_epochs"]) == "8" and summ.loc["1", "n_decreases"] == 1
    assert "mean" in summ.index
    curves = pd.read_csv(f"{out}.csv")
    assert len(curves) == 24 and curves[curves.decreased].epoch.tolist() == [8]
    assert_outputs(out)


# ------------------------------------------------------------- a real CD-GTMLL run


@pytest.fixture(scope="module")
def real_runs(mirror, tmp_path_factory):
    """Two seeds of CD-GTMLL (3 epochs) on a 300-row slice of Yeast, in the run layout."""
    from cdgtmll.data.mulan import read_mulan_arff
    from cdgtmll.methods.base import FitData, RunContext, build

    path = mirror / "yeast" / "yeast-train.arff"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    X, Y, _ = read_mulan_arff(path, 14)
    X_tr, Y_tr, X_va, Y_va = X[:300], Y[:300], X[300:450], Y[300:450]
    root = tmp_path_factory.mktemp("real") / "runs"
    dirs = []
    for seed in (0, 1):
        d = run(root, "yeast", "clean", "CD-GTMLL", seed)
        m = build("CD-GTMLL", {"epochs": 3, "hidden_dim": 64})
        m.fit(FitData(X_tr, Y_tr, X_va, Y_va, [f"Class{i}" for i in range(1, 15)]), RunContext(seed=seed, workdir=d))
        write_json(d / "method_outputs.json", m.extra_outputs())
        write_metrics(d, {}, train_counts=Y_tr.sum(0).tolist(), tail=tail_labels(Y_tr).tolist())
        dirs.append(d)
    return dirs


def test_real_cdgtmll_run_feeds_specialization_ranks_potential(real_runs, tmp_path: Path):
    with np.load(real_runs[0] / "player_val_acc.npz") as z:
        assert z["accuracy"].shape[0] == 3 and z["player"].max() == 2
    players.specialization_figure(real_runs, tmp_path / "spec")
    df = pd.read_csv(tmp_path / "spec.csv")
    assert sorted(df.epoch.unique()) == [1, 2, 3] and sorted(df.player.unique()) == [1, 2, 3]
    for _, g in df.groupby("epoch"):
        assert g["share_mean"].sum() == pytest.approx(1.0)
    assert (df.n_seeds == 2).all()

    rank_rows, share_rows = players.ranks_figures(real_runs, tmp_path / "ranks", tail_fraction=0.2)
    # recompute one seed's rare-label mean ranks by hand from the files
    with np.load(real_runs[0] / "player_val_acc.npz") as z:
        acc, pl, lab = z["accuracy"][-1], z["player"], z["label"]
    part = json.loads((real_runs[0] / "method_outputs.json").read_text())["partition"]
    tail = players.tail_from_counts(json.loads((real_runs[0] / "metrics.json").read_text())["train_counts"], 0.2)
    assert sorted(part["overlap_labels"]) == sorted(tail.tolist())  # E.1: overlap = tail (q = rho = 0.2)
    for p in range(3):
        rs = []
        for l in part["overlap_labels"]:
            cov = np.flatnonzero(lab == l)
            mine = cov[pl[cov] == p]
            if mine.size:
                a = acc[mine[0]]
                rs.append(1 + np.sum(acc[cov] > a) + 0.5 * (np.sum(acc[cov] == a) - 1))
        seed0 = players.mean_ranks(acc, pl, lab, tail)[0][p]
        assert (np.isnan(seed0) and not rs) or seed0 == pytest.approx(np.mean(rs))
    assert all(np.isnan(r["mean_rank_mean"]) for r in rank_rows if r["label_group"] == "frequent")
    for lg in players.LABEL_GROUPS:
        assert sum(r["share_mean"] for r in share_rows if r["label_group"] == lg) == pytest.approx(1.0)
    assert_outputs(tmp_path / "ranks_heatmap")

    _, summary = players.potential_figure(real_runs, tmp_path / "pot")
    assert [s["seed"] for s in summary] == ["0", "1", "mean"]
    log = pd.read_csv(real_runs[0] / "train_log.csv")
    expect = players.phi_monotonicity(log.epoch, log.Phi)
    assert summary[0]["n_decreases"] == expect["n_decreases"]
    assert_outputs(tmp_path / "pot")
