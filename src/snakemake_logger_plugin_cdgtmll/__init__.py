"""Snakemake logger plugin ``cdgtmll``: after each finished job, one line with the steps done
and the time left (:class:`cdgtmll.pipeline.eta.WorkflowETA`), on stderr beside Snakemake's own
output, and the same as JSON in ``results/partial/status.json`` (written atomically; the HTML
report's landing page reads it). The workflow profile turns it on (``logger: [cdgtmll]``); Snakemake finds it by its
module name (``snakemake_logger_plugin_<name>``), installed with the ``cdgtmll`` package."""

from __future__ import annotations

import contextlib
import sys
from logging import LogRecord
from pathlib import Path

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from cdgtmll.io import write_json
from cdgtmll.pipeline.eta import WorkflowETA, reference_jobs
from cdgtmll.tables.partial import EVALUATE_RULES, PLAN, refresh_soon

#: the run's progress as JSON, beside the partial tables (relative to the working directory)
STATUS = Path("results/partial/status.json")


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        try:
            reference = reference_jobs()
        except (OSError, ValueError) as exc:  # a broken table or benchmark file: estimate without
            print(f"[cdgtmll] reference seconds not read ({exc}); estimating from this run only", file=sys.stderr)
            reference = {}
        self.eta = WorkflowETA(reference)

    def emit(self, record: LogRecord) -> None:
        event = getattr(record, "event", None)
        if event == LogEvent.RUN_INFO:
            self.eta.planned(getattr(record, "stats", {}) or {})
        elif event == LogEvent.JOB_INFO:
            self.eta.job_info(int(record.jobid), str(record.rule_name), getattr(record, "wildcards", None) or {})
        elif event == LogEvent.JOB_STARTED:
            # a group job (one sbatch job of several rules' jobs) starts under its uuid, not a
            # job number; its jobs then finish under their own numbers, counted done but untimed
            self.eta.job_started([int(j) for j in getattr(record, "jobs", []) if str(j).isdigit()])
        elif event == LogEvent.JOB_FINISHED:
            if self.eta.key_of.get(int(record.job_id), ("",))[0] in EVALUATE_RULES:
                refresh_soon(PLAN)  # partial tables of the runs done so far (cdgtmll.tables.partial)
            self.eta.job_finished(int(record.job_id))
        elif event == LogEvent.PROGRESS and not self.common_settings.dryrun:
            done, total = int(record.done), int(record.total)
            print(f"[cdgtmll] {self.eta.line(done, total)}", file=sys.stderr, flush=True)
            try:
                if done < total:
                    write_json(STATUS, self.eta.status(done, total))
                else:  # the run is complete: no progress to show, and no partial folder left behind
                    STATUS.unlink(missing_ok=True)
                    with contextlib.suppress(OSError):
                        STATUS.parent.rmdir()
            except OSError as exc:  # progress is a courtesy: never stop the run for it
                print(f"[cdgtmll] {STATUS} not written: {exc}", file=sys.stderr, flush=True)

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
