"""The configuration a run was made with: recorded by content hash, checked by ``cdgtmll audit``.

Config files are inputs of a run, not code (:mod:`cdgtmll.lineage.worktree`): an uncommitted
edit to ``params.yaml`` (``dvc exp run -S`` writes it before the stage runs) or to a profile
does not make a run dirty. Instead every run records which config files the workflow read and
their sha256, in its evaluation record (``metrics.provenance.json``, written by
:mod:`cdgtmll.metrics.evaluate_run`)::

    "config": {"files": {"config/quick.yaml": sha256, "params.yaml": sha256},
               "configfiles": ["config/quick.yaml"], "params_file": "params.yaml",
               "overrides": {"cluster": true}}

``configfiles``: Snakemake's config files in order (``--configfile``, else the Snakefile's
default), relative to the workflow's root; ``params_file``: DVC's ``params.yaml`` when its
``profile`` is exactly those files (its ``settings`` are then laid over them:
:func:`cdgtmll.config.dvc_params.settings_layer`), else null; ``overrides``: ``--config``
(a profile's ``config:`` list, e.g. ``cluster=True`` of ``profiles/slurm``).

The rules put the record's source in the environment (:func:`export_record`), and the
evaluate job hashes the files (:mod:`cdgtmll.lineage.config_record`): not a ``params`` entry,
which would re-run every evaluation at any edit of ``params.yaml``; a config change re-runs
exactly the jobs whose run spec or settings it changes.

The audit (:func:`changed_files`, :func:`run_changes`): a file whose content is what the run
recorded is fine. A file that changed since (a later ``dvc exp run -S`` that re-ran other
runs, or an edit) is checked for what matters: the configuration now is loaded as the
Snakefile loads it, and the run's training spec (the run spec its ``provenance.json``
records) and its evaluation settings (``metrics.json`` ``settings``) are made from it again.
Equal: the change does not concern this run (a note). Different: ``STALE CONFIG``, naming
each field, the way ``STALE CODE`` names each module (:mod:`cdgtmll.lineage.audit`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cdgtmll.config.dvc_params import PARAMS_FILE, read_params, settings_layer
from cdgtmll.config.run_spec import RunSpec
from cdgtmll.io import canonical_json, sha256_file
from cdgtmll.lineage.config_record import CONFIG_RECORD_ENV

#: the evaluate job's settings (``metrics.json`` ``settings``, :data:`cdgtmll.metrics.evaluate_run.SETTINGS`)
#: -> (config section, key) they come from (``workflow/rules/evaluate.smk`` passes them)
SETTINGS_KEYS = {"threshold": ("thresholds", "global"), "tail_fraction": ("r_variants", "tail_fraction"),
                 "tie_seed": ("r_variants", "tie_seed"),
                 "f1_no_positive_labels": ("evaluation", "f1_no_positive_labels")}
#: how many changed fields one STALE CONFIG line names (the rest are counted)
MAX_FIELDS_SAID = 6


def _relative(path: str | os.PathLike, root: Path) -> str:
    """``path`` relative to ``root`` when it lies under it (``/``-separated), else absolute."""
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return str(p)


def _plain(obj: Any) -> Any:
    """Mappings (Snakemake keeps ``--config`` in immutable maps) as dicts, recursively."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


def record_text(configfiles: Iterable[str | os.PathLike], root: str | os.PathLike,
                overrides: Mapping | None = None) -> str:
    """The source of a run's config record (JSON, module docstring): the workflow's config files
    (as Snakemake reads them: relative to the working directory), ``params.yaml`` of the
    workflow's ``root`` when its profile is exactly those files (the test of
    :func:`cdgtmll.config.dvc_params.settings_layer`), and the ``--config`` overrides. Paths are
    relative to the working directory, where the jobs run, when they lie under it (the same in
    every clone), else absolute. The evaluate job hashes the files
    (:func:`cdgtmll.lineage.config_record.config_record`)."""
    cwd = Path.cwd()
    root = Path(os.path.abspath(root))
    files = [Path(os.path.abspath(f)) for f in configfiles]
    params = read_params(root)
    applies = params is not None and [f.resolve() for f in files] == [(root / params["profile"]).resolve()]
    return json.dumps({"configfiles": [_relative(f, cwd) for f in files],
                       "params_file": _relative(root / PARAMS_FILE, cwd) if applies else None,
                       "overrides": _plain(overrides or {})}, sort_keys=True, default=str)


