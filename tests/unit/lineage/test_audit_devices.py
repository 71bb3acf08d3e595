"""Device lineage in the tables and in `cdgtmll audit`: runs made on two kinds of machine give
the tables a footnote and profile.json a record, and the audit a MIXED DEVICES warning (not a
failure: a cluster may hold several kinds of node); runs on one kind give neither. A run resumed
from its checkpoint on another kind of machine keeps both in its training log and provenance.

The runs are real (trained by :func:`cdgtmll.train.run_seed`, scored by
``cdgtmll.metrics.evaluate_run``, tabulated by ``cdgtmll.tables.build``); only the CPU that
``/proc/cpuinfo`` names (:func:`cdgtmll.lineage.provenance.cpu_model`) is set per seed, as two
nodes of a cluster would give."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from cdgtmll import cli
from cdgtmll.io import sha256_file, write_json
from cdgtmll.lineage import provenance, worktree
from cdgtmll.methods.base import FitData, RunContext, build
from cdgtmll.nn.checkpoint import TRAIN_LOG, read_log
from cdgtmll.nn.trainer import TrainingInterrupted
from tests.support.specs import clean_spec
from tests.unit.lineage.test_audit_cell_values import TRAINING, _dataset

INTEL = {"vendor": "GenuineIntel", "model": "Intel(R) Xeon(R) Platinum 8480+", "family_model_stepping": "6/143/8"}
AMD = {"vendor": "AuthenticAMD", "model": "AMD EPYC 7763 64-Core Processor", "family_model_stepping": "25/1/1"}


def _runs(root, cpus: dict[int, dict]):
    from cdgtmll import train
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run
    from cdgtmll.tables import build

    clean, clean_path = _dataset(root)
    tail = tail_labels(clean.part("train")[1])
    spec = clean_spec("yeast", "BCE", seeds=cpus, training=TRAINING, resolved_hparams={"loss": "bce"})
    rundir = root / "runs" / "yeast" / "clean" / "BCE"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(worktree, "git_state", lambda cwd=None: {"commit": "a" * 40, "dirty": False})
        for seed, cpu in cpus.items():
            mp.setattr(provenance, "cpu_model", lambda cpuinfo="/proc/cpuinfo", c=cpu: dict(c))
            train.run_seed(clean, tail, spec, seed, rundir / f"seed{seed}", {"data": clean_path, "clean": clean_path})
        seeds = [str(s) for s in cpus]
        assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir), "--seeds", *seeds]) == 0
    out = root / "tables"
    paths = [str(rundir / f"seed{s}" / "metrics.json") for s in cpus]
    assert build.main(["--metrics", *paths, "--methods", "BCE", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def two_kinds(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit_devices")
    return root, _runs(root, {0: INTEL, 1: AMD, 2: AMD})


def _audit(capsys, monkeypatch, root, table):
    monkeypatch.chdir(root)
    rc = cli.main(["audit", str(table), "--cell", "BCE", "Yeast Micro-F1"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_tables_name_the_kinds_of_machine(two_kinds):
    _, out = two_kinds
    note = ("Device lineage: the 3 runs behind these tables ran on 2 kinds of machine: "
            "AMD EPYC 7763 64-Core Processor (25/1/1) (2 runs), Intel(R) Xeon(R) Platinum 8480+ (6/143/8) (1 run). "
            "The same seed gives the same numbers on the same kind of machine only")
    assert note in (out / "table1_standard.md").read_text()
    assert note in (out / "metrics_full.md").read_text()
    profile = json.loads((out / "profile.json").read_text())
    assert profile["device_lineage"] == {"devices": {"AMD EPYC 7763 64-Core Processor (25/1/1)": 2,
                                                     "Intel(R) Xeon(R) Platinum 8480+ (6/143/8)": 1},
                                         "unrecorded_runs": 0, "runs": 3}
    assert profile["device_footnote"].startswith("Device lineage: the 3 runs")
    rows = (out / "all_runs.csv").read_text()
    assert "Intel(R) Xeon(R) Platinum 8480+ (6/143/8)" in rows


def test_claims_page_names_the_kinds_of_machine(two_kinds):
    from cdgtmll.claims import check

    _, out = two_kinds
    assert check.main(["--runs", str(out / "all_runs.csv"), "--out", str(out / "claims_check")]) == 0
    md = (out / "claims_check.md").read_text()
    assert "- **Devices**: Device lineage: the 3 runs behind these tables ran on 2 kinds of machine" in md
    assert "<li><b>Devices</b>: Device lineage: the 3 runs" in (out / "claims_check.html").read_text()


def test_audit_warns_of_two_kinds_of_machine_and_passes(two_kinds, capsys, monkeypatch):
    root, out = two_kinds
    rc, text, err = _audit(capsys, monkeypatch, root, out / "table1_standard.md")
    assert rc == 0, err  # a warning, not a problem
    assert ("MIXED DEVICES: the runs ran on 2 kinds of machine: AMD EPYC 7763 64-Core Processor (25/1/1) (2 run(s), "
            "e.g. ") in err
    assert "(cpu: Intel(R) Xeon(R) Platinum 8480+, " in text  # each run's own device line


def test_one_kind_of_machine_gives_no_footnote_and_no_warning(tmp_path, capsys, monkeypatch):
    out = _runs(tmp_path, {0: AMD, 1: AMD})
    assert "Device lineage" not in (out / "table1_standard.md").read_text()
    profile = json.loads((out / "profile.json").read_text())
    assert profile["device_footnote"] is None and profile["device_lineage"]["devices"] == {
        "AMD EPYC 7763 64-Core Processor (25/1/1)": 2}
    rc, _, err = _audit(capsys, monkeypatch, tmp_path, out / "table1_standard.md")
    assert rc == 0 and "MIXED DEVICES" not in err


def test_a_run_resumed_on_another_kind_of_machine_keeps_both(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8)).astype(np.float32)
    Y = (rng.random((200, 5)) < 0.3).astype(np.uint8)
    data = FitData(X[:160], Y[:160], X[160:], Y[160:], [f"l{k}" for k in range(5)])
    hp = {"epochs": 4, "hidden_dim": 16, "batch_size": 32}
    with monkeypatch.context() as mp:  # epochs 1-2 on the Intel node, then killed
        mp.setattr(provenance, "cpu_model", lambda cpuinfo="/proc/cpuinfo": dict(INTEL))
        with pytest.raises(TrainingInterrupted):
            build("BCE", hp).fit(data, RunContext(seed=0, workdir=tmp_path, extra={"_stop_after_epoch": 2}))
    with monkeypatch.context() as mp, warnings.catch_warnings():  # requeued on an AMD node: resumes
        warnings.simplefilter("error")  # the checkpoint matches (no "ignoring" warning)
        mp.setattr(provenance, "cpu_model", lambda cpuinfo="/proc/cpuinfo": dict(AMD))
        m = build("BCE", hp).fit(data, RunContext(seed=0, workdir=tmp_path))
    intel, amd = "Intel(R) Xeon(R) Platinum 8480+ (6/143/8)", "AMD EPYC 7763 64-Core Processor (25/1/1)"
    assert [r["machine"] for r in read_log(tmp_path / TRAIN_LOG)] == [intel, intel, amd, amd]
    trained = provenance.training_machines(m.train_log)
    assert trained == [{"machine": intel, "epochs": [1, 2]}, {"machine": amd, "epochs": [3, 4]}]
    prov = {"device": {"requested": "cpu", "cpu": AMD}, "training_machines": trained}
    assert provenance.run_machine(prov) == f"{intel}, then {amd}"  # matches a run from scratch on neither
    assert provenance.run_machine({**prov, "training_machines": trained[1:]}) == amd
    assert provenance.training_machines([{"epoch": 1, "loss": 0.5}]) is None  # a log from before the column

    # the audit names both: one run of a real table, its provenance re-recorded as such a run's would be
    root = tmp_path / "table"
    out = _runs(root, {0: AMD})
    seed_dir = root / "runs" / "yeast" / "clean" / "BCE" / "seed0"
    rec = json.loads((seed_dir / "provenance.json").read_text())
    rec["training_machines"] = trained
    write_json(seed_dir / "provenance.json", rec)
    evaluation = json.loads((seed_dir / "metrics.provenance.json").read_text())  # it holds provenance.json's sha256
    evaluation["inputs"]["provenance"]["sha256"] = sha256_file(seed_dir / "provenance.json")
    write_json(seed_dir / "metrics.provenance.json", evaluation)
    rc, text, err = _audit(capsys, monkeypatch, root, out / "table1_standard.md")
    assert rc == 0, err
    assert f"trained  on {intel} (epochs 1-2), then on {amd} (epochs 3-4)" in text
