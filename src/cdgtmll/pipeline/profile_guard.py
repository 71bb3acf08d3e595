"""A results folder knows its profile: ``results/profile.json`` names the config profile whose run
started there, and a run of another profile into the same folder stops before its first job.

Without it, ``snakemake all`` (the default profile) in a clone that ran
``make all CONFIG=config/quick.yaml`` silently starts the default profile's jobs into the same
``results/``, and the tables and claims then mix two profiles' runs. The Snakefile calls
:func:`check` in its ``onstart:`` handler (a real run, main process only: never a dry run, a
``--report``, a ``--lint`` or a job's own Snakemake), which raises :class:`ProfileMismatch`
naming both profiles and the command for each way forward, and :func:`write_marker` once the
run may go on. A dry run only warns (:func:`is_dry_run`, :func:`mismatch_message`).

The profile is the config's ``name``: ``--config`` overrides of a setting (a smaller scale) and
``dvc exp run -S '++settings.<key>=<value>'`` keep it and pass. A DVC stage (``DVC_STAGE`` in
the environment) is not stopped but warned: DVC keeps each experiment's outputs in its cache and
``dvc exp run -S profile=<file>`` is its documented way to run another profile (docs/dvc.md).

When ``results/profile.json`` is missing, the record of the last ``tables`` job
(``results/tables/profile.json``: ``profile`` and ``configfiles``) stands for it, so that a
folder filled before this marker existed knows its profile too.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdgtmll.io import write_json

#: the marker, relative to the workflow's folder
MARKER = "results/profile.json"
#: what the tables job records (cdgtmll.tables.build): read when the marker is missing
TABLES_RECORD = "results/tables/profile.json"
#: the folders a run of a profile writes (moved aside to start another profile afresh)
OUTPUT_DIRS = ("results", "figures")


class ProfileMismatch(RuntimeError):
    """A run of one profile into a results folder that holds another's."""


class MarkerError(ValueError):
    """A profile marker that cannot be read (names the file and what was expected)."""


@dataclass(frozen=True)
class Recorded:
    """The profile a results folder holds: its ``name``, its config files, when its run started
    (``""`` when unknown) and the file that says so."""

    name: str
    configfiles: tuple[str, ...]
    started: str
    source: str


def _quoted(text: str) -> str:
    """``text`` in double quotes, control characters and newlines escaped (a name from a config
    file is printed on a terminal)."""
    return json.dumps(text, ensure_ascii=False)


