"""Image datasets: how image rows are stored, where the image files are found, and the
PASCAL VOC2007 loader. The image transforms (train / eval / occlusion) and the decoder
live in :mod:`cdgtmll.images.ops` (shared with :mod:`cdgtmll.images.trainer_input`).

Representation of image rows in :class:`~cdgtmll.data.processed.ProcessedData`
-------------------------------------------------------------------------------
Pixels are never stored in the processed file. An image dataset as written by
``cdgtmll.data.prepare`` has

* ``X``: a float32 ``[n, 1]`` column of **row ids**: ``X[i, 0]`` is the index into
  ``meta['image_paths']`` of row ``i``'s image. Right after ``prepare`` it is
  ``0, 1, ..., n-1``; a derived dataset that keeps ``X`` (R-variants) or a subset of its
  rows (``ProcessedData.part``) still maps each row to its file through this column.
  (float32 because the processed format stores ``X`` as float32; integers are exact
  below ``2**24`` = 16.7M rows, checked.) ``X`` exists so that every caller of
  ``ProcessedData.part()`` keeps working; it is *not* a feature: see ``meta['x_kind']``
  and :func:`require_features`.
* ``meta['x_kind'] = 'image-row-id'`` (feature files made by
  :mod:`cdgtmll.images.features` say ``'features'``);
* ``meta['image_root']``: absolute folder the paths are relative to (it can be
  overridden when the files move: :func:`image_files` ``image_root=``);
* ``meta['image_paths']``: ``n`` POSIX paths relative to ``image_root``, in row order
  (official train split first, then official test, as for every dataset);
* ``meta['image_ids']``: the dataset's own image ids (VOC ``'000005'``, COCO ints);
* ``meta['image_source']``: where the files came from (folder or archives, with the
  archives' sha256) and ``listing_sha256``, a sha256 over ``"<path>\\t<size>\\n"`` of
  every image (cheap; the JPEG bytes are not hashed).

The loaders return :class:`ImageTrainTest` (a ``TrainTest`` with a ``meta`` dict);
``prepare`` must merge ``tt.meta`` into the processed meta (one line:
``meta.update(getattr(tt, "meta", None) or {})``).

Locating the image files (:func:`locate_images`), first complete source wins:

1. ``image_root=`` given to the loader;
2. the raw folder ``<raw>/<dataset>/`` (where ``prepare`` put the label files), e.g.
   ``<raw>/voc2007/JPEGImages/`` left by an earlier extraction;
3. an already-extracted copy in the mirror, ``<mirror>/<dataset>/`` (VOC: the devkit's
   ``VOC2007`` folder, i.e. ``<mirror>/voc2007/{JPEGImages,Annotations,ImageSets/Main}``,
   or ``<mirror>/voc2007/VOCdevkit/VOC2007/...``), used in place (nothing copied);
4. the official archives (VOC: ``VOCtrainval_06-Nov-2007.tar`` /
   ``VOCtest_06-Nov-2007.tar``), taken with :func:`cdgtmll.data.acquire.fetch`
   (cached, mirror, URL only when ``allow_download=True``) into ``<raw>/<dataset>/`` and
   the needed images extracted there (:func:`extract_members`: refuses any member that
   is absolute, contains ``..``, or is a link; members are written atomically, so a
   partial extraction just resumes). Only the archive of a split with missing images
   is fetched.

The mirror is ``mirror=`` if given, else ``$CDGTMLL_DATA_MIRROR``, else the mirror the
label files were fetched from (their recorded origin).

VOC2007 difficult labels: see :mod:`cdgtmll.data.voc`. Default ``difficult='negative'``
(a class present only as difficult objects is a negative, y = 0, as in ML-GCN/ASL-style
mAP evaluation); ``'positive'`` or ``'ignore'`` via the loader argument. In every mode
the difficult entries are recorded in ``meta['difficult_entries']`` as ``[row, label]``
pairs (row = processed row) so that ``'ignore'`` can mask them downstream.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from cdgtmll.data.mulan import TrainTest
from cdgtmll.data.voc import DIFFICULT_MODES, VOC_CLASSES, read_image_list, read_voc_labels
from cdgtmll.images.ops import ImageNotFoundError
from cdgtmll.io import CHUNK, atomic_path

X_KIND = "image-row-id"
ROW_ID_LIMIT = 2**24  # float32 represents every integer below this exactly

@dataclass
class ImageTrainTest(TrainTest):
    """``TrainTest`` of an image dataset: ``X_*`` are row-id columns and ``meta`` holds
    ``image_root`` / ``image_paths`` / ... (module docstring)."""

    meta: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- row ids
def row_ids(start: int, n: int) -> np.ndarray:
    """float32 ``[n, 1]`` column ``start .. start+n-1``."""
    if start + n > ROW_ID_LIMIT:
        raise ValueError(f"{start + n} image rows: row ids above 2**24 are not exact in float32")
    return np.arange(start, start + n, dtype=np.float32).reshape(n, 1)


def is_image_rows(data: Any) -> bool:
    """Whether a ProcessedData's ``X`` is an image row-id column (not features)."""
    return (getattr(data, "meta", None) or {}).get("x_kind") == X_KIND


