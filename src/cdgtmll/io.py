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
from collections.abc import Iterator
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
            if stale and (target is None or m["target"] == target) and e.is_file(follow_symlinks=False):
                os.unlink(e.path)
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


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


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
