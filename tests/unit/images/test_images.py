"""Image datasets: VOC2007 and COCO2014 loaders, archive safety, frozen features, transforms and
occlusion (cdgtmll.images.datasets / coco / features; the ResNet-50 itself:
tests/unit/nn/backbones/test_resnet.py)."""

from __future__ import annotations

import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from cdgtmll.data import acquire
from cdgtmll.data.acquire import fetch
from cdgtmll.data.coco import COCO_CATEGORIES, load_coco2014, read_instances
from cdgtmll.data.prepare import prepare
from cdgtmll.data.processed import ProcessedData
from cdgtmll.data.registry import get_spec
from cdgtmll.data.voc import VOC_CLASSES, read_voc_labels
from cdgtmll.images import datasets, ops
from cdgtmll.images.features import main as features_main
from tests.support.image_datasets import (
    fetched_in_place,
    jpeg_bytes,
    make_coco_mirror,
    make_voc_devkit,
    make_voc_tar,
    unverified_voc_spec,
    write_annotations_zip,
)
from tests.support.mirror import mirror_file

pytestmark = pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch, tmp_path):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))  # never the user's cache


@pytest.fixture
def voc_main(mirror) -> Path:
    return mirror_file(mirror, "voc2007/ImageSets/Main")


def _fetch_all(spec, raw: Path, mirror: Path) -> dict:
    return {f.name: fetch(spec, f, raw / spec.name, mirror=mirror, allow_download=False) for f in spec.files}


# --------------------------------------------------------------------------- VOC
def test_voc_full_official_labels_with_generated_jpegs(voc_main, tmp_path):
    """Real label files (sha256-verified through the registry) + 9,963 generated JPEGs in
    an extracted devkit in the mirror: the official sizes, labels and paths."""
    mir = tmp_path / "mirror"
    ids = make_voc_devkit(mir / "voc2007", voc_main)
    spec = get_spec("voc2007")
    assert spec.loader == "cdgtmll.images.datasets.load_voc2007" and len(spec.files) == 42
    fetched = _fetch_all(spec, tmp_path / "raw", mir)
    assert all(r.verified for r in fetched.values())
    tt = datasets.load_voc2007(spec, fetched)
    assert tt.Y_train.shape == (5011, 20) and tt.Y_test.shape == (4952, 20)
    assert tt.label_names == list(VOC_CLASSES)
    _, Ytr, Dtr = read_voc_labels(voc_main, "trainval")
    _, Yte, Dte = read_voc_labels(voc_main, "test")
    assert np.array_equal(tt.Y_train, Ytr) and np.array_equal(tt.Y_test, Yte)
    assert tt.X_train.dtype == np.float32 and tt.X_train.shape == (5011, 1)
    assert np.array_equal(np.concatenate([tt.X_train, tt.X_test])[:, 0], np.arange(9963))
    m = tt.meta
    assert m["x_kind"] == "image-row-id" and m["image_root"] == str((mir / "voc2007").absolute())
    assert m["image_paths"][0] == f"JPEGImages/{ids['trainval'][0]}.jpg"
    assert m["image_paths"][5011] == f"JPEGImages/{ids['test'][0]}.jpg" and len(m["image_paths"]) == 9963
    assert m["image_source"]["kind"] == "folder" and len(m["image_source"]["listing_sha256"]) == 64
    assert m["difficult"] == "negative" and len(m["difficult_entries"]) == int(Dtr.sum() + Dte.sum()) == 607 + 619
    r, c = m["difficult_entries"][0]
    assert tt.Y_train[r, c] == 0 and Dtr[r, c]
    pos = datasets.load_voc2007(spec, fetched, difficult="positive")
    assert int(pos.Y_train.sum()) == int(Ytr.sum() + Dtr.sum())
    with pytest.raises(ValueError, match="difficult must be one of"):
        datasets.load_voc2007(spec, fetched, difficult="drop")
    # a missing JPEG is named, with where we looked
    victim = mir / "voc2007" / "JPEGImages" / f"{ids['test'][7]}.jpg"
    victim.unlink()
    with pytest.raises(ops.ImageNotFoundError) as ei:
        datasets.load_voc2007(spec, fetched)
    assert str(victim) in str(ei.value) and "1 of 9963 missing" in str(ei.value)
    assert "VOCtest_06-Nov-2007.tar" in str(ei.value)  # the archive was looked for too