def require_features(data: Any, who: str = "this method") -> None:
    """Raise when ``data`` holds image row ids instead of features: a method that treats
    ``X`` as a feature matrix must run on the output of :mod:`cdgtmll.images.features`."""
    if is_image_rows(data):
        raise ValueError(
            f"{getattr(data, 'name', 'dataset')}: X holds image row ids (meta x_kind '{X_KIND}'), not features; "
            f"{who} needs a feature matrix: run python -m cdgtmll.images.features first"
        )


def image_files(data: Any, rows: np.ndarray | None = None, image_root: str | os.PathLike | None = None,
                X: np.ndarray | None = None) -> list[Path]:
    """Absolute image path of each row of ``data`` (all rows, or ``rows``), through the
    row-id column ``X`` (``data.X`` unless given, e.g. the ``X`` of ``data.part(...)``,
    in which case ``rows`` must be None). ``image_root`` overrides ``meta['image_root']``."""
    meta = data.meta
    if not is_image_rows(data):
        raise ValueError(f"{data.name}: not an image dataset (meta x_kind is {meta.get('x_kind')!r}, "
                         f"expected '{X_KIND}')")
    paths = meta.get("image_paths")
    if not isinstance(paths, list):
        raise ValueError(f"{data.name}: meta has no 'image_paths' list")
    root = Path(image_root if image_root is not None else meta.get("image_root", ""))
    if not root.is_dir():
        raise ImageNotFoundError(f"{data.name}: image root {root} is not a folder "
                                 "(moved? pass image_root= / --image-root)")
    col = np.asarray(data.X if X is None else X)
    if col.ndim != 2 or col.shape[1] != 1:
        raise ValueError(f"{data.name}: expected X to be the [n, 1] row-id column, got shape {col.shape}")
    if rows is not None:
        col = col[np.asarray(rows, dtype=np.int64)]
    ids = col[:, 0]
    ri = ids.astype(np.int64)
    if ri.size and (not np.array_equal(ri, ids) or ri.min() < 0 or ri.max() >= len(paths)):
        raise ValueError(f"{data.name}: X row ids are not integers in [0, {len(paths)})")
    return [root / paths[i] for i in ri]


