"""benchmarks/bench_xmc_peers.py: the fit's CPU time (the child's own plus, for a library, the
worker's ``fit_cpu_seconds``), the table's columns, and the worker protocol's
``fit_cpu_seconds`` (CPU time of the training call, not its wall time)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.paths import ROOT

BENCH = ROOT / "benchmarks" / "bench_xmc_peers.py"
EXTERNAL = ROOT / "src" / "cdgtmll" / "external"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_xmc_peers", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(method: str, dataset: str = "delicious", **kw) -> dict:
    r = {"dataset": dataset, "method": method, "p@1": 0.5, "p@3": 0.4, "p@5": 0.3, "fit_cpu_s": 139.04,
         "fit_s": 959.5, "load_before": 6.04, "load_after": 10.96, "peak_rss_mb": 1109.2, "rss_of": "process"}
    return {**r, **kw}


def test_fit_cpu_adds_the_workers_cpu_for_a_library(bench):
    assert bench.fit_cpu(12.5, 0.0, None) == {"driver_cpu_s": 12.5, "fit_cpu_s": 12.5}
    got = bench.fit_cpu(0.25, 0.0, {"worker_fit_cpu_seconds": 40.123})
    assert got == {"driver_cpu_s": 0.25, "worker_cpu_s": 40.12, "fit_cpu_s": 40.37}


def test_cpu_seconds_counts_this_process(bench):
    import resource

    c0 = bench.cpu_seconds(resource.RUSAGE_SELF)
    t = time.process_time()
    while time.process_time() - t < 0.2:
        pass
    assert bench.cpu_seconds(resource.RUSAGE_SELF) - c0 >= 0.19


def test_table_has_cpu_wall_with_load_and_rss_per_dataset(bench):
    rows = [_row("BCE"), _row("XR-Linear", fit_cpu_s=15.96, fit_s=16.2, peak_rss_mb=135.4, driver_rss_mb=821.0,
                              rss_of="worker"),
            _row("BCE", "bibtex"), {"dataset": "bibtex", "method": "XR-Linear", "error": "boom"}]
    lines = bench.table(rows, ["delicious", "bibtex"], ["BCE", "XR-Linear"]).splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head == ["method"] + [f"{d}: {c}" for d in ("delicious", "bibtex") for c in bench.COLUMNS]
    assert bench.COLUMNS == ("P@1 / P@3 / P@5", "fit CPU s", "fit wall s (load before→after)", "peak RSS MiB")
    assert lines[1].count("---") == len(head)
    bce = [c.strip() for c in lines[2].strip("|").split("|")]
    assert bce[:5] == ["BCE", "0.5000 / 0.4000 / 0.3000", "139.0", "959.5 (6.0→11.0)", "1109"]
    xr = [c.strip() for c in lines[3].strip("|").split("|")]
    assert xr[1:5] == ["0.5000 / 0.4000 / 0.3000", "16.0", "16.2 (6.0→11.0)", "135 (driver 821)"]
    assert xr[5:] == ["failed", "", "", ""]


@pytest.mark.slow
def test_worker_reports_the_cpu_time_of_fit_not_its_wall_time(tmp_path):
    """A fit that burns 0.3 s of CPU and sleeps 0.4 s: ``fit_cpu_seconds`` counts the first
    only, ``fit_seconds`` both."""
    import numpy as np
    import scipy.sparse as sp

    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(np.eye(3)))
    sp.save_npz(tmp_path / "y.npz", sp.csr_matrix(np.eye(3)))
    worker = tmp_path / "fake_worker.py"
    worker.write_text(textwrap.dedent("""
        import sys, time
        from worker_protocol import serve, topk_dense

        def fit(X, Y, params, seed, workdir):
            t = time.process_time()
            while time.process_time() - t < 0.3:
                pass
            time.sleep(0.4)
            return None

        sys.exit(serve(fit, lambda m, X, k: topk_dense(X.toarray(), k), (), lambda: None))
    """))
    req = {"cmd": "fit", "x": str(tmp_path / "x.npz"), "y": str(tmp_path / "y.npz"), "params": {}, "seed": 0,
           "workdir": str(tmp_path)}
    res = subprocess.run([sys.executable, str(worker)], input=json.dumps(req) + "\n" + '{"cmd": "exit"}\n',
                         capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(EXTERNAL)})
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout.splitlines()[0])
    assert rep["ok"], rep
    assert rep["fit_cpu_seconds"] >= 0.29
    assert rep["fit_seconds"] >= rep["fit_cpu_seconds"] + 0.39
