"""Acquire one raw file of a dataset: verified by sha256, written atomically, with provenance.

Sources are tried in this order (:func:`fetch`):

0. ``cached``   – the file is already in ``dest_dir`` with the expected sha256;
1. ``mirror``   – ``<mirror>/<spec.folder>/<file.name>`` of an offline mirror
   (:func:`resolve_mirror`: the ``CDGTMLL_DATA_MIRROR`` environment variable overrides
   the configured mirror);
2. ``packaged`` – a copy shipped inside an installed distribution
   (:class:`~cdgtmll.data.registry.PackagedCopy`, located with ``importlib.metadata``
   without importing the package). It is a different file in its own format with its own
   sha256, so the result points at *that* file;
3. ``url``      – each URL of the file in order (``urllib``), streamed to a temporary file
   beside the target and hashed while streaming.

A missing source (absent mirror file, HTTP 404, connection error, downloads disabled)
falls through to the next one; when all fail :class:`AcquisitionError` lists every
source tried and why. Content that *arrives* but is wrong (sha256 mismatch, fewer bytes
than ``Content-Length`` or than the registry's size) raises :class:`ChecksumError` at once:
a corrupted mirror or server is reported, not silently bypassed. No partial or
unverified file is ever left at the target path (``cdgtmll.io.atomic_path``).

When the registry has no sha256 for a file (``None`` = unknown upstream), the hash seen is
recorded and a warning is issued; the result says ``verified=False``.

A cached copy is re-verified against the local file it would be acquired from now
(:func:`local_source`: the mirror file, or a ``file://`` URL): when that file's sha256 differs
from the copy's, the copy is stale and is replaced (``source <path> changed: sha256 <old> ->
<new>; re-copying``), or, when the expected sha256 is known, :class:`ChecksumError` reports
the changed source. The rule ``prepare_dataset`` knows the raw data by content, not by path
(:func:`content_identity`, a param): a pinned sha256, or the sha256 of an unpinned local source,
so an edited unpinned source re-runs everything downstream, and a moved identical mirror nothing.

Every acquired file gets ``<dest>/<file>.source.json`` (source, origin, sha256, size,
verified, time). :attr:`FetchResult.notes` says, in words, why this source was used (a
missing mirror file, a fallback to a packaged copy, a stale cache); ``prepare`` logs them.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path

from cdgtmll.data.registry import DatasetSpec, PackagedCopy, RemoteFile
from cdgtmll.io import CHUNK, atomic_path, read_json, sha256_file, write_json

MIRROR_ENV = "CDGTMLL_DATA_MIRROR"


class ChecksumError(ValueError):
    """Content was received but is not the expected file (wrong sha256, or truncated)."""


class AcquisitionError(RuntimeError):
    """No source could provide the file; the message lists every source tried and why."""


class UnverifiedWarning(UserWarning):
    """A file was acquired whose sha256 the registry does not know."""


@dataclass(frozen=True)
class FetchResult:
    path: Path
    sha256: str
    source: str  # "cached", "mirror", "packaged" or "url"
    origin: str  # mirror path, packaged path or URL the content came from
    size: int
    verified: bool  # True iff sha256 was checked against a known expected value
    original_source: str | None = None  # for 'cached': the source recorded when first acquired
    #: why this source was used, in words (not part of :meth:`record`, so that the processed
    #: data does not depend on whether a file was copied or reused)
    notes: tuple[str, ...] = field(default=(), compare=False)

    def record(self) -> dict:
        """JSON-able provenance of this file (for processed-data meta); ``path`` is the raw
        copy that ``cdgtmll audit`` re-hashes."""
        return {
            "file": self.path.name,
            "path": str(self.path),
            "sha256": self.sha256,
            "size": self.size,
            "source": self.source,
            "origin": self.origin,
            "verified": self.verified,
            **({"original_source": self.original_source} if self.original_source else {}),
        }


def resolve_mirror(config_value: str | os.PathLike | None) -> Path | None:
    """The mirror folder: env var ``CDGTMLL_DATA_MIRROR`` if set (non-empty), else ``config_value``."""
    env = os.environ.get(MIRROR_ENV)
    if env:
        return Path(env)
    return Path(config_value) if config_value else None


def locate_packaged(copy: PackagedCopy) -> Path | None:
    """Path of a packaged copy inside its installed distribution, without importing it;
    ``None`` when the distribution or the file is absent."""
    try:
        dist = metadata.distribution(copy.distribution)
    except metadata.PackageNotFoundError:
        return None
    p = Path(dist.locate_file(copy.path))
    return p if p.is_file() else None


def provenance_path(target: Path) -> Path:
    return target.with_name(target.name + ".source.json")


def _file_url_path(url: str) -> Path | None:
    """The local path of a ``file://`` URL, else None."""
    if not url.lower().startswith("file:"):
        return None
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))


