"""Byte-identical outputs: two evaluations of the same predictions, in two
clones at two paths, on two hosts, at two times, with training records that differ as two
machines' do (host, times), write the same ``metrics.json`` bytes; what differs goes to the
evaluation's provenance record, ``metrics.provenance.json``, which says that it is one. The
seal still protects ``metrics.json``, and the audit still closes the chain through the record.

The run is real (one BR-LogReg seed trained by :func:`cdgtmll.train.run_seed`, scored by the
evaluate job's ``main``); only the host name and the clock are set per evaluation."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from cdgtmll.io import sha256_file, write_json
from tests.support.runs import train_seeds
from tests.unit.lineage.test_audit_cell_values import _dataset

RUN = Path("results/runs/yeast/clean/BR-LogReg")
CLEAN = Path("results/data/yeast/processed.npz")
MACHINES = {"a": ("node-a.cluster.example", "2026-01-01T10:00:00+00:00"),
            "b": ("laptop-b", "2026-06-30T23:59:59+00:00")}


@pytest.fixture(scope="module")
def two_clones(tmp_path_factory):
    """``{name: clone root}``: one training copied to two clones at other paths (the second's
    ``provenance.json`` rewritten as another machine's training records it: host and times),
    then evaluated in each by the evaluate job's code on its own host, at its own time; the
    first given its folders relative to the clone (as rule ``evaluate`` does), the second
    absolute ones."""
    from cdgtmll.lineage import provenance
    from cdgtmll.metrics import evaluate_run

    base = tmp_path_factory.mktemp("bytes")
    first = base / "clone-a"
    clean, _ = _dataset(first / "results")
    train_seeds(clean, first / CLEAN, first / RUN, "BR-LogReg", [0], {"backbone": "mlp", "epochs": 1})
    shutil.copytree(first, base / "elsewhere" / "clone-b")
    clones = {"a": first, "b": base / "elsewhere" / "clone-b"}
    prov_b = clones["b"] / RUN / "seed0/provenance.json"
    rec = json.loads(prov_b.read_text())
    rec.update(host="laptop-b", started="2026-06-30T23:00:00+00:00", finished="2026-06-30T23:30:00+00:00")
    write_json(prov_b, rec)
    with pytest.MonkeyPatch.context() as mp:
        for name, root in clones.items():
            host, when = MACHINES[name]
            mp.chdir(root)
            mp.setattr(socket, "gethostname", lambda h=host: h)
            mp.setattr(provenance, "now", lambda w=when: w)
            folders = (CLEAN, RUN) if name == "a" else (root / CLEAN, root / RUN)
            assert evaluate_run.main(["--clean", str(folders[0]), "--rundir", str(folders[1]), "--seeds", "0"]) == 0
    return clones


def test_metrics_json_is_the_same_bytes_on_two_machines(two_clones):
    a, b = (root / RUN / "seed0/metrics.json" for root in two_clones.values())
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text()
    m = json.loads(text)
    # no time, host, absolute path, or hash of a machine-specific file
    assert "evaluated" not in m and "git" not in m and "provenance" not in m["inputs"]
    assert m["inputs"] == {"predictions": {"path": f"{RUN}/seed0/predictions.npz",
                                           "sha256": sha256_file(two_clones["a"] / RUN / "seed0/predictions.npz")},
                           "clean_data": {"path": str(CLEAN), "sha256": sha256_file(two_clones["a"] / CLEAN)}}
    for machine_specific in ("node-a", "laptop-b", "2026-01-01", "2026-06-30", str(two_clones["a"]), "/tmp"):
        assert machine_specific not in text


def test_the_evaluation_record_holds_what_differs_and_says_so(two_clones):
    from cdgtmll.lineage.seal import seal_problem

    records = {name: json.loads((root / RUN / "seed0/metrics.provenance.json").read_text())
               for name, root in two_clones.items()}
    for name, rec in records.items():
        root = two_clones[name]
        assert rec["schema"] == "cdgtmll.lineage.evaluation/1" and "Machine-specific" in rec["record"]
        assert (rec["host"], rec["evaluated"]) == MACHINES[name]
        assert rec["metrics"] == {"path": f"{RUN}/seed0/metrics.json", "sha256": sha256_file(root / RUN / "seed0/metrics.json")}
        assert rec["inputs"]["provenance"]["sha256"] == sha256_file(root / RUN / "seed0/provenance.json")
        assert "commit" in rec["git"] and rec["config"] is None  # evaluated by hand: no --config-record
        assert seal_problem(json.loads((root / RUN / "seed0/metrics.json").read_text())) is None
    assert records["a"]["inputs"]["provenance"]["sha256"] != records["b"]["inputs"]["provenance"]["sha256"]


def test_the_audit_closes_the_chain_through_the_record(two_clones, capsys, monkeypatch):
    """metrics.json -> predictions sha256 = the sha256 training recorded; the evaluation record
    -> metrics.json and provenance.json; a provenance.json edited afterwards is named."""
    from cdgtmll import cli

    root = two_clones["b"]
    monkeypatch.chdir(root)
    metrics = RUN / "seed0/metrics.json"
    tables = Path("results/tables")
    tables.mkdir(parents=True, exist_ok=True)
    write_json(tables / "table1_standard.sources.json",
               {"table": "table1_standard", "cells": {"BR-LogReg | Yeast Micro-F1": [
                   {"path": str(metrics), "sha256": sha256_file(metrics)}]}})
    (tables / "table1_standard.md").write_text("")
    args = ["audit", str(tables / "table1_standard.md"), "--cell", "BR-LogReg", "Yeast Micro-F1", "--allow-mixed"]
    assert cli.main(args) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert f"evaluated {MACHINES['b'][1]} on {MACHINES['b'][0]}" in out
    assert f"ok       metrics (as its evaluation record has it): {metrics} sha256 " in out
    assert "are the ones its training recorded" in out and "0 problem(s)" in out
    prov = RUN / "seed0/provenance.json"
    before = prov.read_bytes()
    try:
        rec = json.loads(before)
        rec["outputs"]["predictions"]["sha256"] = "0" * 64  # a training record of other predictions
        write_json(prov, rec)
        assert cli.main(args) == 1
        err = capsys.readouterr().err
        assert f"MODIFIED provenance: {prov}" in err
        assert (f"DIFFERS FROM ITS TRAINING metrics: {metrics} was computed from predictions sha256 "
                f"{json.loads(metrics.read_text())['inputs']['predictions']['sha256']}, its training {prov} wrote "
                + "0" * 64) in err
    finally:
        prov.write_bytes(before)
