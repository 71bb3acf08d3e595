"""tools/rule_times.py: per-rule sums from Snakemake's benchmark files, and exact CPU per process from
the log of tools/proc_cpu/sitecustomize.py."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from tests.support.paths import ROOT
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


# ---------------------------------------------------------------------------------------------
# --procs: the exact CPU time of each Python process (tools/proc_cpu/sitecustomize.py)

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"


def _python(tmp_path, *args, log=None):
    """A child interpreter with tools/proc_cpu on PYTHONPATH; returns the CPU seconds the kernel
    charged for it (RUSAGE_CHILDREN before and after)."""
    env = {k: v for k, v in os.environ.items() if k != "CDGTMLL_PROC_LOG"}
    env["PYTHONPATH"] = str(ROOT / "tools" / "proc_cpu")
    if log is not None:
        env["CDGTMLL_PROC_LOG"] = str(log)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], env=env, cwd=tmp_path, check=True, timeout=120, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


@pytest.mark.slow
def test_the_process_log_holds_each_python_process_cpu_time(tmp_path):
    log = tmp_path / "procs.jsonl"
    _python(tmp_path, "-c", "pass")  # no CDGTMLL_PROC_LOG: the hook does nothing
    assert not log.exists()
    charged = _python(tmp_path, "-c", BURN, log=log)
    charged_m = _python(tmp_path, "-m", "platform", log=log)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 2
    burn, plat = lines
    cpu = burn["user"] + burn["system"]
    # what the kernel charged the child, less what it spent after its atexit hooks ran
    assert 0.4 <= cpu <= charged and charged - cpu < 0.1, (cpu, charged)
    assert burn["module"] is None and burn["argv"] == ["-c"] and burn["cwd"] == str(tmp_path)
    assert plat["module"] == "platform" and plat["user"] + plat["system"] <= charged_m
    assert burn["ppid"] == os.getpid() and burn["pid"] != plat["pid"]

    tool = load_tool("rule_times")
    records = tool.read_procs(log)
    assert [r["program"] for r in records] == ["-c", "platform"]
    assert records[0]["cpu"] == pytest.approx(cpu)


def test_process_log_sums_per_program_and_training_method(tmp_path):
    def rec(module, argv, user, system=0.0, wall=1.0):
        return json.dumps({"pid": 1, "ppid": 0, "user": user, "system": system, "wall": wall, "module": module,
                           "argv": argv, "cwd": "/x"})

    train = lambda method, user: rec("cdgtmll.train", ["/r/src/cdgtmll/train.py", "--spec", '{"a": 1}',  # noqa: E731
                                                       "--outdir", f"results/runs/yeast/clean/{method}"], user)
    log = tmp_path / "procs.jsonl"
    log.write_text("\n".join([train("C-Tran", 200.0), train("C-Tran", 100.0), train("CD-GTMLL@alpha=0.2", 10.0),
                              rec(None, ["/v/bin/snakemake", "all"], 30.0, 20.0, 900.0),
                              rec("cdgtmll.metrics.evaluate_run", ["/r/evaluate_run.py"], 1.5), ""]) + "\n")
    tool = load_tool("rule_times")
    text = tool.render_procs(tool.read_procs(log), top=1)
    lines = text.splitlines()
    assert lines[2] == "| `cdgtmll.train` | 3 | 3 | 310.0 | 85.8% |"
    assert lines[3] == "| `snakemake` | 1 | 900 | 50.0 | 13.8% |"
    assert lines[4] == "| `cdgtmll.metrics.evaluate_run` | 1 | 1 | 1.5 | 0.4% |"
    assert lines[5] == "| **all Python processes** | 5 | 904 | 361.5 | 100% |"
    assert "| C-Tran | 2 | 2 | 300.0 | 150.0 |" in lines and "| CD-GTMLL@alpha=0.2 | 1 | 1 | 10.0 | 10.0 |" in lines
    assert lines[-1] == "| `cdgtmll.train --outdir results/runs/yeast/clean/C-Tran` | 1 | 200.0 |"


def test_a_malformed_process_log_names_file_and_line(tmp_path):
    tool = load_tool("rule_times")
    with pytest.raises(SystemExit, match="no process log .*CDGTMLL_PROC_LOG="):
        tool.read_procs(tmp_path / "absent.jsonl")
    log = tmp_path / "procs.jsonl"
    ok = json.dumps({"pid": 1, "ppid": 0, "user": 1, "system": 0, "wall": 1, "module": None, "argv": ["x"], "cwd": "/"})
    for bad in ("not json", json.dumps({"pid": 1, "user": 1}), ok.replace('["x"]', '"x"')):
        log.write_text(ok + "\n" + bad + "\n")
        with pytest.raises(SystemExit, match=r"procs\.jsonl:2: expected one JSON record with pid, user, system"):
            tool.read_procs(log)
