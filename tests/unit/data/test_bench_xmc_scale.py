"""benchmarks/bench_xmc_scale.py: its XC-format generator (read back by the pipeline's
loader) and one end-to-end run at a tiny scale whose output lines parse."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.support.paths import ROOT

BENCH = ROOT / "benchmarks"


@pytest.fixture()
def synth():
    sys.path.insert(0, str(BENCH))
    try:
        import xmc_synth

        yield xmc_synth
    finally:
        sys.path.remove(str(BENCH))


def test_generated_files_are_xc_format_at_the_requested_shape(tmp_path, synth):
    from cdgtmll.data.xmc import read_xmc_data

    shape = synth.SHAPES["amazoncat-13k"].scaled(0.002, 0.05)  # 2372 / 614 rows, 10194 features, 666 labels
    stats = synth.generate(shape, tmp_path / "tr.txt", tmp_path / "te.txt", seed=3, chunk_rows=500)
    first = (tmp_path / "tr.txt").read_bytes().split(b"\n", 2)
    assert first[0] == b"%d %d %d" % (shape.n_train, shape.n_features, shape.n_labels)
    assert re.fullmatch(rb"[0-9]+(,[0-9]+)*( [0-9]+:[0-9.e+-]+)+", first[1])
    for split, n in (("tr", shape.n_train), ("te", shape.n_test)):
        X, Y, header = read_xmc_data(tmp_path / f"{split}.txt")
        assert header == (n, shape.n_features, shape.n_labels)
        got = stats["train" if split == "tr" else "test"]
        # the loader reads back exactly what the generator reports (distinct entries only)
        assert X.nnz / n == pytest.approx(got["nnz_per_row"]) and Y.nnz / n == pytest.approx(got["labels_per_row"])
        assert X.getnnz(1).min() >= 1 and Y.getnnz(1).min() >= 1 and np.all(X.data > 0)
        # calibrated to the published averages (sampling error only)
        assert Y.nnz / n == pytest.approx(shape.labels_per_row, rel=0.05)
        assert X.nnz / n == pytest.approx(shape.nnz_per_row, rel=0.05)
    # seeded: same seed and chunking -> same bytes; another seed -> other data
    synth.generate(shape, tmp_path / "tr2.txt", tmp_path / "te2.txt", seed=3, chunk_rows=500)
    assert (tmp_path / "tr2.txt").read_bytes() == (tmp_path / "tr.txt").read_bytes()
    assert (tmp_path / "te2.txt").read_bytes() == (tmp_path / "te.txt").read_bytes()
    synth.generate(shape, tmp_path / "tr3.txt", tmp_path / "te3.txt", seed=4, chunk_rows=500)
    assert (tmp_path / "tr3.txt").read_bytes() != (tmp_path / "tr.txt").read_bytes()
    assert synth.SHAPES["amazoncat-13k"].n_train == 1_186_239 and synth.SHAPES["wiki10-31k"].n_labels == 30_938


@pytest.mark.slow
def test_benchmark_runs_at_tiny_scale(tmp_path):
    """Every stage runs (> 2000 labels: the top-K prediction path) and prints parseable lines."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, str(BENCH / "bench_xmc_scale.py"), "--datasets", "wiki10-31k", "--scale", "0.02",
         "--dim-scale", "0.07", "--warmup", "1", "--steps", "1", "--rounds", "1", "--block", "1",
         "--profile-steps", "1", "--profile-rows", "3", "--thp-pairs", "1", "--workdir", str(tmp_path / "w")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    kv = lambda line: dict(re.findall(r"(\S+)=(\S+)", line))  # noqa: E731
    stages = {m.group(1): kv(m.group(2)) for m in re.finditer(r"^STAGE (\S+)\s+(.*)$", out.stdout, re.M)}
    assert list(stages) == ["generate", "prepare", "train[BCE]", "predict[BCE]", "evaluate[BCE]",
                            "train[CD-GTMLL]", "predict[CD-GTMLL]", "evaluate[CD-GTMLL]", "ratio",
                            "step[thp-off.1]", "step[thp-on.1]"]
    for s in stages.values():
        assert s["rc"] == "0" and float(s["wall_s"]) > 0 and 0 < float(s["peak_rss_gib"]) < 14
    results = [kv(line) for line in out.stdout.splitlines() if line.startswith("RESULT") and "method=" in line]
    assert [r["method"] for r in results] == ["BCE", "CD-GTMLL"]
    for r in results:
        assert r["backbone"] == "SparseLinearBackbone" and int(r["batch_size"]) == 512
        assert float(r["step_s"]) > 0 and float(r["full20_est_h"]) > 0
        assert float(r["full30_est_h"]) > float(r["full20_est_h"])
        for k in ("p@1", "p@3", "p@5"):
            assert 0.0 <= float(r[k]) <= 1.0
    ratios = {}
    for line in out.stdout.splitlines():
        if line.startswith("RATIO"):
            ratios.update(kv(line))
    assert float(ratios["step_over_minimal"]) > 0 and float(ratios["cdgtmll_over_bce"]) > 0
    assert float(ratios["fused_adamw_over_pipeline_bce"]) > 0 and float(ratios["thp_over_default"]) > 0
    assert float(ratios["cdgtmll_over_bce_epoch"]) > 0 and float(ratios["targets_per_batch_cdgtmll_over_bce"]) > 0
    assert re.search(r"^TOPK dataset=wiki10-31k method=BCE .*reference_cpu_s=", out.stdout, re.M)
    assert "PROFILE dataset=wiki10-31k loop=pipeline-BCE" in out.stdout and "Self CPU time total" in out.stdout
    assert not (tmp_path / "w" / "wiki10-31k").exists()  # generated data removed without --keep
