"""MS-COCO 2014 as a multi-label image dataset (Lin et al., "Microsoft COCO: Common
Objects in Context", ECCV 2014).

Source: ``annotations_trainval2014.zip`` (http://images.cocodataset.org/annotations/),
members ``annotations/instances_train2014.json`` (official train, 82,783 images) and
``annotations/instances_val2014.json`` (official val, 40,504 images; used as the test
split, as in the paper and ML-GCN/ASL). Schema (COCO "instances" format): top-level
``info``, ``images`` (``id``, ``file_name``, ``width``, ``height``, ...),
``annotations`` (``id``, ``image_id``, ``category_id``, ``iscrowd``, ``bbox``,
``segmentation``, ``area``), ``categories`` (``id``, ``name``, ``supercategory``);
80 categories with ids 1..90 (ids 12, 26, 29, 30, 45, 66, 68, 69, 71, 83 unused).

Labels: image ``i`` has label ``k`` iff at least one instance annotation of category
``k`` refers to it (crowd annotations included, ``include_crowd=True``, as in ML-GCN's
preprocessing). Label index order: **ascending COCO category id** (label 0 = id 1
'person', label 79 = id 90 'toothbrush'); ``meta['category_ids']`` maps index -> id.
Label names are the JSON's category names. Rows: ascending image id within each split.

Images without any instance annotation:

* train: **dropped** (default ``drop_unlabeled_train=True``): 82,783 - 702 = 82,081
  images, the paper's training-set size (registry ``n_train``). They carry no label
  information for a multi-label model.
* val (= test): **kept** (default ``drop_unlabeled_test=False``) with an all-zero label
  row, so the test split is the paper's full 40,504 images (registry ``n_test``); they
  only add negatives to every label's ranking.

``meta['unlabeled']`` records the counts in the JSON and how many were dropped/kept.
The annotation JSON is read with ``json`` (errors name the archive member, line,
column and character position) and indexed with pycocotools' ``COCO`` when it is
installed (``annotation_index`` in meta says which), else with plain Python.

Images: ``train2014/<file_name>`` and ``val2014/<file_name>`` under an image root
found as in :mod:`cdgtmll.images.datasets` (raw folder, extracted copy in
``<mirror>/coco2014/``, or the official ``train2014.zip`` / ``val2014.zip``, extracted
into ``<raw>/coco2014/``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from cdgtmll.data.registry import RemoteFile
from cdgtmll.images.datasets import X_KIND, ArchiveSource, ImageTrainTest, locate_images, mirror_roots, row_ids

ANNOTATIONS_ZIP = "annotations_trainval2014.zip"
MEMBERS = {"train": "annotations/instances_train2014.json", "test": "annotations/instances_val2014.json"}
IMAGE_FOLDERS = {"train": "train2014", "test": "val2014"}

#: the image archives (not in the registry's ``files``: ``prepare`` would then require
#: 19 GB even when an extracted copy is in the mirror); fetched by the loader on demand.
IMAGE_ARCHIVES = {
    "train": RemoteFile(
        name="train2014.zip",
        urls=("http://images.cocodataset.org/zips/train2014.zip",),
        role="images-train",
        manual="sha256 unknown: not published",
    ),
    "test": RemoteFile(
        name="val2014.zip",
        urls=("http://images.cocodataset.org/zips/val2014.zip",),
        role="images-test",
        manual="sha256 unknown: not published",
    ),
}

#: official categories (id, name, supercategory) of instances_*2014.json
COCO_CATEGORIES: tuple[tuple[int, str, str], ...] = (
    (1, "person", "person"), (2, "bicycle", "vehicle"), (3, "car", "vehicle"), (4, "motorcycle", "vehicle"),
    (5, "airplane", "vehicle"), (6, "bus", "vehicle"), (7, "train", "vehicle"), (8, "truck", "vehicle"),
    (9, "boat", "vehicle"), (10, "traffic light", "outdoor"), (11, "fire hydrant", "outdoor"),
    (13, "stop sign", "outdoor"), (14, "parking meter", "outdoor"), (15, "bench", "outdoor"),
    (16, "bird", "animal"), (17, "cat", "animal"), (18, "dog", "animal"), (19, "horse", "animal"),
    (20, "sheep", "animal"), (21, "cow", "animal"), (22, "elephant", "animal"), (23, "bear", "animal"),
    (24, "zebra", "animal"), (25, "giraffe", "animal"), (27, "backpack", "accessory"),
    (28, "umbrella", "accessory"), (31, "handbag", "accessory"), (32, "tie", "accessory"),
    (33, "suitcase", "accessory"), (34, "frisbee", "sports"), (35, "skis", "sports"),
    (36, "snowboard", "sports"), (37, "sports ball", "sports"), (38, "kite", "sports"),
    (39, "baseball bat", "sports"), (40, "baseball glove", "sports"), (41, "skateboard", "sports"),
    (42, "surfboard", "sports"), (43, "tennis racket", "sports"), (44, "bottle", "kitchen"),
    (46, "wine glass", "kitchen"), (47, "cup", "kitchen"), (48, "fork", "kitchen"), (49, "knife", "kitchen"),
    (50, "spoon", "kitchen"), (51, "bowl", "kitchen"), (52, "banana", "food"), (53, "apple", "food"),
    (54, "sandwich", "food"), (55, "orange", "food"), (56, "broccoli", "food"), (57, "carrot", "food"),
    (58, "hot dog", "food"), (59, "pizza", "food"), (60, "donut", "food"), (61, "cake", "food"),
    (62, "chair", "furniture"), (63, "couch", "furniture"), (64, "potted plant", "furniture"),
    (65, "bed", "furniture"), (67, "dining table", "furniture"), (70, "toilet", "furniture"),
    (72, "tv", "electronic"), (73, "laptop", "electronic"), (74, "mouse", "electronic"),
    (75, "remote", "electronic"), (76, "keyboard", "electronic"), (77, "cell phone", "electronic"),
    (78, "microwave", "appliance"), (79, "oven", "appliance"), (80, "toaster", "appliance"),
    (81, "sink", "appliance"), (82, "refrigerator", "appliance"), (84, "book", "indoor"),
    (85, "clock", "indoor"), (86, "vase", "indoor"), (87, "scissors", "indoor"), (88, "teddy bear", "indoor"),
    (89, "hair drier", "indoor"), (90, "toothbrush", "indoor"),
)  # fmt: skip


# --------------------------------------------------------------------------- reading
def _decode(raw: bytes, where: str) -> dict:
    try:
        d = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{where}: invalid JSON at line {exc.lineno} column {exc.colno} (char {exc.pos}): {exc.msg}"
        ) from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text at byte {exc.start}: {exc.reason}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{where}: top level is a JSON {type(d).__name__}, expected an object")
    return d


def read_instances(archive: str | os.PathLike, member: str) -> dict:
    """The parsed COCO instances JSON ``member`` of zip ``archive``; errors name the
    archive, the member and (for malformed JSON) line, column and character position."""
    archive = Path(archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            try:
                raw = zf.read(member)
            except KeyError:
                names = [n for n in zf.namelist() if n.endswith(".json")]
                raise ValueError(f"{archive}: no member {member!r} (JSON members: {', '.join(names) or 'none'})") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise ValueError(f"{archive}: corrupt zip archive: {exc}") from None
    except OSError as exc:
        raise ValueError(f"{archive}: cannot read: {exc}") from None
    return _decode(raw, f"{archive}:{member}")


def _validate(d: Mapping[str, Any], where: str) -> None:
    for key in ("images", "annotations", "categories"):
        if not isinstance(d.get(key), list):
            raise ValueError(f"{where}: field '{key}' missing or not a list (not a COCO instances file?)")
    for k, im in enumerate(d["images"]):
        if not isinstance(im, dict) or not isinstance(im.get("id"), int) or not isinstance(im.get("file_name"), str):
            raise ValueError(f"{where}: images[{k}] lacks an integer 'id' or a string 'file_name'")
        fn = im["file_name"]
        if not fn or PurePosixPath(fn).name != fn or fn in (".", ".."):
            raise ValueError(f"{where}: images[{k}] (id {im['id']}): file_name {fn!r} is not a plain file name")
    for k, c in enumerate(d["categories"]):
        if not isinstance(c, dict) or not isinstance(c.get("id"), int) or not isinstance(c.get("name"), str):
            raise ValueError(f"{where}: categories[{k}] lacks an integer 'id' or a string 'name'")
    img_ids = [im["id"] for im in d["images"]]
    if len(set(img_ids)) != len(img_ids):
        raise ValueError(f"{where}: duplicate image ids")
    cat_ids = [c["id"] for c in d["categories"]]
    if len(set(cat_ids)) != len(cat_ids):
        raise ValueError(f"{where}: duplicate category ids")
    imgs, cats = set(img_ids), set(cat_ids)
    for k, a in enumerate(d["annotations"]):
        if not isinstance(a, dict):
            raise ValueError(f"{where}: annotations[{k}] is not an object")
        if a.get("image_id") not in imgs:
            raise ValueError(f"{where}: annotations[{k}] (id {a.get('id')}): image_id {a.get('image_id')!r} "
                             "is not an image of this file")
        if a.get("category_id") not in cats:
            raise ValueError(f"{where}: annotations[{k}] (id {a.get('id')}): category_id "
                             f"{a.get('category_id')!r} is not a category of this file")


def _annotations_by_image(d: dict) -> tuple[dict[int, list[dict]], str]:
    """image id -> its annotations, with pycocotools' index when installed."""
    try:
        from importlib.metadata import version

        from pycocotools.coco import COCO
    except ImportError:
        by: dict[int, list[dict]] = {im["id"]: [] for im in d["images"]}
        for a in d["annotations"]:
            by[a["image_id"]].append(a)
        return by, "json (pycocotools not installed)"
    coco = COCO()
    coco.dataset = d
    with contextlib.redirect_stdout(io.StringIO()):  # createIndex prints progress
        coco.createIndex()
    return coco.imgToAnns, f"pycocotools {version('pycocotools')}"


