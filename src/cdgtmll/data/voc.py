"""Reader for PASCAL VOC2007 image-level labels (``VOCdevkit/VOC2007/ImageSets/Main``).

Files read:

* ``<split>.txt`` -- one image id per line (the split's image list, in order);
* ``<class>_<split>.txt`` -- ``"<image_id> <flag>"`` per line for each of the 20
  classes, with flag ``1`` (present), ``-1`` (absent) or ``0`` ("difficult": the
  class only occurs as objects marked difficult).

Difficult handling (``difficult=``):

* ``"negative"`` (default): a difficult entry is absent, ``y = 0``. This is what
  multi-label VOC pipelines evaluate in practice: ML-GCN / ASL-style loaders keep
  ``0`` as a third state, mask it out of the loss, and the usual mAP code scores it
  as a non-positive; a label matrix for plain 0/1 training then has 0 there.
* ``"positive"``: ``y = 1`` (the class is visibly present, just hard).
* ``"ignore"``: ``Y`` is the same as ``"negative"`` (0 at difficult entries) and the
  caller is expected to exclude the entries flagged in the returned ``difficult``
  mask from its loss / metrics, as the official VOC detection protocol does.

The returned ``difficult`` mask is the same in all three modes. The official split
sizes are 5011 images (trainval) and 4952 (test). Files may use CRLF line endings;
blank lines are skipped (line numbers in errors are physical, 1-based).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: the 20 VOC classes in the official (devkit) order
VOC_CLASSES: tuple[str, ...] = (
    "aeroplane", "bicycle", "bird", "boat", "bottle",
    "bus", "car", "cat", "chair", "cow",
    "diningtable", "dog", "horse", "motorbike", "person",
    "pottedplant", "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip
DIFFICULT_MODES = ("negative", "positive", "ignore")
_FLAGS = {"1": 1, "-1": -1, "0": 0}


def _lines(path: Path) -> list[tuple[int, str]]:
    """(1-based line number, stripped text) of the non-blank lines of ``path``."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: VOC label file not found")
    with open(path, encoding="ascii", newline=None) as fh:
        text = fh.read()
    return [(i, ln.strip()) for i, ln in enumerate(text.splitlines(), start=1) if ln.strip()]


def read_image_list(main_dir: str | os.PathLike, split: str) -> list[str]:
    """Image ids of ``<split>.txt`` in file order; duplicates or extra tokens are errors."""
    path = Path(main_dir) / f"{split}.txt"
    ids: list[str] = []
    for lineno, line in _lines(path):
        toks = line.split()
        if len(toks) != 1:
            raise ValueError(f"{path}:{lineno}: malformed line {line!r}: expected one image id")
        ids.append(toks[0])
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"{path}: image id {dup!r} listed more than once")
    if not ids:
        raise ValueError(f"{path}: empty image list")
    return ids


def read_class_file(path: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    """``(image ids, flags int8 in {-1, 0, 1})`` of one ``<class>_<split>.txt`` file."""
    path = Path(path)
    ids: list[str] = []
    flags: list[int] = []
    for lineno, line in _lines(path):
        toks = line.split()
        if len(toks) != 2:
            raise ValueError(
                f"{path}:{lineno}: malformed line {line!r}: expected '<image_id> <flag>'"
            )
        if toks[1] not in _FLAGS:
            raise ValueError(
                f"{path}:{lineno}: unknown flag {toks[1]!r} (expected 1, -1 or 0)"
            )
        ids.append(toks[0])
        flags.append(_FLAGS[toks[1]])
    return ids, np.asarray(flags, dtype=np.int8)


def read_voc_labels(
    main_dir: str | os.PathLike,
    split: str,
    classes: Sequence[str] = VOC_CLASSES,
    difficult: str = "negative",
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Image-level multi-labels of one VOC split.

    Returns ``(image_ids, Y, difficult_mask)``: ids in ``<split>.txt`` order, ``Y``
    uint8 ``[n, len(classes)]`` and ``difficult_mask`` bool of the same shape (True
    where the flag is 0). Every class file must list exactly the ids of
    ``<split>.txt`` in the same order (else ``ValueError`` naming the file and the
    first differing line); malformed lines and unknown flags raise ``ValueError``
    naming the file and line number (and the offending value).
    """
    if difficult not in DIFFICULT_MODES:
        raise ValueError(f"difficult must be one of {DIFFICULT_MODES}, got {difficult!r}")
    main_dir = Path(main_dir)
    ids = read_image_list(main_dir, split)
    n = len(ids)
    flags = np.empty((n, len(classes)), dtype=np.int8)
    for j, cls in enumerate(classes):
        path = main_dir / f"{cls}_{split}.txt"
        cids, cflags = read_class_file(path)
        if cids != ids:
            if len(cids) != n:
                raise ValueError(
                    f"{path}: lists {len(cids)} images but {main_dir / (split + '.txt')} lists {n}"
                )
            k = next(i for i in range(n) if cids[i] != ids[i])
            lineno = _lines(path)[k][0]
            raise ValueError(
                f"{path}:{lineno}: image id {cids[k]!r} does not match {split}.txt entry {k + 1} ({ids[k]!r})"
            )
        flags[:, j] = cflags
    mask = flags == 0
    Y = (flags == 1) | (mask if difficult == "positive" else False)
    return ids, Y.astype(np.uint8), mask
