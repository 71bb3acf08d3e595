"""Workflow-level progress: "120 of 324 steps done; about 40-55 min left (mostly 60 train: LSFA,
C-Tran)", from the jobs done, their measured times and how fast the run goes now.

Snakemake prints "N of M steps done" and nothing about time. :class:`WorkflowETA` follows its log
events (the planned job count per rule; each job's rule and wildcards, start and end) and
estimates the time left as

    left = max( (s * W + R) / P,  the longest single job left )

* ``W``, the work left in *reference seconds*: for each rule, its jobs not started yet times the
  mean reference seconds ``v`` of the keys still to come. A job's key is ``(rule, method,
  dataset)`` from its wildcards (:func:`cdgtmll.pipeline.joblog.job_key`); ``v(key)`` is, most
  specific first: this run's finished jobs of that key (their seconds / the speed factor when
  they ran), the reference seconds of that key (the benchmark files of earlier runs in this
  checkout, ``logs/benchmarks/**.tsv``; else the table shipped with the package,
  ``reference_seconds.json``, made by ``tools/job_log.py reference`` from a recorded run); then
  the same for (rule, method), then for the rule. Which keys are still to come is known from the
  reference jobs (a benchmark file or a table row per key and job count) less the jobs of this run
  started so far; without reference jobs for a rule, its jobs left count at the mean of its
  finished ones.
* ``s``, the speed factor: the recent-weighted mean of ``measured / v(key)`` over this run's
  finished jobs whose key (or rule and method) was already known when they finished
  (geometric, each job weighing half as much ``HALF_LIFE`` jobs later, and less when it is much
  shorter than ``SHORT_S``, mostly start-up time that a load does not stretch; the reference's
  own ratio 1 counts as one long job finished before the first). A load change
  moves ``s`` within a few jobs; with no ratio yet it is 1.
* ``R``: the running jobs' estimated seconds left (``s * v - elapsed``, at least 0).
* ``P``: the jobs running at once, averaged over the run's time so far, at most the most seen.

The range ("40-55 min") is ``left`` times the 25th and 75th percentiles of the recent ratios
relative to ``s`` (at least +-10%; +-50% before 3 ratios). Jobs of a rule with nothing measured
or known count as a typical rule's (the median of the rules' mean seconds so far) and are named
("+ 11 jobs of 9 rules not timed yet").
The Snakemake logger plugin ``snakemake_logger_plugin_cdgtmll`` prints the line after each
finished job and writes ``results/partial/status.json`` (:meth:`WorkflowETA.status`); the
workflow profile turns it on (``logger: [cdgtmll]`` in profiles/default/config.yaml).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cdgtmll.pipeline.joblog import benchmark_seconds, job_key, load_reference, read_rules

#: the workflow's target rule (Snakefile): it has inputs only
TARGET_RULE = "all"
#: the table of reference seconds per key shipped with the package (tools/job_log.py reference)
SHIPPED_REFERENCE = Path(__file__).with_name("reference_seconds.json")
#: a finished job's ratio weighs half as much this many finished jobs later
HALF_LIFE = 8.0
#: a job much shorter than this is mostly start-up: its ratio weighs s / (s + SHORT_S)
SHORT_S = 10.0

Key = tuple[str, str, str]


def reference_jobs(root: Path = Path("."), shipped: Path | None = SHIPPED_REFERENCE) -> dict[Key, tuple[float, int]]:
    """Reference seconds and job count per key: the benchmark files under ``root/logs/benchmarks``
    (median seconds, one job per file; their rules from ``root/workflow/rules``), else the
    ``shipped`` table's row; the count is the larger of the two. ``shipped=None``: no table."""
    bench: dict[Key, list[float]] = {}
    if (root / "workflow" / "rules").is_dir():
        bench = benchmark_seconds(root, read_rules(root / "workflow" / "rules"))
    table = load_reference(shipped) if shipped is not None else {}
    out: dict[Key, tuple[float, int]] = {}
    for key in set(bench) | set(table):
        seconds = statistics.median(bench[key]) if key in bench else table[key][0]
        out[key] = (seconds, max(len(bench.get(key, [])), table.get(key, (0.0, 0))[1]))
    for (rule, method, dataset), value in list(out.items()):
        once = ONCE_RULES.get(rule)
        if once is not None:
            out.setdefault((once, method, dataset), value)
    return out


