"""Snakemake logger plugin ``cdgtmll``: after each finished job, one line with the steps done
and the time left (:class:`cdgtmll.workflow.eta.WorkflowETA`), on stderr beside Snakemake's own
output. The workflow profile turns it on (``logger: [cdgtmll]``); Snakemake finds it by its
module name (``snakemake_logger_plugin_<name>``), installed with the ``cdgtmll`` package."""

from __future__ import annotations

import sys
from logging import LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from cdgtmll.workflow.eta import WorkflowETA, history


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        self.eta = WorkflowETA(history())

    def emit(self, record: LogRecord) -> None:
        event = getattr(record, "event", None)
        if event == LogEvent.RUN_INFO:
            self.eta.planned(getattr(record, "stats", {}) or {})
        elif event == LogEvent.JOB_INFO:
            self.eta.job_info(int(record.jobid), str(record.rule_name))
        elif event == LogEvent.JOB_STARTED:
            # a group job (one sbatch job of several rules' jobs) starts under its uuid, not a
            # job number; its jobs then finish under their own numbers, timed from history only
            self.eta.job_started([int(j) for j in getattr(record, "jobs", []) if str(j).isdigit()])
        elif event == LogEvent.JOB_FINISHED:
            self.eta.job_finished(int(record.job_id))
        elif event == LogEvent.PROGRESS and not self.common_settings.dryrun:
            print(f"[cdgtmll] {self.eta.line(int(record.done), int(record.total))}", file=sys.stderr, flush=True)

    @property
    def writes_to_stream(self) -> bool:
        # False although it prints to stderr: a stream handler would replace Snakemake's own
        # console output, and this one only adds a line to it
        return False

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
