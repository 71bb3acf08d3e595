"""The evaluate job's side of the config record: which config files the workflow read, by content.

The workflow puts the list in the environment (:data:`CONFIG_RECORD_ENV`, set when the rules
are parsed: :func:`cdgtmll.lineage.configs.export_record`); the evaluate job hashes the files
(:func:`config_record`) into each evaluation's provenance record (``metrics.provenance.json``
``config``). The environment and not a ``params`` entry: a param would re-run every evaluation
at any edit of ``params.yaml``, whereas a config change should re-run exactly the jobs whose
run spec or settings it changes (their params do that).

A module of its own, kept small: it is part of the evaluate job's code identity
(:mod:`cdgtmll.lineage.code`), while :mod:`cdgtmll.lineage.configs`, which loads whole configs
for the audit, is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cdgtmll.io import sha256_file

#: the environment variable that carries the record's source from the workflow to the job
CONFIG_RECORD_ENV = "CDGTMLL_CONFIG_RECORD"


class ConfigRecordError(ValueError):
    """The config record's source is not what :func:`cdgtmll.lineage.configs.record_text`
    writes, or names a config file that is not there."""


def config_record(text: str | None) -> dict[str, Any] | None:
    """The ``config`` block of an evaluation's provenance record from the workflow's record
    source (JSON: ``{"configfiles": [...], "params_file": "params.yaml" | null, "overrides":
    {...}}``, paths relative to the working directory): the same fields with ``files``, the
    sha256 of each file (``params_file`` last). None without a source (an evaluation run by
    hand). Raises :class:`ConfigRecordError` naming the source or the missing file."""
    if not text:
        return None
    try:
        rec = json.loads(text)
    except ValueError as exc:
        raise ConfigRecordError(f"config record ({CONFIG_RECORD_ENV} / --config-record): not JSON ({exc}): "
                                f"{text[:200]!r}") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("configfiles"), list) or not rec["configfiles"]:
        raise ConfigRecordError(f"config record ({CONFIG_RECORD_ENV} / --config-record): expected "
                                f'{{"configfiles": [...], "params_file": ..., "overrides": {{...}}}}, got {text[:200]!r}')
    names = [str(f) for f in rec["configfiles"]] + ([str(rec["params_file"])] if rec.get("params_file") else [])
    files = {}
    for name in names:
        if not Path(name).is_file():
            raise ConfigRecordError(f"config record ({CONFIG_RECORD_ENV} / --config-record): config file {name} not "
                                    f"found (relative to {Path.cwd()})")
        files[name] = sha256_file(name)
    return {"files": files, "configfiles": [str(f) for f in rec["configfiles"]],
            "params_file": rec.get("params_file") or None, "overrides": rec.get("overrides") or {}}