#: the rules of a deterministic method's one seed (workflow/rules: train_once, evaluate_once) and
#: the rule of every seed whose reference they read while they have none of their own: an upper
#: bound (that job trained or evaluated every seed of the same method and dataset)
ONCE_RULES = {"train": "train_once", "evaluate": "evaluate_once"}


@dataclass
class Estimate:
    """The time left: the range's ends, the rule with the most work left and its keys' methods
    most to come, and the jobs of rules nothing is known of."""

    low_s: float
    high_s: float
    main: tuple[str, int, list[str]] | None
    untimed: dict[str, int]

    @property
    def mid_s(self) -> float:
        return (self.low_s + self.high_s) / 2


def fmt_range(low: float, high: float) -> str:
    """``40-55 min``, ``30-50 s``, ``1h10m-1h40m``."""
    def unit(s: float) -> str:
        return "s" if s < 90 else "min" if s < 90 * 60 else "h"

    def num(s: float, u: str) -> str:
        if u == "s":
            return f"{max(1, round(s))}"
        if u == "min":
            return f"{max(1, round(s / 60))}"
        m = int(round(s / 60))
        return f"{m // 60}h{m % 60:02d}m"

    u_lo, u_hi = unit(low), unit(high)
    if u_hi == "h":
        lo = num(low, "h") if u_lo == "h" else f"{num(low, u_lo)} {u_lo}"
        return f"{lo}-{num(high, 'h')}"
    if u_lo == u_hi:
        lo, hi = num(low, u_lo), num(high, u_hi)
        return f"{lo} {u_hi}" if lo == hi else f"{lo}-{hi} {u_hi}"
    return f"{num(low, u_lo)} {u_lo}-{num(high, u_hi)} {u_hi}"


