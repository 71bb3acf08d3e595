"""The readings table says what its seeds can detect (the detectable effect of each reading's
paired t-test and the seeds that would detect claims.equivalence_margin), prints Rare-F1 at
validation-tuned thresholds as well, names multi-key readings for people, and says when a
clipping reading could not act. Real Yeast runs, trained and evaluated as the jobs do."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from cdgtmll.claims.verdict import detectable_effect
from cdgtmll.figures.studies.readings import reading_name, readings_table, seeds_needed
from tests.support.runs import prepared_yeast
from tests.support.specs import clean_spec

SEEDS = (0, 1, 2)
TRAINING = {"backbone": "mlp", "epochs": 2, "hidden_dim": 16, "batch_size": 256, "lr_backbone": 2e-3,
            "lr_head": 2e-3, "weight_decay": 1e-4}


@pytest.mark.parametrize("sd", [0.3, 0.9, 1.7, 4.2])
def test_seeds_needed_is_the_fewest_pairs_the_paired_t_test_detects_the_margin_with(sd):
    from statsmodels.stats.power import TTestPower

    n = seeds_needed(sd, margin=1.0, alpha=0.05, power=0.8)
    assert detectable_effect(sd / math.sqrt(n), n - 1, 0.05, 0.8) <= 1.0
    if n > 3:  # (at 2 pairs, 1 degree of freedom, scipy's noncentral t gives NaN this far out)
        assert detectable_effect(sd / math.sqrt(n - 1), n - 2, 0.05, 0.8) > 1.0
    if sd >= 0.9:  # statsmodels' solver fails below ~3 pairs (NaN power at nobs < 2)
        assert n == math.ceil(TTestPower().solve_power(effect_size=1.0 / sd, alpha=0.05, power=0.8))


def test_seeds_needed_edges():
    assert seeds_needed(0.0) == 2 and math.isnan(seeds_needed(float("nan")))


def test_multi_key_readings_have_a_readable_name():
    assert reading_name("CD-GTMLL@n_players=1,alpha=0.0", "CD-GTMLL") == \
        "Single-Predictor, no curiosity (n_players=1, alpha=0)"
    assert reading_name("CD-GTMLL@rho=0.1,beta_max=0.0", "CD-GTMLL") == "rho=0.1, beta_max=0.0"
    assert reading_name("CD-GTMLL@select_epoch=best_val", "CD-GTMLL") == "select_epoch=best_val"


def _train(clean, clean_path, root, method, hparams, grad_clip):
    """Every seed of ``method`` (CD-GTMLL with ``hparams``) on Yeast as rule train does, then
    evaluated as rule evaluate does (both threshold modes)."""
    from cdgtmll import train
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run

    rundir = root / "yeast" / "clean" / method
    spec = clean_spec("yeast", method, seeds=SEEDS, training={**TRAINING, "grad_clip": grad_clip},
                      registered_method="CD-GTMLL", hparams=hparams)
    tail = tail_labels(clean.part("train")[1])
    for seed in SEEDS:
        train.run_seed(clean, tail, spec, seed, rundir / f"seed{seed}", {"data": clean_path, "clean": clean_path})
    assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir), "--seeds", *map(str, SEEDS),
                              "--threshold", "0.5", "--tail-fraction", "0.2"]) == 0
    return rundir


@pytest.fixture(scope="module")
def yeast(tmp_path_factory, mirror):
    root = tmp_path_factory.mktemp("readings_power")
    return (root, *prepared_yeast(root, mirror))


@pytest.fixture(scope="module")
def unclipped(yeast):
    """The default and clip_scope=block with a clip no gradient reaches (grad_clip 1e9)."""
    root, clean, clean_path = yeast
    runs = root / "never"
    for method, hp in (("CD-GTMLL", {}), ("CD-GTMLL@clip_scope=block", {"clip_scope": "block"}),
                       ("BCE", None)):
        if hp is None:
            from cdgtmll.metrics import evaluate_run
            from tests.support.runs import train_seeds

            rd = train_seeds(clean, clean_path, runs / "yeast" / "clean" / "BCE", "BCE", SEEDS, TRAINING)
            assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rd), "--seeds",
                                      *map(str, SEEDS), "--threshold", "0.5", "--tail-fraction", "0.2"]) == 0
        else:
            _train(clean, clean_path, runs, method, hp, 1e9)
    return runs


def _seed_dirs(runs):
    return sorted(str(p) for p in runs.glob("yeast/clean/*/seed*"))


def _logs(runs, methods=("CD-GTMLL", "CD-GTMLL@clip_scope=block")):
    return [list(csv.DictReader((runs / "yeast" / "clean" / m / f"seed{s}" / "train_log.csv").open()))
            for m in methods for s in SEEDS]


def test_a_clip_that_never_acted_is_not_engaged_not_a_null_effect(unclipped, tmp_path):
    logs = _logs(unclipped)
    assert all({"grad_norm_max", "clipped_steps"} <= set(rows[0]) for rows in logs)
    assert sum(int(r["clipped_steps"]) for rows in logs for r in rows) == 0
    largest = max(float(r["grad_norm_max"]) for rows in logs for r in rows)
    steps = sum(int(np.isfinite(np.load(unclipped / "yeast" / "clean" / m / f"seed{s}" / "grad_norms.npy")).sum())
                for m in ("CD-GTMLL", "CD-GTMLL@clip_scope=block") for s in SEEDS)
    readings_table(_seed_dirs(unclipped), tmp_path / "readings", alpha=0.05, power=0.8, margin=1.0)
    md = (tmp_path / "readings.md").read_text()
    note = f"not engaged: the clip (norm 1e+09) never acted; largest gradient norm {largest:.3g} over {steps} steps"
    assert md.count("| clip_scope=block | 3 | ") == 5 and md.count(note) == 5  # every metric's row says it
    rows = list(csv.DictReader((tmp_path / "readings.csv").open()))
    assert {r["engagement"] for r in rows if r["reading"] == "clip_scope=block"} == {"not engaged"}
    sources = json.loads((tmp_path / "readings.sources.json").read_text())["runs"]
    read = {e["path"].rsplit("/", 1)[1] for e in sources["yeast/clean/CD-GTMLL@clip_scope=block"]}
    assert {"metrics.json", "train_log.csv", "grad_norms.npy", "provenance.json"} <= read


def test_a_log_without_the_clip_columns_says_engagement_not_recorded(unclipped, tmp_path):
    import shutil

    runs = tmp_path / "old"
    shutil.copytree(unclipped, runs)
    log = runs / "yeast" / "clean" / "CD-GTMLL@clip_scope=block" / "seed1" / "train_log.csv"
    rows = list(csv.DictReader(log.open()))
    keep = [k for k in rows[0] if k not in ("grad_norm_max", "clipped_steps")]
    with log.open("w", newline="") as f:
        w = csv.DictWriter(f, keep, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    readings_table(_seed_dirs(runs), tmp_path / "readings")
    md = (tmp_path / "readings.md").read_text()
    assert "engagement not recorded" in md and "not engaged" not in md


@pytest.fixture(scope="module")
def clipped(yeast):
    """The default and clip_scope=block with a clip every step exceeds (grad_clip 1e-3)."""
    root, clean, clean_path = yeast
    runs = root / "clipped"
    for method, hp in (("CD-GTMLL", {}), ("CD-GTMLL@clip_scope=block", {"clip_scope": "block"})):
        _train(clean, clean_path, runs, method, hp, 1e-3)
    return runs


def test_a_clip_that_acted_gives_a_delta(clipped, tmp_path):
    runs = clipped
    assert sum(int(r["clipped_steps"]) for rows in _logs(runs) for r in rows) > 0
    readings_table(_seed_dirs(runs), tmp_path / "readings", reference=None)
    rows = [r for r in csv.DictReader((tmp_path / "readings.csv").open()) if r["reading"] == "clip_scope=block"]
    assert {r["engagement"] for r in rows} == {"engaged"}
    md = (tmp_path / "readings.md").read_text()
    assert "not engaged" not in md and "| clip_scope=block | 3 | " in md


def test_the_table_has_rare_f1_at_tuned_thresholds(unclipped, tmp_path):
    readings_table(_seed_dirs(unclipped), tmp_path / "readings")
    md = (tmp_path / "readings.md").read_text()
    rows = list(csv.DictReader((tmp_path / "readings.csv").open()))
    # Rare-F1 in both threshold modes, from the metrics.json blocks the evaluate job wrote
    assert "## Rare-F1 (threshold mode global@0.5)" in md
    assert "## Rare-F1 at validation-tuned thresholds (validation-tuned per-label thresholds)" in md
    for metric, block in (("rare_f1_tuned", "adaptive"), ("rare_f1", "global@0.5")):
        got = {r["reading"]: float(r["mean"]) for r in rows if r["metric"] == metric}
        for reading, method in (("default", "CD-GTMLL"), ("clip_scope=block", "CD-GTMLL@clip_scope=block")):
            want = np.mean([json.loads((unclipped / "yeast/clean" / method / f"seed{s}" / "metrics.json").read_text())
                            [block]["rare_f1"] for s in SEEDS])
            assert got[reading] == pytest.approx(100 * want)


def test_the_table_says_what_its_seeds_detect(clipped, tmp_path):
    unclipped = clipped
    readings_table(_seed_dirs(clipped), tmp_path / "readings", alpha=0.05, power=0.8, margin=1.0)
    md = (tmp_path / "readings.md").read_text()
    rows = list(csv.DictReader((tmp_path / "readings.csv").open()))
    # per row: the detectable effect of the paired t-test on its n pairs and the seeds for 1 point
    r = next(r for r in rows if r["reading"] == "clip_scope=block" and r["metric"] == "mAP")
    base = {s: json.loads((unclipped / "yeast/clean/CD-GTMLL" / f"seed{s}" / "metrics.json").read_text())
            for s in SEEDS}
    read = {s: json.loads((unclipped / "yeast/clean/CD-GTMLL@clip_scope=block" / f"seed{s}" / "metrics.json")
                          .read_text()) for s in SEEDS}
    d = np.array([100 * (read[s]["global@0.5"]["mAP"] - base[s]["global@0.5"]["mAP"]) for s in SEEDS])
    sd = d.std(ddof=1)
    assert float(r["sd_diff"]) == pytest.approx(sd)
    assert float(r["detectable"]) == pytest.approx(detectable_effect(sd / math.sqrt(3), 2, 0.05, 0.8))
    assert float(r["seeds_needed"]) == seeds_needed(sd, 1.0, 0.05, 0.8)
    # the header of each metric: n seeds; detects X points; Y seeds would detect 1.0 point at this spread
    header = [line for line in md.splitlines() if line.startswith("3 seeds; ")]
    assert len(header) == 5 and all(" would detect 1.0 point at this spread" in h for h in header)
