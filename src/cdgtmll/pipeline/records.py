"""Snakemake's records of the outputs DVC tracks travel with them, in ``results/jobs.json``.

Snakemake decides whether an output is up to date from file times and from the record it keeps
in ``.snakemake/metadata`` when a job finishes: the rule's code, its params, its input files and
the sha256 of each input (Snakemake 9.27, ``snakemake.persistence``). Where a record is missing,
only the times count, and Snakemake cannot see that the settings or the code changed; an input
newer than an output counts as changed unless its sha256 equals the recorded one. DVC restores
outputs without either: ``dvc pull`` into a fresh clone has no records and writes files in no
particular order, and ``dvc checkout`` / ``dvc exp apply`` bring back the files of another run
while ``.snakemake`` keeps the records of the last one here. So:

* :func:`export_records` (``python -m cdgtmll.pipeline.records export``, the end of dvc.yaml's
  stage command): for every file under the stage's outputs that has a complete record, the
  fields of the record that say what made it (:data:`FIELDS`: rule, code, params, input files
  and their sha256, software stack, record format) and the file's sha256, grouped by job, into
  ``results/jobs.json``, itself an output of the stage. No times, hosts or absolute paths:
  the same run gives the same bytes anywhere.
* :func:`import_records` (the Snakefile, as it is parsed, main process only): for every output
  listed there whose local record is missing, differs or is marked incomplete, and whose bytes
  are the ones the export hashed, write that record (and clear the incomplete mark): a missing
  or incomplete record always; a record that differs only when the export itself is not the
  one this workspace last saw (:data:`SEEN`: DVC restored it), since after a plain ``snakemake``
  run here the local record is the newer one (a job re-run by changed code that wrote the same
  bytes keeps its new record, or it would be re-run at every start until the next export). Snakemake
  then judges the job by its own triggers: a record made with other params or code re-runs the
  job, an input with other bytes re-runs it, the same ones do not. A file whose bytes differ
  from the export keeps its own record, or none; an output whose local record already says
  what the export says is not read at all (after a pull or a checkout each restored file is
  hashed once).

Records are read and written through Snakemake's own file backend
(:class:`snakemake.persistence.file.FilePersistence`, pinned by requirements.lock); an export
of another record format than the installed Snakemake's is not imported (Snakemake would not
compare its params). An imported record has no shell command, conda file or container (not part
of what Snakemake compares, and host-specific), its start and end time are the file's time here
(Snakemake's report needs numbers), and its ``job_hash`` (Snakemake's report groups a job's
outputs by it) is derived from the job's record.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from snakemake.persistence import RECORD_FORMAT_VERSION, MetadataRecord
from snakemake.persistence.file import FilePersistence

from cdgtmll.io import canonical_json, sha256_file, write_json

#: the export, relative to the workflow root (an output of dvc.yaml's stage)
EXPORT = Path("results/jobs.json")
#: the stage file whose outputs are exported
DVC_YAML = Path("dvc.yaml")
#: version of the export's layout
FORMAT = 1
#: the sha256 of the export this workspace last wrote or imported from, beside Snakemake's own
#: state (not an output: it says what this workspace saw, not what a run made)
SEEN = Path(".snakemake/cdgtmll-records-seen")
#: the fields of a Snakemake record that say what made an output: what its rerun triggers
#: compare (code, params, input, software_stack_hash), the inputs' checksums it compares an
#: input newer than the output with, the record format and the rule and log for its summaries
FIELDS = ("rule", "code", "params", "input", "log", "input_checksums", "software_stack_hash",
          "record_format_version")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class RecordsError(ValueError):
    """results/jobs.json cannot be used; the message names the file, the field and the fix."""


def file_persistence(root: str | os.PathLike = ".") -> FilePersistence:
    """Snakemake's file backend of ``root/.snakemake`` (records keyed by the path relative to root)."""
    return FilePersistence(nolock=True, path=Path(root).absolute() / ".snakemake")


def identity(record: MetadataRecord) -> dict[str, Any]:
    """The :data:`FIELDS` of a record, as the export stores them."""
    return {name: getattr(record, name) for name in FIELDS}


def _job_hash(record: dict) -> int:
    """A stable positive int per job (Snakemake's report groups a job's outputs by job_hash)."""
    return int(hashlib.sha256(canonical_json(record).encode()).hexdigest()[:15], 16)


# ---------------------------------------------------------------------------------------------
# export


