"""tools/rule_times.py: per-rule sums from Snakemake's benchmark files."""

from __future__ import annotations

import pytest

from tests.support.tools import load_tool

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
# data rows as Snakemake 9 wrote them in this workflow's logs/benchmarks (2026-11-27)
ROWS = {
    "train/yeast/clean/CD-GTMLL.tsv": "112.03\t0:01:52\t801.22\t3658.59\t473.31\t586.12\t0.51\t988.38\t18.25\t36.40\n",
    "train/yeast/R0.40-s0/CD-GTMLL.tsv": "170.00\t0:02:50\t790.00\t3658.59\t473.31\t586.12\t0.51\t988.38\t18.25\t35.60\n",
    "train/yeast/clean/BCE.tsv": "119.50\t0:01:59\t650.00\t3658.59\t473.31\t586.12\t0.51\t988.38\t18.25\t28.00\n",
    "evaluate/yeast/clean/BCE.tsv": "2.50\t0:00:02\t60.10\t300.00\t40.00\t45.00\t0.00\t1.00\t5.00\t0.60\n",
    "report/tables.tsv": "20.00\t0:00:20\t750.00\t900.00\t500.00\t520.00\t0.00\t1.00\t5.00\t15.00\n",
}


def _logs(tmp_path, rows=ROWS, unfinished=()):
    base = tmp_path / "logs" / "benchmarks"
    for rel, row in rows.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(HEADER + row)
    for rel in unfinished:
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(HEADER)
    return tmp_path


def test_sums_per_rule_folder_and_per_training_method(tmp_path):
    tool = load_tool("rule_times")
    records, unfinished = tool.read_benchmarks(_logs(tmp_path, unfinished=["train/yeast/clean/ASL.tsv"]))
    assert len(records) == 5 and [p.name for p in unfinished] == ["ASL.tsv"]
    text = tool.render(records, unfinished, top=2)
    lines = text.splitlines()
    # rule folders by CPU, with sums: train 3 jobs, 401.53 s wall, 100 s CPU of 115.6 (86.5%)
    assert lines[2] == "| train | 3 | 402 | 100 | 86.5% | 801 |"
    assert lines[3] == "| report | 1 | 20 | 15 | 13.0% | 750 |"
    assert lines[4] == "| evaluate | 1 | 2 | 1 | 0.5% | 60 |"
    assert lines[5] == "| **all jobs** | 5 | 424 | 116 | 100% | 801 |"
    assert "| CD-GTMLL | 2 | 282 | 72 | 36 |" in lines and "| BCE | 1 | 120 | 28 | 28 |" in lines
    top = lines[lines.index("| job (benchmark file) | wall s | CPU s |") + 2:][:2]
    assert top == ["| train/yeast/clean/CD-GTMLL.tsv | 112 | 36 |", "| train/yeast/R0.40-s0/CD-GTMLL.tsv | 170 | 36 |"]
    assert "unfinished (no data row): 1 files" in text


def test_missing_logs_and_a_malformed_file_name_the_path(tmp_path):
    tool = load_tool("rule_times")
    with pytest.raises(SystemExit, match="no .*logs/benchmarks: run the workflow first"):
        tool.read_benchmarks(tmp_path)
    _logs(tmp_path, {"train/yeast/clean/BCE.tsv": "oops\n"})
    bad = tmp_path / "logs/benchmarks/train/yeast/clean/BCE.tsv"
    bad.write_text("s\tmax_rss\n1.0\t2.0\n")  # no cpu_time column
    with pytest.raises(SystemExit, match=r"BCE\.tsv: expected Snakemake's benchmark columns s, cpu_time, max_rss"):
        tool.read_benchmarks(tmp_path)