def test_voc_label_file_truncated_or_corrupt(voc_main, tmp_path):
    spec = get_spec("voc2007")
    root = tmp_path / "raw" / "voc2007"
    make_voc_devkit(root, voc_main, images=False)
    main = root / "ImageSets" / "Main"
    fetched = fetched_in_place(spec, root)
    dog = main / "dog_trainval.txt"
    raw = dog.read_bytes()
    dog.write_bytes(raw[:1004])  # cut inside a line
    with pytest.raises(ValueError, match=rf"{dog}:\d+: "):
        datasets.load_voc2007(spec, fetched)
    dog.write_bytes(b"".join(raw.splitlines(keepends=True)[:3000]))  # cut at a line end
    with pytest.raises(ValueError, match=rf"{dog}:3001: file ends after 3000 entries but trainval.txt lists 5011"):
        datasets.load_voc2007(spec, fetched)
    lines = raw.splitlines(keepends=True)
    lines[41] = b"000087 7\r\n"
    dog.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=rf"{dog}:42: unknown flag '7'"):
        datasets.load_voc2007(spec, fetched)


def test_voc_from_official_tars_and_unsafe_tars(voc_main, tmp_path):
    mir = tmp_path / "mirror"
    ids = make_voc_devkit(mir / "voc2007", voc_main, n={"trainval": 12, "test": 8}, images=False)
    spec = unverified_voc_spec(12, 8)
    make_voc_tar(mir / "voc2007" / "VOCtrainval_06-Nov-2007.tar", ids["trainval"])
    make_voc_tar(mir / "voc2007" / "VOCtest_06-Nov-2007.tar", ids["test"])
    fetched = _fetch_all(spec, tmp_path / "raw", mir)
    tt = datasets.load_voc2007(spec, fetched)
    raw_root = (tmp_path / "raw" / "voc2007").absolute()
    assert tt.meta["image_root"] == str(raw_root) and tt.meta["image_source"]["kind"] == "archives"
    assert [a["file"] for a in tt.meta["image_source"]["archives"]] == ["VOCtrainval_06-Nov-2007.tar",
                                                                        "VOCtest_06-Nov-2007.tar"]
    assert sorted(p.name for p in (raw_root / "JPEGImages").iterdir()) == sorted(f"{i}.jpg" for i in ids["trainval"] + ids["test"])
    assert not (raw_root / "Annotations").exists()  # only the needed images are extracted
    assert tt.Y_train.shape == (12, 20) and tt.Y_test.shape == (8, 20)
    # second load: the extracted images are found in the raw folder
    assert datasets.load_voc2007(spec, fetched).meta["image_source"]["kind"] == "folder"

    # path traversal / links are refused and nothing is written outside
    evil = make_voc_tar(tmp_path / "evil.tar", ids["test"][:1],
                        extra=[("VOCdevkit/VOC2007/JPEGImages/../../../../evil.jpg", b"x")])
    dest = tmp_path / "dest"
    with pytest.raises(ValueError, match=r"evil.tar: unsafe member .*\.\./evil.jpg"):
        datasets.extract_members(evil, dest, {f"JPEGImages/{ids['test'][0]}.jpg"}, "VOCdevkit/VOC2007/")
    assert not (tmp_path / "evil.jpg").exists() and not dest.exists()
    link = tarfile.TarInfo("VOCdevkit/VOC2007/JPEGImages/000001.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    bad = make_voc_tar(tmp_path / "link.tar", [], extra=[link])
    with pytest.raises(ValueError, match="is a link or special file"):
        datasets.extract_members(bad, dest, {"JPEGImages/000001.jpg"}, "VOCdevkit/VOC2007/")
    with pytest.raises(ValueError, match="absolute"):
        datasets.extract_members(make_voc_tar(tmp_path / "abs.tar", [], extra=[("/tmp/x.jpg", b"x")]), dest, set())


@pytest.mark.slow
def test_prepare_then_features_end_to_end(voc_main, tmp_path, capsys, monkeypatch):
    """prepare (30 images: real label lines, generated JPEGs) -> frozen ResNet-50
    features (random init, 64 px) -> a ProcessedData with 2048 columns."""
    mir = tmp_path / "mirror"
    ids = make_voc_devkit(mir / "voc2007", voc_main, n={"trainval": 20, "test": 10},
                          rng=np.random.default_rng(0))
    spec = unverified_voc_spec(20, 10)
    data = prepare(spec, tmp_path / "raw", tmp_path / "voc.npz", mirror=mir, allow_download=False, min_split_rows=1)
    assert "image_paths" in data.meta  # prepare merges the loader's meta
    data = ProcessedData.load(tmp_path / "voc.npz")
    assert data.X.shape == (30, 1) and datasets.is_image_rows(data)
    files = datasets.image_files(data)
    assert files[0].name == f"{ids['trainval'][0]}.jpg" and files[20].name == f"{ids['test'][0]}.jpg"
    Xte, _ = data.part("test")
    assert datasets.image_files(data, X=Xte) == files[20:]
    with pytest.raises(ValueError, match="X holds image row ids"):
        datasets.require_features(data, "BR-LogReg")

    rc = features_main(["--in", str(tmp_path / "voc.npz"), "--out", str(tmp_path / "feat.npz"),
                        "--image-size", "64", "--no-pretrained", "--batch-size", "16", "--device", "cpu"])
    assert rc == 0, capsys.readouterr().err
    assert "voc2007: 30 rows x 2048 features" in capsys.readouterr().out
    f = ProcessedData.load(tmp_path / "feat.npz")
    assert f.X.shape == (30, 2048) and f.X.dtype == np.float32 and np.isfinite(f.X).all()
    assert np.array_equal(f.Y, data.Y) and f.label_names == data.label_names
    assert all(np.array_equal(f.splits[s], data.splits[s]) for s in ("train", "val", "test"))
    assert f.meta["backbone_frozen"] is True and f.meta["backbone_weights_sha256"] == "random init"
    assert f.meta["image_size"] == 64 and f.meta["x_kind"] == "features" and "resnet50" in f.meta["backbone"]
    assert f.meta["features_from"]["sha256"] and f.meta["feature_amp"] == "off (float32)"
    assert not datasets.is_image_rows(f)
    datasets.require_features(f)
    assert np.abs(f.X[0] - f.X[1]).max() > 0  # different images, different features
    # --workers auto in a Slurm job of 3 CPUs: 2 DataLoader processes, the same features bit for bit
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    rc = features_main(["--in", str(tmp_path / "voc.npz"), "--out", str(tmp_path / "auto.npz"), "--image-size", "64",
                        "--no-pretrained", "--batch-size", "16", "--device", "cpu", "--workers", "auto"])
    err = capsys.readouterr().err
    assert rc == 0 and "2 DataLoader worker(s) (image_backbone.workers auto; 3 CPUs from SLURM_CPUS_PER_TASK)" in err, err
    assert np.array_equal(ProcessedData.load(tmp_path / "auto.npz").X, f.X)
    with pytest.raises(SystemExit):
        features_main(["--in", "x", "--out", "y", "--workers", "some"])
    assert "expected a non-negative integer or 'auto', got 'some'" in capsys.readouterr().err
    # pretrained without weights: a clear error naming the torchvision cache path
    rc = features_main(["--in", str(tmp_path / "voc.npz"), "--out", str(tmp_path / "f2.npz"), "--image-size", "64"])
    err = capsys.readouterr().err
    assert rc == 2 and str(tmp_path / "torch_home" / "hub" / "checkpoints" / "resnet50-0676ba61.pth") in err
    assert "--no-pretrained" in err and not (tmp_path / "f2.npz").exists()


# --------------------------------------------------------------------------- COCO
TRAIN = {9: [1, 18, 90], 25: [], 30: [25, 25], 34: [1]}  # image 25: no annotation
VAL = {42: [90], 73: [], 74: [13, 1]}


def test_coco_loader_on_generated_instances(tmp_path):
    mir = tmp_path / "mirror"
    make_coco_mirror(mir / "coco2014", TRAIN, VAL, crowd={34: [44]})
    spec = get_spec("coco2014")
    assert spec.loader == "cdgtmll.data.coco.load_coco2014"
    assert [f.name for f in spec.files] == ["annotations_trainval2014.zip"]
    spec = replace(spec, n_train=3, n_test=3)
    fetched = _fetch_all(spec, tmp_path / "raw", mir)
    tt = load_coco2014(spec, fetched)
    official_ids = [c[0] for c in COCO_CATEGORIES]
    assert len(official_ids) == 80 and tt.meta["category_ids"] == official_ids == sorted(official_ids)
    assert tt.label_names[0] == "person" and tt.label_names[79] == "toothbrush"
    col = {cid: j for j, cid in enumerate(official_ids)}
    # train: image 25 (no annotation) dropped; ascending image id; crowd counts
    assert tt.meta["image_ids"][:3] == [9, 30, 34] and tt.meta["image_ids"][3:] == [42, 73, 74]
    want_tr = np.zeros((3, 80), np.uint8)
    for r, cids in enumerate([[1, 18, 90], [25], [1, 44]]):
        want_tr[r, [col[c] for c in cids]] = 1
    assert np.array_equal(tt.Y_train, want_tr)
    assert tt.Y_test[1].sum() == 0 and tt.Y_test[2, col[13]] == 1 and tt.Y_test[0, col[90]] == 1
    assert tt.meta["image_paths"][0] == "train2014/COCO_train2014_000000000009.jpg"
    assert tt.meta["image_paths"][3] == "val2014/COCO_val2014_000000000042.jpg"
    assert tt.meta["image_root"] == str((mir / "coco2014").absolute())
    u = tt.meta["unlabeled"]
    assert u["train"] == {"images_in_json": 4, "without_annotation": 1, "dropped": 1}
    assert u["test"] == {"images_in_json": 3, "without_annotation": 1, "dropped": 0}
    assert tt.meta["annotation_index"].startswith("pycocotools ")
    assert np.array_equal(np.concatenate([tt.X_train, tt.X_test])[:, 0], np.arange(6))
    no_crowd = load_coco2014(spec, fetched, include_crowd=False)
    assert no_crowd.Y_train[2, col[44]] == 0
    with pytest.raises(ValueError, match="test split has 3 images after the unlabeled-image policy, expected 2"):
        load_coco2014(replace(spec, n_test=2), fetched)
    dropped = load_coco2014(replace(spec, n_test=None), fetched, drop_unlabeled_test=True)
    assert dropped.meta["image_ids"] == [9, 30, 34, 42, 74]


def test_coco_images_from_official_zips_and_missing(tmp_path):
    mir = tmp_path / "mirror"
    make_coco_mirror(mir / "coco2014", TRAIN, VAL, images="zips")
    spec = replace(get_spec("coco2014"), n_train=None, n_test=None)
    fetched = _fetch_all(spec, tmp_path / "raw", mir)
    tt = load_coco2014(spec, fetched)
    root = (tmp_path / "raw" / "coco2014").absolute()
    assert tt.meta["image_root"] == str(root) and tt.meta["image_source"]["kind"] == "archives"
    assert all((root / p).is_file() for p in tt.meta["image_paths"])
    (root / tt.meta["image_paths"][4]).unlink()
    assert load_coco2014(spec, fetched).meta["image_source"]["kind"] == "archives"  # re-extracted from the cached zip
    (root / tt.meta["image_paths"][4]).unlink()
    (mir / "coco2014" / "val2014.zip").unlink()
    (root / "val2014.zip").unlink()
    with pytest.raises(ops.ImageNotFoundError, match=r"image file missing: .*COCO_val2014_000000000073.jpg"):
        load_coco2014(spec, fetched)


def test_coco_corrupt_json_names_file_and_position(tmp_path):
    z = write_annotations_zip(tmp_path / "annotations_trainval2014.zip",
                              {"train": b'{"images": [{"id": 1,\n "file_name": "a.jpg"}, ]}', "test": b"{}"})
    with pytest.raises(ValueError) as ei:
        read_instances(z, "annotations/instances_train2014.json")
    msg = str(ei.value)
    assert f"{z}:annotations/instances_train2014.json: invalid JSON at line 2 column" in msg and "(char " in msg
    with pytest.raises(ValueError, match=r"no member 'annotations/instances_val2014.json'"):
        read_instances(write_annotations_zip(tmp_path / "b.zip", {"train": b"{}"}), "annotations/instances_val2014.json")
    notzip = tmp_path / "c.zip"
    notzip.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match=rf"{notzip}: corrupt zip archive"):
        read_instances(notzip, "annotations/instances_train2014.json")
    # schema errors name the file and the record
    from tests.support.image_datasets import coco_instances

    doc = coco_instances("train", {1: [3]})
    doc["annotations"][0]["category_id"] = 12  # an official gap
    bad = write_annotations_zip(tmp_path / "d.zip", {"train": doc, "test": coco_instances("test", {})})
    from cdgtmll.data.coco import image_labels

    with pytest.raises(ValueError, match=r"annotations\[0\] \(id 1\): category_id 12 is not a category"):
        image_labels(read_instances(bad, "annotations/instances_train2014.json"), "d.zip")