def local_source(spec: DatasetSpec, file: RemoteFile, mirror: str | os.PathLike | None = None,
                 allow_download: bool = True) -> tuple[str, Path] | None:
    """``(source, path)`` of the local file :func:`fetch` would copy ``file`` from now, when
    there is one: ``('mirror', <mirror>/<folder>/<name>)`` if it exists, else, when no
    installed packaged copy stands in for the file and downloads are allowed, ``('url',
    path)`` if the first URL is a ``file://`` URL of an existing file. None otherwise
    (remote, packaged, or absent). ``mirror`` is resolved with :func:`resolve_mirror`."""
    mirror_dir = resolve_mirror(mirror)
    if mirror_dir is not None:
        p = mirror_dir / spec.folder / file.name
        if p.is_file():
            return "mirror", p
    if any(file.name in c.replaces and locate_packaged(c) is not None for c in spec.packaged):
        return None
    if allow_download and file.urls:
        p = _file_url_path(file.urls[0])
        if p is not None and p.is_file():
            return "url", p
    return None


def local_inputs(spec: DatasetSpec, mirror: str | os.PathLike | None = None, allow_download: bool = True) -> list[str]:
    """The local source files of ``spec``'s raw files (:func:`local_source`), in file order:
    the inputs of the Snakemake rule ``prepare_dataset``, so that editing one re-runs the
    prepare and everything downstream. Remote files and packaged copies (pinned sha256,
    part of the locked environment) are not inputs."""
    out: list[str] = []
    for f in spec.files:
        src = local_source(spec, f, mirror, allow_download)
        if src is not None and str(src[1]) not in out:
            out.append(str(src[1]))
    return out


def content_identity(spec: DatasetSpec, mirror: str | os.PathLike | None = None,
                     allow_download: bool = True) -> list[dict]:
    """What the raw data of ``spec`` *is*, by content, for the Snakemake rule
    ``prepare_dataset`` (a param: a different identity re-runs prepare and everything after it).

    Per raw file, in file order: its name and sha256. The sha256 is the pinned one (registry,
    or ``data.custom.<name>.sha256``) when there is one: prepare refuses any other content, so
    the pin *is* the content. Otherwise it is the sha256 of the local file prepare would copy
    now (:func:`local_source`: mirror or ``file://`` URL; hashed once per file version,
    :func:`cached_sha256`), so an edited unpinned source re-runs prepare. When a packaged copy
    stands in, its own pinned sha256; else (a remote, unpinned file) its URLs. No path of the
    mirror is part of it: a byte-identical mirror in another folder plans nothing."""
    out: list[dict] = []
    for f in spec.files:
        entry: dict = {"name": f.name, "sha256": f.sha256}
        if f.sha256 is None:
            local = local_source(spec, f, mirror, allow_download)
            if local is not None:
                entry["sha256"] = cached_sha256(local[1])
            else:
                copies = [c for c in spec.packaged if f.name in c.replaces and locate_packaged(c) is not None]
                if copies:
                    entry["packaged"] = {"name": copies[0].name, "sha256": copies[0].sha256}
                else:
                    entry["urls"] = list(f.urls)
        out.append(entry)
    return out


def cached_sha256(path: str | os.PathLike) -> str:
    """sha256 of a local source file, remembered under ``$XDG_CACHE_HOME/cdgtmll/sha256/`` by its
    real path, size, inode and mtime (ns): the Snakefile asks on every parse (also in every
    cluster job), and an unpinned mirror file may be gigabytes. Any change of the file gives a
    new key; an unwritable cache only costs the hashing."""
    p = Path(path).resolve()
    st = p.stat()
    key = hashlib.sha256(f"{p}\0{st.st_size}\0{st.st_ino}\0{st.st_mtime_ns}".encode()).hexdigest()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cdgtmll" / "sha256" / key
    try:
        known = cache.read_text(encoding="ascii").strip()
        if len(known) == 64:
            return known
    except OSError:
        pass
    sha = sha256_file(p)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(cache) as tmp:
            Path(tmp).write_text(sha, encoding="ascii")
    except OSError:
        pass
    return sha


