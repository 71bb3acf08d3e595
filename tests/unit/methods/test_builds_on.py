"""Rows built on another row's run (``Method.builds_on``): PE, ETU and LSFA read the BCE run's
model instead of training it again, and predict byte for byte what they predict after training
it themselves; SRB trains a model of its own. Real Yeast rows, a few epochs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cdgtmll import train
from cdgtmll.config import loader, plan
from cdgtmll.config.run_spec import RunSpec
from cdgtmll.data.processed import ProcessedData
from cdgtmll.labels import tail_labels
from cdgtmll.methods import base as methods
from cdgtmll.nn.checkpoint import BaseRunError
from tests.support.mirror import yeast_processed_npz
from tests.support.paths import ROOT

EPOCHS = 3
BUILT = ("PE", "ETU", "LSFA")


def tiny_config(**methods) -> dict:
    """config/config.yaml with 3 epochs, seeds 0-1, no power, and the given method settings."""
    over = {"training": {"default": {"epochs": EPOCHS, "hidden_dim": 32}}, "experiments": {"seeds": [0, 1]},
            "methods": {"LSFA": {"gen_epochs": 3, "gen_hidden_dim": 16, "head_min_count": 60}, **methods}}
    cfg = loader.load(ROOT / "config" / "config.yaml", over)
    cfg.pop("power", None)
    return cfg


@pytest.fixture(scope="module")
def yeast(tmp_path_factory):
    path = yeast_processed_npz(tmp_path_factory.mktemp("data") / "processed.npz")
    data = ProcessedData.load(path)
    return data, tail_labels(data.part("train")[1], q=0.2, tie_seed=0)


def spec_json(spec: RunSpec) -> RunSpec:
    """A run spec as the training job reads it (its ``--spec`` JSON text, parsed)."""
    return RunSpec.from_json(spec.to_json(), "--spec")


def run(yeast, spec: RunSpec, outdir: Path) -> Path:
    data, tail = yeast
    for seed in spec.seeds:
        train.run_seed(data, tail, spec_json(spec), seed, outdir / f"seed{seed}", {})
    return outdir


def same_outputs(a: Path, b: Path) -> None:
    """Every array of predictions.npz equal (dtype, shape, bytes), and method_outputs.json equal."""
    with np.load(a / "predictions.npz") as za, np.load(b / "predictions.npz") as zb:
        assert sorted(za.files) == sorted(zb.files)
        for k in za.files:
            assert za[k].dtype == zb[k].dtype and za[k].shape == zb[k].shape, k
            assert za[k].tobytes() == zb[k].tobytes(), k
    ma, mb = a / "method_outputs.json", b / "method_outputs.json"
    assert ma.is_file() == mb.is_file()
    if ma.is_file():
        assert json.loads(ma.read_text()) == json.loads(mb.read_text())


@pytest.fixture(scope="module")
def bce_run(yeast, tmp_path_factory):
    cfg = tiny_config()
    spec = plan.run_spec(cfg, "yeast", "clean", "BCE")
    root = tmp_path_factory.mktemp("runs")
    return cfg, spec, run(yeast, spec, root / "yeast" / "clean" / "BCE")


def test_the_specs_say_what_builds_on_bce():
    assert {m: methods.spec_of(m).builds_on for m in (*BUILT, "SRB", "BCE", "BalanceMix", "CD-GTMLL")} == {
        "PE": "BCE", "ETU": "BCE", "LSFA": "BCE", "SRB": None, "BCE": None, "BalanceMix": None, "CD-GTMLL": None}


def test_srb_trains_its_own_surrogate_not_bce():
    """SRB's step 1 minimises a strongly proper surrogate other than the logistic loss
    (Kotlowski & Dembczynski): a model BCE's run does not hold, so it builds on nothing."""
    from cdgtmll.methods.base import FitData, build
    from cdgtmll.methods.two_step import SquaredProperLoss
    from cdgtmll.nn.losses.registry import loss_class
    from tests.support.mirror import yeast_arrays

    X, Y = yeast_arrays(50)
    crit = build("SRB").make_criterion(FitData(X, Y, X, Y, [str(k) for k in range(14)]))
    assert isinstance(crit, SquaredProperLoss) and not isinstance(crit, loss_class("bce"))
    assert plan.base_method(tiny_config(), "SRB") is None


