"""DVC lineage: which stage of ``dvc.lock`` produced a file, with which md5, and what a failed
``dvc pull`` left out.

``cdgtmll audit`` (:mod:`cdgtmll.lineage.audit`) checks every file of an artifact's chain that
lies in a DVC stage output against the ``dvc.lock`` of the current folder or above
(:class:`DvcLineage`): the stage, the md5 recorded for the file (a directory output's per-file
md5 comes from its ``.dir`` listing in the DVC cache) and the md5 of the file on disk
(:func:`md5_file`, DVC 3's ``hash: md5``). :func:`audit_dvc_artifact` says the stage behind the
artifact itself. ``make pull`` prints :func:`failed_pull_report` after a failed ``dvc pull``
(:func:`explain_failed_pull`): each file that is not in the DVC cache, and whether the remote
holds it intact, corrupt or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml


def md5_file(path: str | os.PathLike) -> str:
    """md5 of a file's bytes: DVC 3's ``hash: md5``."""
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class DvcLineage:
    """The outputs recorded in a ``dvc.lock``: which stage produced a file, with which md5."""

    root: Path
    #: (stage, output path relative to root, dvc.lock entry), longest paths first
    outs: list[tuple[str, str, dict]]
    cache_dir: Path
    _listings: dict[str, dict[str, str] | None] = field(default_factory=dict, repr=False)

    @classmethod
    def find(cls, start: Path | None = None) -> DvcLineage | None:
        """The dvc.lock of the current folder or the nearest one above it; None without one."""
        here = Path(os.path.abspath(start or Path.cwd()))
        for d in (here, *here.parents):
            lock = d / "dvc.lock"
            if lock.is_file():
                data = yaml.safe_load(lock.read_text(encoding="utf-8")) or {}
                outs = [(stage, os.path.normpath(o["path"]), o)
                        for stage, rec in (data.get("stages") or {}).items() for o in rec.get("outs") or []]
                outs.sort(key=lambda x: -len(x[1]))
                return cls(d, outs, _dvc_cache_dir(d))
        return None

    def stage_cmd(self, stage: str) -> str:
        data = yaml.safe_load((self.root / "dvc.lock").read_text(encoding="utf-8")) or {}
        return str((data.get("stages") or {}).get(stage, {}).get("cmd", ""))

    def owner(self, path: Path) -> tuple[str, str, dict, str] | None:
        """``(stage, output, entry, path inside the output)`` for a file under a DVC output."""
        try:
            rel = Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:  # outside the repository (e.g. the dataset mirror)
            return None
        for stage, out, entry in self.outs:
            if rel == out or rel.startswith(out + "/"):
                return stage, out, entry, rel[len(out) + 1:]
        return None

    def recorded_md5(self, entry: dict, inner: str) -> str | None:
        """md5 that dvc.lock records for the file (``inner`` '' for a file output); None if the
        directory listing is not in the local cache, KeyError if the listing lacks the file."""
        md5 = str(entry.get("md5", ""))
        if not inner:
            return md5
        if md5 not in self._listings:
            listing = self.cache_dir / md5[:2] / md5[2:]
            self._listings[md5] = ({e["relpath"]: e["md5"] for e in json.loads(listing.read_text())}
                                   if listing.is_file() else None)
        files = self._listings[md5]
        if files is None:
            return None
        return files[inner]


def _dvc_cache_dir(root: Path) -> Path:
    """Where DVC keeps file and ``.dir`` objects (``cache.dir`` of the repository's config)."""
    try:
        from dvc.repo import Repo

        with Repo(str(root)) as repo:
            return Path(repo.cache.local.path)
    except Exception:  # noqa: BLE001 (dvc not installed or not a DVC repository: the default)
        return root / ".dvc" / "cache" / "files" / "md5"


def failed_pull_report(start: Path | None = None, remote: str | None = None) -> list[str]:
    """After a failed ``dvc pull`` (``make pull`` prints this): one line per file of dvc.lock's
    outputs that is not in the DVC cache, by its workspace path, with what the remote holds
    for it: missing, or corrupt (its bytes do not hash to the md5 dvc.lock records, which the
    remote's ``verify = true`` rejected), or intact (a transient failure: pull again). DVC
    itself names only the output folder (``Checkout failed for following targets``)."""
    from dvc.repo import Repo

    lin = DvcLineage.find(start)
    if lin is None:
        return ["no dvc.lock here: nothing to pull"]
    lines: list[str] = []
    with Repo(str(lin.root)) as repo:
        odb = repo.cloud.get_remote_odb(remote)

        def state(md5: str) -> str:
            obj = odb.oid_to_path(md5)
            if not odb.fs.exists(obj):
                return f"missing from the remote {odb.path} (object {md5}): `make push` from a clone that has it"
            h = hashlib.md5()
            with odb.fs.open(obj, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            if h.hexdigest() == md5:
                return f"intact in the remote {odb.path}: run `make pull` again"
            return (f"CORRUPT in the remote {odb.path}: dvc.lock records md5 {md5}, the remote's copy {obj} hashes "
                    f"to {h.hexdigest()}; delete that object, then `make push` from a clone that has the file (or rebuild "
                    "it there: `make all`)")

        for _stage, out, entry in sorted(lin.outs, key=lambda x: x[1]):
            md5 = str(entry.get("md5", ""))
            files = {"": md5}
            if md5.endswith(".dir"):
                listing = lin.cache_dir / md5[:2] / md5[2:]
                if not listing.is_file():
                    lines.append(f"{out}/ (its file listing): {state(md5)}")
                    continue
                files = {e["relpath"]: e["md5"] for e in json.loads(listing.read_text())}
            for rel, m in sorted(files.items()):
                if not (lin.cache_dir / m[:2] / m[2:]).is_file():
                    lines.append(f"{out}/{rel}: {state(m)}" if rel else f"{out}: {state(m)}")
    return lines


def explain_failed_pull() -> int:
    """Print :func:`failed_pull_report` to stderr (``make pull`` after a failed ``dvc pull``); 1."""
    lines = failed_pull_report()
    head = (f"pull: dvc pull failed; {len(lines)} file(s) recorded in dvc.lock are not in the DVC cache:" if lines
            else "pull: dvc pull failed, but every file recorded in dvc.lock is in the DVC cache (see DVC's error above)")
    print("\n  ".join([head, *lines]), file=sys.stderr)
    return 1


class DvcAuditor(Protocol):
    """What :func:`audit_dvc_artifact` uses of an audit (:class:`cdgtmll.lineage.audit.AuditReport`;
    named by its members, as the audit module imports this one)."""

    dvc: DvcLineage | None
    lines: list[str]

    def say(self, text: str, indent: int = 0) -> None: ...

    def dvc_check(self, path: Path, what: str, indent: int) -> str: ...


def audit_dvc_artifact(rep: DvcAuditor, artifact: Path, sources_path: Path) -> None:
    """The stage of dvc.lock that produced the artifact (and its lineage record), with the md5
    dvc.lock records for each; a file that differs from dvc.lock is a problem."""
    if rep.dvc is None:
        return
    owner = rep.dvc.owner(artifact)
    if owner is None:
        rep.say(f"dvc      {artifact} is in no output of {rep.dvc.root / 'dvc.lock'}", 1)
        return
    stage, out, entry, _ = owner
    cmd = rep.dvc.stage_cmd(stage)
    rep.say(f"dvc      stage '{stage}' of dvc.lock ({cmd}), out {out} md5 {entry.get('md5')}", 1)
    for path, what in ((artifact, "artifact"), (sources_path, "lineage record")):
        rep.say(f"dvc      {what}: {path}", 2)
        note = rep.dvc_check(path, what, 3)
        if note:
            rep.lines[-1] += note