def fetch(
    spec: DatasetSpec,
    file: RemoteFile | PackagedCopy | str,
    dest_dir: str | os.PathLike,
    mirror: str | os.PathLike | None = None,
    allow_download: bool = True,
    timeout: float = 60,
) -> FetchResult:
    """Acquire ``file`` (a RemoteFile of ``spec``, its name/role, or a PackagedCopy) into
    ``dest_dir``. See the module docstring for the source order and guarantees."""
    if isinstance(file, str):
        file = spec.file(file)
    dest_dir = Path(dest_dir)
    mirror_dir = resolve_mirror(mirror)
    tried: list[str] = []
    notes: list[str] = []

    if isinstance(file, PackagedCopy):
        res = _cached(dest_dir / file.name, file.sha256, notes)
        if res:
            return _done(res, notes)
        res = _from_packaged(spec, file, dest_dir, tried)
        if res:
            return _done(res, notes)
        raise AcquisitionError(_all_failed(spec, file.name, tried))

    target = dest_dir / file.name
    local = local_source(spec, file, mirror_dir, allow_download)
    res = _cached(target, file.sha256, notes)
    if res is not None and local is not None:
        # re-verify the cached copy against the file it would be copied from now
        kind, src = local
        current = sha256_file(src)
        if current != res.sha256:
            came_from = f"{res.original_source} {res.origin}"
            notes.append(
                f"source {src} changed: sha256 {res.sha256} -> {current}; re-copying"
                if str(src) == res.origin or (kind == "url" and _file_url_path(res.origin) == src)
                else f"source {src} differs from the cached copy {target} (copied from {came_from}): "
                f"sha256 {res.sha256} -> {current}; re-copying"
            )
            res = None
        else:
            notes.append(f"source {kind} {src} unchanged (sha256 re-checked); reusing the cached copy")
    elif res is not None:
        notes.append("no local source to re-verify the cached copy against; reusing it")
    if res:
        return _done(res, notes)
    tried.append(f"cached {target}: absent or different content")

    # (1) mirror
    if mirror_dir is None:
        tried.append(f"mirror: none configured (set {MIRROR_ENV} or the config option)")
        missing = "no mirror configured"
    else:
        src = mirror_dir / spec.folder / file.name
        if src.is_file():
            return _done(_install(spec, file.name, file.sha256, file.size, src, target, "mirror", str(src)), notes)
        tried.append(f"mirror {src}: not found")
        missing = f"mirror {mirror_dir}: {spec.folder}/{file.name} not found"

    # (2) packaged copies standing in for this file
    for copy in spec.packaged:
        if file.name in copy.replaces:
            pinned = f"{copy.distribution}=={copy.version}"
            res = _cached(dest_dir / copy.name, copy.sha256, notes)
            if res:
                notes.append(f"{missing}; using the packaged copy from {pinned} cached at {res.path}")
                return _done(res, notes)
            res = _from_packaged(spec, copy, dest_dir, tried)
            if res:
                notes.append(f"{missing}; using the packaged copy from {pinned} ({res.origin})")
                return _done(res, notes)

    # (3) URLs
    if not file.urls:
        tried.append(f"url: none known ({file.manual})" if file.manual else "url: none known")
    for url in file.urls:
        if not allow_download:
            tried.append(f"url {url}: skipped (downloads disabled)")
            continue
        try:
            res = _download(spec, file, url, target, timeout)
        except _Unavailable as exc:
            tried.append(f"url {url}: {exc}")
            continue
        notes.append(f"{missing}; downloaded {url}")
        return _done(res, notes)
    raise AcquisitionError(_all_failed(spec, file.name, tried))


# --------------------------------------------------------------------------- helpers
class _Unavailable(Exception):
    """This source cannot provide the file; try the next one."""


def _all_failed(spec: DatasetSpec, name: str, tried: list[str]) -> str:
    lines = "\n".join(f"  - {t}" for t in tried)
    return f"dataset '{spec.name}': could not acquire '{name}'; sources tried:\n{lines}"


def _done(res: FetchResult, notes: list[str]) -> FetchResult:
    """``res`` with the notes; warns when a cached copy is reused without a known sha256."""
    if res.source == "cached" and not res.verified:
        warnings.warn(
            f"{res.path}: reusing cached file whose sha256 {res.sha256} matches the one recorded when it was "
            "acquired, but the expected sha256 is unknown (not published): not verified",
            UnverifiedWarning,
            stacklevel=3,
        )
    return replace(res, notes=tuple(notes))


