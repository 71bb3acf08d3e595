"""Code lineage in the tables and in `cdgtmll audit`: runs of two commits and of a dirty tree
give the tables a footnote and profile.json a record, and fail the audit unless --allow-mixed;
a run whose recorded code differs from the code on disk fails it unless --allow-stale.

The runs are real (trained by :func:`cdgtmll.train.run_seed`, scored by
``cdgtmll.metrics.evaluate_run``, tabulated by ``cdgtmll.tables.build``); only what git says
(:func:`cdgtmll.lineage.worktree.git_state`) is set per seed, as three checkouts would."""

from __future__ import annotations

import json

import pytest
import torch

from cdgtmll import cli
from cdgtmll.lineage import worktree
from cdgtmll.lineage.provenance import cpu_model
from tests.support.specs import clean_spec
from tests.unit.lineage.test_audit_cell_values import TRAINING, _dataset

A, B = "a" * 40, "b" * 40
GIT = {0: {"commit": A, "dirty": False}, 1: {"commit": B, "dirty": False}, 2: {"commit": B, "dirty": True}}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    from cdgtmll import train
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run
    from cdgtmll.tables import build

    root = tmp_path_factory.mktemp("audit_code")
    clean, clean_path = _dataset(root)
    tail = tail_labels(clean.part("train")[1])
    spec = clean_spec("yeast", "BCE", seeds=[0, 1, 2], training=TRAINING, resolved_hparams={"loss": "bce"})
    rundir = root / "runs" / "yeast" / "clean" / "BCE"
    with pytest.MonkeyPatch.context() as mp:
        for seed, git in GIT.items():
            mp.setattr(worktree, "git_state", lambda cwd=None, g=git: dict(g))
            train.run_seed(clean, tail, spec, seed, rundir / f"seed{seed}", {"data": clean_path, "clean": clean_path})
        assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir), "--seeds", "0", "1", "2"]) == 0
    out = root / "tables"
    paths = [str(rundir / f"seed{s}" / "metrics.json") for s in GIT]
    assert build.main(["--metrics", *paths, "--methods", "BCE", "--out", str(out)]) == 0
    return root, out, rundir


def _audit(capsys, monkeypatch, root, *args):
    monkeypatch.chdir(root)
    rc = cli.main(["audit", *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_tables_say_two_commits_and_a_dirty_tree(mixed):
    _, out, _ = mixed
    md = (out / "table1_standard.md").read_text()
    assert ("Code lineage: the 3 runs behind these tables come from 2 commits: aaaaaaaaaa (1 run), bbbbbbbbbb (2 runs); "
            "1 of them were made from a working tree with uncommitted changes") in md
    profile = json.loads((out / "profile.json").read_text())
    assert profile["mixed_code"] is True and profile["code_lineage"]["commits"] == {A: 1, B: 2}
    assert profile["code_lineage"]["dirty_runs"] == 1
    sources = json.loads((out / "table1_standard.sources.json").read_text())
    assert sources["code"]["runs"]["commits"] == {A: 1, B: 2}
    assert sources["code"]["tables"]["roots"] == ["cdgtmll.tables.build"] and len(sources["code"]["tables"]["sha256"]) == 64


def test_audit_fails_on_mixed_commits_unless_allowed(mixed, capsys, monkeypatch):
    root, out, _ = mixed
    rc, text, err = _audit(capsys, monkeypatch, root, str(out / "table1_standard.md"), "--cell", "BCE", "Yeast Micro-F1")
    assert rc == 1
    assert "MIXED CODE: the runs come from 2 commits: aaaaaaaaaa (1 run(s)" in err
    assert "MIXED CODE: 1 run(s) were made from a working tree with uncommitted changes" in err
    assert "training code" in text and "equals the code on disk" in text  # the code itself is current
    # the CPU that trained it: torch's CPU kernels (dropout's draws among them) depend on it
    assert f"(cpu: {cpu_model()['model']}, {torch.backends.cpu.get_cpu_capability()}; cuda: none)" in text
    rc, _, err = _audit(capsys, monkeypatch, root, str(out / "table1_standard.md"), "--cell", "BCE", "Yeast Micro-F1",
                        "--allow-mixed")
    assert rc == 0 and "MIXED CODE" in err  # still said, as a warning


def test_audit_fails_on_stale_code_unless_allowed(mixed, capsys, monkeypatch):
    """A run made by other code than the code on disk: its recorded identity names a module
    whose source hash differs (as after an edit of nn/losses/bce.py)."""
    from cdgtmll.io import sha256_file, write_json

    root, out, rundir = mixed
    prov_path = rundir / "seed0" / "provenance.json"
    metrics_path = rundir / "seed0" / "metrics.json"
    ev_path = rundir / "seed0" / "metrics.provenance.json"
    prov_before, metrics_before, ev_before = prov_path.read_bytes(), metrics_path.read_bytes(), ev_path.read_bytes()
    sources_path = out / "table1_standard.sources.json"
    sources_before = sources_path.read_bytes()
    try:
        prov = json.loads(prov_before)
        prov["code"]["modules"]["cdgtmll.nn.losses.bce"] = "0" * 64
        prov["code"]["sha256"] = prov["code_sha256"] = "1" * 64
        write_json(prov_path, prov)  # re-record the hashes downstream, as a run by that code would have
        ev = json.loads(ev_before)  # the evaluation record holds provenance.json's sha256 (metrics.json does not)
        ev["inputs"]["provenance"]["sha256"] = sha256_file(prov_path)
        write_json(ev_path, ev)
        src = json.loads(sources_before)
        for runs in src["cells"].values():
            for r in runs:
                if r["path"] == str(metrics_path):
                    r["sha256"] = sha256_file(metrics_path)
        write_json(sources_path, src)
        args = (str(out / "table1_standard.md"), "--cell", "BCE", "Yeast Micro-F1", "--allow-mixed")
        rc, _, err = _audit(capsys, monkeypatch, root, *args)
        assert rc == 1, err
        assert f"STALE CODE training: {prov_path} was made by code 1111111111111111…" in err
        assert "(changed: cdgtmll.nn.losses.bce)" in err
        rc, _, err = _audit(capsys, monkeypatch, root, *args, "--allow-stale")
        assert rc == 0 and "STALE CODE" in err
    finally:
        prov_path.write_bytes(prov_before)
        metrics_path.write_bytes(metrics_before)
        ev_path.write_bytes(ev_before)
        sources_path.write_bytes(sources_before)
