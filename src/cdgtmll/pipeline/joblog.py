"""The jobs of a Snakemake run, each with its key, its times and its CPU seconds.

A job's *key* is ``(rule, method, dataset)`` from its wildcards (:func:`job_key`): the unit the
time-left estimate (:mod:`cdgtmll.pipeline.eta`) keeps its typical seconds per. Three readers:

* :func:`read_rules`: each rule's ``log:`` and ``benchmark:`` patterns and its own
  ``wildcard_constraints`` from ``workflow/rules/*.smk``; :func:`match_path` turns a log or
  benchmark path back into the rule and its wildcards.
* :func:`run_jobs`: a finished run directory's jobs from ``.snakemake/metadata`` (one JSON per
  output file, its name the base64 of the output path, holding the rule, ``job_hash``,
  ``starttime``, ``endtime`` and the job's ``log`` files). A job with several outputs has one
  record per output; the records are grouped as Snakemake's own report groups them, by
  ``(rule, job_hash)``, the job starting at the earliest ``starttime`` and ending at the latest
  ``endtime``. The wildcards come from the job's log path; the CPU seconds from its benchmark
  file (``logs/benchmarks/**.tsv``, columns ``s``, ``cpu_time``, ...).
* :func:`benchmark_seconds`: the wall seconds per key of every benchmark file in a checkout
  (earlier runs' jobs, without the metadata).

:func:`write_job_log` / :func:`read_job_log` store the jobs as a TSV (``#`` header comments,
then ``rule method dataset variant seeds start_s end_s cpu_s``); :func:`reference_table` makes
the table of reference seconds per key shipped as ``cdgtmll/pipeline/reference_seconds.json``
(``tools/job_log.py reference``).
"""

from __future__ import annotations

import ast
import base64
import csv
import io
import json
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cdgtmll.io import atomic_write

#: the job-log TSV's columns
COLUMNS = ("rule", "method", "dataset", "variant", "seeds", "start_s", "end_s", "cpu_s")

#: wildcards that are not part of a job's key besides its method and dataset
_NOT_KEY = ("dataset", "variant", "seed")


@dataclass
class RulePatterns:
    """A rule's ``log:`` and ``benchmark:`` paths and its own ``wildcard_constraints``."""

    rule: str
    log: list[str] = field(default_factory=list)
    benchmark: str | None = None
    constraints: dict[str, str] = field(default_factory=dict)


def _string_literal(line: str) -> str | None:
    text = line.strip().rstrip(",")
    if "=" in text and not text.startswith(("'", '"', "r'", 'r"')):
        text = text.split("=", 1)[1].strip()  # a named log: log=".."
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def read_rules(rules_dir: Path) -> dict[str, RulePatterns]:
    """Every rule's :class:`RulePatterns` from the ``*.smk`` files in ``rules_dir``. Only the
    plain-string directives are read (a ``log:`` made by a function is skipped)."""
    if not rules_dir.is_dir():
        raise FileNotFoundError(f"job log: no rules folder {rules_dir} (the workflow's workflow/rules)")
    rules: dict[str, RulePatterns] = {}
    for smk in sorted(rules_dir.glob("*.smk")):
        current: RulePatterns | None = None
        section = None
        for line in smk.read_text(encoding="utf-8").splitlines():
            m = re.match(r"(?:rule|checkpoint)\s+(\w+)\s*:", line)
            if m:
                current = rules.setdefault(m.group(1), RulePatterns(m.group(1)))
                section = None
                continue
            if current is None or not line.strip() or line.lstrip().startswith("#"):
                continue
            indent = len(line) - len(line.lstrip())
            if indent == 0:
                current, section = None, None
                continue
            if indent == 4:
                m = re.match(r"\s{4}(\w+):\s*(.*)$", line)
                section = m.group(1) if m else None
                rest = m.group(2) if m else ""
                if section and rest:  # a directive on one line: `log: "x.log"`
                    _add(current, section, rest)
                continue
            if section:
                _add(current, section, line)
    return rules


def _add(rule: RulePatterns, section: str, line: str) -> None:
    if section == "wildcard_constraints":
        m = re.match(r"\s*(\w+)\s*=\s*(.+?),?\s*$", line)
        value = _string_literal(m.group(2)) if m else None
        if m and value is not None:
            rule.constraints[m.group(1)] = value
        return
    value = _string_literal(line)
    if value is None:
        return
    if section == "log":
        rule.log.append(value)
    elif section == "benchmark" and rule.benchmark is None:
        rule.benchmark = value