def dvc_outputs(root: str | os.PathLike = ".", dvc_yaml: str | os.PathLike = DVC_YAML) -> list[str]:
    """The paths of every output (outs, metrics, plots) of every stage in ``dvc.yaml``, relative
    to ``root``; [] when there is no dvc.yaml. Raises RecordsError naming the file and field when
    it is not a DVC stage file."""
    path = Path(root) / dvc_yaml
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, yaml.YAMLError) as exc:
        raise RecordsError(f"{path}: cannot read the DVC stages: {exc}") from exc
    stages = (doc or {}).get("stages") if isinstance(doc, dict) else None
    if not isinstance(stages, dict):
        raise RecordsError(f"{path}: 'stages' must be a mapping of stage names to stages")
    out: list[str] = []
    for name, stage in stages.items():
        for kind in ("outs", "metrics", "plots"):
            entries = (stage.get(kind) if isinstance(stage, dict) else None) or []
            if not isinstance(entries, list):
                raise RecordsError(f"{path}: stages.{name}.{kind} must be a list")
            for entry in entries:
                p = entry if isinstance(entry, str) else next(iter(entry), None) if isinstance(entry, dict) else None
                if not isinstance(p, str):
                    raise RecordsError(f"{path}: stages.{name}.{kind}: {entry!r} is not an output path")
                out.append(p)
    return list(dict.fromkeys(out))


def _files(root: Path, outs: Iterable[str]) -> Iterator[str]:
    for out in outs:
        top = root / out
        if top.is_file():
            yield Path(out).as_posix()
        elif top.is_dir():
            for d, dirs, files in os.walk(top):
                dirs.sort()
                for f in sorted(files):
                    yield (Path(d) / f).relative_to(root).as_posix()


@dataclass
class Export:
    path: Path
    jobs: int
    outputs: int


def export_records(root: str | os.PathLike = ".", persistence: FilePersistence | None = None,
                   export: str | os.PathLike = EXPORT, outs: Iterable[str] | None = None) -> Export:
    """Write ``root/export``: the record (:data:`FIELDS`) and the sha256 of every file under
    ``outs`` (default: the outputs of ``root/dvc.yaml``) that has a complete Snakemake record."""
    root = Path(root)
    pers = persistence or file_persistence(root)
    export_key = Path(export).as_posix()
    keys = [k for k in _files(root, dvc_outputs(root) if outs is None else outs) if k != export_key]
    incomplete = pers._filter_incomplete_keys(keys)
    jobs: dict[str, dict] = {}
    for key in keys:
        rec = pers._read_record(key)
        if rec is None or rec.incomplete or key in incomplete:
            continue
        ident = identity(rec)
        job = jobs.setdefault(canonical_json(ident), {"record": ident, "outputs": {}})
        job["outputs"][key] = sha256_file(root / key)
    ordered = sorted(jobs.values(), key=lambda j: min(j["outputs"]))
    write_json(root / export, {
        "about": "Snakemake's records of the jobs that made these outputs, each output with its sha256: "
                 "Snakemake imports a record where the file has these bytes (cdgtmll.pipeline.records, "
                 "docs/dvc.md)",
        "format": FORMAT,
        "jobs": ordered,
    })
    _mark_seen(root, root / export)
    return Export(root / export, len(ordered), sum(len(j["outputs"]) for j in ordered))


# ---------------------------------------------------------------------------------------------
# import


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


def _export_sha(root: Path, export: Path) -> str:
    """The export's sha256, from :data:`SEEN` when the file's size and time are the ones recorded
    there (a normal start hashes nothing), else hashed."""
    try:
        sha, key = (root / SEEN).read_text(encoding="utf-8").strip().split(" ", 1)
        if key == _stat_key(export):
            return sha
    except (OSError, ValueError):
        pass
    return sha256_file(export)


def _seen(root: Path) -> str | None:
    try:
        return (root / SEEN).read_text(encoding="utf-8").strip().split(" ", 1)[0]
    except (OSError, IndexError):
        return None


def _mark_seen(root: Path, export: Path) -> None:
    try:
        (root / SEEN).parent.mkdir(parents=True, exist_ok=True)
        (root / SEEN).write_text(f"{_export_sha(root, export)} {_stat_key(export)}\n", encoding="utf-8")
    except OSError:
        pass  # a read-only .snakemake: every export then counts as restored


