"""Fault catalogue: a forged ``metrics.json`` value is never certified.

Real ``snakemake`` runs of config/quick.yaml at test scale (one method, one seed, the clean
split, 2 epochs), on a copy of the Yeast mirror of its own. The value of the issue's report:
``global@0.5.micro_f1`` of BCE's run set to 0.991 (Table 1's BCE | Yeast Micro-F1 cell).

* edited in place (a new modification time), then ``snakemake all``: the Snakefile's check
  sees that the file is not what the tables recorded and no longer matches its self-hash,
  names it and deletes it; the same run re-evaluates it, the table never shows 99.1, and
  ``snakemake -n`` twice afterwards plans nothing;
* the same forgery restored with the original's old modification time (``cp -a``), which
  Snakemake alone never looks at again: the same;
* a careful forgery that recomputes the self-hash: the same check deletes it (the tables did
  not read those bytes), and the run re-evaluates the predictions, so the table never shows
  it; ``cdgtmll audit`` of the forged file fails (exit 1) naming the file and the field;
* a mirror file changed after the run: the audit re-hashes the source and says it differs
  from the raw copy;
* an evaluation made again (``--forcerun evaluate``, later: as on another machine) writes the
  same ``metrics.json`` bytes; only its provenance record, ``metrics.provenance.json``, changes.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
import yaml

from tests.support.workflow import copy_repo, run_audit, run_snakemake, snakemake_env, succeeded

pytestmark = pytest.mark.slow

SCALE = {"experiments": {"methods": ["BCE"], "seeds": [0], "r_variants": False}, "training": {"default": {"epochs": 2}}}
CONFIGS = ("all", "--cores", "2", "--configfile", "config/quick.yaml", "config/scale.yaml")
RUN = "results/runs/yeast/clean/BCE/seed0"
METRICS = f"{RUN}/metrics.json"
FIELD = "global@0.5.micro_f1"
FORGED = 0.991
CELL = ("results/tables/table1_standard.md", "--cell", "BCE", "Yeast Micro-F1")


def _bce_row(repo) -> str:
    return next(line for line in (repo / "results/tables/table1_standard.md").read_text().splitlines()
                if line.startswith("| BCE |"))


def _forge(path, reseal: bool = False) -> None:
    """Set the issue's value by hand (as an editor would: the rest of the file as it was)."""
    m = json.loads(path.read_text())
    m["global@0.5"]["micro_f1"] = FORGED
    if reseal:  # a forger who knows how the file is sealed
        from cdgtmll.lineage.seal import write_sealed_json

        write_sealed_json(path, m)
    else:
        path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")


def _plans_nothing(repo, env) -> None:
    for _ in range(2):  # twice: the check itself must change nothing
        out = succeeded(run_snakemake(repo, env, "-n", *CONFIGS))
        assert "Nothing to be done" in out and "cdgtmll integrity" not in out, out[-4000:]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, mirror):
    root = tmp_path_factory.mktemp("forged")
    own_mirror = root / "mirror"
    shutil.copytree(mirror / "yeast", own_mirror / "yeast")  # the test changes a file of it
    repo = copy_repo(root / "repo")
    (repo / "config/scale.yaml").write_text(yaml.safe_dump(SCALE))
    env = snakemake_env(own_mirror)
    succeeded(run_snakemake(repo, env, *CONFIGS))
    return repo, env, own_mirror


def test_the_untouched_cell_passes_the_audit_and_reruns_plan_nothing(pipeline):
    repo, env, _ = pipeline
    res = run_audit(repo, env, *CELL)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr
    assert "0 problem(s)" in res.stdout
    assert "DIFFERS FROM ITS PREDICTIONS" not in res.stdout and "MODIFIED" not in res.stdout
    # the config files the run read, by content
    assert "ok       config config/quick.yaml sha256 " in res.stdout and "config/scale.yaml sha256 " in res.stdout
    _plans_nothing(repo, env)


def test_an_evaluation_made_again_writes_the_same_metrics_bytes(pipeline):
    repo, env, _ = pipeline
    record = repo / RUN / "metrics.provenance.json"
    metrics_before, record_before = (repo / METRICS).read_bytes(), json.loads(record.read_text())
    time.sleep(1.1)  # a later evaluation time (the record's clock has seconds)
    out = succeeded(run_snakemake(repo, env, "--forcerun", "evaluate", *CONFIGS))
    assert "rule evaluate:" in out and "rule train:" not in out, out[-4000:]
    assert (repo / METRICS).read_bytes() == metrics_before
    rec = json.loads(record.read_text())
    assert rec["evaluated"] != record_before["evaluated"], rec
    assert rec["metrics"] == record_before["metrics"] and rec["inputs"] == record_before["inputs"]
    res = run_audit(repo, env, *CELL)
    assert res.returncode == 0 and "0 problem(s)" in res.stdout, res.stdout[-4000:] + res.stderr
    _plans_nothing(repo, env)


