"""The workflow-level progress line: steps done and time left from the measured job times."""

from __future__ import annotations

import json
import logging

from cdgtmll.workflow.eta import WorkflowETA, history


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_time_left_from_this_runs_jobs_then_from_earlier_runs():
    clock = Clock()
    eta = WorkflowETA({"tables": 20.0}, clock=clock)
    eta.planned({"train": 4, "evaluate": 4, "tables": 1, "all": 1, "total": 10})
    for j, rule in enumerate(["train"] * 4 + ["evaluate"] * 4 + ["tables"]):
        eta.job_info(j, rule)
    assert eta.line(0, 10) == "0 of 10 steps done; about 20.0 s left (+ 4 evaluate, 4 train: no job of that rule " \
                              "timed yet); mostly 1 tables at 20.0 s each (earlier runs)"
    eta.job_started([0, 1])  # two at once
    clock.t = 60.0
    eta.job_finished(0)
    eta.job_finished(1)
    # 2 train left at 60 s + 1 tables at 20 s, two jobs at a time; evaluate not timed yet
    assert eta.line(2, 10) == ("2 of 10 steps done; about 70.0 s left (+ 4 evaluate: no job of that rule timed yet); "
                               "mostly 2 train at 60.0 s each (this run)")
    eta.job_started([4])
    clock.t = 64.0
    eta.job_finished(4)
    assert "about 76.0 s left;" in eta.line(3, 10)  # (2 x 60 + 3 x 4 + 20) / 2
    for j in (2, 3, 5, 6, 7, 8):
        eta.job_started([j])
        eta.job_finished(j)
    assert eta.line(10, 10) == "10 of 10 steps done"  # nothing left: no estimate


def test_history_reads_snakemakes_output_metadata(tmp_path):
    md = tmp_path / "metadata"
    md.mkdir()
    records = [("a", "train", 0, 100), ("b", "train", 0, 100),  # one job, two outputs: counted once
               ("c", "train", 200, 230), ("d", "evaluate", 0, 5), ("e", "evaluate", 10, 12)]
    for name, rule, start, end in records:
        (md / name).write_text(json.dumps({"rule": rule, "starttime": start, "endtime": end, "incomplete": False}))
    (md / "broken").write_text("{")
    (md / "running").write_text(json.dumps({"rule": "train", "starttime": 5, "endtime": 9, "incomplete": True}))
    assert history(md) == {"train": 65.0, "evaluate": 3.5}
    assert history(tmp_path / "none") == {}


def test_the_logger_plugin_is_found_and_prints_the_line(capsys):
    from snakemake_interface_logger_plugins.common import LogEvent
    from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

    plugin = LoggerPluginRegistry().get_plugin("cdgtmll")

    class Settings:
        dryrun = False

    handler = plugin.log_handler(Settings(), None)

    def emit(event, **extra):
        rec = logging.LogRecord("snakemake", logging.INFO, __file__, 0, None, None, None)
        rec.__dict__.update(event=event, **extra)
        handler.emit(rec)

    emit(LogEvent.RUN_INFO, stats={"train": 2, "all": 1, "total": 3})
    emit(LogEvent.JOB_INFO, jobid=1, rule_name="train")
    emit(LogEvent.JOB_STARTED, jobs=[1])
    # a group job (profiles/slurm: a run's train + evaluate) starts under its uuid
    emit(LogEvent.JOB_STARTED, jobs=["5f83b2c8-043e-562a-91da-9ae77245ff4d"])
    emit(LogEvent.JOB_FINISHED, job_id=1)
    emit(LogEvent.PROGRESS, done=1, total=3)
    err = capsys.readouterr().err
    assert err.startswith("[cdgtmll] 1 of 3 steps done; about ") and "mostly 1 train at" in err
