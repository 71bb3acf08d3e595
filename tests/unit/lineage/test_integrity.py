"""The chain from a table cell down to its predictions and source files holds also where
Snakemake does not look:

* before a run, the Snakefile compares the sha256 the tables recorded for every ``metrics.json``
  with the file on disk (:func:`cdgtmll.lineage.integrity.check_recorded_metrics`): a
  hand-edited file (self-hash broken) and a sealed one that differs (a restored copy, or a
  forgery with a recomputed seal) are deleted and named, so that rule evaluate makes them again
  from the predictions; an unchanged one is left alone, whatever the modification times;
* ``cdgtmll audit --cell`` computes the cell from the predictions, so a forgery that was
  re-sealed and tabulated fails it, naming the file and the field;
* the audit re-hashes the source a raw copy came from and says when it changed.

The runs are real (one BR-LogReg run trained and evaluated by the jobs' code); the table's
lineage record is written as the tables write it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cdgtmll import cli
from cdgtmll.io import sha256_file, write_json
from tests.unit.metrics.test_metrics_seal import _forge
from tests.unit.metrics.test_metrics_seal import run as run  # noqa: F401 (the fixture)

CELL = "BR-LogReg | Yeast Micro-F1"


@pytest.fixture()
def table(run, tmp_path, monkeypatch):
    """``(metrics.json path relative to the working folder, tables folder)``: a table's
    ``.sources.json`` and ``all_runs.csv`` that record the run's metrics file as read."""
    metrics, _ = run
    monkeypatch.chdir(tmp_path)
    rel = metrics.relative_to(tmp_path)
    tables = Path("results/tables")
    tables.mkdir(parents=True)
    write_json(tables / "table1_standard.sources.json",
               {"table": "table1_standard", "cells": {CELL: [{"path": str(rel), "sha256": sha256_file(rel)}]}})
    (tables / "all_runs.csv").write_text(f"metrics_path,metrics_sha256\n{rel},{sha256_file(rel)}\n")
    return rel, tables


def _age(path: Path) -> int:
    """Give ``path`` an old modification time (as ``cp -a`` of an old copy would); returns it."""
    old = 1_600_000_000_000_000_000
    os.utime(path, ns=(old, old))
    return old


def test_unchanged_files_are_left_alone(table):
    from cdgtmll.lineage.integrity import check_recorded_metrics, recorded_metrics

    rel, tables = table
    assert set(recorded_metrics(tables)) == {rel}
    old = _age(rel)
    assert check_recorded_metrics(tables) == []
    assert rel.is_file() and os.stat(rel).st_mtime_ns == old


def test_a_hand_edited_file_with_an_old_time_is_named_and_deleted(table):
    from cdgtmll.lineage.integrity import check_recorded_metrics

    rel, tables = table
    _forge(rel)
    _age(rel)
    lines = check_recorded_metrics(tables)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{rel}: sha256 ") and "differs from the" in lines[0]
    assert f"that {tables}/" in lines[0] and "its content does not match its self-hash" in lines[0]
    assert lines[0].endswith("deleted, so that this run re-makes it (rule evaluate: python -m "
                             "cdgtmll.metrics.evaluate_run) and the tables after it")
    assert not rel.exists()
    assert check_recorded_metrics(tables) == []  # missing: Snakemake re-makes it


def test_a_sealed_file_the_tables_did_not_read_is_deleted_to_be_evaluated_again(table):
    from cdgtmll.lineage.integrity import check_recorded_metrics
    from cdgtmll.lineage.seal import write_sealed_json

    rel, tables = table
    m = json.loads(rel.read_text())
    # an evaluation of the same predictions by older code (which wrote its time into the file), restored
    m["evaluated"] = "2020-01-01T00:00:00+00:00"
    write_sealed_json(rel, m)
    lines = check_recorded_metrics(tables)
    assert len(lines) == 1 and "its self-hash holds, but the tables did not read it (a restored or re-made " \
                                "evaluation, or a forgery with a recomputed seal): deleted, so that this run " \
                                "evaluates its predictions again (rule evaluate" in lines[0], lines
    assert not rel.exists()  # a re-sealed forgery is never tabulated: only evaluate re-makes the file


def test_files_outside_the_working_folder_are_not_touched(table, tmp_path):
    from cdgtmll.lineage.integrity import check_recorded_metrics

    rel, tables = table
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text("{}")
    write_json(tables / "table1_standard.sources.json",
               {"cells": {CELL: [{"path": str(outside), "sha256": "0" * 64}]}})
    (tables / "all_runs.csv").unlink()
    assert check_recorded_metrics(tables) == [] and outside.is_file()
    outside.unlink()


