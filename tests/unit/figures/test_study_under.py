"""Study figures of a study run under several readings (``studies.<study>.under``), from
real Yeast runs (CD-GTMLL, a few epochs, 2 seeds, trained by :func:`cdgtmll.train.run_seed` and
scored by ``cdgtmll.metrics.evaluate_run`` as the pipeline does): one column of panels per reading,
labelled with it, a ``reading`` column in the CSV, and the as-written N sweep said to be flat by
construction where its N >= 2 runs wrote byte-identical predictions."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cdgtmll.config.plan import with_reading
from cdgtmll.figures.studies import build, comparison
from cdgtmll.figures.studies.runs import AS_WRITTEN
from tests.support.runs import prepared_yeast, train_and_evaluate
from tests.support.specs import clean_spec

SEEDS = (0, 1)
SEP = "player_backbones=separate"
PROTOCOL = {"backbone": "mlp", "epochs": 3, "batch_size": 256, "lr_backbone": 2.0e-3, "lr_head": 2.0e-3,
            "weight_decay": 1.0e-4, "grad_clip": 5.0, "hidden_dim": 32}
CDG = {"n_players": 3, "rho": 0.2, "alpha": 0.4, "beta_max": 0.3, "ema_decay": 0.99, "divergence": "jsd",
       "payoff_weights": "uniform"}
#: the settings as the plan names them (with_reading) and their hyper-parameters over CDG
SWEEP = {f"CD-GTMLL@n_players={n}": {"n_players": n} for n in (1, 2, 3)}
ABLATION = {"CD-GTMLL": {}, "No-Curiosity": {"alpha": 0.0}}
READING = {"player_backbones": "separate"}


def _train(clean, clean_path: Path, rundir: Path, hparams: dict) -> Path:
    spec = clean_spec(clean.name, rundir.name, seeds=SEEDS, training=PROTOCOL, registered_method="CD-GTMLL", hparams={**CDG, **hparams})
    return train_and_evaluate(clean, clean_path, clean_path, rundir, spec)


@pytest.fixture(scope="module")
def yeast_runs(tmp_path_factory, mirror):
    root = tmp_path_factory.mktemp("under_yeast")
    clean, clean_path = prepared_yeast(root, mirror)
    runs = root / "runs" / "yeast" / "clean"
    dirs = {}
    for name, hp in {**SWEEP, **ABLATION}.items():
        for reading, extra in (("", {}), (SEP, READING)):
            m = with_reading(name, reading)
            if m not in dirs:
                dirs[m] = _train(clean, clean_path, runs / m, {**hp, **extra})
    return dirs


def _seed_dirs(dirs: dict, names) -> list[str]:
    return [str(dirs[m] / f"seed{s}") for m in names for s in SEEDS]


@pytest.fixture
def drawn(monkeypatch):
    """The figures' panel titles and note, captured before they are saved."""
    seen = []
    real = comparison.save_figure

    def spy(fig, out, rows, log, **kw):
        axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
        seen.append({"titles": [ax.get_title().replace("\n", " ") for ax in axes],
                     "texts": [t.get_text().replace("\n", " ") for ax in fig.axes for t in ax.texts],
                     "suptitle": fig._suptitle.get_text().replace("\n", " ") if fig._suptitle else ""})
        return real(fig, out, rows, log, **kw)

    monkeypatch.setattr(comparison, "save_figure", spy)
    return seen


