"""A run's jobs from Snakemake's metadata, log and benchmark files; the job-log TSV; the
reference table (cdgtmll.pipeline.joblog, tools/job_log.py)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from cdgtmll.pipeline.joblog import match_path, read_job_log, read_rules, run_jobs, snakemake_log_jobs, write_job_log
from tests.support.paths import ROOT
from tests.support.tools import load_tool

RULES = ROOT / "workflow" / "rules"


def job_log_main(argv):
    return load_tool("job_log").main(argv)


def test_benchmark_paths_map_to_their_rule_and_wildcards():
    rules = read_rules(RULES)
    assert match_path("logs/benchmarks/train/yeast/clean/C-Tran.tsv", rules, "benchmark") == (
        "train", {"dataset": "yeast", "variant": "clean", "method": "C-Tran"})
    rule, wc = match_path("logs/benchmarks/train/yeast/R0.50-s0/CD-GTMLL@alpha=0.2.more.tsv", rules, "benchmark")
    assert (rule, wc["method"]) == ("train_more", "CD-GTMLL@alpha=0.2")
    # one pattern, three rules: their own wildcard_constraints tell them apart
    assert match_path("logs/benchmarks/variants/yeast/N0.10-s0.tsv", rules, "benchmark")[0] == "noise_variant"
    assert match_path("logs/benchmarks/variants/yeast/R0.50-s0.tsv", rules, "benchmark")[0] == "r_variant"
    assert match_path("logs/benchmarks/nowhere.tsv", rules, "benchmark") is None


def fake_run(root: Path) -> None:
    (root / "workflow").mkdir(parents=True)
    (root / "workflow" / "rules").symlink_to(RULES)
    md = root / ".snakemake" / "metadata"
    md.mkdir(parents=True)
    t0 = time.mktime(time.strptime("Sat Nov 28 12:40:01 2026", "%a %b %d %H:%M:%S %Y"))
    outputs = {  # one job with two outputs, one job re-run later by another invocation
        "results/runs/y/clean/BCE/seed0/predictions.npz": ("train", 7, t0 + 0.2, t0 + 30.5, "logs/train/y/clean/BCE.log"),
        "results/runs/y/clean/BCE/seed1/predictions.npz": ("train", 7, t0 + 0.1, t0 + 30.5, "logs/train/y/clean/BCE.log"),
        "figures/pr_tail.csv": ("figure_pr", 9, t0 + 5000, t0 + 5003, "logs/report/figure_pr.log"),
    }
    for out, (rule, h, start, end, log) in outputs.items():
        name = base64.urlsafe_b64encode(out.encode()).decode()
        rec = {"rule": rule, "job_hash": h, "starttime": start, "endtime": end, "incomplete": False, "log": [log]}
        (md / name).write_text(json.dumps(rec))
    bench = root / "logs" / "benchmarks" / "train" / "y" / "clean"
    bench.mkdir(parents=True)
    (bench / "BCE.tsv").write_text("s\th:m:s\tmax_rss\tcpu_time\n30.1\t0:00:30\t100\t55.5\n")
    log = root / ".snakemake" / "log"
    log.mkdir(parents=True)
    (log / "2026-11-28T124000.snakemake.log").write_text(
        "[Sat Nov 28 12:40:01 2026]\nrule train:\n    jobid: 3\n"
        "    wildcards: dataset=y, variant=clean, method=BCE\n"
        "[Sat Nov 28 12:40:31 2026]\nFinished jobid: 3 (Rule: train)\n"
        "[Sat Nov 28 12:40:31 2026]\nlocalrule figure_pr:\n    jobid: 4\n"
        "[Sat Nov 28 12:40:34 2026]\nFinished jobid: 4 (Rule: figure_pr)\n")


def test_run_jobs_groups_outputs_and_keeps_one_invocation(tmp_path):
    fake_run(tmp_path)
    every = run_jobs(tmp_path)
    assert [(j.rule, j.key, j.seeds, j.cpu) for j in every] == [
        ("train", ("train", "BCE", "y"), [0, 1], 55.5), ("figure_pr", ("figure_pr", "", ""), [], None)]
    assert every[0].end - every[0].start == pytest.approx(30.4)  # earliest start, latest end of its outputs
    log = next((tmp_path / ".snakemake" / "log").iterdir())
    assert len(snakemake_log_jobs(log)) == 2
    ours = run_jobs(tmp_path, log=log)
    # figure_pr's record is of a later invocation: its time comes from this invocation's log
    pr = [j for j in ours if j.rule == "figure_pr"][0]
    assert pr.end - pr.start == pytest.approx(3.0) and pr.start - ours[0].start < 60


def test_job_log_round_trip_and_the_tool(tmp_path):
    fake_run(tmp_path / "run")
    jobs = run_jobs(tmp_path / "run")
    write_job_log(tmp_path / "a_jobs.tsv", jobs, ["a test run", "shipped reference: no"])
    header, rows = read_job_log(tmp_path / "a_jobs.tsv")
    assert header == ["a test run", "shipped reference: no"]
    assert [(r.key, r.end - r.start) for r in rows] == [(j.key, round(j.end - j.start, 3)) for j in jobs]
    assert job_log_main(["reference", str(tmp_path / "run"), "--out", str(tmp_path / "ref.json"), "--load", "1",
                         "--log", "all"]) == 0
    table = json.loads((tmp_path / "ref.json").read_text())
    assert table["load"] == "1" and table["jobs"] == len(jobs)
    train = [r for r in table["seconds"] if r["rule"] == "train"][0]
    assert (train["method"], train["jobs"], train["seconds"]) == ("BCE", 1, round(jobs[0].end - jobs[0].start, 3))
    assert job_log_main(["jobs", str(tmp_path / "nowhere"), str(tmp_path / "b.tsv"), "--reference", "no",
                         "--log", "all"]) == 1
