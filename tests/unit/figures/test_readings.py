"""The readings study (src/cdgtmll/figures/studies/readings.py): paired changes against the
default with t-intervals, and the paper's direction against the reference row."""

import json
import math

import pytest
from scipy import stats

from cdgtmll.config.plan import DEFAULT_READINGS, study_methods
from cdgtmll.figures.studies.readings import paired_interval, readings_rows, readings_table


def test_paired_interval_is_the_t_interval():
    d = [0.01, 0.03, 0.02]
    mean, lo, hi = paired_interval(d)
    half = stats.t.ppf(0.975, 2) * 0.01 / math.sqrt(3)
    assert mean == pytest.approx(0.02) and lo == pytest.approx(0.02 - half) and hi == pytest.approx(0.02 + half)
    assert math.isnan(paired_interval([0.1])[1])


def test_rows_pair_by_seed_and_say_the_papers_direction():
    v = {}
    for s, (base, read, ref) in enumerate([(0.60, 0.62, 0.55), (0.61, 0.64, 0.56), (0.59, 0.60, 0.57)]):
        v[("CD-GTMLL", s)] = {"micro_f1": base}
        v[("CD-GTMLL@payoff_scale=sum", s)] = {"micro_f1": read}
        v[("BCE", s)] = {"micro_f1": ref}
    rows = {r["reading"]: r for r in readings_rows(v, "CD-GTMLL", "BCE", ("micro_f1",))}
    assert set(rows) == {"default", "payoff_scale=sum"}
    r = rows["payoff_scale=sum"]
    assert r["delta"] == pytest.approx(100 * (0.02 + 0.03 + 0.01) / 3)
    assert r["mean"] == pytest.approx(100 * (0.62 + 0.64 + 0.60) / 3)
    assert r["paper_direction"] == "yes"  # 7, 8, 3 points: t-interval [-0.5, 12.5] includes 0
    assert rows["default"]["delta"] == 0 and rows["default"]["paper_direction"].startswith("yes")


def test_identical_predictions_and_equal_direction_are_said():
    v = {(m, s): {"rare_f1": 0.0} for m in ("CD-GTMLL", "CD-GTMLL@clip_scope=block", "BCE") for s in (0, 1)}
    shas = {("CD-GTMLL", s): f"h{s}" for s in (0, 1)} | {("CD-GTMLL@clip_scope=block", s): f"h{s}" for s in (0, 1)}
    rows = {r["reading"]: r for r in readings_rows(v, "CD-GTMLL", "BCE", ("rare_f1",), shas)}
    assert rows["clip_scope=block"]["identical"] is True and rows["default"]["identical"] is False
    assert rows["clip_scope=block"]["paper_direction"] == "equal"


def test_study_methods_are_the_default_each_reading_and_the_reference():
    config = {"studies": {"readings": {"dataset": "yeast", "reference": "BCE"}}}
    assert study_methods(config, "readings") == ["CD-GTMLL", *(f"CD-GTMLL@{r}" for r in DEFAULT_READINGS), "BCE"]


def test_table_from_run_dirs(tmp_path):
    for method, base in (("CD-GTMLL", 0.5), ("CD-GTMLL@clip_scope=block", 0.45), ("BCE", 0.4)):
        for s in (0, 1):
            d = tmp_path / "runs" / "yeast" / "clean" / method / f"seed{s}"
            d.mkdir(parents=True)
            block = {k: base + 0.01 * s for k in ("micro_f1", "macro_f1", "rare_f1", "mAP")}
            (d / "metrics.json").write_text(json.dumps({"global@0.5": block}))
    runs = sorted(str(p) for p in (tmp_path / "runs").glob("*/*/*/seed*"))
    paths = readings_table(runs, tmp_path / "readings")
    md = (tmp_path / "readings.md").read_text()
    assert "| clip_scope=block | 2 | 45.50 ± 0.71 | -5.00 [" in md and "## Rare-F1" in md
    sources = json.loads((tmp_path / "readings.sources.json").read_text())
    assert len(sources["runs"]["yeast/clean/BCE"]) == 2 and len(paths) == 3


def test_table_with_two_datasets_has_one_section_each(tmp_path):
    """A study may name several datasets (config/mulan.yaml: Enron and Bibtex): the table pairs
    runs within a dataset only, and has one section per dataset."""
    for ds, shift in (("enron", 0.0), ("bibtex", 0.2)):
        for method, base in (("CD-GTMLL", 0.5), ("CD-GTMLL@payoff_scale=sum", 0.45), ("BCE", 0.4)):
            for s in (0, 1):
                d = tmp_path / "runs" / ds / "clean" / method / f"seed{s}"
                d.mkdir(parents=True)
                block = {k: base + shift + 0.01 * s for k in ("micro_f1", "macro_f1", "rare_f1", "mAP")}
                (d / "metrics.json").write_text(json.dumps({"global@0.5": block}))
    runs = sorted(str(p) for p in (tmp_path / "runs").glob("*/*/*/seed*"))
    readings_table(runs, tmp_path / "readings")
    md = (tmp_path / "readings.md").read_text()
    assert "## CD-GTMLL under each reading of the paper (enron, clean)" in md
    assert "## CD-GTMLL under each reading of the paper (bibtex, clean)" in md
    # deltas are paired within a dataset: -5 points on both, never the 20-point dataset gap
    assert md.count("| payoff_scale=sum | 2 | 45.50 ± 0.71 | -5.00 [") == 4  # enron, 4 metrics
    assert md.count("| payoff_scale=sum | 2 | 65.50 ± 0.71 | -5.00 [") == 4  # bibtex
    import csv

    rows = list(csv.DictReader((tmp_path / "readings.csv").open()))
    assert {r["dataset"] for r in rows} == {"enron", "bibtex"} and all(r["variant"] == "clean" for r in rows)


def test_study_on_a_list_of_datasets_plans_each():
    from cdgtmll.config.plan import study_jobs

    config = {"studies": {"ablation": {"dataset": ["enron", "bibtex"], "methods": ["No-Curiosity", "CD-GTMLL"]}},
              "data": {"custom": {}}}
    assert study_jobs(config)["ablation"] == [("enron", "clean", "No-Curiosity"), ("enron", "clean", "CD-GTMLL"),
                                              ("bibtex", "clean", "No-Curiosity"), ("bibtex", "clean", "CD-GTMLL")]