class WorkflowETA:
    """Follows one Snakemake run (module docstring). ``reference``: seconds and job count per key
    (:func:`reference_jobs`); ``clock``: seconds, monotonic."""

    def __init__(self, reference: dict[Key, tuple[float, int]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.ref = dict(reference or {})
        self.ref_by_rule: dict[str, dict[Key, int]] = defaultdict(dict)
        for key, (_, n) in self.ref.items():
            self.ref_by_rule[key[0]][key] = n
        self.counts: Counter[str] = Counter()  # rule -> planned jobs
        self.done: Counter[str] = Counter()
        self.key_of: dict[int, Key] = {}
        self.started: dict[int, float] = {}
        self.started_keys: Counter[Key] = Counter()
        self.started_rules: Counter[str] = Counter()
        self.own: dict[Key, list[float]] = defaultdict(list)  # key -> measured / s, this run
        self.ratios: list[tuple[float, float]] = []  # (log(measured / v), weight)
        self.max_running = 0
        self.t_first: float | None = None
        self.t_last = 0.0
        self.area = 0.0  # integral of the running-jobs count

    # --- events -----------------------------------------------------------------------------

    def planned(self, stats: dict[str, int]) -> None:
        """Snakemake's job counts per rule (its "Job stats" table; ``total`` is skipped, and so is
        the target rule ``all``, which runs nothing)."""
        self.counts = Counter({rule: int(n) for rule, n in stats.items() if rule not in ("total", TARGET_RULE)})

    def job_info(self, jobid: int, rule: str, wildcards: dict[str, str] | None = None) -> None:
        """A job's rule and wildcards (Snakemake logs them just after the job's start)."""
        if jobid in self.key_of:
            return
        key = self.key_of[jobid] = job_key(rule, wildcards)
        if jobid in self.started:
            self.started_keys[key] += 1
            self.started_rules[key[0]] += 1

    def _tick(self, now: float) -> None:
        if self.t_first is None:
            self.t_first = now
        else:
            self.area += len(self.started) * max(0.0, now - self.t_last)
        self.t_last = now

    def job_started(self, jobids: list[int]) -> None:
        now = self.clock()
        self._tick(now)
        for j in jobids:
            if j not in self.started:
                self.started[j] = now
                if j in self.key_of:
                    self.started_keys[self.key_of[j]] += 1
                    self.started_rules[self.key_of[j][0]] += 1
        self.max_running = max(self.max_running, len(self.started))

    def job_finished(self, jobid: int) -> None:
        now = self.clock()
        key = self.key_of.get(jobid)
        self._tick(now)
        start = self.started.pop(jobid, None)
        if key is None:
            return
        self.done[key[0]] += 1
        if start is None:
            return
        measured = max(now - start, 1e-3)
        prior, level = self.value(key)
        if prior is not None and level <= 1:
            weight = measured / (measured + SHORT_S)
            self.ratios.append((math.log(measured / prior), weight))
        self.own[key].append(measured / self.speed())

    # --- the estimate -----------------------------------------------------------------------

    def speed(self) -> float:
        """``s``: the recent-weighted geometric mean of the ratios and of a prior ratio 1 (the
        reference's own speed) that weighs as one long job finished before the first, so that the
        first short jobs (mostly start-up: weight ``s / (s + SHORT_S)``) cannot set the speed of
        the whole run alone; 1 without a ratio."""
        pairs = self._recent()
        prior = 0.5 ** (len(self.ratios) / HALF_LIFE)
        total = prior + sum(w for _, w in pairs)
        return math.exp(sum(x * w for x, w in pairs) / total)

    def _recent(self) -> list[tuple[float, float]]:
        n = len(self.ratios)
        return [(x, w * 0.5 ** ((n - 1 - i) / HALF_LIFE)) for i, (x, w) in enumerate(self.ratios)
                if w * 0.5 ** ((n - 1 - i) / HALF_LIFE) > 1e-4]

    def spread(self) -> tuple[float, float]:
        """Factors for the range's ends: the weighted 25th and 75th percentiles of the recent
        ratios relative to ``s``, at most 0.9 and at least 1.1 (0.67 and 1.5 before 3 ratios)."""
        pairs = self._recent()
        if len(pairs) < 3:
            return 1 / 1.5, 1.5
        mean = math.log(self.speed())
        pts = sorted((x - mean, w) for x, w in pairs)
        total = sum(w for _, w in pairs)

        def quantile(q: float) -> float:
            acc = 0.0
            for x, w in pts:
                acc += w
                if acc >= q * total:
                    return x
            return pts[-1][0]

        return min(0.9, math.exp(quantile(0.25))), max(1.1, math.exp(quantile(0.75)))

    def value(self, key: Key) -> tuple[float | None, int]:
        """``v(key)`` in reference seconds and its level: 0 the key, 1 (rule, method), 2 the rule
        (this run's jobs first, then the reference at each level); (None, 3) if nothing is known."""
        if self.own.get(key):
            return statistics.fmean(self.own[key]), 0
        if key in self.ref:
            return self.ref[key][0], 0
        for level, same in ((1, lambda k: k[:2] == key[:2]), (2, lambda k: k[0] == key[0])):
            own = [x for k, v in self.own.items() if same(k) for x in v]
            if own:
                return statistics.fmean(own), level
            ref = [(s, n) for k, (s, n) in self.ref.items() if same(k)]
            if ref:
                return sum(s * n for s, n in ref) / sum(n for _, n in ref), level
        return None, 3

    def _rule_left(self, rule: str, n_left: int) -> tuple[float | None, float, list[str]]:
        """Mean ``v`` of a rule's jobs to come, the largest one, and their methods by work."""
        refs = self.ref_by_rule.get(rule)
        if refs:
            pending = {k: max(0, n - self.started_keys[k]) for k, n in refs.items()}
            if sum(pending.values()) == 0:
                pending = dict(refs)
            vals = {k: self.value(k)[0] or 0.0 for k in pending}
            total = sum(pending.values())
            by_method: Counter[str] = Counter()
            for k, c in pending.items():
                by_method[k[1]] += c * vals[k]
            methods = [m for m, w in by_method.most_common(2) if m and w > 0]
            return (sum(c * vals[k] for k, c in pending.items()) / total,
                    max((vals[k] for k, c in pending.items() if c), default=0.0), methods)
        v, _ = self.value((rule, "", ""))
        return v, v or 0.0, []

    def estimate(self) -> Estimate | None:
        """The time left (module docstring), None when no job is left."""
        now = self.clock()
        s = self.speed()
        by_rule: dict[str, list[float]] = defaultdict(list)
        for k, v in self.own.items():
            by_rule[k[0]].extend(v)
        # a rule nothing is known of counts as a typical rule: the median of the rules' means
        fallback = statistics.median(statistics.fmean(v) for v in by_rule.values()) if by_rule else None
        work, longest, untimed = 0.0, 0.0, {}
        per_rule: dict[str, tuple[float, int, list[str]]] = {}
        for rule, n in self.counts.items():
            n_left = n - self.started_rules[rule]
            if n_left <= 0:
                continue
            mean, big, methods = self._rule_left(rule, n_left)
            if mean is None:
                untimed[rule] = n_left
                mean = big = fallback or 0.0
            work += n_left * mean
            longest = max(longest, big)
            per_rule[rule] = (n_left * mean, n_left, methods)
        running = 0.0
        for j, t0 in self.started.items():
            v = self.value(self.key_of[j])[0] if j in self.key_of else None
            rem = max(0.0, s * (v if v is not None else fallback or 0.0) - (now - t0))
            running += rem
            longest = max(longest, rem / s)
        if not per_rule and not self.started:
            return None
        elapsed = (now - self.t_first) if self.t_first is not None else 0.0
        area = self.area + len(self.started) * max(0.0, now - self.t_last)
        parallel = min(self.max_running, area / elapsed) if elapsed > 1.0 else self.max_running
        parallel = max(1.0, parallel)
        left = max((s * work + running) / parallel, s * longest)
        lo, hi = self.spread()
        main = None
        if per_rule:
            rule = max(per_rule, key=lambda r: per_rule[r][0])
            main = (rule, per_rule[rule][1], per_rule[rule][2])
        return Estimate(left * lo, left * hi, main, untimed)

    def line(self, done: int, total: int) -> str:
        """``120 of 324 steps done; about 40-55 min left (mostly 60 train: LSFA, C-Tran)``."""
        head = f"{done} of {total} steps done"
        est = self.estimate()
        if est is None:
            return head
        if est.high_s <= 0:
            text = f"{head}; time left not known yet"
        else:
            text = f"{head}; about {fmt_range(est.low_s, est.high_s)} left"
        if est.main:
            rule, n, methods = est.main
            text += f" (mostly {n} {rule}{': ' + ', '.join(methods) if methods else ''})"
        if len(est.untimed) == 1:
            (rule, n), = est.untimed.items()
            text += f" + {n} {rule} not timed yet"
        elif est.untimed:
            text += f" + {sum(est.untimed.values())} jobs of {len(est.untimed)} rules not timed yet"
        return text

    def status(self, done: int, total: int) -> dict:
        """What ``results/partial/status.json`` holds: steps done and planned, the range of
        seconds left (None without an estimate), the time (UTC) and ``[done, planned]`` per rule."""
        est = self.estimate()
        return {
            "done": int(done),
            "total": int(total),
            "left_s_low": None if est is None else round(est.low_s, 1),
            "left_s_high": None if est is None else round(est.high_s, 1),
            "updated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "per_rule": {rule: [self.done[rule], n] for rule, n in sorted(self.counts.items())},
        }
