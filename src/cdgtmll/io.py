"""Small I/O helpers shared by every module: hashing and atomic writes.

Every artifact the pipeline writes goes through :func:`atomic_write` (or
:func:`atomic_path`), so that a crash or a validation error never leaves a
partial file behind: content is written to a temporary file in the target's
directory and renamed over the target only once complete.

Temporary files are named ``.<target name>.atomic-<host>-<pid>-<random>.tmp<suffix>``
(``<host>``: 8 hex digits of the hostname's sha256, ``<pid>``: the writing process). A
process killed between create and rename (``kill -9``, OOM killer) cannot remove its
own; the first :func:`atomic_path` of a process in a folder therefore removes the
temporaries there whose writer is gone (:func:`remove_stale_temps`: same host, process
no longer running), so a re-run never leaves one beside its outputs.

A write that fails because the file system is full (``ENOSPC``; ``EDQUOT``) raises
:class:`DiskFullError`, an ``OSError`` that says "no space left on device" and names the
target, also where the writer was a library that hides the errno (torch's
``enforce fail at inline_container.cc ... unexpected pos``: its text shows the write
failed and ``shutil.disk_usage`` confirms the file system is full).

Reading: :func:`read_json` and :func:`load_npz` raise :class:`CorruptArtifactError` for a
file that exists but cannot be read (truncated, edited, not its format). The message names
the file, says it is corrupt and why, the rule that writes it and the command that rebuilds
it; the pipeline's readers pass ``remove=True``, which deletes the corrupt file first, so
that the next ``snakemake`` run re-runs the job that writes it (Snakemake re-makes a missing
output) instead of failing on it again.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: the tag between the target's name and the writer's host/pid in a temporary's name
TEMP_TAG = "atomic"
#: a write failure without an errno counts as "disk full" when less than this is free
LOW_SPACE_BYTES = 16 * 2**20
#: texts of write failures that carry no errno (torch's C++ zip writer)
WRITE_FAILED_TEXTS = ("file write failed", "unexpected pos", "failed writing", "iostream error")

_TEMP_RE = re.compile(rf"^\.(?P<target>.+)\.{TEMP_TAG}-(?P<host>[0-9a-f]{{8}})-(?P<pid>\d+)-[a-z0-9_]{{8}}\.tmp")
_swept: set[str] = set()  # folders this process has already swept


class DiskFullError(OSError):
    """A write failed because its file system is full (errno ``ENOSPC``) or the user's
    quota is exhausted (``EDQUOT``). ``filename`` is the target; ``free`` the bytes
    available there after the failure (None if unknown)."""

    def __init__(self, err: int, target: str | os.PathLike, free: int | None = None, total: int | None = None):
        what = "disk quota exceeded" if err == errno.EDQUOT else "no space left on device"
        super().__init__(err, what, str(target))
        self.free, self.total = free, total

    def __str__(self) -> str:
        space = ""
        if self.free is not None and self.total is not None:
            space = f" ({_fmt_bytes(self.free)} free of {_fmt_bytes(self.total)} on that file system)"
        return (
            f"{self.strerror} while writing {self.filename}{space}; make room there (or write the results "
            "elsewhere) and re-run: the previous complete version of the file, if any, is unchanged"
        )


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def disk_full_error(exc: BaseException, target: str | os.PathLike) -> DiskFullError | None:
    """:class:`DiskFullError` for ``target`` when ``exc`` is a write failure on a full
    file system, else None: an ``OSError`` with errno ``ENOSPC``/``EDQUOT``, or an error
    whose text shows a failed write (:data:`WRITE_FAILED_TEXTS`) while less than
    :data:`LOW_SPACE_BYTES` are free. Call it before removing the partial file (it
    holds the space that ran out)."""
    if isinstance(exc, DiskFullError):
        return exc
    try:
        usage = shutil.disk_usage(Path(target).parent)
    except OSError:
        usage = None
    free, total = (usage.free, usage.total) if usage else (None, None)
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(exc.errno, target, free, total)
    if (isinstance(exc, (OSError, RuntimeError)) and free is not None and free < LOW_SPACE_BYTES
            and any(t in str(exc) for t in WRITE_FAILED_TEXTS)):
        return DiskFullError(errno.ENOSPC, target, free, total)
    return None


def _pid_running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid > 0
    try:  # a killed process that its parent has not reaped yet is gone too
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


@functools.lru_cache(maxsize=1)
def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def remove_stale_temps(directory: str | os.PathLike, target: str | None = None) -> list[Path]:
    """Remove the temporaries of :func:`atomic_path` in ``directory`` (of ``target``'s
    name only, if given) whose writer is gone: written on this host by a process that
    no longer runs (or is a zombie). A temporary of a running writer, or of another host
    (a shared file system), is never touched.
    Returns the removed paths; errors (permissions, races) are ignored."""
    removed: list[Path] = []
    host = _host_tag()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for e in entries:
        if not e.name.startswith("."):
            continue
        m = _TEMP_RE.match(e.name)
        if m is None:
            continue
        try:
            stale = m["host"] == host and not _pid_running(int(m["pid"]))
            if stale and (target is None or m["target"] == target):
                if e.is_file(follow_symlinks=False):
                    os.unlink(e.path)
                elif e.is_dir(follow_symlinks=False):  # a folder of :func:`staged_dir`
                    shutil.rmtree(e.path)
                else:
                    continue
                removed.append(Path(e.path))
        except OSError:
            continue
    return removed


def _sweep_once(directory: Path) -> None:
    """:func:`remove_stale_temps` on ``directory`` the first time this process writes there
    (once, not per write: a folder may receive thousands of files)."""
    key = os.path.abspath(directory)
    if key not in _swept:
        _swept.add(key)
        remove_stale_temps(directory)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it onto ``target`` on success.

    On any exception the temporary file is removed and ``target`` is left as it
    was (absent, or its previous complete version); a full disk is re-raised as
    :class:`DiskFullError` naming ``target``. ``suffix`` lets libraries that insist on
    an extension (``np.savez`` adds ``.npz``) write to it. The first call of a process
    in a folder removes stale temporaries there (see the module docstring).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_once(target.parent)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.{TEMP_TAG}-{_host_tag()}-{os.getpid()}-", suffix=f".tmp{suffix}", dir=target.parent
        )
    except OSError as exc:
        full = disk_full_error(exc, target)
        if full is not None:
            raise full from exc
        raise
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600; give the artifact the usual permissions (umask applies)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, target)
    except BaseException as exc:
        # judged before the partial file is removed: it holds the space that ran out
        full = disk_full_error(exc, target) if isinstance(exc, (OSError, RuntimeError)) else None
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if full is not None and full is not exc:
            raise full from exc
        raise


@contextlib.contextmanager
def staged_dir(target: str | os.PathLike, last: tuple[str, ...] = ()) -> Iterator[Path]:
    """Yield a temporary folder beside the folder ``target``; once the block succeeds, move every
    file written there to the same place under ``target`` (``os.replace``; files whose names end
    in one of ``last`` after all others), then remove it. On any exception it is removed and
    ``target`` is left as it was: a set of files that belong together (a table and its
    ``.sources.json``) appears only complete. Named like the temporaries of :func:`atomic_path`,
    so that one left by ``kill -9`` is removed by the next write beside it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_once(target.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.{TEMP_TAG}-{_host_tag()}-{os.getpid()}-", suffix=".tmp",
                                dir=target.parent))
    try:
        yield tmp
        files = sorted((f for f in tmp.rglob("*") if f.is_file()), key=lambda f: (f.name.endswith(last), str(f)))
        for f in files:
            dst = target / f.relative_to(tmp)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def atomic_write(target: str | os.PathLike, data: str | bytes) -> None:
    """Write text or bytes to ``target`` atomically."""
    with atomic_path(target) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)


