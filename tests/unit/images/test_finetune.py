"""End-to-end ResNet-50 fine-tuning on images (cdgtmll.images.trainer_input, the trainer's image
path, NeuralMethod on image rows), occlusion variants (cdgtmll.variants.occlusion) and the
scheduling rules for image datasets (cdgtmll.config.loader).

The images are generated (:func:`tests.support.finetune.make_image_data`): a 48 x 48 JPEG per
row whose label l, when present, paints quadrant l bright in one colour channel over dark
noise, so the labels are learnable from the pixels and from nothing else. The same runs on a
CUDA device, with each AMP mode, are in tests/cuda/test_cuda_finetune.py."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from sklearn.metrics import average_precision_score

from cdgtmll.config import loader
from cdgtmll.config import plan as cfgmod
from cdgtmll.data.processed import ProcessedData
from cdgtmll.images import trainer_input
from cdgtmll.images.features import extract_features
from cdgtmll.labels import tail_labels
from cdgtmll.methods import base
from cdgtmll.methods.base import FitData, RunContext
from cdgtmll.nn.trainer import TrainingInterrupted
from cdgtmll.train import run_seed
from cdgtmll.variants import naming, occlusion
from tests.support.finetune import IMG_CFG, TRAINING, L, N, make_image_data, spec

#: a test that fine-tunes the ResNet-50 (seconds each on a CPU, worker processes in one) is slow
FINETUNES = pytest.mark.slow


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> ProcessedData:
    return make_image_data(tmp_path_factory.mktemp("img") / "JPEGImages")


def _run(data, tmp, method, **training):
    out = tmp / method
    run_seed(data, tail_labels(data.part("train")[1]), spec(method, **training), 0, out, {}, False)
    return np.load(out / "predictions.npz"), json.loads((out / "provenance.json").read_text()), out


# ------------------------------------------------------------------------ input pipeline
@pytest.mark.slow
def test_augmented_batches_do_not_depend_on_workers_and_change_per_epoch(data):
    src = trainer_input.ImageSource.from_data(data)
    X_tr = data.part("train")[0]
    perm = torch.randperm(80, generator=torch.Generator().manual_seed(3))

    def batches(workers, epoch, train=True):
        inp = src.input(X_tr, train=train, image_size=32, seed=7, workers=workers)
        return [(p.clone(), x.clone()) for p, x in inp.iter_batches(perm, 16, epoch, torch.device("cpu"))]

    a, b = batches(0, 1), batches(2, 1)
    assert len(a) == 5 and all(torch.equal(p, q) and torch.equal(x, y) for (p, x), (q, y) in zip(a, b))
    assert torch.equal(torch.cat([p for p, _ in a]), perm)  # the trainer's permutation, in order
    assert a[0][1].shape == (16, 3, 32, 32)
    c = batches(0, 2)  # a new epoch draws new crops and flips
    assert not torch.equal(a[0][1], c[0][1])
    e1, e2 = batches(0, 1, train=False), batches(0, 2, train=False)  # eval: no randomness
    assert all(torch.equal(x, y) for (_, x), (_, y) in zip(e1, e2))
    # one input, persistent workers, passes of several epochs and an explicit batch plan
    inp = src.input(X_tr, train=True, image_size=32, seed=7, workers=2)
    cpu = torch.device("cpu")
    again = [x.clone() for _, x in inp.iter_batches(perm, 16, 1, cpu)]
    assert all(torch.equal(x, y) for x, (_, y) in zip(again, a))
    ep2 = [x.clone() for _, x in inp.iter_batches(perm, 16, 2, cpu)]  # epoch 2 through the same workers
    assert all(torch.equal(x, y) for x, (_, y) in zip(ep2, c))
    plan = [perm[:5], perm[5:9]]
    got = list(inp.iter_batches(plan, 999, 1, cpu))
    assert [p.tolist() for p, _ in got] == [perm[:5].tolist(), perm[5:9].tolist()]
    assert torch.equal(got[0][1], a[0][1][:5])  # same row, same epoch -> same crop, whatever the batch


def test_a_rows_crop_is_seeded_on_the_cpu_generator_alone(data, monkeypatch):
    """A training row's crop and flip are those of ``torch.manual_seed(seed of (seed, epoch,
    row))``, bit for bit, but no other device's generator is seeded (CUDA's drives the model's
    randomness in the same process) and the global CPU generator is left as it was."""
    src = trainer_input.ImageSource.from_data(data)
    rows = trainer_input._Rows(src.input(data.part("train")[0], train=True, image_size=32, seed=7, workers=0))
    torch.manual_seed(123)
    state = torch.get_rng_state()
    seeded = []
    for dev in ("cuda", "xpu", "mtia"):
        module = getattr(torch, dev)
        monkeypatch.setattr(module, "manual_seed_all", lambda s, dev=dev: seeded.append(dev), raising=False)
    got = [rows[(epoch, pos)][0] for epoch in (1, 2) for pos in (0, 5)]
    assert seeded == [] and torch.equal(torch.get_rng_state(), state)
    for (epoch, pos), x in zip([(e, p) for e in (1, 2) for p in (0, 5)], got):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(trainer_input._seed_of(7, epoch, int(rows.rows[pos])))
            want = rows.transform(trainer_input.load_image(rows.files[pos]))
        assert torch.equal(x, want)
    assert not torch.equal(got[0], got[2])  # epoch 2 draws another crop of row 0


def test_image_source_occludes_training_rows_only(data):
    occ_data, book = occlusion.apply_to_dataset(data, 0.3, 1)
    src = trainer_input.ImageSource.from_data(occ_data)
    assert src.occlusion == trainer_input.Occlusion(0.3, 1) and book["n_occluded_images"] == 80
    X_tr, X_va = occ_data.part("train")[0], occ_data.part("val")[0]
    assert src.input(X_tr, train=True, image_size=32).occlusion == trainer_input.Occlusion(0.3, 1)
    assert src.input(X_va, train=False, image_size=32).occlusion is None
    with pytest.raises(ValueError, match="row id out of range"):
        src.input(np.array([[N + 5]], dtype=np.float32), train=False, image_size=32)


# ------------------------------------------------------------------------ training
@FINETUNES
def test_finetuning_learns_from_pixels_and_records_the_backbone(data, tmp_path):
    pred, prov, out = _run(data, tmp_path, "BCE")
    Y_test = data.part("test")[1]
    ap = [average_precision_score(Y_test[:, k], pred["test"][:, k]) for k in range(L)]
    # chance AP = prevalence (about 0.34 on average); the pixels carry every label
    assert np.mean(ap) > Y_test.mean() + 0.25, ap
    assert prov["backbone"]["frozen"] is False and prov["backbone"]["mode"] == "finetune"
    assert prov["backbone"]["weights_sha256"] == "random init" and prov["backbone"]["amp"] is None
    ck = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)
    digest = ck["fingerprint_obj"]["data"][0]
    assert digest[0] == 80 and digest[2] == "train" and digest[3] == 32  # image list, not an array hash
    assert ck["fingerprint_obj"]["task"]["backbone"]["weights_sha256"] == "random init"


@FINETUNES
def test_finetuning_is_bit_identical_and_resumes_exactly(data, tmp_path):
    p1, _, _ = _run(data, tmp_path / "a", "CD-GTMLL", epochs=2)
    p2, _, _ = _run(data, tmp_path / "b", "CD-GTMLL", epochs=2)
    assert np.array_equal(p1["test"], p2["test"]) and np.array_equal(p1["val"], p2["val"])
    # interrupted after epoch 1, then resumed from the checkpoint: same predictions
    m = base.build("CD-GTMLL", {k: v for k, v in TRAINING.items() if k != "backbone"} | {"epochs": 2})
    src = trainer_input.ImageSource.from_data(data)
    (X_tr, Y_tr), (X_va, Y_va) = data.part("train"), data.part("val")
    fit = FitData(X_tr, Y_tr, X_va, Y_va, data.label_names, images=src)
    ctx = RunContext(seed=0, workdir=tmp_path / "c", device="cpu",
                     extra={"training": TRAINING, "image_backbone": IMG_CFG, "_stop_after_epoch": 1})
    with pytest.raises(TrainingInterrupted):
        m.fit(fit, ctx)
    ctx.extra.pop("_stop_after_epoch")
    m2 = base.build("CD-GTMLL", {k: v for k, v in TRAINING.items() if k != "backbone"} | {"epochs": 2})
    m2.fit(fit, ctx)
    assert np.array_equal(m2.predict_proba(data.part("test")[0]), p1["test"])


@FINETUNES
def test_changed_image_file_invalidates_the_checkpoint(tmp_path):
    d = make_image_data(tmp_path / "imgs", seed=1)
    _run(d, tmp_path / "r1", "BCE", epochs=1)
    ck1 = torch.load(tmp_path / "r1/BCE/checkpoint.pt", map_location="cpu", weights_only=False)["fingerprint"]
    f = Path(d.meta["image_root"]) / d.meta["image_paths"][3]  # a training image
    Image.new("RGB", (64, 64), (1, 2, 3)).save(f)
    (tmp_path / "r1/BCE/predictions.npz").unlink()  # the run is redone; its checkpoint must not be resumed
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _run(d, tmp_path / "r1", "BCE", epochs=1)
    ck2 = torch.load(tmp_path / "r1/BCE/checkpoint.pt", map_location="cpu", weights_only=False)["fingerprint"]
    assert ck1 != ck2 and any("ignoring checkpoint" in str(x.message) for x in w)


def test_vector_methods_refuse_image_rows(data, tmp_path):
    with pytest.raises(ValueError, match="BR-LogReg needs feature vectors"):
        run_seed(data, tail_labels(data.part("train")[1]), spec("BR-LogReg"), 0, tmp_path / "x", {}, False)
    assert not (tmp_path / "x" / "predictions.npz").exists()
    for name in ("BalanceMix", "MLBOTE", "LSFA", "LCIFS"):
        assert base.image_input_reason(base.build(name, {})) is not None, name
    for name in ["BCE", "CD-GTMLL", *IMAGE_METHODS]:
        assert base.image_input_reason(base.build(name, {})) is None, name


IMAGE_METHODS = ["ASL", "DBL", "Focal", "CB", "LDAM", "LogitAdj", "PE", "SRB", "ETU", "CC", "ML-GCN", "C-Tran",
                 "ML-Decoder", "MLC-NC"]


@FINETUNES
@pytest.mark.parametrize("method", IMAGE_METHODS)
def test_other_image_capable_methods_train_on_images(data, tmp_path, method):
    pred, prov, _ = _run(data, tmp_path, method, epochs=1)
    assert pred["test"].shape == (20, L) and np.isfinite(pred["test"]).all()
    assert prov["backbone"]["frozen"] is False


@FINETUNES
def test_workers_do_not_change_a_run(data, tmp_path, monkeypatch):
    """MLC-NC draws its own class-aware batches (trainer hook ``epoch_batches``); with 2
    persistent DataLoader workers the whole run is bit-identical to decoding in-process. The 2
    come from ``workers: auto`` (as the train rule passes it, in the environment) in a Slurm job
    of 3 CPUs, and the provenance records them; the run spec is the same."""
    monkeypatch.delenv(trainer_input.WORKERS_ENV, raising=False)
    p0, prov0, _ = _run(data, tmp_path / "w0", "MLC-NC", epochs=2)
    assert prov0["backbone"]["loader_workers"] == {"setting": 0, "workers": 0, "cpus": None, "cpus_from": None}
    monkeypatch.setenv(trainer_input.WORKERS_ENV, "auto")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    p2, prov, _ = _run(data, tmp_path / "w2", "MLC-NC", epochs=2)
    differs = {k for k in prov["config"].keys() | prov0["config"].keys() if prov["config"].get(k) != prov0["config"].get(k)}
    assert not differs and "workers" not in prov["config"]["image_backbone"], differs
    assert prov["backbone"]["loader_workers"] == {"setting": "auto", "workers": 2, "cpus": 3,
                                                  "cpus_from": "SLURM_CPUS_PER_TASK"}
    assert np.array_equal(p0["test"], p2["test"]) and np.array_equal(p0["val"], p2["val"])


def test_the_workers_setting_comes_from_the_train_rule_and_bad_values_name_themselves():
    assert trainer_input.workers_setting({}) == 0  # fitted in-process: decode in the training process
    assert trainer_input.workers_setting({trainer_input.WORKERS_ENV: "auto"}) == "auto"
    assert trainer_input.workers_setting({trainer_input.WORKERS_ENV: "3"}) == 3
    with pytest.raises(ValueError, match="CDGTMLL_LOADER_WORKERS='-1'.*non-negative integer or 'auto'"):
        trainer_input.workers_setting({trainer_input.WORKERS_ENV: "-1"})


def test_auto_workers_are_the_jobs_cpus_minus_one(monkeypatch):
    """``auto``: SLURM_CPUS_PER_TASK (what a Slurm job asked for) minus one, else the CPUs this
    process may run on minus one, never below 0; an integer as given; bad values name themselves."""
    assert trainer_input.resolve_workers("auto", {"SLURM_CPUS_PER_TASK": "10"})["workers"] == 9
    assert trainer_input.resolve_workers("auto", {"SLURM_CPUS_PER_TASK": "1"})["workers"] == 0
    here = len(os.sched_getaffinity(0))
    assert trainer_input.resolve_workers("auto", {}) == {"setting": "auto", "workers": max(0, here - 1), "cpus": here,
                                                         "cpus_from": "sched_getaffinity"}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert trainer_input.resolve_workers("auto", {})["workers"] == 0
    assert trainer_input.resolve_workers(4, {"SLURM_CPUS_PER_TASK": "10"})["workers"] == 4
    with pytest.raises(ValueError, match="SLURM_CPUS_PER_TASK='two'"):
        trainer_input.resolve_workers("auto", {"SLURM_CPUS_PER_TASK": "two"})
    with pytest.raises(ValueError, match="image_backbone.workers"):
        trainer_input.resolve_workers(-1, {})


# ------------------------------------------------------------------------ occlusion + features
def test_occlusion_variant_and_frozen_features(data, tmp_path):
    occ, book = occlusion.apply_to_dataset(data, 0.3, 0)
    assert occ.meta["occlusion"] == {"gamma": 0.3, "seed": 0, "split": "train"} and np.array_equal(occ.Y, data.Y)
    assert book["variant_id"] == "O0.30-s0"
    with pytest.raises(ValueError, match="already a variant"):
        occlusion.apply_to_dataset(occ, 0.1, 0)
    tab = ProcessedData("tab", np.zeros((3, 2), np.float32), np.zeros((3, 1), np.uint8), ["a"],
                        {"train": np.arange(2), "val": np.arange(2, 3), "test": np.arange(0)})
    with pytest.raises(ValueError, match="needs an image dataset"):
        occlusion.apply_to_dataset(tab, 0.1, 0)
    # CLI: bad input names the file and leaves nothing behind
    bad = tmp_path / "tab.npz"
    tab.save(bad)
    assert occlusion.main(["--in", str(bad), "--gamma", "0.1", "--seed", "0", "--out", str(tmp_path / "o.npz"),
                           "--bookkeeping", str(tmp_path / "o.json")]) == 2
    assert not (tmp_path / "o.npz").exists() and not (tmp_path / "o.json").exists()

    kw = dict(image_size=32, pretrained=False, batch_size=32, device="cpu")
    clean_f, occ_f = extract_features(data, **kw), extract_features(occ, **kw)
    tr = data.splits["train"]
    rest = np.concatenate([data.splits["val"], data.splits["test"]])
    assert np.array_equal(clean_f.X[rest], occ_f.X[rest])  # validation and test images stay clean
    assert (np.abs(clean_f.X[tr] - occ_f.X[tr]).max(axis=1) > 0).all()  # every training image occluded
    assert occ_f.meta["occluded_training_images"] == {"gamma": 0.3, "seed": 0}


# ------------------------------------------------------------------------ scheduling
def test_config_schedules_image_datasets(tmp_path):
    base_cfg = loader.load("config/config.yaml", {
        "experiments": {"datasets": ["voc2007"], "methods": ["BCE", "BR-LogReg", "MLBOTE", "CD-GTMLL"]},
        "training": {"voc2007": {"backbone": "resnet50"}},
        "studies": {"occlusion": {"dataset": "voc2007", "levels": [0.1, 0.3], "methods": ["CD-GTMLL"]}},
    })
    assert base_cfg["image_backbone"]["mode"] == "finetune"
    assert cfgmod.finetunes_images(base_cfg, "voc2007") and not cfgmod.finetunes_images(base_cfg, "yeast")
    assert cfgmod.not_runnable(base_cfg, "voc2007", "BCE") is None
    assert "needs feature vectors" in cfgmod.not_runnable(base_cfg, "voc2007", "BR-LogReg")
    assert "needs feature vectors" in cfgmod.not_runnable(base_cfg, "voc2007", "MLBOTE")
    assert cfgmod.not_runnable(base_cfg, "yeast", "BR-LogReg") is None
    s = cfgmod.run_spec(base_cfg, "voc2007", "clean", "BCE")
    assert s.image_backbone["mode"] == "finetune" and cfgmod.run_spec(
        base_cfg, "yeast", "clean", "BCE").image_backbone is None
    occ_jobs = cfgmod.study_jobs(base_cfg)["occlusion"]
    assert [v for _, v, _ in occ_jobs] == ["clean", "O0.10-s0", "O0.30-s0"]
    assert naming.variant_setting("O0.30-s0") == "O@0.30" and naming.parse_occlusion("O0.30-s2") == (0.3, 2)
    frozen = loader.load("config/config.yaml", {
        "experiments": {"datasets": ["voc2007"], "methods": ["BR-LogReg"]},
        "training": {"voc2007": {"backbone": "resnet50"}}, "image_backbone": {"mode": "frozen"}})
    assert cfgmod.not_runnable(frozen, "voc2007", "BR-LogReg") is None