def export_record(configfiles: Iterable[str | os.PathLike], root: str | os.PathLike,
                  overrides: Mapping | None = None) -> str:
    """Put :func:`record_text` in this process's environment (:data:`CONFIG_RECORD_ENV`), where
    the evaluate jobs it starts find it (a cluster job's own Snakemake parses the rules again
    and sets it there); returns it. Called by ``workflow/rules/evaluate.smk``."""
    text = record_text(configfiles, root, overrides)
    os.environ[CONFIG_RECORD_ENV] = text
    return text


def changed_files(record: dict, root: str | os.PathLike = ".") -> dict[str, tuple[str, str | None]]:
    """``{file: (sha256 recorded, sha256 now or None when missing)}`` for each recorded config
    file whose content is not what the run recorded (paths relative to ``root``)."""
    out = {}
    for name, recorded in (record.get("files") or {}).items():
        path = Path(root) / name
        now = sha256_file(path) if path.is_file() else None
        if now != recorded:
            out[name] = (recorded, now)
    return out


def current_config(record: dict, root: str | os.PathLike = ".") -> dict:
    """The configuration the recorded config files give now, loaded as the Snakefile loads it
    (the files in order, ``params.yaml``'s settings when its profile is exactly those files,
    the recorded ``--config`` overrides; validated). ``root``: the folder the recorded paths are
    relative to (the workflow's), also where ``params.yaml`` is looked for when the run did not
    record one. Raises ``ConfigError`` naming the file and key, ``OSError`` for a file that
    cannot be read."""
    from cdgtmll.config.loader import load_files

    root = Path(root)
    files = [root / f for f in record.get("configfiles") or []]
    params_root = (root / record["params_file"]).parent if record.get("params_file") else root
    return load_files(files, record.get("overrides") or None, layer=settings_layer(files, params_root))


def _changes(recorded: Any, now: Any, path: str = "") -> list[str]:
    """``field: recorded -> now`` for each field that differs (dotted paths)."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        return [c for k in sorted(set(recorded) | set(now), key=str)
                for c in _changes(recorded.get(k, "(absent)"), now.get(k, "(absent)"), f"{path}.{k}" if path else str(k))]
    if canonical_json(recorded) == canonical_json(now):
        return []
    return [f"{path or '(all)'}: {json.dumps(recorded, default=str)} -> {json.dumps(now, default=str)}"]


def spec_changes(spec: RunSpec, config: dict) -> list[str]:
    """How the run spec ``config`` gives the run of ``spec`` (its dataset, variant and method,
    :func:`cdgtmll.config.plan.run_spec`) differs from ``spec``; empty when it is the same.
    A powered run's extra seeds are trained with ``power.seeds`` as their seeds (rule
    ``train_more``): that spec counts as the same too. ``base_run`` is not compared (comment below)."""
    from cdgtmll.config.plan import extra_seeds, run_spec, with_seeds

    candidates = [config]
    if extra_seeds(config):
        candidates.append(with_seeds(config, extra_seeds(config)))
    # base_run (a row built on another run: cdgtmll.config.plan.base_run) is planned from every
    # job of a run, not from one spec; the audit checks the run it names (audit.audit_base_run)
    recorded = {k: v for k, v in spec.to_dict().items() if k != "base_run"}
    found: list[str] | None = None
    for cfg in candidates:
        changes = _changes(recorded, run_spec(cfg, spec.dataset, spec.variant, spec.method).to_dict())
        if found is None or len(changes) < len(found):
            found = changes
    return found or []


def settings_of(config: dict) -> dict[str, Any]:
    """The evaluate job's settings the configuration gives (:data:`SETTINGS_KEYS`), in the
    types ``metrics.json`` records them."""
    out = {k: config[section][key] for k, (section, key) in SETTINGS_KEYS.items()}
    return {"threshold": float(out["threshold"]), "tail_fraction": float(out["tail_fraction"]),
            "tie_seed": int(out["tie_seed"]), "f1_no_positive_labels": str(out["f1_no_positive_labels"])}


def run_changes(spec: RunSpec | None, settings: dict | None, config: dict) -> list[str]:
    """What the configuration ``config`` would make differently for one run: the fields of its
    training spec (``spec``, from its ``provenance.json``; None: not checked) and of its
    evaluation settings (``settings``, from its ``metrics.json``; None: not checked)."""
    out = [f"run spec {c}" for c in spec_changes(spec, config)] if spec is not None else []
    if settings is not None:
        now = settings_of(config)
        out += [f"evaluation settings {c}" for c in _changes({k: settings.get(k) for k in now}, now)]
    return out
