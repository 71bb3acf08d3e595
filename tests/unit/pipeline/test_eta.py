"""The workflow-level progress line: steps done and a range of time left, per job key, scaled by
how fast the run goes now."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cdgtmll.pipeline.eta import HALF_LIFE, WorkflowETA, fmt_range


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def run_job(eta, clock, jobid, rule, method, seconds):
    eta.job_started([jobid])  # Snakemake logs the start, then the job's rule and wildcards
    eta.job_info(jobid, rule, {"dataset": "d", "variant": "clean", "method": method})
    clock.t += seconds
    eta.job_finished(jobid)


def test_jobs_to_come_count_at_their_keys_reference_not_a_median_of_the_rule():
    clock = Clock()
    ref = {("train", "fast", "d"): (2.0, 3), ("train", "slow", "d"): (300.0, 3)}
    eta = WorkflowETA(ref, clock=clock)
    eta.planned({"train": 6, "all": 1, "total": 7})
    for j in range(3):  # the fast jobs run first, at their reference time: speed factor 1
        run_job(eta, clock, j, "train", "fast", ref[("train", "fast", "d")][0])
    assert eta.speed() == pytest.approx(1.0)
    est = eta.estimate()
    left = 3 * ref[("train", "slow", "d")][0]  # one job at a time so far
    assert est.low_s < left < est.high_s
    assert est.main == ("train", 3, ["slow"])
    assert "mostly 3 train: slow" in eta.line(3, 7)


def test_a_load_change_moves_the_estimate_within_a_few_jobs():
    clock = Clock()
    ref = {("evaluate", "m", "d"): (10.0, 40)}
    eta = WorkflowETA(ref, clock=clock)
    eta.planned({"evaluate": 40})
    for j in range(10):
        run_job(eta, clock, j, "evaluate", "m", 10.0)
    before = eta.estimate().mid_s
    for j in range(10, 10 + int(HALF_LIFE)):  # the machine gets three times slower
        run_job(eta, clock, j, "evaluate", "m", 30.0)
    after = eta.estimate().mid_s
    jobs_left = 40 - 10 - int(HALF_LIFE)
    assert before == pytest.approx(30 * 10.0, rel=0.15)
    # the per-job estimate follows the slower machine most of the way within one half-life
    assert eta.speed() > 1.5
    assert after / jobs_left > 1.5 * before / 30


def test_without_reference_a_rules_first_job_times_it_and_unknown_rules_are_named():
    clock = Clock()
    eta = WorkflowETA({}, clock=clock)
    eta.planned({"train": 4, "tables": 1, "figure": 2, "all": 1, "total": 8})
    assert eta.estimate().untimed == {"train": 4, "tables": 1, "figure": 2}
    run_job(eta, clock, 0, "train", "a", 50.0)
    est = eta.estimate()
    assert set(est.untimed) == {"tables", "figure"}
    # 3 train at 50 s, the 3 untimed jobs at the typical rule's mean (50 s): one job at a time
    assert est.low_s < 6 * 50.0 < est.high_s
    assert eta.line(1, 8).endswith("+ 3 jobs of 2 rules not timed yet")


def test_parallel_jobs_divide_the_work_and_the_line_ends_when_nothing_is_left():
    clock = Clock()
    ref = {("train", "m", "d"): (100.0, 6)}
    eta = WorkflowETA(ref, clock=clock)
    eta.planned({"train": 6})
    for pair in ((0, 1), (2, 3)):
        eta.job_started(list(pair))
        for j in pair:
            eta.job_info(j, "train", {"dataset": "d", "method": "m"})
        clock.t += 100.0
        for j in pair:
            eta.job_finished(j)
    est = eta.estimate()
    assert est.low_s < 2 * 100.0 / 2 < est.high_s  # 2 jobs left, two at a time
    for j in (4, 5):
        run_job(eta, clock, j, "train", "m", 100.0)
    assert eta.estimate() is None
    assert eta.line(6, 6) == "6 of 6 steps done"


def test_status_holds_the_range_and_the_counts_per_rule():
    clock = Clock()
    eta = WorkflowETA({("train", "m", "d"): (10.0, 2)}, clock=clock)
    eta.planned({"train": 2, "tables": 1, "all": 1, "total": 4})
    run_job(eta, clock, 0, "train", "m", 10.0)
    st = eta.status(1, 4)
    est = eta.estimate()
    assert (st["done"], st["total"]) == (1, 4)
    assert st["left_s_low"] == pytest.approx(est.low_s, abs=0.1)
    assert st["left_s_high"] == pytest.approx(est.high_s, abs=0.1)
    assert st["per_rule"] == {"tables": [0, 1], "train": [1, 2]}
    assert st["updated"].endswith("+00:00")


@pytest.mark.parametrize("low,high", [(30, 50), (40 * 60, 55 * 60), (50, 200), (70 * 60, 100 * 60)])
def test_fmt_range_keeps_the_order_and_the_units(low, high):
    text = fmt_range(low, high)
    assert text.count("-") == 1
    lo, hi = text.split("-")
    assert lo and hi and lo != hi


def test_the_logger_plugin_prints_the_line_and_writes_status_json(capsys, tmp_path, monkeypatch):
    from snakemake_interface_logger_plugins.common import LogEvent
    from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

    monkeypatch.chdir(tmp_path)  # no workflow/ nor logs/ here: the shipped table only
    plugin = LoggerPluginRegistry().get_plugin("cdgtmll")

    class Settings:
        dryrun = False

    handler = plugin.log_handler(Settings(), None)

    def emit(event, **extra):
        rec = logging.LogRecord("snakemake", logging.INFO, __file__, 0, None, None, None)
        rec.__dict__.update(event=event, **extra)
        handler.emit(rec)

    emit(LogEvent.RUN_INFO, stats={"train": 2, "all": 1, "total": 3})
    emit(LogEvent.JOB_STARTED, jobs=[1])
    emit(LogEvent.JOB_INFO, jobid=1, rule_name="train", wildcards={"dataset": "yeast", "method": "BCE"})
    # a group job (profiles/slurm: a run's train + evaluate) starts under its uuid
    emit(LogEvent.JOB_STARTED, jobs=["5f83b2c8-043e-562a-91da-9ae77245ff4d"])
    emit(LogEvent.JOB_FINISHED, job_id=1)
    emit(LogEvent.PROGRESS, done=1, total=3)
    err = capsys.readouterr().err
    assert err.startswith("[cdgtmll] 1 of 3 steps done; about ") and "mostly 1 train" in err
    status = json.loads((tmp_path / "results" / "partial" / "status.json").read_text())
    assert (status["done"], status["total"], status["per_rule"]) == (1, 3, {"train": [1, 2]})
    assert 0 < status["left_s_low"] <= status["left_s_high"]


def test_the_first_short_jobs_do_not_set_the_speed_of_the_whole_run():
    """A run starts with jobs of a fraction of a second (the data, the R-variants): their ratio to
    the reference is start-up noise. Before the prior, one 0.25 s job against a 1 s reference set
    the speed factor to 0.25 and the first estimate of a 90-minute run to about 20 minutes."""
    clock = Clock()
    ref = {("r_variant", "", "d"): (1.0, 1), ("train", "m", "d"): (100.0, 10)}
    eta = WorkflowETA(ref, clock=clock)
    eta.planned({"r_variant": 1, "train": 10})
    run_job(eta, clock, 0, "r_variant", "", 0.25)
    assert 0.9 < eta.speed() < 1.0  # moved toward the short job's ratio, a little
    for j in range(1, 9):  # then the long jobs run twice as slow as the reference: they decide
        run_job(eta, clock, j, "train", "m", 200.0)
    assert 190.0 < eta.speed() * eta.value(("train", "m", "d"))[0] < 210.0  # a train job left: ~200 s


def test_a_deterministic_methods_jobs_read_the_shipped_reference_of_its_every_seed_jobs():
    """train_once / evaluate_once (a deterministic method's one seed) have no reference of their
    own in the shipped table (measured when BR-LogReg trained every seed): they read train's and
    evaluate's for the same method and dataset, an upper bound, instead of counting as untimed."""
    from cdgtmll.pipeline.eta import ONCE_RULES, SHIPPED_REFERENCE, reference_jobs

    ref = reference_jobs(Path("/nonexistent-checkout"), SHIPPED_REFERENCE)
    every = ref[("train", "BR-LogReg", "yeast")]
    assert ref[("train_once", "BR-LogReg", "yeast")] == every
    assert ref[("evaluate_once", "BR-LogReg", "yeast")] == ref[("evaluate", "BR-LogReg", "yeast")]
    assert ONCE_RULES == {"train": "train_once", "evaluate": "evaluate_once"}
    eta = WorkflowETA(ref, clock=lambda: 0.0)
    eta.planned({"train_once": 3})
    assert not eta.estimate().untimed
