"""Trace a table cell or a figure back to its inputs and re-verify every recorded hash.

``cdgtmll audit results/tables/table1_standard.md --cell CD-GTMLL "Yeast Rare-F1"``
``cdgtmll audit figures/pr_tail.pdf``

For a table, each cell's value comes first (:func:`audit_cell_value`), recomputed from the
*predictions* behind it, not from what ``metrics.json`` says: each run its ``.sources.json``
lists is evaluated again by the evaluate job's own code
(:func:`cdgtmll.metrics.evaluate_run.reevaluate`, with the settings the job recorded), and the
cell is computed as the tables compute it: the cell as the table prints it (mean ± sample std
in percent, n runs), then one line per run (its folder, variant, sampling seed and training
seed, and the metric's value, read in the table's threshold mode: ``global`` for the unsuffixed
files, ``adaptive`` for ``*_adaptive``). Every field of a run's ``metrics.json`` that differs
from its re-evaluation fails the audit (``DIFFERS FROM ITS PREDICTIONS``, naming the file and
the field, e.g. ``global@0.5.micro_f1``): a forged or stale metrics file. The recomputed
mean / std / n are compared with the table's CSV (``<stem>.csv`` beside the artifact); a cell
whose CSV differs gets a ``MISMATCH`` line and fails the audit (a table that shows a number
its sources do not support); the hashes below say which file changed. A ``metrics.json``
whose content does not match the self-hash its evaluate job sealed it with
(:func:`cdgtmll.lineage.seal.seal_problem`) fails too.

The chain, for each run behind the artifact::

    table/figure  --sources.json-->  metrics.json (sha256)
    metrics.json  --inputs-->        predictions.npz, clean processed data (sha256)
    metrics.provenance.json -->      the metrics.json it belongs to, provenance.json (sha256);
                                     when, where and from which commit it was evaluated; the
                                     config files the workflow read (sha256, see below)
    provenance    --outputs-->       the predictions' sha256: must be the one metrics.json was
                                     computed from
    provenance    --inputs-->        processed data / R-variant (sha256), run spec (config sha256),
                                     seed, git commit + dirty flag (code only), packages, device
    processed     --meta-->          raw files: the copies in results/raw/<dataset>/ are
                                     re-hashed against the sha256 recorded when they were
                                     acquired (provenance ``data_sources``, i.e. the processed
                                     data's ``source_files``); image datasets (row ids or
                                     frozen features): the image listing (path + size of
                                     every image), the image archives in the raw folder, and
                                     the ResNet-50 weights file
    raw copy  --origin-->            the source it was copied from (mirror file, packaged
                                     copy, file:// download) and the source configured now
                                     (``CDGTMLL_DATA_MIRROR``), when present here: re-hashed,
                                     ``SOURCE CHANGED`` when it is no longer the raw copy's bytes

Every hash is recomputed from the file on disk. A missing or modified file makes the
audit fail (exit 1) and names the file, the expected and the actual hash.

Code and config. A run made from a working tree with uncommitted changes to *code* (the
package, the rules, the Snakefile, the lock files, pyproject.toml, mk/: the rule of
:mod:`cdgtmll.lineage.worktree`), or runs of several commits, are ``MIXED CODE`` (a failure
unless ``--allow-mixed``); a change to ``params.yaml`` or a profile is not. Config files are
inputs: each run's evaluation record holds their sha256 (:mod:`cdgtmll.lineage.configs`). A
file whose content is still the recorded one is ``ok``; one that changed since is checked for
what matters to the run: its run spec and evaluation settings are made again from the config
as it is now: the same is a note (the change concerns other runs, e.g. after a ``dvc exp run
-S`` that re-ran them), different is ``STALE CONFIG`` naming each field (a failure unless
``--allow-stale``, as ``STALE CODE``).

DVC lineage (:mod:`cdgtmll.lineage.dvc`): when a ``dvc.lock`` is found (the current folder or
above), every file of the chain that lies in a DVC stage output (the artifact and its
``.sources.json`` included) is also checked against it: the audit names the stage and the md5 recorded for the file (a
directory output's per-file md5 comes from its ``.dir`` listing in the DVC cache), and fails
when the file on disk differs from dvc.lock or when dvc.lock cannot be checked (listing not
in the cache: ``dvc fetch``).
"""

from __future__ import annotations

import csv
import json
import math
import os
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdgtmll.config.run_spec import RunSpec, RunSpecError
from cdgtmll.config.schema import ConfigError
from cdgtmll.data.acquire import local_source
from cdgtmll.data.processed import ProcessedData
from cdgtmll.data.registry import REGISTRY
from cdgtmll.io import (
    NPZ_ERRORS,
    CorruptArtifactError,
    canonical_json,
    config_hash,
    load_npz,
    read_json,
    sha256_file,
)
from cdgtmll.lineage import configs
from cdgtmll.lineage.code import changed_modules
from cdgtmll.lineage.code import identity as code_identity
from cdgtmll.lineage.dvc import DvcLineage, audit_dvc_artifact, md5_file
from cdgtmll.lineage.provenance import recorded_spec, run_machine
from cdgtmll.lineage.seal import SEAL_FIELD, seal_problem
from cdgtmll.lineage.worktree import code_dirty, code_dirty_files
from cdgtmll.metrics.evaluate_run import EVALUATION_RECORD, differences, reevaluate
from cdgtmll.tables.collect import mode_block, run_deterministic
from cdgtmll.tables.layout import header_metric, table_digits
from cdgtmll.variants.naming import split_variant, variant_setting

#: how many differing fields of one metrics.json the audit names (the rest are counted)
MAX_DIFFS_SAID = 12

#: where the raw copies of data prepared before ``source_files`` recorded their ``path`` are
#: (the default ``data.raw_dir``)
DEFAULT_RAW_DIR = Path("results/raw")


