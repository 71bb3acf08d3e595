"""The DVC lineage of an audited artifact (src/cdgtmll/lineage/dvc.py): the stage of dvc.lock that
produced it and each file's md5, on a dvc.lock and DVC cache written here in DVC 3's format."""

import hashlib
import json

import yaml

from cdgtmll.lineage.audit import AuditReport
from cdgtmll.lineage.dvc import DvcLineage, audit_dvc_artifact, md5_file


def _repo(tmp_path):
    """A table and its lineage record in the directory output ``results/tables`` of stage
    ``report``, its ``.dir`` listing in the local cache: ``(table, sources, listing md5)``."""
    out = tmp_path / "results/tables"
    out.mkdir(parents=True)
    table, sources = out / "t.md", out / "t.sources.json"
    table.write_text("| a |\n")
    sources.write_text("{}\n")
    listing = [{"md5": md5_file(table), "relpath": "t.md"}, {"md5": md5_file(sources), "relpath": "t.sources.json"}]
    dir_md5 = hashlib.md5(json.dumps(listing).encode()).hexdigest() + ".dir"
    cache = tmp_path / ".dvc/cache/files/md5" / dir_md5[:2]
    cache.mkdir(parents=True)
    (cache / dir_md5[2:]).write_text(json.dumps(listing))
    lock = {"schema": "2.0", "stages": {"report": {"cmd": "snakemake all", "outs": [
        {"path": "results/tables", "hash": "md5", "md5": dir_md5}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    return table, sources, dir_md5


def test_md5_file_is_the_md5_of_the_bytes(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * (3 << 20))  # more than one read block
    assert md5_file(f) == hashlib.md5(b"x" * (3 << 20)).hexdigest()


def test_the_artifact_and_its_lineage_record_are_said_with_their_stage(tmp_path):
    table, sources, dir_md5 = _repo(tmp_path)
    rep = AuditReport(dvc=DvcLineage.find(tmp_path / "results"))
    audit_dvc_artifact(rep, table, sources)
    assert rep.lines == [
        f"  dvc      stage 'report' of dvc.lock (snakemake all), out results/tables md5 {dir_md5}",
        f"    dvc      artifact: {table} | dvc report md5 {md5_file(table)[:12]}…",
        f"    dvc      lineage record: {sources} | dvc report md5 {md5_file(sources)[:12]}…",
    ]
    assert rep.problems == [] and rep.dvc_checked == 2


def test_a_changed_artifact_and_one_outside_every_output(tmp_path):
    table, sources, _ = _repo(tmp_path)
    table.write_text("| b |\n")
    rep = AuditReport(dvc=DvcLineage.find(tmp_path))
    audit_dvc_artifact(rep, table, sources)
    assert rep.problems[0].startswith(f"DIFFERS FROM DVC.LOCK artifact: {table} (dvc.lock stage 'report', out "
                                      "results/tables")
    other = tmp_path / "README.md"
    rep = AuditReport(dvc=DvcLineage.find(tmp_path))
    audit_dvc_artifact(rep, other, sources)
    assert rep.lines == [f"  dvc      {other} is in no output of {tmp_path / 'dvc.lock'}"] and not rep.problems


def test_without_a_dvc_lock_nothing_is_said(tmp_path):
    table, sources, _ = _repo(tmp_path)
    (tmp_path / "dvc.lock").unlink()
    assert DvcLineage.find(tmp_path) is None or DvcLineage.find(tmp_path).root != tmp_path
    rep = AuditReport(dvc=None)
    audit_dvc_artifact(rep, table, sources)
    assert rep.lines == [] and rep.problems == []