# --------------------------------------------------------------------------- transforms
def test_transforms_and_occlusion(tmp_path):
    from PIL import Image

    img = Image.new("RGB", (80, 60), (255, 255, 255))
    tr = ops.train_transform(48)
    assert tr(img).shape == (3, 48, 48)
    ev = ops.eval_transform(48)
    a, b = ev(img), ev(img)
    assert a.shape == (3, 48, 48) and torch.equal(a, b)
    # uint8 output + to_normalized (the fine-tuning pipeline) = ToTensor -> Normalize, exactly
    noisy = Image.fromarray(np.random.default_rng(0).integers(0, 255, (60, 80, 3), dtype=np.uint8))
    u8 = ops.eval_transform(48, normalize=False)(noisy)
    assert u8.dtype == torch.uint8 and torch.equal(ops.to_normalized(u8), ev(noisy))
    torch.manual_seed(1)
    ref = tr(noisy)
    torch.manual_seed(1)
    assert torch.equal(ops.to_normalized(ops.train_transform(48, normalize=False)(noisy)), ref)
    white = torch.ones(3, 50, 40)
    gamma = 0.1
    k = round((gamma * 50 * 40) ** 0.5)
    assert k == 14
    positions = set()
    for seed in range(6):
        out = ops.occlude(white, gamma, torch.Generator().manual_seed(seed))
        zero = (out == 0).all(dim=0)
        assert int(zero.sum()) == k * k and int((out == 0).sum()) == 3 * k * k
        rows, cols = torch.nonzero(zero, as_tuple=True)
        assert int(rows.max() - rows.min()) + 1 == k and int(cols.max() - cols.min()) + 1 == k
        positions.add((int(rows.min()), int(cols.min())))
        again = ops.occlude(white, gamma, torch.Generator().manual_seed(seed))
        assert torch.equal(out, again)
    assert len(positions) > 1 and torch.equal(white, torch.ones(3, 50, 40))  # input untouched
    assert torch.equal(ops.occlude(white, 0.0, torch.Generator()), white)
    assert int((ops.occlude(white, 1.0, torch.Generator()) == 0).sum()) == 3 * 40 * 40  # k clipped to min(H, W)
    with pytest.raises(ValueError, match="gamma"):
        ops.occlude(white, 1.5)
    # the fixed per-row patch of an occlusion variant: same row -> same patch, rows differ
    from torchvision.transforms.functional import pil_to_tensor

    from cdgtmll.images.trainer_input import occlude_image

    a0 = pil_to_tensor(occlude_image(img, 0.25, seed=1, row=0))
    k2 = round((0.25 * 80 * 60) ** 0.5)
    assert int((a0 == 0).all(dim=0).sum()) == k2 * k2
    assert torch.equal(pil_to_tensor(occlude_image(img, 0.25, seed=1, row=0)), a0)
    others = [pil_to_tensor(occlude_image(img, 0.25, seed=1, row=r)) for r in range(1, 6)]
    assert any(not torch.equal(o, a0) for o in others)
    assert occlude_image(img, 0.0, seed=1, row=0) is img
    # unreadable images name the file
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(ValueError, match=str(bad)):
        ops.load_image(bad)
    assert jpeg_bytes()[:2] == b"\xff\xd8"