def pattern_regex(pattern: str, constraints: dict[str, str] | None = None) -> re.Pattern[str]:
    """A Snakemake path pattern (``logs/train/{dataset}/{method}.log``) as a regex with one named
    group per wildcard; a wildcard matches ``[^/]+`` unless the rule constrains it."""
    constraints = constraints or {}
    out, pos, seen = [], 0, set()
    for m in re.finditer(r"\{(\w+)(?:,([^{}]+))?\}", pattern):
        out.append(re.escape(pattern[pos:m.start()]))
        name = m.group(1)
        regex = m.group(2) or constraints.get(name, r"[^/]+")
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{regex})")
        seen.add(name)
        pos = m.end()
    out.append(re.escape(pattern[pos:]))
    return re.compile("".join(out))


def match_path(path: str, rules: dict[str, RulePatterns], kind: str) -> tuple[str, dict[str, str]] | None:
    """The rule and wildcards whose ``kind`` (``log`` or ``benchmark``) pattern matches ``path``;
    of several, the pattern with the most fixed characters (``{method}.more.tsv`` before
    ``{method}.tsv``). None when none matches."""
    best: tuple[int, str, dict[str, str]] | None = None
    for rule in rules.values():
        patterns = rule.log if kind == "log" else [rule.benchmark] if rule.benchmark else []
        for pattern in patterns:
            m = pattern_regex(pattern, rule.constraints).fullmatch(path)
            if m is None:
                continue
            fixed = len(re.sub(r"\{[^{}]+\}", "", pattern))
            if best is None or fixed > best[0]:
                best = (fixed, rule.rule, m.groupdict())
    return None if best is None else (best[1], best[2])


def job_key(rule: str, wildcards: dict[str, str] | None) -> tuple[str, str, str]:
    """``(rule, method, dataset)``: the method wildcard, else the job's other wildcards besides
    dataset and variant (``kind=occlusion``), else ""; the dataset wildcard, else ""."""
    wc = {str(k): str(v) for k, v in (wildcards or {}).items()}
    method = wc.get("method")
    if method is None:
        method = ",".join(f"{k}={v}" for k, v in sorted(wc.items()) if k not in _NOT_KEY)
    return rule, method, wc.get("dataset", "")


def read_benchmark(path: Path) -> tuple[float, float | None] | None:
    """The wall seconds ``s`` and CPU seconds ``cpu_time`` of a Snakemake benchmark file's last
    data row (CPU None when not a number); None for a file without one."""
    try:
        rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")), delimiter="\t"))
    except (OSError, UnicodeDecodeError):
        return None
    if not rows:
        return None
    try:
        wall = float(rows[-1]["s"])
    except (KeyError, TypeError, ValueError):
        return None
    try:
        cpu: float | None = float(rows[-1]["cpu_time"])
    except (KeyError, TypeError, ValueError):
        cpu = None
    return wall, cpu


def benchmark_seconds(root: Path, rules: dict[str, RulePatterns]) -> dict[tuple[str, str, str], list[float]]:
    """Wall seconds per key of every benchmark file under ``root/logs/benchmarks`` whose path a
    rule's ``benchmark:`` pattern matches (files of unknown rules and without a row skipped)."""
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    base = root / "logs" / "benchmarks"
    if not base.is_dir():
        return {}
    for f in sorted(base.rglob("*.tsv")):
        hit = match_path(f.relative_to(root).as_posix(), rules, "benchmark")
        bench = read_benchmark(f) if hit else None
        if hit and bench:
            out[job_key(*hit)].append(bench[0])
    return dict(out)


@dataclass
class Job:
    """One job of a finished run: its rule, wildcards, seconds since the epoch, CPU seconds."""

    rule: str
    wildcards: dict[str, str]
    start: float
    end: float
    seeds: list[int]
    cpu: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return job_key(self.rule, self.wildcards)


def _output_path(md: Path, f: Path) -> str:
    """The output path a metadata file is named after: urlsafe base64, a long one split into
    folders whose names start with ``@`` (Snakemake 9.27, persistence/file.py)."""
    name = "".join(part[1:] if part.startswith("@") else part for part in f.relative_to(md).parts)
    try:
        return base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return name


