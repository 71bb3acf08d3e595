"""Generators of small image-dataset files: VOC devkit folders and tars, COCO instances JSON /
annotation zips, tiny JPEGs. Used by tests/unit/images/test_images.py and the VOC pipeline test
(tests/integration/pipeline/test_pipeline_images.py)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from cdgtmll.data.acquire import FetchResult
from cdgtmll.data.coco import ANNOTATIONS_ZIP, COCO_CATEGORIES, MEMBERS
from cdgtmll.data.registry import get_spec
from cdgtmll.data.voc import VOC_CLASSES
from cdgtmll.io import sha256_file

SPLITS = ("trainval", "test")


def jpeg_bytes(size: tuple[int, int] = (16, 12), color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A small RGB JPEG (``size`` = width, height)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def random_jpeg_bytes(rng: np.random.Generator, size: tuple[int, int] = (40, 32)) -> bytes:
    from PIL import Image

    a = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


# --------------------------------------------------------------------------- VOC
def label_file_names(split: str) -> list[str]:
    return [f"{split}.txt"] + [f"{c}_{split}.txt" for c in VOC_CLASSES]


def write_voc_labels(main_src: Path, main_dst: Path, n: dict[str, int] | None = None) -> dict[str, list[str]]:
    """Copy the 42 real ``ImageSets/Main`` label files from ``main_src`` to ``main_dst``;
    with ``n = {'trainval': k, 'test': m}`` keep only their first k / m entries (the
    real lines, CRLF kept). Returns the image ids of each split."""
    main_dst.mkdir(parents=True, exist_ok=True)
    ids = {}
    for split in SPLITS:
        for fname in label_file_names(split):
            src = main_src / fname
            if n is None:
                shutil.copyfile(src, main_dst / fname)
            else:
                lines = src.read_bytes().splitlines(keepends=True)[: n[split]]
                (main_dst / fname).write_bytes(b"".join(lines))
        ids[split] = (main_dst / f"{split}.txt").read_text().split()
    return ids


def write_jpegs(folder: Path, ids: Iterable[str], data: bytes | None = None, rng: np.random.Generator | None = None) -> None:
    """``folder/<id>.jpg`` for every id: the same ``data`` bytes (fast) or random images."""
    folder.mkdir(parents=True, exist_ok=True)
    data = data if data is not None or rng is not None else jpeg_bytes()
    for i in ids:
        (folder / f"{i}.jpg").write_bytes(data if rng is None else random_jpeg_bytes(rng))


def make_voc_devkit(root: Path, main_src: Path, n: dict[str, int] | None = None, images: bool = True,
                    rng: np.random.Generator | None = None) -> dict[str, list[str]]:
    """A VOC2007 folder ``root/{ImageSets/Main, JPEGImages}`` (the devkit's VOC2007/)."""
    ids = write_voc_labels(main_src, root / "ImageSets" / "Main", n)
    if images:
        write_jpegs(root / "JPEGImages", ids["trainval"] + ids["test"], rng=rng)
    return ids


def make_voc_tar(path: Path, ids: Sequence[str], extra: Sequence[tarfile.TarInfo | tuple[str, bytes]] = ()) -> Path:
    """An archive in the official layout: ``VOCdevkit/VOC2007/JPEGImages/<id>.jpg``
    (plus an Annotations stub); ``extra`` adds raw members (name, bytes) or TarInfos."""
    data = jpeg_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tf:
        def add(name: str, payload: bytes) -> None:
            ti = tarfile.TarInfo(name)
            ti.size = len(payload)
            tf.addfile(ti, io.BytesIO(payload))

        for i in ids:
            add(f"VOCdevkit/VOC2007/JPEGImages/{i}.jpg", data)
            add(f"VOCdevkit/VOC2007/Annotations/{i}.xml", b"<annotation/>")
        for e in extra:
            if isinstance(e, tarfile.TarInfo):
                tf.addfile(e)
            else:
                add(*e)
    return path


def unverified_voc_spec(n_train: int | None = None, n_test: int | None = None):
    """The registry's voc2007 spec with unknown hashes/sizes (for subset label files)."""
    spec = get_spec("voc2007")
    files = tuple(replace(f, sha256=None, size=None) for f in spec.files)
    return replace(spec, files=files, n_train=n_train, n_test=n_test)


def fetched_in_place(spec, dataset_dir: Path) -> dict[str, FetchResult]:
    """``fetched`` as ``prepare`` would pass it, pointing at files already in ``dataset_dir``
    (no copy, no checksum: for tests of malformed files)."""
    out = {}
    for f in spec.files:
        p = dataset_dir / f.name
        out[f.name] = FetchResult(p, sha256_file(p), "cached", str(p), p.stat().st_size, False)
    return out


# --------------------------------------------------------------------------- COCO
def coco_instances(split: str, labels: dict[int, list[int]], crowd: dict[int, list[int]] | None = None) -> dict:
    """A COCO instances document (exact schema of instances_*2014.json) with the 80
    official categories; ``labels``: image id -> category ids of its (non-crowd)
    annotations (an empty list = image without annotation); ``crowd``: iscrowd ones."""
    folder = "train2014" if split == "train" else "val2014"
    images, anns = [], []
    aid = 1
    for img_id in labels:
        images.append({"license": 1, "file_name": f"COCO_{folder}_{img_id:012d}.jpg",
                       "coco_url": f"http://images.cocodataset.org/{folder}/COCO_{folder}_{img_id:012d}.jpg",
                       "height": 12, "width": 16, "date_captured": "2013-11-14 16:28:13",
                       "flickr_url": "http://farm.example/x.jpg", "id": img_id})
        for kind, src in (("plain", labels), ("crowd", crowd or {})):
            for cid in src.get(img_id, []):
                anns.append({"segmentation": [[1.0, 1.0, 5.0, 1.0, 5.0, 5.0]], "area": 8.0,
                             "iscrowd": int(kind == "crowd"), "image_id": img_id,
                             "bbox": [1.0, 1.0, 4.0, 4.0], "category_id": cid, "id": aid})
                aid += 1
    return {
        "info": {"description": "fixture in the COCO 2014 instances schema", "url": "http://mscoco.org",
                 "version": "1.0", "year": 2014, "contributor": "tests", "date_created": "2015-01-27 09:11:52.357475"},
        "images": images,
        "licenses": [{"url": "http://creativecommons.org/licenses/by-nc-sa/2.0/", "id": 1,
                      "name": "Attribution-NonCommercial-ShareAlike License"}],
        "type": "instances",
        "annotations": anns,
        "categories": [{"supercategory": s, "id": i, "name": n} for i, n, s in COCO_CATEGORIES],
    }


def write_annotations_zip(path: Path, docs: dict[str, dict | bytes]) -> Path:
    """``annotations_trainval2014.zip`` with ``annotations/instances_{train,val}2014.json``
    (``docs``: 'train'/'test' -> dict, or raw bytes for corrupt members)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for split, doc in docs.items():
            zf.writestr(MEMBERS[split], doc if isinstance(doc, bytes) else json.dumps(doc))
    return path


def make_coco_mirror(folder: Path, train: dict[int, list[int]], val: dict[int, list[int]],
                     images: str = "folders", crowd: dict[int, list[int]] | None = None) -> dict[str, dict]:
    """``folder`` = ``<mirror>/coco2014``: the annotation zip and the images as extracted
    folders (``images='folders'``) or as train2014.zip / val2014.zip (``'zips'``)."""
    docs = {"train": coco_instances("train", train, crowd), "test": coco_instances("test", val)}
    write_annotations_zip(folder / ANNOTATIONS_ZIP, docs)
    data = jpeg_bytes()
    for split, sub in (("train", "train2014"), ("test", "val2014")):
        names = [im["file_name"] for im in docs[split]["images"]]
        if images == "folders":
            (folder / sub).mkdir(parents=True, exist_ok=True)
            for fn in names:
                (folder / sub / fn).write_bytes(data)
        else:
            with zipfile.ZipFile(folder / f"{sub}.zip", "w") as zf:
                for fn in names:
                    zf.writestr(f"{sub}/{fn}", data)
    return docs