def read_recorded(root: str | os.PathLike = ".") -> Recorded | None:
    """The profile recorded under ``root`` (:data:`MARKER`, else :data:`TABLES_RECORD`); None
    when neither exists. A marker that is not a JSON object with a string ``name`` raises
    :class:`MarkerError` naming the file; an unreadable tables record counts as absent (its
    own reader names it)."""
    root = Path(root)
    marker = root / MARKER
    if marker.exists():
        try:
            rec = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MarkerError(f"{marker}: not readable as JSON ({exc}); expected an object with 'name', "
                              f"'configfiles' and 'started' (remove it to record the next run's profile)") from exc
        if not isinstance(rec, dict) or not isinstance(rec.get("name"), str) or not rec["name"]:
            raise MarkerError(f"{marker}: field 'name' must be a non-empty string (the config's name); "
                              f"got {rec.get('name') if isinstance(rec, dict) else rec!r}")
        files = rec.get("configfiles") or []
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise MarkerError(f"{marker}: field 'configfiles' must be a list of paths; got {files!r}")
        return Recorded(rec["name"], tuple(files), str(rec.get("started") or ""), MARKER)
    tables = root / TABLES_RECORD
    try:
        rec = json.loads(tables.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = rec.get("profile") if isinstance(rec, dict) else None
    if not isinstance(name, str) or not name:
        return None
    files = [f for f in rec.get("configfiles") or [] if isinstance(f, str)]
    return Recorded(name, tuple(files), "", TABLES_RECORD)


def write_marker(root: str | os.PathLike, name: str, configfiles: Sequence[str],
                 now: dt.datetime | None = None) -> Path:
    """Record (atomically) that ``root``'s results belong to profile ``name`` run from
    ``configfiles``; the marker's path."""
    now = now or dt.datetime.now(dt.UTC)
    target = Path(root) / MARKER
    write_json(target, {"name": name, "configfiles": list(configfiles), "started": now.isoformat(timespec="seconds")})
    return target


def _files(configfiles: Sequence[str]) -> str:
    return " ".join(shlex.quote(f) for f in configfiles) or "config/config.yaml"


def _commands(configfiles: Sequence[str]) -> list[str]:
    """The two ways to run the profile of ``configfiles``: snakemake itself and make (one file)."""
    cmds = [f"snakemake all --cores all --configfile {_files(configfiles)}"]
    if len(configfiles) <= 1:
        cmds.append(f"make all CONFIG={_files(configfiles)}")
    return cmds


def _aside(name: str) -> str:
    """A folder suffix from a profile name: letters, digits, '.', '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "previous"


def mismatch_message(recorded: Recorded, name: str, configfiles: Sequence[str]) -> str | None:
    """None when the run of profile ``name`` (from ``configfiles``) may write where ``recorded``
    ran; else what to tell the user: both profiles and the commands of each way forward."""
    if recorded.name == name:
        return None
    started = f", started {recorded.started}" if recorded.started else ""
    old_files = ", ".join(recorded.configfiles) or "config file not recorded"
    new_files = ", ".join(configfiles) or "config/config.yaml"
    suffix = _aside(recorded.name)
    moves = " && ".join(f"mv {d} {shlex.quote(f'{d}.{suffix}')}" for d in OUTPUT_DIRS)
    lines = [
        f"results/ holds a run of profile {_quoted(recorded.name)} ({old_files}{started}; recorded in "
        f"{recorded.source}), but this run is profile {_quoted(name)} ({new_files}). Its jobs would write into the "
        f"same results/ and the tables would mix both profiles' runs, so no job was started.",
        f"To go on with profile {_quoted(recorded.name)}:",
    ]
    if recorded.configfiles:
        lines += [f"    {c}" for c in _commands(recorded.configfiles)]
    else:
        lines.append(f"    snakemake all --cores all --configfile <the file whose name is {_quoted(recorded.name)}>")
    lines += [
        f"To start profile {_quoted(name)} in a fresh folder (the other run's results/ and figures/ moved aside):",
        f"    {moves}",
        *(f"    {c}" for c in _commands(list(configfiles))),
    ]
    return "\n".join(lines)


def check(root: str | os.PathLike, name: str, configfiles: Sequence[str],
          environ: Mapping[str, str] | None = None) -> str | None:
    """Before a real run's first job: raise :class:`ProfileMismatch` when ``root``'s results hold
    another profile's run; under a DVC stage return the message as a warning instead; None when
    the run may go on silently."""
    recorded = read_recorded(root)
    msg = mismatch_message(recorded, name, configfiles) if recorded else None
    if msg is None:
        return None
    env = os.environ if environ is None else environ
    if env.get("DVC_STAGE"):
        return f"{msg}\n(Run by DVC, which keeps each experiment's outputs: going on.)"
    raise ProfileMismatch(msg)


#: Snakemake's flags of a dry run (a cluster of one-letter flags, e.g. ``-np``, counts too)
_DRY_FLAGS = ("--dry-run", "--dryrun", "--dry", "-n")


def is_dry_run(argv: Sequence[str]) -> bool:
    """Whether Snakemake's command line ``argv`` (``sys.argv``: the ``snakemake`` entry point or
    ``python -m snakemake``) asks for a dry run; the workflow object does not know it yet while
    the Snakefile is parsed."""
    for a in argv[1:]:
        if a == "--":
            break
        if a in _DRY_FLAGS or (re.fullmatch(r"-[A-Za-z]+", a) and "n" in a[1:] and not a.startswith("--")):
            return True
    return False
