"""The fault and bad-input catalogue: one test per case, each asserting the clear error
(naming the file, field or value) or the correct recovery, and that nothing partial or stale is
left behind. docs/troubleshooting.md lists the same cases.

This module holds acquisition and format errors, config errors, determinism and tampering, and
two Snakemake runs at once; the other cases have modules of their own beside it: data inputs
and the audit (``test_data_faults.py``), training divergence / disk full / kill -9
(``test_train_faults.py``), labels without training positives (``test_eval_faults.py``).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.support.mirror import yeast_arrays
from tests.support.paths import ROOT
from tests.support.specs import clean_spec
from tests.support.workflow import default_sigint

# the catalogue's UserWarnings (unverified files, labels without positives) are expected
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# ----------------------------------------------------------------- acquisition and formats


def _yeast_mirror(mirror: Path, dst: Path) -> Path:
    (dst / "yeast").mkdir(parents=True)
    for f in ("yeast-train.arff", "yeast-test.arff", "yeast.xml"):
        shutil.copy(mirror / "yeast" / f, dst / "yeast" / f)
    return dst


def test_checksum_mismatch_names_both_hashes_and_leaves_nothing(mirror, tmp_path, monkeypatch):
    from cdgtmll.data.acquire import MIRROR_ENV, ChecksumError
    from cdgtmll.data.prepare import prepare

    monkeypatch.delenv(MIRROR_ENV, raising=False)
    m = _yeast_mirror(mirror, tmp_path / "mirror")
    f = m / "yeast" / "yeast-train.arff"
    data = bytearray(f.read_bytes())
    data[5000] ^= 1  # one flipped bit
    f.write_bytes(bytes(data))
    raw, out = tmp_path / "raw", tmp_path / "processed.npz"
    with pytest.raises(ChecksumError, match=r"yeast-train\.arff.*sha256") as exc:
        prepare("yeast", raw, out, mirror=m, allow_download=False)
    msg = str(exc.value)
    assert msg.count("sha256") >= 1 and len([w for w in msg.split() if len(w.strip("(),:;'")) == 64]) >= 2
    assert not out.exists() and not list(raw.rglob("yeast-train.arff"))


def test_truncated_and_malformed_arff_name_file_and_line(mirror, tmp_path):
    from cdgtmll.data.mulan import read_mulan_arff

    raw = (mirror / "yeast" / "yeast-train.arff").read_bytes()
    cut = tmp_path / "cut.arff"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=rf"{cut}: malformed ARFF at line \d+"):
        read_mulan_arff(cut, 14)
    bad = tmp_path / "bad.arff"
    bad.write_bytes(raw.replace(b"@data\n", b"@data\nnot,a,row\n", 1))
    with pytest.raises(ValueError, match=rf"{bad}: malformed ARFF at line \d+"):
        read_mulan_arff(bad, 14)


def test_label_count_mismatch_names_the_missing_labels(mirror):
    from cdgtmll.data.mulan import read_mulan_arff

    f = mirror / "yeast" / "yeast-train.arff"
    with pytest.raises(ValueError, match=rf"{f}: label count mismatch: expected 15 .*missing: Extra"):
        read_mulan_arff(f, [f"Class{k}" for k in range(1, 15)] + ["Extra"])


# ------------------------------------------------------------------------------ config


@pytest.mark.parametrize(("key", "value", "named"), [
    (("training", "default", "epocs"), 2, "training.default.epocs"),
    (("methods", "BR-LogReg", "C"), -1, "methods.BR-LogReg.C"),
    (("experiments", "datasets"), ["yaest"], "experiments.datasets[0]"),
])
def test_config_errors_name_the_key(key, value, named):
    from cdgtmll.config import loader, schema

    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    node = cfg
    for k in key[:-1]:
        node = node[k]
    node[key[-1]] = value
    with pytest.raises(schema.ConfigError, match=re.escape(f"config error at '{named}'")):
        loader.validate(copy.deepcopy(cfg))


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    from cdgtmll.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nexperiments:\n  datasets: [yeast\n  seeds: [0]\n")
    res = subprocess.run([sys.executable, "-m", "cdgtmll.cli", "check-config", str(bad)], capture_output=True, text=True)
    assert res.returncode == 2 and str(bad) in res.stderr and "line 3" in res.stderr
    assert main(["check-config", str(ROOT / "config/config.yaml")]) == 0


# ------------------------------------------------------------- determinism and tampering


def _tiny_run(tmp_path: Path, name: str):
    """One BCE seed through run.py + evaluate.py on a Yeast slice; returns (clean, rundir)."""
    from cdgtmll import train as run
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run as evaluate

    X, Y = yeast_arrays(700)
    splits = {"train": np.arange(0, 400), "val": np.arange(400, 550), "test": np.arange(550, 700)}
    data = ProcessedData("yeast-slice", X, Y, [f"Class{k + 1}" for k in range(14)], splits, {})
    clean = tmp_path / f"{name}.npz"
    data.save(clean)
    spec = clean_spec("yeast-slice", "BCE", training={"backbone": "mlp", "epochs": 3, "batch_size": 64, "hidden_dim": 32})
    rundir = tmp_path / name / "yeast" / "clean" / "BCE"  # collected as the Yeast cells of the tables
    run.run_seed(data, tail_labels(Y[splits["train"]]), spec, 0, rundir / "seed0", {"clean": clean})
    assert evaluate.main(["--clean", str(clean), "--rundir", str(rundir), "--seeds", "0"]) == 0
    return clean, rundir


def test_same_seed_same_config_same_data_identical_metrics(tmp_path):
    _, a = _tiny_run(tmp_path, "a")
    _, b = _tiny_run(tmp_path, "b")
    with np.load(a / "seed0/predictions.npz") as za, np.load(b / "seed0/predictions.npz") as zb:
        np.testing.assert_array_equal(za["test"], zb["test"])
    ma, mb = (json.loads((d / "seed0/metrics.json").read_text()) for d in (a, b))
    for block in ("global@0.5", "adaptive"):
        assert ma[block] == mb[block]


def test_tampered_predictions_fail_the_audit(tmp_path):
    from cdgtmll.lineage.audit import audit
    from cdgtmll.tables import build as tables

    _, rundir = _tiny_run(tmp_path, "t")
    out = tmp_path / "tables"
    assert tables.main(["--metrics", str(rundir / "seed0/metrics.json"), "--methods", "BCE", "--out", str(out)]) == 0
    table, cell = out / "table1_standard.md", ("BCE", "Yeast Micro-F1")
    ok = audit(table, cell)
    assert not ok.problems and any("predictions" in line for line in ok.lines)
    pred = rundir / "seed0/predictions.npz"
    pred.write_bytes(pred.read_bytes() + b"\0")  # one byte appended
    problems = audit(table, cell).problems
    assert problems and any(str(pred) in p or "predictions" in p for p in problems)


# ------------------------------------------------------------------------ two runs at once


@pytest.mark.slow
def test_two_snakemake_runs_at_once_second_refused(tmp_path, mirror):
    """A second `snakemake` in the same project while one runs is refused by Snakemake's
    directory lock; the first run, interrupted as Ctrl-C in a terminal does (SIGINT to its whole
    process group, the running job included), stops within seconds and leaves no partial
    output behind. (SIGINT to Snakemake's own process alone lets the running job finish first,
    which under load took over 120 s. The first run writes to a file: an undrained pipe fills
    up with the jobs' output and blocks Snakemake in a write, even on its way out.)"""
    repo = tmp_path / "repo"
    repo.mkdir()
    for item in ("Snakefile", "workflow", "config", "environment.yml"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / item)
    env = {**os.environ, "CDGTMLL_DATA_MIRROR": str(mirror), "PYTHONPATH": str(ROOT / "src"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "MPLCONFIGDIR": str(tmp_path / "mpl")}
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "all", "--configfile", "config/quick.yaml"]
    first_log = open(tmp_path / "first.log", "w")
    first = subprocess.Popen(cmd, cwd=repo, env=env, stdout=first_log, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, preexec_fn=default_sigint)
    try:
        deadline = time.time() + 180
        while not list((repo / ".snakemake" / "locks").glob("*")) and time.time() < deadline:
            time.sleep(0.5)
        assert first.poll() is None, "the first run ended before the second could start"
        second = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode != 0
        # refused by the directory lock, or, when the first run is inside a job, one step
        # earlier because that job's outputs are marked incomplete (measured under load)
        out = second.stdout + second.stderr
        assert "cannot be locked" in out or "seem to be incomplete" in out, out[-2000:]
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.wait(timeout=120)
        first_log.close()
    # nothing half-written: every processed/prediction file that exists is complete (loads)
    for f in list(repo.glob("results/**/*.npz")):
        with np.load(f) as z:
            assert z.files
    assert not list(repo.glob("results/**/*.tmp*"))
