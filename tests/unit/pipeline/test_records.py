"""Snakemake's records travel with the outputs DVC tracks (src/cdgtmll/pipeline/records.py), read
and written through Snakemake's own file backend. That Snakemake then plans nothing for restored
outputs and re-runs a job whose params changed: tests/integration/dvc/test_dvc.py (a tiny
workflow, and the quick profile through `dvc exp run`, `dvc push` and `dvc pull`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from snakemake.persistence import RECORD_FORMAT_VERSION, MetadataRecord

from cdgtmll.pipeline import records
from cdgtmll.pipeline.records import (
    EXPORT,
    FIELDS,
    RecordsError,
    dvc_outputs,
    export_records,
    file_persistence,
    import_records,
    read_export,
)

DVC_YAML = """\
stages:
  pipeline:
    cmd: snakemake all
    outs:
      - results/runs:
          persist: true
      - results/summary.json
      - results/jobs.json
    metrics:
      - results/metrics
"""

#: output path -> (rule, params, content)
OUTPUTS = {
    "results/runs/a/predictions.npz": ("train", ["'alpha=0.2'"], b"pred a"),
    "results/runs/a/provenance.json": ("train", ["'alpha=0.2'"], b"{}"),
    "results/runs/b/predictions.npz": ("train", ["'alpha=0.4'"], b"pred b"),
    "results/summary.json": ("summary", ["'x'"], b"summary"),
    "results/metrics/a.json": ("summary", ["'x'"], b'{"mAP": 0.5}'),
}


def _record(rule: str, params: list[str], **extra) -> MetadataRecord:
    return MetadataRecord(rule=rule, params=params, code=f"python -m {rule}", input=["results/data.npz"],
                          log=[f"logs/{rule}.log"], input_checksums={"results/data.npz": "sha256:" + "0" * 64},
                          software_stack_hash="d41d8cd98f00b204e9800998ecf8427e",
                          record_format_version=RECORD_FORMAT_VERSION, shellcmd=f"python -m {rule} --host-path /home/me",
                          conda_env="Y29uZGE=", container_img_url="/scratch/me/cdgtmll.sif", job_hash=12345,
                          starttime=1700000000.5, endtime=1700000100.25, incomplete=False, **extra)


def _workspace(root: Path, with_records: bool = True) -> Path:
    """A workflow root: dvc.yaml, the outputs, a checkpoint (no record), and Snakemake's records."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dvc.yaml").write_text(DVC_YAML)
    for path, (_, _, content) in OUTPUTS.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    (root / "results/runs/a/checkpoint.pt").write_bytes(b"not an output")
    if with_records:
        pers = file_persistence(root)
        for path, (rule, params, _) in OUTPUTS.items():
            pers._write_record(path, _record(rule, params))
    return root


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_dvc_outputs_are_every_out_metric_and_plot_of_dvc_yaml(tmp_path):
    (tmp_path / "dvc.yaml").write_text(DVC_YAML + "    plots:\n      - figures/pr.csv:\n          x: recall\n")
    assert dvc_outputs(tmp_path) == ["results/runs", "results/summary.json", "results/jobs.json", "results/metrics",
                                     "figures/pr.csv"]
    assert dvc_outputs(tmp_path / "nowhere") == []
    (tmp_path / "dvc.yaml").write_text("stages:\n  s:\n    outs: results\n")
    with pytest.raises(RecordsError, match=r"dvc.yaml: stages.s.outs must be a list"):
        dvc_outputs(tmp_path)


def test_export_keeps_what_snakemake_compares_groups_by_job_and_is_the_same_anywhere(tmp_path):
    a = _workspace(tmp_path / "a")
    done = export_records(a)
    assert (done.path, done.jobs, done.outputs) == (a / EXPORT, 3, 5)
    doc = json.loads((a / EXPORT).read_text())
    assert doc["format"] == 1
    jobs = {tuple(sorted(j["outputs"])): j for j in doc["jobs"]}
    assert set(jobs) == {("results/runs/a/predictions.npz", "results/runs/a/provenance.json"),
                         ("results/runs/b/predictions.npz",), ("results/metrics/a.json", "results/summary.json")}
    job = jobs[("results/runs/a/predictions.npz", "results/runs/a/provenance.json")]
    assert job["outputs"] == {"results/runs/a/predictions.npz": _sha(b"pred a"), "results/runs/a/provenance.json": _sha(b"{}")}
    assert sorted(job["record"]) == sorted(FIELDS)
    assert job["record"]["params"] == ["'alpha=0.2'"] and job["record"]["record_format_version"] == RECORD_FORMAT_VERSION
    text = (a / EXPORT).read_text()
    for host_specific in ("starttime", "endtime", "job_hash", "/home/me", "/scratch/me", "Y29uZGE=", "checkpoint.pt"):
        assert host_specific not in text
    # another machine, another folder, other file times, records written later: the same bytes
    b = _workspace(tmp_path / "elsewhere" / "b")
    for f in (b / "results").rglob("*"):
        os.utime(f, (1e9, 1e9))
    export_records(b)
    assert (b / EXPORT).read_bytes() == (a / EXPORT).read_bytes()


