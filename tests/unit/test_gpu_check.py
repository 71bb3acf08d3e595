"""tools/gpu_check.sh, the prepared GPU check, in its CPU-side parts: ``--help``,
``--dry-run`` (each part's command and time budget, adding up to under 8 minutes), argument
errors, the ``--help`` of every script it runs, and the collection of the CUDA tests it runs
(they skip without CUDA)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # each test runs the shell tool or a Python process

TOOL = ROOT / "tools" / "gpu_check.sh"
PARTS = ("sync", "cuda", "finetune", "tabular")
ENV = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src")}


def run(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOOL), *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=ENV)


def test_help_names_every_part_and_option():
    out = run("--help")
    assert out.returncode == 0, out.stderr
    for word in (*PARTS, "--out", "--parts", "--dry-run", "8 minutes"):
        assert word in out.stdout


def test_dry_run_lists_each_part_with_a_budget_under_eight_minutes(tmp_path):
    out = run("--dry-run", "--out", str(tmp_path / "o.txt"))
    assert out.returncode == 0, out.stderr
    parts = re.findall(r"^\[(\w+)\] timeout (\d+)s: (.+)$", out.stdout, flags=re.M)
    assert [p for p, _, _ in parts] == list(PARTS)
    assert sum(int(b) for _, b, _ in parts) <= 8 * 60 - 30  # leaves time for the header and start-up
    for _, _, cmd in parts:  # every file a part names exists
        for path in re.findall(r"(?:tests|benchmarks)/\S+\.py", cmd):
            assert (ROOT / path).is_file(), path
    assert not (tmp_path / "o.txt").exists()  # a dry run writes nothing
    sub = run("--dry-run", "--parts", "tabular,sync")
    assert re.findall(r"^\[(\w+)\]", sub.stdout, flags=re.M) == ["sync", "tabular"]  # the fixed order


def test_without_a_gpu_it_writes_the_header_and_exits_3(tmp_path):
    """A real run on a machine without CUDA: the output file gets the header (date, host, GPU,
    torch, load) and says that nothing was checked; no part runs (their tests would only skip)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    out_file = tmp_path / "check.txt"
    out = run("--parts", "sync", "--out", str(out_file))
    assert out.returncode == 3
    text = out_file.read_text()
    assert text.startswith("# gpu_check ") and f"torch {torch.__version__}" in text and "# load average: " in text
    assert "no CUDA GPU visible to torch: nothing checked" in text and "## [sync]" not in text


@pytest.mark.parametrize("args,message", [(("--parts", "bogus"), "unknown part 'bogus'"),
                                          (("--fast",), "unknown argument '--fast'"),
                                          (("--out",), "--out needs a file name")])
def test_bad_arguments_exit_2_naming_the_problem(args, message):
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr


@pytest.mark.parametrize("script", ["bench_finetune_amp.py", "bench_tabular_throughput.py", "bench_optimizer_impl.py"])
def test_each_benchmark_has_help(script):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--help"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env=ENV)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage:")


def test_the_sync_debug_cuda_test_is_collected():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/cuda/test_cuda_sync.py"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=ENV)
    assert out.returncode == 0, out.stdout[-2000:]
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert sum("test_tabular_steps_do_not_sync" in i for i in ids) == 5
    assert sum("test_image_steps_do_not_sync" in i for i in ids) == 3