def _cached(target: Path, sha256: str | None, notes: list[str] | None = None) -> FetchResult | None:
    if not target.is_file():
        return None
    prov = {}
    pp = provenance_path(target)
    if pp.is_file():
        try:
            prov = read_json(pp)
        except (OSError, ValueError):
            prov = {}
    expected = sha256 or prov.get("sha256")
    if not expected:
        if notes is not None:
            notes.append(f"{target}: cached copy has no provenance record ({pp.name}); re-acquiring")
        return None  # unknown content and no record of what we stored: re-acquire
    actual = sha256_file(target)
    if actual != expected:
        if notes is not None:
            notes.append(f"{target}: cached copy has sha256 {actual}, expected {expected}; re-acquiring")
        return None
    return FetchResult(
        path=target,
        sha256=actual,
        source="cached",
        origin=str(prov.get("origin", target)),
        size=target.stat().st_size,
        verified=sha256 is not None,
        original_source=prov.get("source"),
    )


def _check(spec: DatasetSpec, name: str, source: str, origin: str, expected: str | None,
           actual: str, expected_size: int | None, size: int) -> bool:
    """Raise ChecksumError on a mismatch; return whether the content was verified."""
    if expected_size is not None and size != expected_size and expected is None:
        raise ChecksumError(
            f"dataset '{spec.name}' file '{name}' from {source} {origin}: expected {expected_size} bytes, "
            f"received {size} bytes (truncated or wrong file)"
        )
    if expected is None:
        warnings.warn(
            f"dataset '{spec.name}' file '{name}' from {source} {origin}: sha256 unknown (not published); "
            f"recorded the sha256 seen, {actual}, NOT verified",
            UnverifiedWarning,
            stacklevel=4,
        )
        return False
    if actual != expected:
        size_note = f" ({size} bytes, expected {expected_size})" if expected_size is not None and size != expected_size else ""
        raise ChecksumError(
            f"dataset '{spec.name}' file '{name}' from {source} {origin}: sha256 mismatch: "
            f"expected {expected}, actual {actual}{size_note}"
        )
    return True


def _record(target: Path, res: FetchResult) -> None:
    write_json(
        provenance_path(target),
        {
            "file": target.name,
            "source": res.source,
            "origin": res.origin,
            "sha256": res.sha256,
            "size": res.size,
            "verified": res.verified,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    )


def _install(spec: DatasetSpec, name: str, expected: str | None, expected_size: int | None,
             src: Path, target: Path, source: str, origin: str) -> FetchResult:
    """Copy a local file onto ``target`` atomically, verifying its sha256 on the way."""
    h = hashlib.sha256()
    size = 0
    with atomic_path(target) as tmp:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            for block in iter(lambda: fin.read(CHUNK), b""):
                h.update(block)
                size += len(block)
                fout.write(block)
        verified = _check(spec, name, source, origin, expected, h.hexdigest(), expected_size, size)
    res = FetchResult(target, h.hexdigest(), source, origin, size, verified)
    _record(target, res)
    return res


def _from_packaged(spec: DatasetSpec, copy: PackagedCopy, dest_dir: Path, tried: list[str]) -> FetchResult | None:
    src = locate_packaged(copy)
    if src is None:
        tried.append(f"packaged {copy.distribution}=={copy.version}:{copy.path}: not installed")
        return None
    return _install(spec, copy.name, copy.sha256, copy.size, src, dest_dir / copy.name, "packaged", str(src))


def _download(spec: DatasetSpec, file: RemoteFile, url: str, target: Path, timeout: float) -> FetchResult:
    try:
        resp = urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 (registry URLs)
    except urllib.error.HTTPError as exc:
        raise _Unavailable(f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Unavailable(f"{type(exc).__name__}: {reason}") from None
    with resp:
        length = resp.headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else None
        h = hashlib.sha256()
        size = 0
        with atomic_path(target) as tmp:
            with open(tmp, "wb") as fout:
                try:
                    while True:
                        block = resp.read(CHUNK)
                        if not block:
                            break
                        h.update(block)
                        size += len(block)
                        fout.write(block)
                except http.client.IncompleteRead as exc:
                    size += len(exc.partial)
                    raise ChecksumError(
                        f"dataset '{spec.name}' file '{file.name}' from url {url}: truncated: "
                        f"expected {length if length is not None else '?'} bytes, received {size} bytes"
                    ) from None
                except (TimeoutError, OSError, http.client.HTTPException) as exc:
                    raise _Unavailable(f"connection lost after {size} bytes: {exc}") from None
            if length is not None and size != length:
                raise ChecksumError(
                    f"dataset '{spec.name}' file '{file.name}' from url {url}: truncated: "
                    f"expected {length} bytes (Content-Length), received {size} bytes"
                )
            verified = _check(spec, file.name, "url", url, file.sha256, h.hexdigest(), file.size, size)
    res = FetchResult(target, h.hexdigest(), "url", url, size, verified)
    _record(target, res)
    return res