def test_export_leaves_out_incomplete_outputs_and_files_without_a_record(tmp_path):
    root = _workspace(tmp_path)
    pers = file_persistence(root)
    pers._mark_incomplete("results/runs/b/predictions.npz", None)
    (root / "results/runs/c.txt").write_text("written by hand")
    export_records(root)
    outs = {o for j in json.loads((root / EXPORT).read_text())["jobs"] for o in j["outputs"]}
    assert outs == set(OUTPUTS) - {"results/runs/b/predictions.npz"}


def test_import_into_a_fresh_clone_writes_the_records_snakemake_reads(tmp_path, monkeypatch):
    src = _workspace(tmp_path / "src")
    export_records(src)
    clone = _workspace(tmp_path / "clone", with_records=False)  # `dvc pull`: the files, no .snakemake
    shutil.copy2(src / EXPORT, clone / EXPORT)
    done = import_records(clone)
    assert sorted(done.imported) == sorted(OUTPUTS) and not done.differ and done.skipped is None
    pers = file_persistence(clone)
    for path, (rule, params, _) in OUTPUTS.items():
        rec = pers._read_record(path)
        assert rec is not None and not rec.incomplete
        assert records.identity(rec) == records.identity(_record(rule, params))
        assert rec.starttime == rec.endtime == (clone / path).stat().st_mtime  # Snakemake's report needs numbers
        assert rec.shellcmd is None and rec.container_img_url is None
    # one job_hash per job (Snakemake's report groups a job's outputs by it)
    hashes = {p: pers._read_record(p).job_hash for p in OUTPUTS}
    assert hashes["results/runs/a/predictions.npz"] == hashes["results/runs/a/provenance.json"]
    assert hashes["results/runs/a/predictions.npz"] != hashes["results/runs/b/predictions.npz"]
    assert "5 output(s) have the bytes results/jobs.json records" in done.lines()[0]
    # the next start finds nothing to do and hashes nothing
    calls = []
    real = records.sha256_file
    monkeypatch.setattr(records, "sha256_file", lambda p: calls.append(p) or real(p))
    again = import_records(clone)
    assert not again.imported and not again.lines() and calls == []


def test_import_replaces_another_runs_record_only_where_the_bytes_match(tmp_path):
    """`dvc checkout`/`dvc exp apply`: .snakemake holds the records of the last run here."""
    src = _workspace(tmp_path / "src")
    export_records(src)
    ws = _workspace(tmp_path / "ws")
    shutil.copy2(src / EXPORT, ws / EXPORT)
    pers = file_persistence(ws)
    other = _record("train", ["'alpha=0.6'"])
    pers._write_record("results/runs/a/predictions.npz", other)     # the last run here: alpha 0.6 ...
    pers._write_record("results/runs/b/predictions.npz", other)
    (ws / "results/runs/b/predictions.npz").write_bytes(b"pred b, alpha 0.6")  # ... and b still has its bytes
    pers._mark_incomplete("results/summary.json", "12")              # a killed run, file restored by DVC since
    done = import_records(ws)
    assert sorted(done.imported) == ["results/runs/a/predictions.npz", "results/summary.json"]
    assert done.differ == ["results/runs/b/predictions.npz"]
    pers = file_persistence(ws)
    assert pers._read_record("results/runs/a/predictions.npz").params == ["'alpha=0.2'"]
    assert pers._read_record("results/runs/b/predictions.npz").params == ["'alpha=0.6'"]  # its own record decides
    assert not pers._filter_incomplete_keys(["results/summary.json"])
    assert "1 output(s) differ from the bytes results/jobs.json records" in done.lines()[1]