def write_json(target: str | os.PathLike, obj: Any) -> None:
    """Atomically write ``obj`` as indented, key-sorted JSON (stable bytes for hashing)."""
    atomic_write(target, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


#: how to re-run the pipeline, named in every :class:`CorruptArtifactError`
REBUILD_COMMAND = "`snakemake --cores all all --configfile <profile>` (or `make all CONFIG=<profile>`)"


#: the rule (and command) that writes each artifact, by file name: what a
#: :class:`CorruptArtifactError` names when its reader does not say
ARTIFACT_PRODUCERS = {
    "predictions.npz": "rule train: python -m cdgtmll.train",
    "provenance.json": "rule train: python -m cdgtmll.train",
    "metrics.json": "rule evaluate: python -m cdgtmll.metrics.evaluate_run",
    "processed.npz": "rule prepare_dataset: python -m cdgtmll.data.prepare",
    "features.npz": "rule extract_features: python -m cdgtmll.images.features",
    ".sources.json": "rule tables (python -m cdgtmll.tables.build) or the figure's rule",
}


def producer_of(path: str | os.PathLike) -> str | None:
    """The rule that writes ``path`` (:data:`ARTIFACT_PRODUCERS`, by name or suffix), or None."""
    name = Path(path).name
    return next((who for key, who in ARTIFACT_PRODUCERS.items() if name == key or (key[0] == "." and name.endswith(key))),
                None)


class CorruptArtifactError(ValueError):
    """An artifact the pipeline wrote cannot be read: truncated, edited or not its format.
    The message names the file, says it is corrupt and why, which rule or command writes it
    (``producer``, default :func:`producer_of`) and how to rebuild it; ``removed``: the reader deleted it, so that the next
    ``snakemake`` run re-runs the job that writes it (a missing output is re-made)."""

    def __init__(self, path: str | os.PathLike, reason: str, producer: str | None = None, removed: bool = False):
        self.path, self.reason, self.removed = Path(path), reason, removed
        self.producer = producer or producer_of(path)
        super().__init__(str(self))

    def __str__(self) -> str:
        by = f" ({self.producer})" if self.producer else ""
        if self.removed:
            todo = (f"it has been deleted, so the next snakemake run re-runs the job that writes it{by}: "
                    f"{REBUILD_COMMAND}")
        else:
            todo = f"delete it and rebuild it{by}: {REBUILD_COMMAND}"
        return f"corrupt file {self.path}: {self.reason}; {todo}"


def corrupt_artifact(path: str | os.PathLike, exc: BaseException | str, producer: str | None = None,
                     remove: bool = False) -> CorruptArtifactError:
    """:class:`CorruptArtifactError` for ``path`` (``exc``: what reading it raised); with
    ``remove`` the file is deleted first (a hard link into the DVC cache is only unlinked),
    so that Snakemake re-runs its job next time."""
    reason = exc if isinstance(exc, str) else f"cannot be read ({type(exc).__name__}: {exc})"
    removed = False
    if remove:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        removed = True
    return CorruptArtifactError(path, reason, producer, removed)


def read_json(path: str | os.PathLike, producer: str | None = None, remove: bool = False) -> Any:
    """The JSON in ``path``. A file that is not valid UTF-8 JSON (truncated, edited) raises
    :class:`CorruptArtifactError` naming it and ``producer`` (the rule or command that writes
    it); with ``remove`` the corrupt file is deleted first. A missing file raises
    ``FileNotFoundError`` as usual."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise corrupt_artifact(path, exc, producer, remove) from exc


#: what reading a damaged ``.npz`` raises (zip directory or member CRC, inflate, a short member)
NPZ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError, OSError)


def load_npz(path: str | os.PathLike, keys: Iterable[str] | None = None, producer: str | None = None,
             remove: bool = False) -> dict[str, Any]:
    """Every array of the ``.npz`` at ``path`` (only ``keys``, if given), read now: a damaged
    member fails here, not later. A truncated or edited file raises
    :class:`CorruptArtifactError` (see :func:`read_json`); a missing one ``FileNotFoundError``;
    a missing key ``KeyError``."""
    import numpy as np

    keys = None if keys is None else tuple(keys)
    try:
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files) if keys is None else [k for k in keys if k in z.files]
            out = {k: z[k] for k in names}
    except FileNotFoundError:
        raise
    except NPZ_ERRORS as exc:
        raise corrupt_artifact(path, exc, producer, remove) from exc
    if keys is not None:
        missing = [k for k in keys if k not in out]
        if missing:
            raise KeyError(f"{path}: field(s) {', '.join(map(repr, missing))} missing")
    return out


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")



def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def config_hash(obj: Any) -> str:
    """sha256 of the canonical JSON form (key order and whitespace do not matter)."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()
