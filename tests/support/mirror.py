"""The dataset mirror and Yeast for the tests (``from tests.support.mirror import ...``).

Data. Tests read real data from the offline dataset mirror (:func:`mirror_path`:
``$CDGTMLL_DATA_MIRROR``, else ``<repo>/../shared/datasets``). Without a mirror, Yeast is still
available: the pinned wheel river==0.26.1 ships the full MULAN Yeast data
(``river/datasets/yeast.csv.gz``, rows 0-916 = MULAN test, 917-2416 = train, the ARFF's
decimal strings byte for byte), and :func:`packaged_yeast_mirror` rebuilds MULAN's three
Yeast files from it, each checked against the registry's sha256 (so they are MULAN's files,
not an approximation). A test that needs any other mirror file asks for it with
:func:`mirror_file`, which skips and names the file when it is absent.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from tests.support.paths import SHARED

MIRROR_ENV = "CDGTMLL_DATA_MIRROR"

#: label order of MULAN's ``yeast.xml`` (the file lists Class6 and Class10 early; the CSV has
#: no XML, so the order is written out here; the rebuilt file is checked against its sha256)
_YEAST_XML_ORDER = (1, 2, 3, 6, 4, 10, 11, 5, 7, 8, 9, 12, 13, 14)


def mirror_path() -> Path:
    """The offline dataset mirror: $CDGTMLL_DATA_MIRROR, else ``<repo>/../shared/datasets``."""
    env = os.environ.get(MIRROR_ENV)
    return Path(env) if env else SHARED / "datasets"


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cdgtmll-tests"


def _yeast_texts(csv_gz: Path) -> dict[str, bytes]:
    """MULAN's yeast-train.arff, yeast-test.arff and yeast.xml, rebuilt from river's CSV."""
    lines = gzip.decompress(csv_gz.read_bytes()).decode("ascii").split("\n")
    names, rows = lines[0].split(","), [r for r in lines[1:] if r]
    head = "@relation MultiLabelData\n\n" + "".join(
        f"@attribute {n} numeric\n" if n.startswith("Att") else f"@attribute {n} {{0,1}}\n" for n in names
    ) + "\n@data\n"
    xml = ('<?xml version="1.0" encoding="utf-8"?>\n<labels xmlns="http://mulan.sourceforge.net/labels">\n'
           + "".join(f'<label name="Class{k}"></label>\n' for k in _YEAST_XML_ORDER) + "</labels>")
    return {"yeast-test.arff": (head + "\n".join(rows[:917]) + "\n").encode(),
            "yeast-train.arff": (head + "\n".join(rows[917:]) + "\n").encode(),
            "yeast.xml": xml.encode()}


@functools.cache
def packaged_yeast_mirror() -> tuple[Path | None, str]:
    """``(mirror folder, '')`` holding ``yeast/`` with MULAN's three Yeast files rebuilt from
    the packaged copy in river==0.26.1 (cached under ``$XDG_CACHE_HOME/cdgtmll-tests``, each
    file's sha256 equal to the registry's), or ``(None, why not)``. Raises when the packaged
    copy is the pinned one but does not rebuild the registry's files (a real defect)."""
    from cdgtmll.data.acquire import locate_packaged
    from cdgtmll.data.registry import RIVER_YEAST, get_spec
    from cdgtmll.io import sha256_file

    src = locate_packaged(RIVER_YEAST)
    pinned = f"{RIVER_YEAST.distribution}=={RIVER_YEAST.version}"
    if src is None:
        return None, f"{pinned} (packaged Yeast copy) is not installed"
    if sha256_file(src) != RIVER_YEAST.sha256:
        return None, f"{src} is not the pinned packaged copy of {pinned} (sha256 differs)"
    want = {f.name: f.sha256 for f in get_spec("yeast").files}
    root = _cache_dir() / f"packaged-yeast-{RIVER_YEAST.sha256[:12]}"
    folder = root / "yeast"
    if all((folder / n).is_file() and sha256_file(folder / n) == sha for n, sha in want.items()):
        return root, ""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in _yeast_texts(src).items():
        got = hashlib.sha256(data).hexdigest()
        if got != want[name]:
            raise RuntimeError(f"{name} rebuilt from {src} has sha256 {got}, the registry's is {want[name]}")
        tmp = folder / f".{name}.{os.getpid()}.tmp"  # atomic: parallel test workers may race
        tmp.write_bytes(data)
        os.replace(tmp, folder / name)
    return root, ""