@pytest.mark.parametrize("method", BUILT)
def test_read_from_bce_equals_training_it(yeast, bce_run, tmp_path, method):
    """The row trained today's way (stage 1 inside) and the row reading BCE's run write the same
    bytes; the provenance names the run read, with the sha256 of its provenance and checkpoint."""
    cfg, bspec, bdir = bce_run
    spec = plan.run_spec(cfg, "yeast", "clean", method)
    own = run(yeast, spec, tmp_path / "own" / method)
    base = plan.base_run(cfg, spec, ("yeast", "clean", "BCE"), [0, 1])
    assert base == {"method": "BCE", "dir": "results/runs/yeast/clean/BCE", "spec_sha256": bspec.sha256()}
    read = run(yeast, replace(spec, base_run={**base, "dir": str(bdir)}), tmp_path / "read" / method)
    for seed in (0, 1):
        same_outputs(own / f"seed{seed}", read / f"seed{seed}")
        prov = json.loads((read / f"seed{seed}" / "provenance.json").read_text())
        bprov = json.loads((bdir / f"seed{seed}" / "provenance.json").read_text())
        rec = prov["base_run"]
        assert rec["dir"] == str(bdir / f"seed{seed}") and rec["seed"] == seed and rec["method"] == "BCE"
        assert rec["checkpoint_sha256"] == bprov["outputs"]["checkpoint"]["sha256"]
        from cdgtmll.io import sha256_file

        assert rec["provenance_sha256"] == sha256_file(bdir / f"seed{seed}" / "provenance.json")
        assert not (read / f"seed{seed}" / "checkpoint.pt").exists()  # nothing was trained
        own_prov = json.loads((own / f"seed{seed}" / "provenance.json").read_text())
        for key in ("epoch_selection", "grad_clip", "training_machines"):
            assert prov[key] == own_prov[key], key


def test_fallback_fits_stage_one_and_says_why(yeast, tmp_path):
    """Without BCE planned, or with BCE at other settings, the row fits its first stage itself,
    and its spec and provenance say why."""
    cfg = tiny_config(BCE={"epochs": 2})
    spec = plan.run_spec(cfg, "yeast", "clean", "PE")
    other = plan.base_run(cfg, spec, ("yeast", "clean", "BCE"), [0, 1])
    assert other["dir"] is None and "epochs: 2 there, 3 here" in other["reason"]
    none = plan.base_run(cfg, spec, None, [])
    assert none == {"method": "BCE", "dir": None, "reason": "BCE is not run on yeast/clean in this configuration"}
    seeds = plan.base_run(tiny_config(), spec, ("yeast", "clean", "BCE"), [0])
    assert seeds["dir"] is None and "does not train seed(s) 1" in seeds["reason"]
    out = run(yeast, replace(spec, seeds=(0,), base_run=none), tmp_path / "PE")
    prov = json.loads((out / "seed0" / "provenance.json").read_text())
    assert prov["base_run"] == none
    assert (out / "seed0" / "checkpoint.pt").is_file() and "checkpoint" in prov["outputs"]


def test_a_tampered_base_run_is_refused(yeast, bce_run, tmp_path):
    """A checkpoint whose bytes are not the ones BCE's provenance records, or a provenance of
    another spec, is refused with the file named; nothing is trained in their place."""
    import shutil

    cfg, bspec, bdir = bce_run
    spec = plan.run_spec(cfg, "yeast", "clean", "PE")
    base = plan.base_run(cfg, spec, ("yeast", "clean", "BCE"), [0, 1])
    copy = shutil.copytree(bdir, tmp_path / "BCE")
    ckpt = copy / "seed0" / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes() + b"\0")
    one = replace(spec, seeds=(0,), base_run={**base, "dir": str(copy)})
    with pytest.raises(BaseRunError, match=f"{ckpt}: sha256 .* but .*provenance.json records"):
        run(yeast, one, tmp_path / "PE")
    wrong = replace(one, base_run={**base, "dir": str(bdir), "spec_sha256": "0" * 64})
    with pytest.raises(BaseRunError, match="config_sha256 .* expected 0{64}"):
        run(yeast, wrong, tmp_path / "PE2")
    # a base run trained by other code than its training code now
    stale = shutil.copytree(bdir, tmp_path / "BCE-stale")
    prov_path = stale / "seed0" / "provenance.json"
    prov = json.loads(prov_path.read_text())
    prov["code_sha256"] = "f" * 64
    prov_path.write_text(json.dumps(prov))
    with pytest.raises(BaseRunError, match=f"{prov_path}: trained by code f{{64}}, its training code is .* now"):
        run(yeast, replace(one, base_run={**base, "dir": str(stale)}), tmp_path / "PE1")
    # a checkpoint of another training (other epochs) under a consistent provenance
    cfg2 = tiny_config(BCE={"epochs": 2})
    b2 = plan.run_spec(cfg2, "yeast", "clean", "BCE")
    d2 = run(yeast, replace(b2, seeds=(0,)), tmp_path / "BCE2")
    forged = replace(one, base_run={**base, "dir": str(d2), "spec_sha256": replace(b2, seeds=(0,)).sha256()})
    with pytest.raises(BaseRunError, match=r"fingerprint differs in task, train_config\)"):
        run(yeast, forged, tmp_path / "PE3")