@pytest.mark.parametrize("old_mtime", [False, True], ids=["edited", "restored-with-old-mtime"])
def test_a_hand_edited_value_is_deleted_re_evaluated_and_never_shown(pipeline, old_mtime):
    repo, env, _ = pipeline
    path = repo / METRICS
    original = path.read_bytes()
    st = os.stat(path)
    _forge(path)
    if old_mtime:  # cp -a of a forged copy: the original's time, older than the tables
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.stat(repo / "results/tables/table1_standard.md").st_mtime_ns > os.stat(path).st_mtime_ns
    # the audit of the tables as they are names the file (its sha256) and the forged field
    res = run_audit(repo, env, *CELL)
    assert res.returncode == 1
    assert f"MODIFIED metrics: {METRICS}" in res.stderr, res.stderr
    assert (f"DIFFERS FROM ITS PREDICTIONS metrics: {METRICS}: field '{FIELD}' is {FORGED!r}, evaluating "
            f"{RUN}/predictions.npz again gives") in res.stderr, res.stderr
    # the next snakemake all: named, deleted, re-evaluated in the same run; the tables never show it
    out = succeeded(run_snakemake(repo, env, *CONFIGS))
    assert f"cdgtmll integrity: {METRICS}: sha256 " in out and "results/tables/" in out, out[-4000:]
    assert "its content does not match its self-hash" in out and "deleted, so that this run re-makes it " \
           "(rule evaluate: python -m cdgtmll.metrics.evaluate_run)" in out, out[-4000:]
    assert "rule evaluate:" in out and "rule tables:" in out and "rule train:" not in out, out[-4000:]
    assert "99.1" not in _bce_row(repo)
    assert json.loads(path.read_text())["global@0.5"]["micro_f1"] == json.loads(original)["global@0.5"]["micro_f1"]
    res = run_audit(repo, env, *CELL)
    assert res.returncode == 0 and "0 problem(s)" in res.stdout, res.stdout[-4000:] + res.stderr
    _plans_nothing(repo, env)


@pytest.mark.parametrize("old_mtime", [False, True], ids=["new-mtime", "old-mtime"])
def test_a_resealed_forgery_fails_the_audit_and_is_never_tabulated(pipeline, old_mtime):
    repo, env, _ = pipeline
    path = repo / METRICS
    original = path.read_bytes()
    st = os.stat(path)
    _forge(path, reseal=True)  # its self-hash holds: only the predictions can tell
    if old_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    res = run_audit(repo, env, *CELL)
    assert res.returncode == 1, res.stdout[-4000:]
    assert "AUDIT FAILED:" in res.stderr
    assert (f"DIFFERS FROM ITS PREDICTIONS metrics: {METRICS}: field '{FIELD}' is {FORGED!r}, evaluating "
            f"{RUN}/predictions.npz again gives") in res.stderr, res.stderr
    # the next snakemake all deletes it (the tables did not read these bytes) and evaluates the
    # predictions again in the same run: the table never shows 99.1 (at 3580139..bd71610 it did,
    # rebuilt from the forged file, bold as the best row)
    out = succeeded(run_snakemake(repo, env, *CONFIGS))
    assert f"cdgtmll integrity: {METRICS}: sha256 " in out and "its self-hash holds, but the tables did not read " \
           "it" in out, out[-4000:]
    assert "rule evaluate:" in out and "rule train:" not in out, out[-4000:]
    assert "99.1" not in _bce_row(repo)
    assert path.read_bytes() == original  # the evaluation comes back byte for byte
    assert run_audit(repo, env, *CELL).returncode == 0
    _plans_nothing(repo, env)


def test_a_mirror_file_changed_after_the_run_is_named_by_the_audit(pipeline):
    repo, env, own_mirror = pipeline
    src = own_mirror / "yeast" / "yeast-train.arff"
    original = src.read_bytes()
    try:
        src.write_bytes(original + b"% one more line\n")
        res = run_audit(repo, env, *CELL)
        assert res.returncode == 1
        assert f"SOURCE CHANGED mirror (recorded): {src} has sha256 " in res.stderr, res.stderr
        assert "results/raw/yeast/yeast-train.arff it gave was" in res.stderr
        assert "the source changed after the run" in res.stderr
    finally:
        src.write_bytes(original)
    res = run_audit(repo, env, *CELL)
    assert res.returncode == 0, res.stderr
    assert f"ok       source mirror (recorded): {src} sha256 " in res.stdout