def test_n_sweep_has_a_column_per_reading_and_says_flat_by_construction(yeast_runs, tmp_path, drawn):
    names = [with_reading(m, r) for r in ("", SEP) for m in SWEEP]
    out = tmp_path / "sensitivity_players"
    assert build.main(["sweep", "--param", "n_players", "--metrics", "mAP", "rare_f1", "--runs",
                       *_seed_dirs(yeast_runs, names), "--under", SEP, "--out", str(out)]) == 0
    df = pd.read_csv(f"{out}.csv")
    assert sorted(df["reading"].unique()) == sorted([AS_WRITTEN, SEP])
    assert len(df) == 2 * 3 * 2  # readings x N x metrics
    # under E.1 as written every N >= 2 is one problem: byte-identical predictions, and said so
    written = df[df["reading"] == AS_WRITTEN]
    assert written[written["value"] >= 2]["same_predictions_as"].notna().all()
    assert written.set_index(["value", "metric"])["flat_by_construction"].to_dict() == {
        (v, m): v >= 2 for v in (1.0, 2.0, 3.0) for m in ("mAP", "rare_f1")}
    assert not df[df["reading"] == SEP]["flat_by_construction"].any()
    # separate backbones: N reaches the model (N = 2 and 3 differ)
    sep = df[(df["reading"] == SEP) & (df["metric"] == "mAP")].set_index("value")["mean"]
    assert sep[2.0] != sep[3.0]
    (fig,) = drawn
    assert fig["titles"] == [AS_WRITTEN, f"under {SEP}"] * 2  # rows: mAP, Rare-F1; columns: the readings
    assert sum(comparison.FLAT_BY_CONSTRUCTION in t for t in fig["texts"]) == 1
    assert "under each reading" in fig["suptitle"]
    for ext in ("pdf", "png", "sources.json"):
        assert Path(f"{out}.{ext}").is_file()


def test_ablation_has_a_panel_per_reading_with_gaps_within_it(yeast_runs, tmp_path, drawn):
    names = [with_reading(m, r) for r in ("", SEP) for m in ABLATION]
    out = tmp_path / "ablation"
    assert build.main(["ablation", "--runs", *_seed_dirs(yeast_runs, names), "--under", SEP, "--order",
                       "No-Curiosity", "CD-GTMLL", "--out", str(out)]) == 0
    df = pd.read_csv(f"{out}.csv")
    assert sorted(df["reading"].unique()) == sorted([AS_WRITTEN, SEP])
    assert set(df["method"]) == {"CD-GTMLL", "No-Curiosity"}  # the reading is a column, not a method
    full = df[df["method"] == "CD-GTMLL"].set_index(["reading", "metric"])["mean"]
    for _, r in df[df["method"] == "No-Curiosity"].iterrows():
        assert r["gap_to_full"] == pytest.approx(r["mean"] - full[r["reading"], r["metric"]])
    (fig,) = drawn
    assert fig["titles"] == [AS_WRITTEN, f"under {SEP}"]


def test_without_under_the_figures_are_as_before(yeast_runs, tmp_path, drawn):
    out = tmp_path / "sensitivity_players"
    assert build.main(["sweep", "--param", "n_players", "--metrics", "mAP", "--runs",
                       *_seed_dirs(yeast_runs, list(SWEEP)), "--out", str(out)]) == 0
    df = pd.read_csv(f"{out}.csv")
    assert set(df["reading"]) == {AS_WRITTEN} and df[df["value"] >= 2]["flat_by_construction"].all()
    assert len(drawn[0]["titles"]) <= 1  # one panel: its title is the figure's


def test_a_curve_or_a_bar_group_averages_the_seeds_every_point_has():
    """A powered run (10 seeds) beside sweep points of 3: each point is the mean over the seeds
    all points of its panel have, so a difference between points is not one of seed sets."""
    from cdgtmll.figures.studies.runs import common_seeds

    vals = ([{"setting": "y/clean", "reading": "r", "value": 3.0, "seed": s} for s in range(10)]
            + [{"setting": "y/clean", "reading": "r", "value": n, "seed": s} for n in (1.0, 2.0) for s in range(3)]
            + [{"setting": "y/clean", "reading": "other", "value": 3.0, "seed": s} for s in range(10)])
    kept = common_seeds(vals, "value", ("setting", "reading"))
    assert sorted({(v["value"], v["seed"]) for v in kept if v["reading"] == "r"}) == [
        (n, s) for n in (1.0, 2.0, 3.0) for s in range(3)]
    assert sorted(v["seed"] for v in kept if v["reading"] == "other") == list(range(10))  # its own panel