def test_a_finished_row_reads_a_re_made_base_run_again(yeast, tmp_path):
    """A seed whose outputs exist is skipped only while the base run still holds the checkpoint
    it read: after BCE is trained again (new checkpoint bytes: its log's timings), PE reads it
    again and records the new checkpoint."""
    import shutil

    from cdgtmll.io import sha256_file

    cfg = tiny_config()
    bspec = replace(plan.run_spec(cfg, "yeast", "clean", "BCE"), seeds=(0,))
    bdir = run(yeast, bspec, tmp_path / "BCE")
    spec = replace(plan.run_spec(cfg, "yeast", "clean", "PE"), seeds=(0,))
    base = {**plan.base_run(cfg, spec, ("yeast", "clean", "BCE"), [0]), "dir": str(bdir),
            "spec_sha256": bspec.sha256()}  # the run of seed 0 only
    pe = run(yeast, replace(spec, base_run=base), tmp_path / "PE")
    first = json.loads((pe / "seed0" / "provenance.json").read_text())["base_run"]["checkpoint_sha256"]
    shutil.rmtree(bdir)
    run(yeast, bspec, bdir)
    now = sha256_file(bdir / "seed0" / "checkpoint.pt")
    assert now != first  # the re-made checkpoint's log rows hold other epoch timings
    run(yeast, replace(spec, base_run=base), pe)
    assert json.loads((pe / "seed0" / "provenance.json").read_text())["base_run"]["checkpoint_sha256"] == now


def test_etu_reads_bce_on_sparse_rows_as_xmc_trains(tmp_path):
    """The XMC form: CSR features and labels, the TF-IDF linear backbone (``backbone:
    tfidf-linear``). ETU reading BCE's run scores byte for byte as ETU training it (the fingerprint
    is taken over the arrays as the trainer holds them: CSR float32)."""
    import scipy.sparse as sp

    from cdgtmll.io import sha256_file, write_json
    from cdgtmll.lineage.code import identity
    from cdgtmll.lineage.roots import train_roots
    from cdgtmll.methods.base import FitData, RunContext, build
    from tests.support.mirror import yeast_arrays
    from tests.support.specs import clean_spec

    X, Y = yeast_arrays(300)
    Xs, Ys = sp.csr_matrix(X), sp.csr_matrix(Y)
    data = FitData(Xs[:200], Ys[:200], Xs[200:], Ys[200:], [f"Class{k + 1}" for k in range(14)])
    hp = {"epochs": 2, "hidden_dim": 16, "batch_size": 64}
    extra = {"training": {"backbone": "tfidf-linear"}}

    def fit(name, workdir, base=None):
        m = build(name, hp)
        m.fit(data, RunContext(seed=3, workdir=workdir, device="cpu", extra={**extra, "base_run": base}))
        return m

    bce = fit("BCE", tmp_path / "BCE" / "seed3")
    assert bce._sparse_input
    ckpt = tmp_path / "BCE" / "seed3" / "checkpoint.pt"
    bspec = clean_spec("yeast", "BCE", seeds=[3], resolved_hparams={"loss": "bce"})
    code = identity(train_roots(bspec))["sha256"]
    write_json(tmp_path / "BCE" / "seed3" / "provenance.json",
               {"config_sha256": "b" * 64, "config": bspec.to_dict(), "code_sha256": code, "seed": 3,
                "outputs": {"checkpoint": {"sha256": sha256_file(ckpt)}}})
    own = fit("ETU", tmp_path / "own")
    read = fit("ETU", tmp_path / "read", {"method": "BCE", "dir": str(tmp_path / "BCE" / "seed3"),
                                          "spec_sha256": "b" * 64, "code_sha256": code})
    assert read.base_record["checkpoint_sha256"] == sha256_file(ckpt)
    assert own.predict_proba(Xs[200:]).tobytes() == read.predict_proba(Xs[200:]).tobytes()


def test_best_val_rows_read_the_best_epochs_weights(yeast, tmp_path):
    """With ``select_epoch: best_val`` the row reads the weights BCE's run kept (the checkpoint's
    ``best``), the same bytes as selecting them in its own training."""
    cfg = tiny_config()
    cfg["training"]["default"].update(select_epoch="best_val", epochs=8, lr_backbone=5e-2, lr_head=5e-2, batch_size=32,
                                      hidden_dim=128)
    bspec = plan.run_spec(cfg, "yeast", "clean", "BCE")
    bdir = run(yeast, bspec, tmp_path / "BCE")
    spec = plan.run_spec(cfg, "yeast", "clean", "LSFA")
    own = run(yeast, spec, tmp_path / "own")
    base = {**plan.base_run(cfg, spec, ("yeast", "clean", "BCE"), [0, 1]), "dir": str(bdir)}
    read = run(yeast, replace(spec, base_run=base), tmp_path / "read")
    kept = []
    for seed in (0, 1):
        same_outputs(own / f"seed{seed}", read / f"seed{seed}")
        sel = json.loads((read / f"seed{seed}" / "provenance.json").read_text())["epoch_selection"]
        assert sel == json.loads((bdir / f"seed{seed}" / "provenance.json").read_text())["epoch_selection"]
        kept.append(sel["epoch"])
    assert any(k < 8 for k in kept), kept  # the best epoch is not the last one: the test reads `best`