def read_export(path: str | os.PathLike) -> list[dict]:
    """The jobs of an export, checked; RecordsError names the file, the field and the fix."""
    path = Path(path)
    fix = f"restore it (`dvc checkout {path}`) or delete it (Snakemake then judges the outputs without a record by their times)"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecordsError(f"{path}: cannot read Snakemake's records of the outputs ({exc}); {fix}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise RecordsError(f"{path}: field 'format' must be {FORMAT}, got {got!r}; {fix}")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise RecordsError(f"{path}: field 'jobs' must be a list; {fix}")
    for i, job in enumerate(jobs):
        rec = job.get("record") if isinstance(job, dict) else None
        outputs = job.get("outputs") if isinstance(job, dict) else None
        if not isinstance(rec, dict) or sorted(rec) != sorted(FIELDS):
            raise RecordsError(f"{path}: jobs[{i}].record must have the fields {list(FIELDS)}, got "
                               f"{sorted(rec) if isinstance(rec, dict) else rec!r}; {fix}")
        if not isinstance(outputs, dict) or not outputs:
            raise RecordsError(f"{path}: jobs[{i}].outputs must map output paths to sha256s; {fix}")
        for out, sha in outputs.items():
            if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
                raise RecordsError(f"{path}: jobs[{i}].outputs[{out!r}] must be a sha256 (64 hex digits), got {sha!r}; {fix}")
            if Path(out).is_absolute() or ".." in Path(out).parts:
                raise RecordsError(f"{path}: jobs[{i}].outputs: {out!r} is not a path inside the workflow; {fix}")
    return jobs


@dataclass
class Imported:
    """What :func:`import_records` did."""

    imported: list[str] = field(default_factory=list)
    #: outputs whose bytes differ from the export (their own record, or none, decides)
    differ: list[str] = field(default_factory=list)
    #: outputs whose exported record has another format than the installed Snakemake's
    other_format: list[str] = field(default_factory=list)
    #: why nothing was looked at (another Snakemake holds the locks)
    skipped: str | None = None

    def lines(self, export: str | os.PathLike = EXPORT) -> list[str]:
        def some(paths: list[str]) -> str:
            return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")

        out = []
        if self.skipped:
            out.append(self.skipped)
        if self.imported:
            out.append(f"{len(self.imported)} output(s) have the bytes {export} records for them: Snakemake's "
                       f"records of the jobs that made them imported ({some(self.imported)})")
        if self.differ:
            out.append(f"{len(self.differ)} output(s) differ from the bytes {export} records, so their own "
                       f"records (or none) decide: {some(self.differ)}")
        if self.other_format:
            out.append(f"{len(self.other_format)} record(s) of {export} have another record format than this "
                       f"Snakemake's ({RECORD_FORMAT_VERSION}): not imported ({some(self.other_format)})")
        return out


def import_records(root: str | os.PathLike = ".", persistence: FilePersistence | None = None,
                   export: str | os.PathLike = EXPORT) -> Imported:
    """Import the records of ``root/export`` where they describe the bytes on disk (module
    docstring). Nothing happens without an export, or while another Snakemake holds its locks
    in ``.snakemake`` (a running job's output may be half made)."""
    root = Path(root)
    done = Imported()
    if not (root / export).is_file():
        return done
    jobs = read_export(root / export)
    restored = _seen(root) != _export_sha(root, root / export)  # DVC brought another export since this workspace's last
    pers = persistence or file_persistence(root)
    if next(iter(pers._read_locks()), None) is not None:
        done.skipped = (f"another Snakemake holds the locks of {root / '.snakemake'} (or a killed one left them: "
                        f"`snakemake --unlock`): Snakemake's records were not compared with {export}")
        return done
    keys = [k for job in jobs for k in job["outputs"]]
    incomplete = pers._filter_incomplete_keys(keys)
    for job in jobs:
        record = job["record"]
        for key, sha in job["outputs"].items():
            path = root / key
            if not path.is_file():
                continue
            local = pers._read_record(key)
            if key not in incomplete and local is not None and (identity(local) == record or not restored):
                continue
            if record["record_format_version"] != RECORD_FORMAT_VERSION:
                done.other_format.append(key)
                continue
            if sha256_file(path) != sha:
                done.differ.append(key)
                continue
            mtime = path.stat().st_mtime
            pers._write_record(key, MetadataRecord(**record, incomplete=False, starttime=mtime, endtime=mtime,
                                                   job_hash=_job_hash(record)))
            pers._unmark_incomplete(key)
            done.imported.append(key)
    pers._clear_cache()
    _mark_seen(root, root / export)
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdgtmll.pipeline.records", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help=f"write {EXPORT} from .snakemake's records of dvc.yaml's outputs")
    im = sub.add_parser("import", help=f"import the records of {EXPORT} where the files have its bytes")
    for p in (ex, im):
        p.add_argument("--root", default=".", help="the workflow's root (default: here)")
    args = ap.parse_args(argv)
    try:
        if args.command == "export":
            done = export_records(args.root)
            print(f"records: {done.outputs} output(s) of {done.jobs} job(s) in {done.path}")
        else:
            for line in import_records(args.root).lines() or ["nothing to import"]:
                print(f"records: {line}")
    except RecordsError as exc:
        print(f"records: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