def test_import_waits_for_a_running_snakemake_and_skips_other_record_formats(tmp_path):
    src = _workspace(tmp_path / "src")
    export_records(src)
    clone = _workspace(tmp_path / "clone", with_records=False)
    shutil.copy2(src / EXPORT, clone / EXPORT)
    pers = file_persistence(clone)
    pers._write_locks("output", ["results/summary.json"])
    done = import_records(clone)
    assert not done.imported and "another Snakemake holds the locks" in done.skipped
    shutil.rmtree(clone / ".snakemake/locks")

    doc = json.loads((clone / EXPORT).read_text())
    for job in doc["jobs"]:
        job["record"]["record_format_version"] = RECORD_FORMAT_VERSION - 1
    (clone / EXPORT).write_text(json.dumps(doc))
    done = import_records(clone)
    assert not done.imported and sorted(done.other_format) == sorted(OUTPUTS)
    assert file_persistence(clone)._read_record("results/summary.json") is None


def test_no_export_imports_nothing(tmp_path):
    root = _workspace(tmp_path, with_records=False)
    assert not import_records(root).lines()
    assert not (root / ".snakemake").exists()  # nothing created either


@pytest.mark.parametrize("text, field", [
    ("{not json", "cannot read Snakemake's records"),
    ('{"format": 2, "jobs": []}', "field 'format' must be 1, got 2"),
    ('{"format": 1, "jobs": {}}', "field 'jobs' must be a list"),
    ('{"format": 1, "jobs": [{"record": {"rule": "x"}, "outputs": {"a": "' + "0" * 64 + '"}}]}',
     "jobs[0].record must have the fields"),
    ('{"format": 1, "jobs": [{"record": %s, "outputs": {"a": "abc"}}]}', "jobs[0].outputs['a'] must be a sha256"),
    ('{"format": 1, "jobs": [{"record": %s, "outputs": {"/etc/passwd": "' + "0" * 64 + '"}}]}',
     "'/etc/passwd' is not a path inside the workflow"),
])
def test_a_bad_export_is_named_with_its_field_and_the_fix(tmp_path, text, field):
    record = json.dumps(dict.fromkeys(FIELDS))
    (tmp_path / "jobs.json").write_text(text.replace("%s", record) if "%s" in text else text)
    with pytest.raises(RecordsError) as err:
        read_export(tmp_path / "jobs.json")
    assert str(err.value).startswith(f"{tmp_path / 'jobs.json'}: ") and field in str(err.value)
    assert "dvc checkout" in str(err.value)


def test_cli_export_then_import(tmp_path, capsys):
    src = _workspace(tmp_path / "src")
    assert records.main(["export", "--root", str(src)]) == 0
    assert "5 output(s) of 3 job(s)" in capsys.readouterr().out
    clone = _workspace(tmp_path / "clone", with_records=False)
    shutil.copy2(src / EXPORT, clone / EXPORT)
    assert records.main(["import", "--root", str(clone)]) == 0
    assert "5 output(s) have the bytes" in capsys.readouterr().out
    (clone / EXPORT).write_text("[]")
    assert records.main(["import", "--root", str(clone)]) == 1
    assert "field 'format' must be 1" in capsys.readouterr().err


def test_a_local_run_after_the_export_keeps_its_records(tmp_path):
    """A plain `snakemake` run after the last export: a job re-run by changed code that wrote the
    same bytes has a newer record than results/jobs.json. Importing the older one would make
    Snakemake re-run the job at every start (code changed, once more) until the next export."""
    ws = _workspace(tmp_path / "ws")
    export_records(ws)
    pers = file_persistence(ws)
    newer = _record("train", ["'alpha=0.2'"])
    newer.code = "python -m train  # refactored, same bytes"
    pers._write_record("results/runs/a/predictions.npz", newer)
    done = import_records(ws)
    assert done.imported == [] and done.differ == []
    assert file_persistence(ws)._read_record("results/runs/a/predictions.npz").code == newer.code
    # a missing record is still imported (a killed run, `--cleanup-metadata`)
    pers._delete_record("results/runs/b/predictions.npz")
    assert import_records(ws).imported == ["results/runs/b/predictions.npz"]
    # once DVC restores another export (dvc checkout / exp apply), its records replace the local ones
    other = json.loads((ws / EXPORT).read_text())
    other["about"] += " (another experiment)"
    (ws / EXPORT).write_text(json.dumps(other))
    assert import_records(ws).imported == ["results/runs/a/predictions.npz"]
    assert file_persistence(ws)._read_record("results/runs/a/predictions.npz").code == "python -m train"