def _metadata_groups(run_dir: Path) -> dict[tuple[str, object], dict]:
    md = run_dir / ".snakemake" / "metadata"
    if not md.is_dir():
        raise FileNotFoundError(f"job log: no {md}: not a Snakemake run directory, or nothing ran there")
    groups: dict[tuple[str, object], dict] = {}
    for f in sorted(p for p in md.rglob("*") if p.is_file()):
        try:
            rec = json.loads(f.read_text(encoding="utf-8"))
            rule, start, end = str(rec["rule"]), float(rec["starttime"]), float(rec["endtime"])
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            continue
        if rec.get("incomplete") or end < start:
            continue
        g = groups.setdefault((rule, rec.get("job_hash", end)), {"start": start, "end": end, "outputs": [], "log": []})
        g["start"], g["end"] = min(g["start"], start), max(g["end"], end)
        g["outputs"].append(_output_path(md, f))
        for log in rec.get("log") or []:
            if log not in g["log"]:
                g["log"].append(log)
    return groups


_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def snakemake_log_jobs(log: Path) -> list[dict]:
    """The jobs of one Snakemake invocation from its log (``.snakemake/log/*.snakemake.log``):
    ``{rule, jobid, wildcards, outputs, start, end}``, times (whole seconds, the machine's local
    time) from the ``[Sat Nov 28 12:40:01 2026]`` line before the job's block and before its
    ``Finished jobid: N``; jobs without a finish line are left out."""
    jobs: dict[int, dict] = {}
    stamp: float | None = None
    current: dict | None = None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _STAMP.match(line)
        if m:
            stamp = time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y"))
            current = None
            continue
        m = re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line)
        if m:
            current = {"rule": m.group(1), "wildcards": {}, "outputs": [], "start": stamp, "end": None}
            continue
        m = re.match(r"^Finished jobid: (\d+)", line)
        if m and int(m.group(1)) in jobs:
            jobs[int(m.group(1))]["end"] = stamp
            continue
        if current is None:
            continue
        field_ = re.match(r"^    (\w+): (.*)$", line)
        if not field_:
            continue
        name, value = field_.groups()
        if name == "jobid":
            jobs[int(value)] = current
            current["jobid"] = int(value)
        elif name == "wildcards":
            current["wildcards"] = dict(p.split("=", 1) for p in re.split(r", (?=\w+=)", value) if "=" in p)
        elif name == "output":
            current["outputs"] = value.split(", ")
    return [j for j in jobs.values() if j["start"] is not None and j["end"] is not None]


def main_log(run_dir: Path) -> Path | None:
    """The Snakemake log of the run's largest invocation (the most finished jobs), None without."""
    logs = sorted((run_dir / ".snakemake" / "log").glob("*.snakemake.log"))
    counts = {f: f.read_text(encoding="utf-8", errors="replace").count("\nFinished jobid: ") for f in logs}
    best = max(counts, key=lambda f: (counts[f], f.name), default=None)
    return best if best is not None and counts[best] else None


def _seeds(outputs: list[str]) -> list[int]:
    return sorted({int(m.group(1)) for p in outputs for m in [re.search(r"/seed(\d+)/", p)] if m})


