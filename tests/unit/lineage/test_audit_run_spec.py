"""The audit parses the run spec a training recorded (:func:`cdgtmll.lineage.provenance.recorded_spec`):
a record whose ``config`` is not a run spec is a problem naming the ``provenance.json`` and the
field; a valid one is said as the job it names, and its recorded sha256 is checked as written."""

from __future__ import annotations

from cdgtmll.io import config_hash, write_json
from cdgtmll.lineage.audit import AuditReport, audit_provenance
from tests.support.specs import clean_spec


def _record(path, spec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"config": spec, "config_sha256": config_hash(spec), "seed": 0, "inputs": {}})


def test_an_invalid_recorded_spec_is_a_problem_naming_the_file_and_the_field(tmp_path):
    spec = clean_spec("yeast", "BCE").to_dict()
    del spec["seeds"]
    path = tmp_path / "runs" / "yeast" / "clean" / "BCE" / "seed0" / "provenance.json"
    _record(path, spec)
    rep = AuditReport()
    assert audit_provenance(rep, path, 0) is not None
    assert [p for p in rep.problems if p.startswith("INVALID")] == [
        f"INVALID run spec from {path}: missing field 'seeds'"]
    assert rep.lines[0] == "run      INVALID run spec seed 0"
    assert not any("MODIFIED run spec" in p for p in rep.problems)  # its sha256 is the record's own


def test_a_valid_recorded_spec_is_said_as_its_job(tmp_path):
    path = tmp_path / "seed0" / "provenance.json"
    _record(path, clean_spec("yeast", "BCE", variant="R0.50-s0", hparams={"epochs": 2}).to_dict())
    rep = AuditReport()
    audit_provenance(rep, path, 0)
    assert rep.lines[0] == "run      yeast/R0.50-s0/BCE seed 0"
    assert any(line.strip().endswith('hparams {"epochs": 2}') for line in rep.lines), rep.lines
    assert not any(p.startswith(("INVALID", "MODIFIED run spec")) for p in rep.problems), rep.problems
