"""Workflow-level progress: "12 of 208 steps done; about 14 min left", from the jobs done and
their measured times.

Snakemake prints "N of M steps done" and nothing about time; a 208-job run can sit at "1 of 208"
for a quarter of an hour. :class:`WorkflowETA` follows Snakemake's log events (the job counts per
rule, each job's start and end) and estimates the time left as

    sum over rules of (jobs of that rule not done) x (typical seconds of one job of that rule)
    / (jobs running at once)

where a rule's typical time is the median of its jobs finished in this run, else of its jobs in
earlier runs (``.snakemake/metadata``: Snakemake records every output's start and end time), and
"jobs running at once" the most seen so far. Rules without any measured job are named instead
of guessed ("train: no job timed yet"). The Snakemake logger plugin
``snakemake_logger_plugin_cdgtmll`` prints the line after each finished job; the workflow
profile turns it on (``logger: [cdgtmll]`` in profiles/default/config.yaml).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from cdgtmll.nn.progress import fmt_seconds

#: the workflow's target rule (Snakefile): it has inputs only
TARGET_RULE = "all"


def history(metadata_dir: Path = Path(".snakemake/metadata")) -> dict[str, float]:
    """Median seconds per rule of the jobs of earlier runs, from Snakemake's output metadata
    (one record per output file; a job with several outputs counts once)."""
    per_job: dict[tuple[str, float], float] = {}
    try:
        files = list(metadata_dir.iterdir())
    except OSError:
        return {}
    for f in files:
        try:
            rec = json.loads(f.read_text())
            start, end = float(rec["starttime"]), float(rec["endtime"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if rec.get("incomplete") or end < start:
            continue
        per_job[(str(rec.get("rule")), start)] = end - start
    by_rule: dict[str, list[float]] = defaultdict(list)
    for (rule, _), seconds in per_job.items():
        by_rule[rule].append(seconds)
    return {rule: statistics.median(v) for rule, v in by_rule.items()}


class WorkflowETA:
    """Follows one Snakemake run (module docstring)."""

    def __init__(self, past: dict[str, float] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.past = dict(past or {})
        self.clock = clock
        self.counts: Counter[str] = Counter()  # rule -> jobs of this run
        self.done: Counter[str] = Counter()
        self.rule_of: dict[int, str] = {}
        self.started: dict[int, float] = {}
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.parallel = 1

    def planned(self, stats: dict[str, int]) -> None:
        """Snakemake's job counts per rule (its "Job stats" table; ``total`` is skipped, and so is
        the target rule ``all``, which runs nothing)."""
        self.counts = Counter({rule: int(n) for rule, n in stats.items() if rule not in ("total", TARGET_RULE)})

    def job_info(self, jobid: int, rule: str) -> None:
        self.rule_of[jobid] = rule

    def job_started(self, jobids: list[int]) -> None:
        now = self.clock()
        for j in jobids:
            self.started[j] = now
        running = sum(1 for j in self.started if j in self.rule_of)
        self.parallel = max(self.parallel, running)

    def job_finished(self, jobid: int) -> None:
        rule = self.rule_of.get(jobid)
        start = self.started.pop(jobid, None)
        if rule is None:
            return
        self.done[rule] += 1
        if start is not None:
            self.seconds[rule].append(self.clock() - start)

    def typical(self, rule: str) -> float | None:
        if self.seconds.get(rule):
            return statistics.median(self.seconds[rule])
        return self.past.get(rule)

    def line(self, done: int, total: int) -> str:
        """``12 of 208 steps done; about 14 min left (train: 9.5 s a job, ...)``."""
        head = f"{done} of {total} steps done"
        left = {rule: n - self.done[rule] for rule, n in self.counts.items() if n - self.done[rule] > 0}
        if not left:
            return head
        unknown = sorted(r for r in left if self.typical(r) is None)
        work = sum(n * (self.typical(r) or 0.0) for r, n in left.items())
        eta = f"about {fmt_seconds(work / self.parallel)} left" if work > 0 else "time left not known yet"
        if unknown:
            eta += f" (+ {', '.join(f'{left[r]} {r}' for r in unknown)}: no job of that rule timed yet)"
        main = max(left, key=lambda r: left[r] * (self.typical(r) or 0.0))
        if self.typical(main):
            src = "this run" if self.seconds.get(main) else "earlier runs"
            eta += f"; mostly {left[main]} {main} at {fmt_seconds(self.typical(main))} each ({src})"
        return f"{head}; {eta}"
