"""The audit follows a run built on another run (``base_run``: PE reads the BCE run's model):
the base run's provenance and checkpoint must be the files that were read. Real Yeast rows."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from cdgtmll import train
from cdgtmll.config import loader, plan
from cdgtmll.config.run_spec import RunSpec
from cdgtmll.data.processed import ProcessedData
from cdgtmll.labels import tail_labels
from cdgtmll.lineage.audit import AuditReport, audit_provenance
from cdgtmll.lineage.configs import spec_changes
from tests.support.mirror import yeast_processed_npz
from tests.support.paths import ROOT


def test_a_tampered_base_checkpoint_fails_the_audit(tmp_path):
    over = {"training": {"default": {"epochs": 2, "hidden_dim": 16}}, "experiments": {"seeds": [0]}}
    cfg = loader.load(ROOT / "config" / "config.yaml", over)
    cfg.pop("power", None)
    data = ProcessedData.load(yeast_processed_npz(tmp_path / "processed.npz"))
    tail = tail_labels(data.part("train")[1], q=0.2, tie_seed=0)
    bspec = RunSpec.from_json(plan.run_spec(cfg, "yeast", "clean", "BCE").to_json(), "--spec")
    bdir = tmp_path / "BCE" / "seed0"
    train.run_seed(data, tail, bspec, 0, bdir, {})
    spec = plan.run_spec(cfg, "yeast", "clean", "PE")
    base = {**plan.base_run(cfg, spec, ("yeast", "clean", "BCE"), [0]), "dir": str(tmp_path / "BCE")}
    spec = dataclasses.replace(spec, base_run=base)
    pdir = tmp_path / "PE" / "seed0"
    train.run_seed(data, tail, RunSpec.from_json(spec.to_json(), "--spec"), 0, pdir, {})

    # the config gives the same spec: base_run is planned from the whole job list, checked below
    recorded = json.loads((pdir / "provenance.json").read_text())["config"]
    assert spec_changes(RunSpec.from_dict(recorded, "provenance.json"), cfg) == []
    rep = AuditReport()
    audit_provenance(rep, pdir / "provenance.json", 0)
    text = "\n".join(rep.lines)
    assert f"first stage read from the BCE run {bdir} (seed 0)" in text
    assert f"ok       BCE run's checkpoint: {bdir / 'checkpoint.pt'}" in text
    assert not any("BCE run's" in p for p in rep.problems)

    ckpt = bdir / "checkpoint.pt"
    raw = bytearray(ckpt.read_bytes())
    raw[-1] ^= 1
    ckpt.write_bytes(bytes(raw))
    rep = AuditReport()
    audit_provenance(rep, pdir / "provenance.json", 0)
    assert [p for p in rep.problems if "BCE run's" in p] == [
        f"MODIFIED BCE run's checkpoint: {ckpt} (recorded sha256 "
        f"{json.loads((pdir / 'provenance.json').read_text())['base_run']['checkpoint_sha256']}, on disk "
        f"{hashlib.sha256(bytes(raw)).hexdigest()})"]