def _audit(capsys, *args: str) -> tuple[int, str, str]:
    rc = cli.main(["audit", *args, "--allow-mixed"])  # this checkout's tree may be dirty
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_audit_recomputes_the_cell_from_the_predictions(table, capsys):
    from cdgtmll.lineage.seal import write_sealed_json

    rel, tables = table
    md = tables / "table1_standard.md"
    md.write_text("")
    rc, out, err = _audit(capsys, str(md), "--cell", "BR-LogReg", "Yeast Micro-F1")
    assert rc == 0, out + err
    assert "DIFFERS" not in out and f"ok       metrics: {rel} sha256 " in out
    true = json.loads(rel.read_text())["global@0.5"]["micro_f1"]
    # a forger who re-seals the file and re-records its sha256 where the table keeps it
    m = json.loads(rel.read_text())
    m["global@0.5"]["micro_f1"] = 0.991
    write_sealed_json(rel, m)
    write_json(tables / "table1_standard.sources.json",
               {"table": "table1_standard", "cells": {CELL: [{"path": str(rel), "sha256": sha256_file(rel)}]}})
    rc, out, err = _audit(capsys, str(md), "--cell", "BR-LogReg", "Yeast Micro-F1")
    assert rc == 1
    pred = m["inputs"]["predictions"]["path"]
    assert (f"DIFFERS FROM ITS PREDICTIONS metrics: {rel}: field 'global@0.5.micro_f1' is 0.991, evaluating "
            f"{pred} again gives {true!r}") in err, err
    assert f"micro_f1 = {true!r}" in out  # the value shown is the predictions' one
    # a hand edit without the seal: named as such
    _forge(rel, 0.5)
    write_json(tables / "table1_standard.sources.json",
               {"table": "table1_standard", "cells": {CELL: [{"path": str(rel), "sha256": sha256_file(rel)}]}})
    rc, out, err = _audit(capsys, str(md), "--cell", "BR-LogReg", "Yeast Micro-F1")
    assert rc == 1 and f"MODIFIED metrics: {rel}: its content does not match its self-hash" in err, err


def test_the_audit_says_when_a_source_changed_after_the_run(tmp_path, monkeypatch):
    from cdgtmll.lineage.audit import AuditReport, audit_raw

    monkeypatch.delenv("CDGTMLL_DATA_MIRROR", raising=False)
    raw = tmp_path / "raw" / "x.arff"
    mirror = tmp_path / "mirror" / "x.arff"
    for p in (raw, mirror):
        p.parent.mkdir(parents=True)
        p.write_text("@relation x\n")
    src = {"file": "x.arff", "path": str(raw), "sha256": sha256_file(raw), "source": "mirror", "origin": str(mirror)}
    rep = AuditReport()
    audit_raw(rep, src, "not-a-registered-dataset", 0)
    assert not rep.problems and f"ok       source mirror (recorded): {mirror} sha256 " in "\n".join(rep.lines)
    mirror.write_text("@relation y\n")
    rep = AuditReport()
    audit_raw(rep, src, "not-a-registered-dataset", 0)
    assert len(rep.problems) == 1 and rep.problems[0].startswith(
        f"SOURCE CHANGED mirror (recorded): {mirror} has sha256 {sha256_file(mirror)}, the raw copy {raw} it gave "
        f"was {src['sha256']} when acquired: the source changed after the run"), rep.problems
    mirror.unlink()  # not present here: nothing to re-hash, nothing said
    rep = AuditReport()
    audit_raw(rep, src, "not-a-registered-dataset", 0)
    assert not rep.problems and "source" not in "\n".join(rep.lines)


def test_the_audit_rehashes_the_mirror_configured_now(tmp_path, monkeypatch):
    """A raw copy cached before (its recorded origin gone) is checked against the mirror of
    ``CDGTMLL_DATA_MIRROR``, at the registry's place for the file."""
    from cdgtmll.data.registry import REGISTRY
    from cdgtmll.lineage.audit import AuditReport, audit_raw

    name = REGISTRY["yeast"].files[0].name
    mirror = tmp_path / "mirror"
    now = mirror / REGISTRY["yeast"].folder / name
    now.parent.mkdir(parents=True)
    now.write_text("edited\n")
    raw = tmp_path / "raw" / name
    raw.parent.mkdir()
    raw.write_text("original\n")
    monkeypatch.setenv("CDGTMLL_DATA_MIRROR", str(mirror))
    src = {"file": name, "path": str(raw), "sha256": sha256_file(raw), "source": "cached",
           "original_source": "mirror", "origin": str(tmp_path / "gone" / name)}
    rep = AuditReport()
    audit_raw(rep, src, "yeast", 0)
    assert len(rep.problems) == 1 and rep.problems[0].startswith(f"SOURCE CHANGED mirror (configured now): {now} ")