@dataclass
class AuditReport:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: things the audit found wrong that are not a hash check (a table cell whose CSV differs
    #: from the value its sources give); printed, but the audit does not fail on them
    warnings: list[str] = field(default_factory=list)
    checked: int = 0
    #: within one audit each file is hashed and each image listing computed once (a table's
    #: runs share their data files)
    _sha256: dict[Path, str] = field(default_factory=dict, repr=False)
    _listings: dict[Path, tuple[str, str, list] | None] = field(default_factory=dict, repr=False)
    #: the dvc.lock the files are checked against (None: no dvc.lock, DVC lineage not checked)
    dvc: DvcLineage | None = None
    dvc_checked: int = 0
    _dvc_seen: dict[Path, str] = field(default_factory=dict, repr=False)
    #: --allow-stale: a run whose recorded code differs from the code on disk is a warning;
    #: --allow-mixed: runs of several commits or of a dirty tree are a warning (else problems)
    allow_stale: bool = False
    allow_mixed: bool = False
    #: git commit -> runs, and the runs made from a tree with uncommitted changes to code
    #: (training provenance; :func:`cdgtmll.lineage.worktree.code_dirty`) with those files
    commits: dict[str, list[str]] = field(default_factory=dict, repr=False)
    dirty: list[tuple[str, list[str] | None]] = field(default_factory=list, repr=False)
    #: the configuration now, per recorded config (files, overrides): loaded once per audit
    _configs: dict[str, dict | str] = field(default_factory=dict, repr=False)
    #: kind of machine (:func:`run_machine`) -> runs
    devices: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _code_seen: set[tuple[str, str]] = field(default_factory=set, repr=False)
    #: each run re-evaluated once per audit (its cells share it), and each clean data file loaded once:
    #: metrics path -> (re-evaluated record, or None, and why not)
    _reevaluated: dict[Path, tuple[dict | None, str]] = field(default_factory=dict, repr=False)
    _clean: dict[Path, ProcessedData] = field(default_factory=dict, repr=False)
    _diffs_said: set[Path] = field(default_factory=set, repr=False)

    def reevaluated(self, path: Path, record: dict) -> tuple[dict | None, str]:
        """``(the metrics of the run's predictions, evaluated again, '')``, or ``(None, why not)``;
        the differences from ``record`` are problems, said once per run (one line each,
        naming the file and the field)."""
        key = path.resolve()
        if key in self._reevaluated:
            return self._reevaluated[key]
        try:
            recorded_clean = ((record.get("inputs") or {}).get("clean_data") or {}).get("path")
            clean = None  # not recorded: reevaluate names the missing field
            if recorded_clean:
                ckey = Path(recorded_clean).resolve()
                if ckey not in self._clean:
                    self._clean[ckey] = ProcessedData.load(Path(recorded_clean))
                clean = self._clean[ckey]
            result: tuple[dict | None, str] = (reevaluate(record, path, clean), "")
        except (OSError, KeyError, CorruptArtifactError, *NPZ_ERRORS) as exc:
            text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else f"{type(exc).__name__}: {exc}"
            result = (None, text)
        self._reevaluated[key] = result
        return result

    def say_differences(self, path: Path, record: dict, indent: int) -> None:
        """One problem per field of ``record`` that its predictions do not give (said once per run)."""
        if path.resolve() in self._diffs_said:
            return
        self._diffs_said.add(path.resolve())
        new, why = self.reevaluated(path, record)
        if new is None:
            text = f"UNVERIFIED metrics: {path}: its values cannot be re-computed from its predictions ({why})"
            self.problems.append(text)
            self.say(text, indent)
            return
        pred = ((record.get("inputs") or {}).get("predictions") or {}).get("path")
        diffs = differences(record, new)
        for fld, was, now in diffs[:MAX_DIFFS_SAID]:
            text = (f"DIFFERS FROM ITS PREDICTIONS metrics: {path}: field '{fld}' is {was!r}, evaluating {pred} "
                    f"again gives {now!r}")
            self.problems.append(text)
            self.say(text, indent)
        if len(diffs) > MAX_DIFFS_SAID:
            text = f"DIFFERS FROM ITS PREDICTIONS metrics: {path}: and {len(diffs) - MAX_DIFFS_SAID} more field(s)"
            self.problems.append(text)
            self.say(text, indent)
        if not diffs:
            self.checked += 1

    def check_code(self, record: dict | None, what: str, where: Path, indent: int) -> None:
        """Recompute a recorded code identity (:mod:`cdgtmll.lineage.code`) from the code on
        disk: a difference is STALE CODE (a problem unless ``allow_stale``), naming the modules
        that changed."""
        if not record or not record.get("roots"):
            self._stale(f"UNRECORDED CODE {what}: {where} records no code identity (made before code identities "
                        "were recorded); re-run it to trace its code", indent)
            return
        key = (record["sha256"], ",".join(record["roots"]))
        if key in self._code_seen:
            return
        self._code_seen.add(key)
        now = code_identity(record["roots"])
        if now["sha256"] == record["sha256"]:
            self.say(f"ok       {what} code {record['sha256'][:16]}… equals the code on disk "
                     f"({len(now['modules'])} modules + lock file)", indent)
            return
        changed = changed_modules(record.get("modules") or {}, now["modules"])
        if record.get("lock_sha256") != now["lock_sha256"]:
            changed.append("requirements.lock")
        self._stale(f"STALE CODE {what}: {where} was made by code {record['sha256'][:16]}…, the code on disk is "
                    f"{now['sha256'][:16]}… (changed: {', '.join(changed) or 'unknown'}); re-run it "
                    "(`snakemake all` re-runs exactly such jobs)", indent)

    def _stale(self, text: str, indent: int) -> None:
        self.say(text, indent)
        (self.warnings if self.allow_stale else self.problems).append(text)

    def note_git(self, git: dict, run: str) -> None:
        """Count a run's commit, and the run when its code had uncommitted changes (config
        files do not count: :mod:`cdgtmll.lineage.worktree`)."""
        self.commits.setdefault(str(git.get("commit")), []).append(run)
        if code_dirty(git):
            self.dirty.append((run, code_dirty_files(git)))

    def check_config(self, record: dict | None, spec: RunSpec | None, settings: dict | None, where: Path,
                     indent: int) -> None:
        """The config files a run recorded (its evaluation record's ``config``) against the files
        now (:mod:`cdgtmll.lineage.configs`): unchanged, ok; changed, the run's training
        ``spec`` and evaluation ``settings`` are made again from the config now: the same is a
        note, different is STALE CONFIG (a problem unless ``allow_stale``)."""
        if not record:
            self.say(f"config   {where} records no config files (evaluated outside the workflow, or before they "
                     "were recorded)", indent)
            return
        changed = configs.changed_files(record)
        files = record.get("files") or {}
        if not changed:
            self.checked += len(files)
            self.say("ok       config " + ", ".join(f"{f} sha256 {str(h)[:16]}…" for f, h in files.items())
                     + " as recorded", indent)
            return
        said = ", ".join(f"{f} (recorded {was[:16]}…, now {now[:16] + '…' if now else 'missing'})"
                         for f, (was, now) in changed.items())
        key = canonical_json({k: record.get(k) for k in ("configfiles", "overrides")})
        if key not in self._configs:
            try:
                self._configs[key] = configs.current_config(record)
            except (ConfigError, OSError) as exc:
                self._configs[key] = f"{type(exc).__name__}: {exc}"
        now = self._configs[key]
        if isinstance(now, str):
            self._stale(f"STALE CONFIG {where}: changed since the run: {said}; the config cannot be loaded now "
                        f"({now})", indent)
            return
        try:
            diffs = configs.run_changes(spec, settings, now)
        except (ConfigError, KeyError, ValueError) as exc:
            diffs = [f"the config now does not describe this run ({type(exc).__name__}: {exc})"]
        if not diffs:
            self.checked += len(files)
            self.say(f"ok       config changed since the run: {said}; the config now gives this run the same run "
                     "spec and evaluation settings (the change concerns other runs)", indent)
            return
        more = f" and {len(diffs) - configs.MAX_FIELDS_SAID} more" if len(diffs) > configs.MAX_FIELDS_SAID else ""
        self._stale(f"STALE CONFIG {where}: changed since the run: {said}; what the config now gives this run "
                    "differs: " + "; ".join(diffs[:configs.MAX_FIELDS_SAID]) + more
                    + "; re-run it (`snakemake all` re-runs exactly such jobs)", indent)

    def note_device(self, prov: dict, run: str) -> None:
        kind = run_machine(prov)
        if kind is not None:
            self.devices.setdefault(kind, []).append(run)

    def check_devices(self) -> None:
        """Runs on more than one kind of machine: MIXED DEVICES, a warning (a cluster may hold
        several kinds of node; the same seed gives the same numbers on the same kind only)."""
        if len(self.devices) > 1:
            text = (f"MIXED DEVICES: the runs ran on {len(self.devices)} kinds of machine: "
                    + ", ".join(f"{k} ({len(r)} run(s), e.g. {r[0]})" for k, r in sorted(self.devices.items()))
                    + "; the same seed gives the same numbers on the same kind of machine only")
            self.say(text, 1)
            self.warnings.append(text)

    def check_mixed(self) -> None:
        """Runs of more than one commit, or of a dirty tree: MIXED CODE (a problem unless
        ``allow_mixed``)."""
        texts = []
        if len(self.commits) > 1:
            texts.append(f"MIXED CODE: the runs come from {len(self.commits)} commits: "
                         + ", ".join(f"{c[:10]} ({len(r)} run(s), e.g. {r[0]})" for c, r in sorted(self.commits.items())))
        if self.dirty:
            run, files = self.dirty[0]
            which = f" ({', '.join(files[:5])})" if files else " (which files: not recorded)"
            texts.append(f"MIXED CODE: {len(self.dirty)} run(s) were made from a working tree with uncommitted "
                         f"changes to code, e.g. {run}{which}")
        for text in texts:
            self.say(text, 1)
            (self.warnings if self.allow_mixed else self.problems).append(
                text + "; commit, then `snakemake --forceall all` for numbers that trace to one commit "
                "(or --allow-mixed)")

    def say(self, text: str, indent: int = 0) -> None:
        self.lines.append("  " * indent + text)

    def dvc_check(self, path: Path, what: str, indent: int) -> str:
        """Check a file against dvc.lock. Returns a note for the file's line ('' when the file
        is not under a DVC output); a difference is a problem with its own line."""
        if self.dvc is None:
            return ""
        key = Path(os.path.abspath(path))
        if key in self._dvc_seen:
            return self._dvc_seen[key]
        note = ""
        owner = self.dvc.owner(path)
        if owner is not None:
            stage, out, entry, inner = owner
            where = f"dvc.lock stage '{stage}', out {out}" + (f" ({entry.get('md5')})" if inner else "")
            try:
                recorded = self.dvc.recorded_md5(entry, inner)
            except KeyError:
                recorded = ""
            if recorded is None:
                self.problems.append(f"UNVERIFIED {what}: {path}: {where}: its file listing is not in the DVC "
                                     f"cache {self.dvc.cache_dir} (`dvc fetch`)")
                self.say(f"UNVERIFIED {what}: {path}: {where} listing not in the DVC cache", indent)
            elif not recorded:
                self.problems.append(f"NOT IN DVC.LOCK {what}: {path} is in {where} but dvc.lock does not "
                                     "list it (`dvc repro` / `dvc commit` records it)")
                self.say(f"NOT IN DVC.LOCK {what}: {path} ({where})", indent)
            else:
                actual = md5_file(path)
                self.dvc_checked += 1
                if actual != recorded:
                    self.problems.append(f"DIFFERS FROM DVC.LOCK {what}: {path} ({where}: md5 {recorded}, on disk "
                                         f"{actual}); `dvc checkout` restores the recorded file, `dvc commit` "
                                         "records this one")
                    self.say(f"DIFFERS FROM DVC.LOCK {what}: {path}\n" + "  " * (indent + 2) +
                             f"{where} md5 {recorded}\n" + "  " * (indent + 2) + f"on disk md5 {actual}", indent)
                else:
                    note = f" | dvc {stage} md5 {actual[:12]}…"
        self._dvc_seen[key] = note
        return note

    def verify(self, path: str | Path, expected: str | None, what: str, indent: int) -> bool:
        path = Path(path)
        if not path.exists():
            self.problems.append(f"MISSING {what}: {path}")
            self.say(f"MISSING  {what}: {path}", indent)
            return False
        if expected is None:
            self.say(f"(no recorded hash) {what}: {path}", indent)
            self._say_dvc(path, what, indent)
            return True
        key = path.resolve()
        if key not in self._sha256:
            self._sha256[key] = sha256_file(path)
        actual = self._sha256[key]
        self.checked += 1
        if actual != expected:
            self.problems.append(f"MODIFIED {what}: {path} (recorded sha256 {expected}, on disk {actual})")
            self.say(f"MODIFIED {what}: {path}\n" + "  " * (indent + 2) +
                     f"recorded {expected}\n" + "  " * (indent + 2) + f"on disk  {actual}", indent)
            self.dvc_check(path, what, indent)
            return False
        self.say(f"ok       {what}: {path} sha256 {actual[:16]}…", indent)
        self._say_dvc(path, what, indent)
        return True

    def _say_dvc(self, path: Path, what: str, indent: int) -> None:
        """dvc.lock check of a file whose line was just said: the note goes on that line."""
        at = len(self.lines) - 1
        note = self.dvc_check(path, what, indent)
        if note:
            self.lines[at] += note


def _sources_file(artifact: Path) -> Path:
    cand = artifact.with_suffix(".sources.json")
    if not cand.exists():
        raise FileNotFoundError(f"{artifact}: no lineage record {cand.name} beside it "
                                "(tables and figures written by the pipeline have one)")
    return cand


def audit_run_metrics(rep: AuditReport, metrics_path: Path, expected: str | None,
                      indent: int = 1) -> dict | None:
    """Follow one run's ``metrics.json`` down its chain (seal, evaluation code, predictions, clean
    data, evaluation record, provenance, config); gives back the record read, None when it could
    not be read."""
    if not rep.verify(metrics_path, expected, "metrics", indent):
        return None
    m = _read(rep, metrics_path, "metrics", indent)
    if m is None:
        return None
    sealed = seal_problem(m)
    if sealed is not None and isinstance(m, dict) and SEAL_FIELD not in m:
        # written before files were sealed: a warning, since its values are re-computed from its
        # predictions either way (audit_cell_value); a seal that does not match is a problem
        rep.warnings.append(f"UNSEALED metrics: {metrics_path}: {sealed}")
        rep.say(f"UNSEALED metrics: {metrics_path}: {sealed}", indent + 1)
    elif sealed is not None:  # edited after its evaluate job wrote it
        rep.problems.append(f"MODIFIED metrics: {metrics_path}: {sealed}")
        rep.say(f"MODIFIED metrics: {metrics_path}: {sealed}", indent + 1)
    else:
        rep.checked += 1
    rep.check_code((m.get("code") or {}).get("evaluate"), "evaluation", metrics_path, indent + 1)
    inputs = m.get("inputs", {})
    for role in ("predictions", "clean_data"):
        if role in inputs:
            rep.verify(inputs[role]["path"], inputs[role]["sha256"], role, indent + 1)
        else:
            rep.problems.append(f"{metrics_path}: field 'inputs.{role}' missing")
    if not inputs:  # not written by the evaluate job (said above): nothing to follow
        return m
    # provenance.json: hashed by the evaluation record (by metrics.json itself in files written before it)
    legacy = "provenance" in inputs
    evaluation = None if legacy else audit_evaluation(rep, metrics_path, indent + 1)
    prov_rec = inputs.get("provenance") if legacy else ((evaluation or {}).get("inputs") or {}).get("provenance")
    prov_path = Path(prov_rec["path"]) if prov_rec else metrics_path.parent / "provenance.json"
    if prov_rec:
        rep.verify(prov_path, prov_rec.get("sha256"), "provenance", indent + 1)
    if not prov_path.exists():
        if not prov_rec:  # verify said the recorded one
            rep.problems.append(f"MISSING provenance: {prov_path}")
            rep.say(f"MISSING  provenance: {prov_path}", indent + 1)
        return m
    prov = audit_provenance(rep, prov_path, indent + 1)
    if prov is None:
        return m
    check_trained_predictions(rep, metrics_path, inputs.get("predictions") or {}, prov, prov_path, indent + 2)
    if evaluation is not None:
        rep.check_config(evaluation.get("config"), _valid_spec(prov), m.get("settings"),
                         metrics_path.with_name(EVALUATION_RECORD), indent + 2)
    return m


def audit_evaluation(rep: AuditReport, metrics_path: Path, indent: int) -> dict | None:
    """The evaluation record beside a ``metrics.json`` (``metrics.provenance.json``: when, where,
    from which checkout and config files it was evaluated): said, and the ``metrics.json`` it
    names re-hashed (a record of another evaluation than the file beside it is a problem).
    None when it is missing or unreadable (a problem: the evaluate job writes both)."""
    path = metrics_path.with_name(EVALUATION_RECORD)
    if not path.exists():
        rep.problems.append(f"MISSING evaluation record: {path} (written with {metrics_path.name} by rule evaluate: "
                            "delete both and re-run `snakemake all`)")
        rep.say(f"MISSING  evaluation record: {path}", indent)
        return None
    try:
        ev = read_json(path, producer="rule evaluate: python -m cdgtmll.metrics.evaluate_run")
    except CorruptArtifactError as exc:
        rep.problems.append(f"CORRUPT evaluation record: {exc}")
        rep.say(f"CORRUPT  evaluation record: {path}", indent)
        return None
    if not isinstance(ev, dict):
        rep.problems.append(f"CORRUPT evaluation record: {path}: expected a JSON object")
        return None
    git = ev.get("git") or {}
    rep.say(f"evaluated {ev.get('evaluated')} on {ev.get('host')}, commit {git.get('commit')} "
            f"code dirty={code_dirty(git)}: {path}", indent)
    rec = ev.get("metrics") or {}
    rep.verify(metrics_path, rec.get("sha256"), "metrics (as its evaluation record has it)", indent + 1)
    return ev


def audit_figure_config(rep: AuditReport, path: Path, prov: dict, indent: int) -> None:
    """A figure's run: the config files its evaluation record (beside the predictions the
    figure read) recorded, against the run's training spec (:meth:`AuditReport.check_config`;
    the figure does not use the evaluation's settings). Without that record: nothing to check
    (the figure's lineage is its predictions)."""
    if not path.is_file():
        return
    ev = _read(rep, path, "evaluation record", indent)
    if isinstance(ev, dict):
        rep.check_config(ev.get("config"), _valid_spec(prov), None, path, indent)


def check_trained_predictions(rep: AuditReport, metrics_path: Path, predictions: dict, prov: dict, prov_path: Path,
                              indent: int) -> None:
    """The chain closes: the predictions ``metrics.json`` was computed from (their sha256) are
    the ones its training wrote (``provenance.json`` ``outputs.predictions.sha256``)."""
    trained = ((prov.get("outputs") or {}).get("predictions") or {}).get("sha256")
    if not trained:
        rep.say(f"(no recorded output) {prov_path} records no predictions sha256 (trained before it was "
                "recorded)", indent)
        return
    rep.checked += 1
    if predictions.get("sha256") != trained:
        text = (f"DIFFERS FROM ITS TRAINING metrics: {metrics_path} was computed from predictions sha256 "
                f"{predictions.get('sha256')}, its training {prov_path} wrote {trained}")
        rep.problems.append(text)
        rep.say(text, indent)
    else:
        rep.say(f"ok       predictions sha256 {trained[:16]}… are the ones its training recorded", indent)


def _read(rep: AuditReport, path: Path, what: str, indent: int) -> Any:
    """The JSON of ``path``; a corrupt file (:class:`cdgtmll.io.CorruptArtifactError`: named,
    with the command that rebuilds it; the audit never deletes it) is a problem, and None."""
    try:
        return read_json(path)
    except CorruptArtifactError as exc:
        rep.problems.append(f"CORRUPT {what}: {exc}")
        rep.say(f"CORRUPT  {what}: {path}", indent)
        return None


def _valid_spec(prov: dict) -> RunSpec | None:
    """The run spec of a training's provenance record, or None when it holds no valid one
    (:func:`audit_provenance` reports that)."""
    try:
        return recorded_spec(prov, "provenance.json")
    except RunSpecError:
        return None


def audit_provenance(rep: AuditReport, prov_path: Path, indent: int) -> dict | None:
    """Say a training's provenance and re-hash everything it records (its run spec, inputs,
    raw data and sources, code identity); its record, or None when it cannot be read."""
    prov = _read(rep, prov_path, "provenance", indent)
    if prov is None:
        return None
    git = prov.get("git", {})
    try:
        spec = recorded_spec(prov, str(prov_path))
    except RunSpecError as exc:
        spec = None
        rep.problems.append(f"INVALID {exc}")
    rep.say(f"run      {spec.label if spec else 'INVALID run spec'} seed {prov.get('seed')}", indent)
    changed = code_dirty_files(git)
    rep.say(f"code     commit {git.get('commit')} code dirty={code_dirty(git)}"
            + (f" ({', '.join(changed[:5])})" if changed else "")
            + f" code sha256 {str(prov.get('code_sha256'))[:16]}…", indent + 1)
    rep.note_git(git, str(prov_path.parent))
    rep.note_device(prov, str(prov_path.parent))
    rep.check_code(prov.get("code"), "training", prov_path, indent + 1)
    recomputed = config_hash(prov.get("config"))  # the record as written
    if recomputed != prov.get("config_sha256"):
        rep.problems.append(f"MODIFIED run spec in {prov_path}: config_sha256 {prov.get('config_sha256')} "
                            f"!= sha256 of the recorded spec {recomputed}")
    rep.say(f"config   sha256 {prov.get('config_sha256')} hparams "
            f"{json.dumps(spec.hparams if spec else None, sort_keys=True)}", indent + 1)
    rep.say(f"training {json.dumps(spec.training if spec else None, sort_keys=True)}", indent + 1)
    pk = prov.get("packages", {})
    rep.say("packages " + ", ".join(f"{k}={v}" for k, v in pk.items() if v), indent + 1)
    dev = prov.get("device", {})
    cpu = dev.get("cpu") or {}  # absent from records written before it was recorded
    cpu_text = ", ".join(str(v) for v in (cpu.get("model"), cpu.get("torch_capability")) if v) or "not recorded"
    rep.say(f"device   {dev.get('requested')} on {dev.get('platform')} (cpu: {cpu_text}; "
            f"cuda: {dev.get('cuda_device', 'none')}), {prov.get('started')} -> {prov.get('finished')}", indent + 1)
    trained = prov.get("training_machines") or []
    if len(trained) > 1:  # resumed from a checkpoint on another kind of machine
        rep.say("trained  " + ", then ".join(f"on {t['machine']} (epochs {t['epochs'][0]}-{t['epochs'][1]})"
                                            for t in trained), indent + 1)
    sched = prov.get("scheduler")
    if sched:
        rep.say(f"slurm    job {sched.get('slurm_job_id')} on {sched.get('slurm_job_nodelist')} "
                f"(cluster {sched.get('slurm_cluster_name')}, partition {sched.get('slurm_job_partition')})", indent + 1)
    for role, rec in prov.get("inputs", {}).items():
        if rep.verify(rec["path"], rec["sha256"], f"input {role}", indent + 1) and role == "data":
            audit_images(rep, Path(rec["path"]), indent + 1)
    audit_base_run(rep, prov, indent + 1)
    bb = prov.get("backbone")
    if bb:
        rep.say(f"backbone {bb.get('backbone')}: {'frozen' if bb.get('frozen') else 'fine-tuned end to end'}, "
                f"weights sha256 {bb.get('weights_sha256')}, amp {bb.get('amp')}", indent + 1)
        if bb.get("weights_file"):
            rep.verify(bb["weights_file"], bb.get("weights_sha256"), "backbone weights", indent + 1)
    for src in prov.get("data_sources") or []:
        origin = src.get("origin")
        rep.say(f"raw      {src.get('file')} from {src.get('source')} {origin} sha256 "
                f"{str(src.get('sha256'))[:16]}… verified={src.get('verified')}", indent + 1)
        audit_raw(rep, src, spec.dataset if spec else None, indent + 2)
    return prov


def audit_base_run(rep: AuditReport, prov: dict, indent: int) -> None:
    """A run whose first stage was read from another run (``base_run``: PE, ETU and LSFA read
    the BCE run's model, :meth:`cdgtmll.methods.neural.NeuralMethod.fit`): that run's
    provenance and checkpoint must still be the files it read (their sha256 as recorded), else a
    problem naming the file. A run that fitted its first stage itself says why."""
    base = prov.get("base_run")
    if not isinstance(base, dict):
        return
    if not base.get("dir"):
        rep.say(f"base     first stage fitted here, not read from a {base.get('method')} run: {base.get('reason')}",
                indent)
        return
    rep.say(f"base     first stage read from the {base.get('method')} run {base['dir']} (seed {base.get('seed')})",
            indent)
    where = Path(base["dir"])
    rep.verify(where / "provenance.json", base.get("provenance_sha256"), f"{base.get('method')} run's provenance",
               indent + 1)
    rep.verify(where / "checkpoint.pt", base.get("checkpoint_sha256"), f"{base.get('method')} run's checkpoint",
               indent + 1)


def audit_raw(rep: AuditReport, src: dict, dataset: str | None, indent: int) -> None:
    """Re-hash the raw copy of one source file (a ``FetchResult.record()``) against the
    sha256 recorded when it was acquired."""
    path = src.get("path")
    if not path:  # recorded before raw paths were: the default raw folder
        path = DEFAULT_RAW_DIR / str(dataset) / str(src.get("file"))
    if not src.get("sha256"):
        rep.problems.append(f"UNRECORDED raw file: {path} (no sha256 in the run's data_sources)")
        rep.say(f"UNRECORDED raw file: {path}", indent)
        return
    rep.verify(path, src["sha256"], "raw file", indent)
    audit_source(rep, src, dataset, Path(path), indent)


def _source_candidates(src: dict, dataset: str | None) -> list[tuple[str, Path]]:
    """``(what, path)`` of the local files a raw copy came from or would come from now: the
    recorded origin (a mirror file, a packaged copy, a ``file://`` download) and the source
    the registry configures now (:func:`cdgtmll.data.acquire.local_source`: the mirror of
    ``CDGTMLL_DATA_MIRROR``), each once. URLs and sources not present here are left out."""
    out: list[tuple[str, Path]] = []
    origin = str(src.get("origin") or "")
    kind = str(src.get("original_source") or src.get("source") or "source")
    if origin.lower().startswith("file:"):
        out.append((f"{kind} (recorded)", Path(urllib.request.url2pathname(urllib.parse.urlparse(origin).path))))
    elif origin and "://" not in origin:
        out.append((f"{kind} (recorded)", Path(origin)))
    spec = REGISTRY.get(str(dataset))
    rf = next((f for f in spec.files if f.name == src.get("file")), None) if spec is not None else None
    if rf is not None:
        now = local_source(spec, rf)
        if now is not None:
            out.append((f"{now[0]} (configured now)", now[1]))
    seen: set[Path] = set()
    kept = []
    for what, p in out:
        if p.is_file() and p.resolve() not in seen:
            seen.add(p.resolve())
            kept.append((what, p))
    return kept


def audit_source(rep: AuditReport, src: dict, dataset: str | None, raw: Path, indent: int) -> None:
    """Re-hash the source a raw copy came from (and the one configured now) when it is present:
    a source whose bytes are no longer the raw copy's (a mirror file that changed after the
    run) is ``SOURCE CHANGED``, a problem: the runs behind the table were made from other data
    than a run from this source would be."""
    for what, path in _source_candidates(src, dataset):
        key = path.resolve()
        if key not in rep._sha256:
            rep._sha256[key] = sha256_file(path)
        actual = rep._sha256[key]
        rep.checked += 1
        if actual != src["sha256"]:
            text = (f"SOURCE CHANGED {what}: {path} has sha256 {actual}, the raw copy {raw} it gave was {src['sha256']} "
                    "when acquired: the source changed after the run (a re-run would prepare other data)")
            rep.problems.append(text)
            rep.say(text, indent)
        else:
            rep.say(f"ok       source {what}: {path} sha256 {actual[:16]}… equals the raw copy", indent)


def audit_images(rep: AuditReport, data_path: Path, indent: int) -> None:
    """For an image dataset (row ids + image paths), re-compute the listing fingerprint
    (relative path and size of every image) recorded when it was prepared."""
    key = data_path.resolve()
    if key not in rep._listings:
        try:
            rep._listings[key] = _image_listing_check(data_path)
        except CorruptArtifactError as exc:
            rep._listings[key] = (f"CORRUPT data: {exc}", f"CORRUPT  data: {data_path}", [])
    result = rep._listings[key]
    if result is None:  # not an image dataset
        return
    problem, line, archives = result
    rep.checked += 1
    if problem:
        rep.problems.append(problem)
    rep.say(line, indent)
    for rec in archives:  # image archives fetched into the raw folder
        if rec.get("path"):
            rep.verify(rec["path"], rec.get("sha256"), "image archive", indent)


def _image_listing_check(data_path: Path) -> tuple[str, str, list] | None:
    """``(problem or '', report line, archive records)`` for an image dataset's listing
    (processed row ids, or frozen features, which keep the listing of the images they were
    computed from); None otherwise."""
    from cdgtmll.images.datasets import listing_sha256

    z = load_npz(data_path, keys=("meta",))  # a corrupt file: CorruptArtifactError naming it
    meta = json.loads(str(z["meta"]))
    source = meta.get("image_source") or {}
    recorded = source.get("listing_sha256")
    if not recorded or not meta.get("image_paths") or not meta.get("image_root"):
        return None
    archives = list(source.get("archives") or [])
    root = Path(meta["image_root"])
    missing = next((p for p in meta["image_paths"] if not (root / p).is_file()), None)
    if missing is not None:
        return f"MISSING image: {root / missing}", f"MISSING  image: {root / missing}", archives
    actual = listing_sha256(root, meta["image_paths"])
    if actual != recorded:
        return (f"MODIFIED images under {root}: listing sha256 (path + size of {len(meta['image_paths'])} "
                f"images) recorded {recorded}, on disk {actual}",
                f"MODIFIED images under {root}: listing recorded {recorded}, on disk {actual}", archives)
    return "", f"ok       images: {len(meta['image_paths'])} under {root}, listing sha256 {actual[:16]}…", archives


def audit(artifact: str | Path, cell: tuple[str, str] | None = None, allow_stale: bool = False,
          allow_mixed: bool = False) -> AuditReport:
    artifact = Path(artifact)
    rep = AuditReport(dvc=DvcLineage.find(), allow_stale=allow_stale, allow_mixed=allow_mixed)
    sources_path = _sources_file(artifact)
    rep.say(f"artifact {artifact}")
    sources = _read(rep, sources_path, "lineage record", 1)
    if sources is None:
        return rep
    if "cells" in sources:  # a table
        cells: dict[str, Any] = sources["cells"]
        if cell is not None:
            key = f"{cell[0]} | {cell[1]}"
            if key not in cells:
                raise KeyError(f"{artifact}: no cell '{key}'; cells with runs: {', '.join(sorted(cells))}")
            cells = {key: cells[key]}
        stem = str(sources.get("table") or artifact.name.split(".")[0])
        table_csv = _read_table_csv(artifact.parent / f"{stem}.csv")
        for key, runs in cells.items():  # the values first, then the lineage
            audit_cell_value(rep, key, runs, stem, table_csv, 1)
        audit_dvc_artifact(rep, artifact, sources_path)
        for key, runs in cells.items():
            rep.say(f"cell     {key}: {len(runs)} run(s)", 1)
            for r in runs:
                audit_run_metrics(rep, Path(r["path"]), r["sha256"], 2)
    else:  # a figure
        audit_dvc_artifact(rep, artifact, sources_path)
        shared = sources.get("aliases") or {}
        for method, runs in sources.get("runs", {}).items():
            rep.say(f"method   {method}: {len(runs)} run(s)"
                    + (f", read from the run of {shared[method]} (the same run spec, trained once)"
                       if method in shared else ""), 1)
            for r in runs:
                audit_figure_source(rep, r)
    rep.check_mixed()
    rep.check_devices()
    dvc = (f", {rep.dvc_checked} file(s) against {rep.dvc.root / 'dvc.lock'}" if rep.dvc is not None
           else " (no dvc.lock: DVC lineage not checked)")
    warned = f", {len(rep.warnings)} warning(s)" if rep.warnings else ""
    rep.say(f"verified {rep.checked} hashes{dvc}; {len(rep.problems)} problem(s){warned}")
    return rep


def audit_figure_source(rep: AuditReport, r: dict) -> None:
    """One file a figure or a study table read (``{"path", "sha256"}`` in its ``.sources.json``),
    by what it is: a run's ``metrics.json`` (the readings table reads the values) gets the
    chain of a table cell's run (:func:`audit_run_metrics`) and is evaluated again from its
    predictions; predictions get their training's provenance and the figure's evaluation
    record; any other file a study read (``train_log.csv``, ``grad_norms.npy``,
    ``provenance.json``) is re-hashed."""
    path = Path(r["path"])
    if path.name == "metrics.json":
        record = audit_run_metrics(rep, path, r["sha256"], 2)
        if isinstance(record, dict):
            rep.say_differences(path, record, 3)
        return
    if path.suffix != ".npz":
        rep.verify(path, r["sha256"], path.name, 2)
        return
    if rep.verify(path, r["sha256"], "predictions", 2):
        prov = path.parent / "provenance.json"
        if prov.exists():
            rec = audit_provenance(rep, prov, 3)
            if rec is not None:
                check_trained_predictions(rep, path, r, rec, prov, 4)
                audit_figure_config(rep, path.parent / EVALUATION_RECORD, rec, 4)
        else:
            rep.problems.append(f"MISSING provenance: {prov}")


def _read_table_csv(path: Path) -> dict[str, dict[str, str]] | None:
    """The rows of a table's CSV by method; None when there is no CSV."""
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as fh:
        return {rec.get("method", ""): rec for rec in csv.DictReader(fh)}


def _pct(v: float) -> str:
    return "nan" if math.isnan(v) else f"{100 * v:.4f}%"


def _variant_names(variant: str) -> tuple[str, str]:
    """(setting, 'sampling seed k' / 'no sampling seed') of a run folder's variant, in the
    spelling of :mod:`cdgtmll.variants.naming` (an unknown variant: itself, '?')."""
    from cdgtmll.config.schema import ConfigError

    try:
        parsed = split_variant(variant)
        return variant_setting(variant), (f"sampling seed {parsed[2]}" if parsed else "no sampling seed")
    except ConfigError:
        return variant, "sampling seed ?"


def audit_cell_value(rep: AuditReport, key: str, runs: list[dict], stem: str,
                     table_csv: dict[str, dict[str, str]] | None, indent: int = 1) -> float | None:
    """Say a table cell's value, recomputed as the tables compute it (mean, sample std and
    n over the runs its ``.sources.json`` lists, each run's metric from its ``metrics.json``
    in the table's threshold mode), then one line per run; compare it with the table's CSV
    (``table_csv``: rows by method, None without a CSV). Returns the mean (fraction), None
    when no run could be read."""
    import pandas as pd

    from cdgtmll.tables.render import fmt

    row, column = key.split(" | ", 1)
    mode = "adaptive" if stem.endswith("_adaptive") else "global"
    try:
        metric = header_metric(column)
    except KeyError as exc:
        rep.warnings.append(f"cell {key}: {exc.args[0]}")
        rep.say(f"WARNING  value of {key}: {exc.args[0]}", indent)
        return None
    per_run: list[tuple[Path, str, str, float]] = []
    unread: list[str] = []
    records: list[tuple[Path, dict]] = []
    for r in runs:
        path = Path(r["path"])
        seed_dir = path.parent
        variant = seed_dir.parent.parent.name
        try:
            record = read_json(path)
            new, _ = rep.reevaluated(path, record)  # the value from the predictions, not from metrics.json
            block_key, block = mode_block(new if new is not None else record, mode)
        except (OSError, ValueError, KeyError) as exc:
            unread.append(f"{seed_dir}: {path.name} cannot be read ({type(exc).__name__}: {exc})")
            continue
        records.append((path, record))
        v = block.get(metric)
        per_run.append((seed_dir, variant, block_key, math.nan if v is None else float(v)))
    values = pd.Series([v for *_, v in per_run], dtype=float)
    n = len(runs)
    mean, std = float(values.mean()), float(values.std())  # pandas: as summarise() (NaN skipped, ddof 1)
    digits = table_digits(stem)
    settings = sorted({_variant_names(v)[0] for _, v, _, _ in per_run})
    rep.say(f"value    {key} = {fmt(mean, std, n, digits)} (n={n}): {metric}, mean ± sample std over runs, "
            f"{mode} threshold mode, setting {', '.join(settings) or '?'}", indent)
    if per_run and all(_fitted_once(seed_dir) for seed_dir, *_ in per_run):
        rep.say(f"note     {row}: deterministic (its fit does not use the seed): fitted once, one training seed "
                "by design (its run spec: deterministic), not a missing seed", indent + 1)
    for seed_dir, variant, block_key, v in per_run:
        sampling = _variant_names(variant)[1]
        rep.say(f"run      {seed_dir}  variant {variant} ({sampling}), training seed {seed_dir.name[4:]}: "
                f"{metric} = {v!r} ({_pct(v)}) [{block_key}]", indent + 1)
    for path, record in records:  # a metrics.json that says other than its predictions: file and field
        rep.say_differences(path, record, indent + 1)
    for u in unread:
        rep.say(f"UNREAD   {u}", indent + 1)
    if unread:
        rep.warnings.append(f"cell {key}: {len(unread)} of {n} run(s) could not be read; the value above leaves "
                            "them out")
    _compare_with_csv(rep, key, row, column, mean, std, n, stem, table_csv, indent + 1)
    return None if not per_run else mean


def _fitted_once(seed_dir: Path) -> bool:
    """Whether the run's provenance says it is a deterministic method's, fitted once
    (:func:`cdgtmll.tables.collect.run_deterministic`); False where it cannot be read."""
    try:
        return run_deterministic(read_json(seed_dir / "provenance.json"))
    except (OSError, ValueError):
        return False


def _compare_with_csv(rep: AuditReport, key: str, row: str, column: str, mean: float, std: float, n: int,
                      stem: str, table_csv: dict[str, dict[str, str]] | None, indent: int) -> None:
    """The recomputed cell against the table's CSV (mean and std in percent, 4 decimals)."""
    if table_csv is None:
        rep.say(f"(no {stem}.csv beside the table: the value is not compared with it)", indent)
        return
    rec = table_csv.get(row)
    if rec is None or f"{column} mean" not in rec:
        diff = f"{stem}.csv has no {'row ' + repr(row) if rec is None else 'column ' + repr(column + ' mean')}"
    else:
        def num(text: str | None) -> float:
            return math.nan if text in (None, "") else float(text)

        csv_mean, csv_std, csv_n = num(rec[f"{column} mean"]), num(rec.get(f"{column} std")), rec.get(f"{column} n")
        ours = (round(100 * mean, 4), round(100 * std, 4))

        def same(a: float, b: float) -> bool:
            return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-4 + 1e-9
        if same(csv_mean, ours[0]) and same(csv_std, ours[1]) and str(csv_n) == str(n):
            rep.say(f"ok       equals {stem}.csv: mean {csv_mean:.4f}, std {csv_std:.4f}, n {csv_n}", indent)
            return
        diff = (f"{stem}.csv says mean {csv_mean:.4f}, std {csv_std:.4f}, n {csv_n}; its metrics files give "
                f"mean {ours[0]:.4f}, std {ours[1]:.4f}, n {n}")
    rep.problems.append(f"cell {key}: the table differs from its sources: {diff}")
    rep.say(f"MISMATCH cell differs from its sources: {diff}", indent)