def run_jobs(run_dir: Path, rules_dir: Path | None = None, log: Path | None = None) -> list[Job]:
    """The finished jobs of the run in ``run_dir`` (module docstring), by start time; ``rules_dir``
    defaults to the run's ``workflow/rules``. With ``log`` (a Snakemake log of the run), the jobs
    of that invocation only: the log names them, the metadata gives their exact times where its
    record is of that invocation (a later invocation that re-ran a job overwrote it; then the
    log's whole seconds, and no CPU seconds: the benchmark file is of the later one too). Without,
    every job the metadata records, of whichever invocation."""
    rules = read_rules(rules_dir or run_dir / "workflow" / "rules")
    groups = _metadata_groups(run_dir)
    found: list[tuple[str, dict[str, str], float, float, list[str], bool]] = []
    for (rule, _), g in groups.items():
        wildcards: dict[str, str] = {}
        for path in g["log"]:
            hit = match_path(path, {rule: rules[rule]} if rule in rules else {}, "log")
            if hit:
                wildcards = hit[1]
                break
        found.append((rule, wildcards, g["start"], g["end"], g["outputs"], True))
    if log is not None:
        exact = {}
        for rule, wildcards, start, end, outputs, _ in found:
            exact.setdefault((rule, tuple(sorted(wildcards.items()))), []).append((start, end, outputs))
        found = []
        for j in snakemake_log_jobs(log):
            if j["rule"] == "all":
                continue
            times = [(s, e, o) for s, e, o in exact.get((j["rule"], tuple(sorted(j["wildcards"].items()))), [])
                     if abs(s - j["start"]) <= 2.0 and abs(e - j["end"]) <= 2.0]
            start, end, outputs = times[0] if times else (j["start"], j["end"], j["outputs"])
            found.append((j["rule"], j["wildcards"], start, end, outputs, bool(times)))
    jobs = []
    for rule, wildcards, start, end, outputs, ours in found:
        cpu = None
        # a job whose record a later invocation overwrote: its benchmark file is of that one too
        bench = rules[rule].benchmark if rule in rules and ours else None
        if bench:
            try:
                b = read_benchmark(run_dir / bench.format(**wildcards))
            except (KeyError, IndexError):
                b = None
            cpu = b[1] if b else None
        jobs.append(Job(rule, wildcards, start, end, _seeds(outputs), cpu))
    return sorted(jobs, key=lambda j: (j.start, j.end, j.rule))


def write_job_log(path: Path, jobs: list[Job], header: list[str]) -> None:
    """The job-log TSV (atomically): ``# `` + each header line, then one row per job, times in
    seconds relative to the first job's start."""
    t0 = min((j.start for j in jobs), default=0.0)
    buf = io.StringIO()
    for line in header:
        buf.write(f"# {line}\n")
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(COLUMNS)
    for j in jobs:
        rule, method, dataset = j.key
        w.writerow([rule, method, dataset, j.wildcards.get("variant", ""), ",".join(map(str, j.seeds)),
                    f"{j.start - t0:.3f}", f"{j.end - t0:.3f}", "" if j.cpu is None else f"{j.cpu:.2f}"])
    atomic_write(path, buf.getvalue())


@dataclass
class LoggedJob:
    """A row of a job-log TSV."""

    rule: str
    method: str
    dataset: str
    variant: str
    seeds: str
    start: float
    end: float
    cpu: float | None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.rule, self.method, self.dataset


def read_job_log(path: Path) -> tuple[list[str], list[LoggedJob]]:
    """The header comment lines (without ``# ``) and the rows of a job-log TSV."""
    text = path.read_text(encoding="utf-8")
    header = [line[2:] if line.startswith("# ") else line[1:] for line in text.splitlines() if line.startswith("#")]
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    reader = csv.DictReader(body, delimiter="\t")
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path}: job log without the column(s) {', '.join(missing)} (has {reader.fieldnames})")
    rows = []
    for i, r in enumerate(reader, start=2):
        try:
            rows.append(LoggedJob(r["rule"], r["method"], r["dataset"], r["variant"], r["seeds"],
                                  float(r["start_s"]), float(r["end_s"]), float(r["cpu_s"]) if r["cpu_s"] else None))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: data row {i - 1}: start_s, end_s or cpu_s not a number ({exc})") from exc
    return header, rows


def reference_table(jobs: list[Job], about: dict[str, str]) -> dict:
    """The shipped reference table: ``about`` (commit, date, machine, load, run of the jobs)
    and, per key, the median wall seconds (end - start) of its jobs and their number."""
    per_key: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for j in jobs:
        per_key[j.key].append(j.end - j.start)
    rows = [{"rule": r, "method": m, "dataset": d, "seconds": round(statistics.median(v), 3), "jobs": len(v)}
            for (r, m, d), v in sorted(per_key.items())]
    return {**about, "seconds": rows}


def load_reference(path: Path) -> dict[tuple[str, str, str], tuple[float, int]]:
    """Seconds and job count per key of a reference table (:func:`reference_table`); {} for a
    missing file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a reference-seconds table ({exc})") from exc
    try:
        return {(r["rule"], r["method"], r["dataset"]): (float(r["seconds"]), int(r.get("jobs", 1)))
                for r in data["seconds"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: field 'seconds' must be a list of {{rule, method, dataset, seconds}} ({exc})") from exc
