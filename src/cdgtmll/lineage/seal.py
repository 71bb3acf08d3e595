"""A self-hash inside a JSON record: tamper-evidence for ``metrics.json``.

The evaluate job seals every ``metrics.json`` it writes (:func:`write_sealed_json`): the field
``integrity.sha256`` holds the sha256 of the canonical JSON of every other field. A value edited
by hand afterwards no longer matches it; the tables' reader (:func:`read_sealed_json`), the
Snakefile's check before every run (:mod:`cdgtmll.lineage.integrity`) and ``cdgtmll audit``
refuse such a file, naming it and the field, the way :mod:`cdgtmll.io` names a corrupt file.

A module of its own, not part of :mod:`cdgtmll.io`: every job imports ``cdgtmll.io``, so a
change there would change every job's code identity (and re-run every training); only the
jobs that write or read sealed records import this one.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

# _json_default: the JSON form write_json gives numpy values and paths (io is not edited here: it
# is part of every job's code identity)
from cdgtmll.io import _json_default, canonical_json, corrupt_artifact, sha256_bytes, write_json

#: the field of a sealed JSON file that holds the sha256 of the rest of it (:func:`write_sealed_json`)
SEAL_FIELD = "integrity"


def seal_digest(obj: dict) -> str:
    """sha256 of a sealed record's content: the canonical JSON of every field but
    :data:`SEAL_FIELD`, after the round trip through JSON its reader sees (numpy values as
    Python numbers), so that writer and reader hash the same thing."""
    plain = as_read({k: v for k, v in obj.items() if k != SEAL_FIELD})
    return hashlib.sha256(canonical_json(plain).encode()).hexdigest()


def as_read(obj: Any) -> Any:
    """``obj`` as a reader of the JSON :func:`write_json` writes of it gets it back (numpy
    values as Python numbers, tuples as lists, paths as strings): what a writer compares or
    hashes when it must match what is read later."""
    return json.loads(json.dumps(obj, default=_json_default))


def write_sealed_json(target: str | os.PathLike, obj: dict) -> None:
    """:func:`write_json` with a self-hash (``integrity.sha256``, :func:`seal_digest`): a value
    edited by hand afterwards no longer matches it, and :func:`read_sealed_json` refuses the
    file. Tamper-evidence against edits and restores, not a signature: whoever recomputes the
    seal can forge it, which ``cdgtmll audit`` catches by re-computing the values themselves."""
    body = {k: v for k, v in obj.items() if k != SEAL_FIELD}
    body[SEAL_FIELD] = {"sha256": seal_digest(body),
                        "of": "canonical JSON (sorted keys, no spaces) of every other field"}
    write_json(target, body)


def seal_problem(obj: Any) -> str | None:
    """Why a sealed record's content does not match its self-hash (in words naming the
    field), or None when it does."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, found {type(obj).__name__}"
    rec = obj.get(SEAL_FIELD)
    if not isinstance(rec, dict) or not rec.get("sha256"):
        return f"field '{SEAL_FIELD}.sha256' (its self-hash) is missing: written by older code or edited"
    actual = seal_digest(obj)
    if actual != rec["sha256"]:
        return (f"its content does not match its self-hash (field '{SEAL_FIELD}.sha256' {str(rec['sha256'])[:16]}…, "
                f"content {actual[:16]}…): edited after it was written")
    return None


def read_sealed_json(path: str | os.PathLike, producer: str | None = None, remove: bool = False,
                     unsealed_ok: bool = False) -> tuple[Any, str]:
    """``(record, sha256 of the bytes read)`` of a file written by :func:`write_sealed_json`,
    parsed and hashed from one read (the digest is of the very bytes the record came from). A
    file that cannot be parsed, or whose content does not match its self-hash, raises
    :class:`CorruptArtifactError` naming it, why, and the rule that writes it (deleted first
    with ``remove``, so that the next ``snakemake`` run re-makes it). ``unsealed_ok``: a file
    without a self-hash at all (written before files were sealed) is read as it is."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        obj = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise corrupt_artifact(path, exc, producer, remove) from exc
    problem = seal_problem(obj)
    if problem is not None and not (unsealed_ok and isinstance(obj, dict) and SEAL_FIELD not in obj):
        raise corrupt_artifact(path, problem, producer, remove)
    return obj, sha256_bytes(data)