# --------------------------------------------------------------------------- archives
def _safe_member_name(archive: Path, name: str) -> PurePosixPath:
    p = PurePosixPath(name.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or (p.parts and ":" in p.parts[0]):
        raise ValueError(f"{archive}: unsafe member {name!r} (absolute path or '..'): archive refused")
    return p


def extract_members(
    archive: str | os.PathLike,
    dest: str | os.PathLike,
    wanted: Iterable[str],
    strip_prefix: str = "",
) -> int:
    """Extract from a tar or zip ``archive`` the regular files whose name, minus
    ``strip_prefix``, is in ``wanted`` (POSIX relative paths), to ``dest/<relpath>``.

    Safe against path traversal: the whole archive is refused (``ValueError`` naming it
    and the member) if any member name is absolute or contains ``..``, or if a wanted
    member is a link or other non-regular file; only names from ``wanted`` are ever
    written, each atomically. Files already present with the member's size are skipped.
    Returns the number of files written.
    """
    archive, dest = Path(archive), Path(dest)
    wanted = set(wanted)
    written = 0

    def target_of(name: str) -> Path | None:
        p = _safe_member_name(archive, name)
        s = str(p)
        if strip_prefix and not s.startswith(strip_prefix):
            return None
        rel = s[len(strip_prefix):]
        return dest / rel if rel in wanted else None

    def write(target: Path, size: int, fh: Any) -> None:
        nonlocal written
        if target.is_file() and target.stat().st_size == size:
            return
        with atomic_path(target) as tmp:
            with open(tmp, "wb") as out:
                for block in iter(lambda: fh.read(CHUNK), b""):
                    out.write(block)
        written += 1

    if zipfile.is_zipfile(archive):
        try:
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                targets = [(i, target_of(i.filename)) for i in infos]  # validates every name first
                for info, target in targets:
                    if target is None or info.is_dir():
                        continue
                    if (info.external_attr >> 16) & 0o170000 not in (0, 0o100000):  # S_IFLNK etc.
                        raise ValueError(f"{archive}: member {info.filename!r} is a link or special file: "
                                         "archive refused")
                    with zf.open(info) as fh:
                        write(target, info.file_size, fh)
        except zipfile.BadZipFile as exc:
            raise ValueError(f"{archive}: corrupt zip archive: {exc}") from None
        return written
    try:
        with tarfile.open(archive, "r:*") as tf:
            members = tf.getmembers()  # reads the index once; validates every name first
            targets = [(m, target_of(m.name)) for m in members]
            for m, target in targets:
                if target is None:
                    continue
                if not m.isfile():
                    raise ValueError(f"{archive}: member {m.name!r} is a link or special file: archive refused")
                fh = tf.extractfile(m)
                with fh:
                    write(target, m.size, fh)
    except tarfile.TarError as exc:
        raise ValueError(f"{archive}: corrupt or unreadable tar archive: {exc}") from None
    return written


# --------------------------------------------------------------------------- locating
def listing_sha256(root: Path, relpaths: Sequence[str]) -> str:
    """sha256 over ``"<relpath>\\t<size>\\n"`` of every file (a cheap fingerprint of an image set)."""
    h = hashlib.sha256()
    for rel in relpaths:
        h.update(f"{rel}\t{(root / rel).stat().st_size}\n".encode())
    return h.hexdigest()


def _present(root: Path, relpaths: Sequence[str]) -> int:
    """How many of ``relpaths`` exist under ``root`` (listing each folder once)."""
    if not root.is_dir():
        return 0
    listings: dict[str, set[str]] = {}
    n = 0
    for rel in relpaths:
        parent, _, fname = rel.rpartition("/")
        if parent not in listings:
            d = root / parent
            listings[parent] = set(os.listdir(d)) if d.is_dir() else set()
        n += fname in listings[parent]
    return n


def _first_missing(root: Path, relpaths: Sequence[str]) -> str:
    for rel in relpaths:
        if not (root / rel).is_file():
            return rel
    return relpaths[0]


def label_origin_mirror(fetched: Mapping[str, Any], depth: int) -> Path | None:
    """The mirror root a fetched file came from (``origin`` of a mirror fetch, or the
    recorded original origin of a cached one), ``depth`` = folder levels of its name."""
    for r in fetched.values():
        src = r.source if r.source != "cached" else getattr(r, "original_source", None)
        if src == "mirror" and r.origin:
            return Path(r.origin).parents[depth]
    return None


def mirror_roots(explicit: str | os.PathLike | None, fetched: Mapping[str, Any], depth: int) -> list[Path]:
    """Mirrors to search for extracted images: ``explicit`` alone if given, else
    ``$CDGTMLL_DATA_MIRROR`` and the mirror the label files came from (both, deduplicated)."""
    from cdgtmll.data.acquire import resolve_mirror

    if explicit:
        return [Path(explicit)]
    out: list[Path] = []
    for m in (resolve_mirror(None), label_origin_mirror(fetched, depth)):
        if m is not None and m not in out:
            out.append(m)
    return out


@dataclass
class ArchiveSource:
    """An official archive that holds some of the images: its registry file, the prefix
    of its members before the relative image path, and which relpaths it holds."""

    file: Any  # RemoteFile
    strip_prefix: str
    relpaths: Sequence[str]


def locate_images(
    spec: Any,
    relpaths: Sequence[str],
    candidates: Sequence[Path],
    raw_root: Path,
    archives: Sequence[ArchiveSource] = (),
    mirror: Path | None = None,
    allow_download: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Find a folder holding every ``relpaths`` (module docstring, steps 1-4); returns
    ``(image_root, provenance)``. Raises :class:`ImageNotFoundError` naming the first
    missing file in the most complete place searched, and every place searched."""
    from cdgtmll.data.acquire import AcquisitionError, fetch

    relpaths = list(relpaths)
    n = len(relpaths)
    looked: list[str] = []
    best: tuple[int, Path] | None = None
    seen: set[Path] = set()
    for root in candidates:
        root = Path(root).absolute()
        if root in seen:
            continue
        seen.add(root)
        k = _present(root, relpaths)
        looked.append(f"{root}: {k} of {n} images present" if root.is_dir() else f"{root}: absent")
        if k == n:
            return root, {"kind": "folder", "root": str(root), "listing_sha256": listing_sha256(root, relpaths)}
        if root.is_dir() and (best is None or k > best[0]):
            best = (k, root)

    records = []
    raw_root = Path(raw_root).absolute()
    for a in archives:
        if _present(raw_root, a.relpaths) == len(a.relpaths):
            continue
        try:
            res = fetch(spec, a.file, raw_root, mirror=mirror, allow_download=allow_download)
        except AcquisitionError as exc:
            looked.append(f"archive {a.file.name}: {exc}")
            continue
        extract_members(res.path, raw_root, a.relpaths, a.strip_prefix)
        records.append(res.record())
    k = _present(raw_root, relpaths)
    if k == n:
        return raw_root, {"kind": "archives", "root": str(raw_root), "archives": records,
                          "listing_sha256": listing_sha256(raw_root, relpaths)}
    if records and (best is None or k > best[0]):
        best = (k, raw_root)
    if best is None:
        raise ImageNotFoundError(
            f"dataset '{spec.name}': none of its {n} image files found (first: {relpaths[0]}); looked in:\n"
            + "\n".join(f"  - {x}" for x in looked)
        )
    k, root = best
    miss = _first_missing(root, relpaths)
    raise ImageNotFoundError(
        f"dataset '{spec.name}': image file missing: {root / miss} ({n - k} of {n} missing there); looked in:\n"
        + "\n".join(f"  - {x}" for x in looked)
    )


# --------------------------------------------------------------------------- VOC2007
def _voc_archives() -> dict[str, Any]:
    from cdgtmll.data.registry import voc_image_archives

    return {f.role: f for f in voc_image_archives()}


def _check_label_lengths(main_dir: Path, split: str, classes: Sequence[str]) -> None:
    """A class file shorter than ``<split>.txt`` is truncated: name the file and the line."""
    n = len(read_image_list(main_dir, split))
    for cls in classes:
        path = main_dir / f"{cls}_{split}.txt"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: VOC label file not found")
        text = path.read_bytes().decode("ascii", errors="replace").splitlines()
        entries = [i for i, ln in enumerate(text, start=1) if ln.strip()]
        if len(entries) < n:
            raise ValueError(
                f"{path}:{len(text) + 1}: file ends after {len(entries)} entries but {split}.txt lists {n} "
                "images (truncated?)"
            )


def load_voc2007(
    spec: Any,
    fetched: Mapping[str, Any],
    *,
    difficult: str = "negative",
    image_root: str | os.PathLike | None = None,
    mirror: str | os.PathLike | None = None,
    allow_download: bool = False,
) -> ImageTrainTest:
    """Loader for ``voc-devkit`` (``DatasetSpec.loader``): official trainval -> train,
    official test -> test, 20 labels in devkit order, labels from
    ``ImageSets/Main/<class>_<split>.txt`` (:func:`cdgtmll.data.voc.read_voc_labels`),
    rows in ``<split>.txt`` order, images ``JPEGImages/<id>.jpg`` (located as in the
    module docstring). Split sizes are checked against ``spec.n_train`` / ``spec.n_test``
    (5011 / 4952) when the spec has them.
    """
    if difficult not in DIFFICULT_MODES:
        raise ValueError(f"difficult must be one of {DIFFICULT_MODES}, got {difficult!r}")
    try:
        main_dir = fetched["ImageSets/Main/trainval.txt"].path.parent
    except KeyError:
        raise ValueError(f"dataset '{spec.name}': ImageSets/Main/trainval.txt was not fetched") from None
    classes = list(VOC_CLASSES)
    if spec.n_labels is not None and spec.n_labels != len(classes):
        raise ValueError(f"dataset '{spec.name}': registry expects {spec.n_labels} labels, VOC has {len(classes)}")
    parts = {}
    for split in ("trainval", "test"):
        _check_label_lengths(main_dir, split, classes)
        parts[split] = read_voc_labels(main_dir, split, classes, difficult=difficult)
    (tr_ids, Ytr, Dtr), (te_ids, Yte, Dte) = parts["trainval"], parts["test"]
    for what, want, got in (("trainval", spec.n_train, len(tr_ids)), ("test", spec.n_test, len(te_ids))):
        if want is not None and want != got:
            raise ValueError(f"{main_dir / (what + '.txt')}: {what} split has {got} images, expected {want}")
    both = set(tr_ids) & set(te_ids)
    if both:
        raise ValueError(f"{main_dir}: image id {sorted(both)[0]!r} is in both trainval.txt and test.txt")

    rel_tr = [f"JPEGImages/{i}.jpg" for i in tr_ids]
    rel_te = [f"JPEGImages/{i}.jpg" for i in te_ids]
    raw_root = main_dir.parent.parent  # <raw>/voc2007
    mirrors = mirror_roots(mirror, fetched, 3)
    candidates = [Path(image_root)] if image_root is not None else []
    candidates += [raw_root, raw_root / "VOCdevkit" / "VOC2007"]
    for m in mirrors:
        candidates += [m / spec.folder, m / spec.folder / "VOCdevkit" / "VOC2007"]
    tars = _voc_archives()
    archives = [
        ArchiveSource(tars["images-trainval"], "VOCdevkit/VOC2007/", rel_tr),
        ArchiveSource(tars["images-test"], "VOCdevkit/VOC2007/", rel_te),
    ]
    root, source = locate_images(spec, rel_tr + rel_te, candidates, raw_root, archives,
                                 mirror=mirrors[0] if mirrors else None, allow_download=allow_download)
    ntr, nte = len(tr_ids), len(te_ids)
    D = np.concatenate([Dtr, Dte])
    meta = {
        "x_kind": X_KIND,
        "image_root": str(root),
        "image_paths": rel_tr + rel_te,
        "image_ids": list(tr_ids) + list(te_ids),
        "image_source": source,
        "difficult": difficult,
        "difficult_entries": np.argwhere(D).tolist(),
        "label_source": "ImageSets/Main/<class>_{trainval,test}.txt (1 present, -1 absent, 0 difficult)",
    }
    return ImageTrainTest(row_ids(0, ntr), Ytr, row_ids(ntr, nte), Yte, classes, ["row_id"], "voc-devkit",
                          meta=meta)