def image_labels(d: dict, where: str, include_crowd: bool = True) -> dict[str, Any]:
    """Image-level labels of one parsed instances file: ``image_ids`` (ascending),
    ``file_names``, ``Y`` uint8 ``[n, C]`` (columns in ascending category id),
    ``category_ids``, ``category_names``, ``index`` (which indexer was used)."""
    _validate(d, where)
    cats = sorted(d["categories"], key=lambda c: c["id"])
    col = {c["id"]: j for j, c in enumerate(cats)}
    imgs = sorted(d["images"], key=lambda im: im["id"])
    by, index = _annotations_by_image(d)
    Y = np.zeros((len(imgs), len(cats)), dtype=np.uint8)
    for i, im in enumerate(imgs):
        for a in by.get(im["id"], ()):
            if include_crowd or not a.get("iscrowd", 0):
                Y[i, col[a["category_id"]]] = 1
    return {
        "image_ids": [im["id"] for im in imgs],
        "file_names": [im["file_name"] for im in imgs],
        "Y": Y,
        "category_ids": [c["id"] for c in cats],
        "category_names": [c["name"] for c in cats],
        "index": index,
    }


# --------------------------------------------------------------------------- loader
def load_coco2014(
    spec: Any,
    fetched: Mapping[str, Any],
    *,
    drop_unlabeled_train: bool = True,
    drop_unlabeled_test: bool = False,
    include_crowd: bool = True,
    image_root: str | os.PathLike | None = None,
    mirror: str | os.PathLike | None = None,
    allow_download: bool = False,
) -> ImageTrainTest:
    """Loader for ``coco-json`` (``DatasetSpec.loader``): official train2014 -> train,
    val2014 -> test (module docstring for labels, order and unlabeled images). Sizes
    are checked against ``spec.n_train`` (with the default train policy) and
    ``spec.n_test`` (with the default test policy) when the spec has them."""
    try:
        ann = fetched[ANNOTATIONS_ZIP].path
    except KeyError:
        raise ValueError(f"dataset '{spec.name}': {ANNOTATIONS_ZIP} was not fetched") from None
    drop = {"train": drop_unlabeled_train, "test": drop_unlabeled_test}
    parts: dict[str, dict[str, Any]] = {}
    unlabeled: dict[str, Any] = {"policy": {"train": "drop" if drop_unlabeled_train else "keep (all-zero row)",
                                            "test": "drop" if drop_unlabeled_test else "keep (all-zero row)"}}
    for split, member in MEMBERS.items():
        where = f"{ann}:{member}"
        p = image_labels(read_instances(ann, member), where, include_crowd)
        none = p["Y"].sum(axis=1) == 0
        unlabeled[split] = {"images_in_json": len(p["image_ids"]), "without_annotation": int(none.sum()),
                            "dropped": int(none.sum()) if drop[split] else 0}
        if drop[split]:
            keep = np.flatnonzero(~none)
            p["Y"] = p["Y"][keep]
            p["image_ids"] = [p["image_ids"][i] for i in keep]
            p["file_names"] = [p["file_names"][i] for i in keep]
        parts[split] = p
    tr, te = parts["train"], parts["test"]
    if tr["category_ids"] != te["category_ids"] or tr["category_names"] != te["category_names"]:
        raise ValueError(f"{ann}: {MEMBERS['train']} and {MEMBERS['test']} declare different categories")
    L = len(tr["category_ids"])
    if spec.n_labels is not None and L != spec.n_labels:
        raise ValueError(f"{ann}: {L} categories, registry expects {spec.n_labels}")
    for split, want, policy in (("train", spec.n_train, drop_unlabeled_train), ("test", spec.n_test, not drop_unlabeled_test)):
        got = len(parts[split]["image_ids"])
        if want is not None and policy and got != want:
            raise ValueError(f"{ann}:{MEMBERS[split]}: {split} split has {got} images after the unlabeled-image "
                             f"policy, expected {want}")

    rel = {s: [f"{IMAGE_FOLDERS[s]}/{fn}" for fn in parts[s]["file_names"]] for s in MEMBERS}
    raw_root = Path(ann).parent  # <raw>/coco2014
    mirrors = mirror_roots(mirror, fetched, 1)
    candidates = [Path(image_root)] if image_root is not None else []
    candidates.append(raw_root)
    candidates += [m / spec.folder for m in mirrors]
    archives = [ArchiveSource(IMAGE_ARCHIVES[s], "", rel[s]) for s in MEMBERS]
    root, source = locate_images(spec, rel["train"] + rel["test"], candidates, raw_root, archives,
                                 mirror=mirrors[0] if mirrors else None, allow_download=allow_download)
    ntr, nte = len(rel["train"]), len(rel["test"])
    meta = {
        "x_kind": X_KIND,
        "image_root": str(root),
        "image_paths": rel["train"] + rel["test"],
        "image_ids": tr["image_ids"] + te["image_ids"],
        "image_source": source,
        "category_ids": tr["category_ids"],
        "label_order": "ascending COCO category id",
        "include_crowd": include_crowd,
        "unlabeled": unlabeled,
        "annotation_index": tr["index"],
    }
    return ImageTrainTest(row_ids(0, ntr), tr["Y"], row_ids(ntr, nte), te["Y"], list(tr["category_names"]),
                          ["row_id"], "coco-json", meta=meta)