def yeast_mirror() -> Path | None:
    """A mirror folder with MULAN's Yeast files: the dataset mirror when it has them, else the
    one rebuilt from the packaged copy; None when neither is available."""
    real = mirror_path()
    if all((real / "yeast" / n).is_file() for n in ("yeast-train.arff", "yeast-test.arff", "yeast.xml")):
        return real
    return packaged_yeast_mirror()[0]


def no_yeast_reason() -> str:
    """Why no Yeast files are available (skip reason)."""
    return (f"needs yeast/yeast-train.arff: not in the dataset mirror {mirror_path()} (set {MIRROR_ENV}), "
            f"and no packaged copy to rebuild it from: {packaged_yeast_mirror()[1]}")


def __getattr__(name: str) -> Path:
    """``YEAST_DIR`` / ``YEAST_TRAIN``: the Yeast folder and training file of :func:`yeast_mirror`
    (computed on first use; when no Yeast is available, the mirror's paths, which do not exist)."""
    if name in ("YEAST_DIR", "YEAST_TRAIN"):
        folder = (yeast_mirror() or mirror_path()) / "yeast"
        return folder if name == "YEAST_DIR" else folder / "yeast-train.arff"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def mirror_file(mirror: Path, rel: str) -> Path:
    """``mirror / rel``; skips the test, naming the file, when it is not there (e.g. a clone
    without the dataset mirror, where ``mirror`` holds only the rebuilt Yeast)."""
    p = mirror / rel
    if p.exists():
        return p
    if mirror == packaged_yeast_mirror()[0] and mirror != mirror_path():
        pytest.skip(f"needs {rel} from the dataset mirror: no mirror at {mirror_path()} (set {MIRROR_ENV}); "
                    "without one only Yeast is available (rebuilt from river's packaged copy)")
    pytest.skip(f"needs {rel}: not in the dataset mirror {mirror}")


def yeast_arrays(n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(X float32, Y uint8)`` of the first ``n_rows`` rows of Yeast's training file (the
    mirror's, or the one rebuilt from the packaged copy); skips when neither is available."""
    from cdgtmll.data.mulan import read_mulan_arff

    folder = yeast_mirror()
    if folder is None:
        pytest.skip(no_yeast_reason())
    X, Y, _ = read_mulan_arff(folder / "yeast" / "yeast-train.arff", 14)
    return np.asarray(X, dtype=np.float32)[:n_rows], np.asarray(Y)[:n_rows]


def yeast_processed_npz(path: Path) -> Path:
    """The first 600 rows of Yeast's training file as a processed dataset at ``path``
    (``yeast``, 14 labels; rows 0-399 train, 400-499 val, 500-599 test), as ``prepare`` writes one."""
    from cdgtmll.data.processed import ProcessedData

    X, Y = yeast_arrays(600)
    ProcessedData("yeast", X, Y, [f"Class{k + 1}" for k in range(14)],
                  {"train": np.arange(400), "val": np.arange(400, 500), "test": np.arange(500, 600)}).save(path)
    return path


def yeast_fitdata(n_train: int, n_val: int):
    """FitData of Yeast rows ``[0, n_train)`` (train) and ``[n_train, n_train + n_val)`` (validation)."""
    from cdgtmll.methods.base import FitData

    X, Y = yeast_arrays(n_train + n_val)
    return FitData(X[:n_train], Y[:n_train], X[n_train:], Y[n_train:], [f"Class{k + 1}" for k in range(14)])

