"""The data behind the tables: every run's ``metrics.json`` as one long table
(:func:`collect`, written as ``all_runs.csv``), its mean / sample std / n per
(threshold mode, dataset, setting, method) (:func:`summarise`), and the per-row
headline files read by ``dvc metrics show`` (:func:`write_summary_dir`).

What a row records beside the metrics, from each run's files:

* the decision rule behind each F1 column (``decision_rules`` of the metrics block) and how
  many labels Macro-F1 / Rare-F1 left out because they have no test positive
  (``f1_no_positive_labels``);
* which threshold-free metrics equal another row's *by construction*
  (:func:`equal_by_construction`), the method's own note on how it differs from its paper
  (:func:`run_deviation`), labels without training positives, and how an image backbone
  was used (:func:`backbone_use`), from ``provenance.json``;
* what the metrics can reach on the run's test split (the ``oracle`` block,
  :mod:`cdgtmll.metrics.oracle`): ``oracle_micro_f1``, ``oracle_macro_f1``, ``oracle_rare_f1``
  (the best any thresholding of the run's scores reaches, thresholds chosen on the test set),
  ``oracle_mAP``, ``oracle_p@k`` (a perfect ranking; data only) and ``hamming_accuracy`` at the
  global threshold (not an E.4 metric), the same in both threshold modes; empty for a run
  evaluated before the block existed;
* the F1 columns under each reading of App. E.4 (the ``readings`` block,
  :mod:`cdgtmll.metrics.readings`), at the thresholds of the row's threshold mode:
  ``reading:<metric>:<reading>`` (e.g. ``reading:micro_f1:flat_weighted``), every tail label's
  F1 with its test and training positive counts (``tail_labels_f1``, JSON), and the bootstrap
  interval of Rare-F1 over test rows (``rare_f1_bootstrap_lo`` / ``_hi``, with its ``_B`` and
  ``_seed``) (:func:`readings_record`); empty for a run evaluated before the block existed and
  for top-K predictions;
* which epoch's weights a neural run predicted with (``select_epoch``: the rule, and
  ``selected_epoch`` of ``epochs_trained``; :func:`epoch_selection_record`, from ``provenance.json``;
  empty for methods without training epochs);
* the run a row's first stage was read from (``base_run``: PE, ETU and LSFA read the BCE run of
  the same dataset, variant and seed), or why the row fitted it itself (:func:`base_run_record`);
* the path and sha256 of the metrics file, hashed from the very bytes the row was read from
  (the ``.sources.json`` sidecars and ``cdgtmll audit`` follow them; the Snakefile compares
  them with the files on disk before every run: :mod:`cdgtmll.lineage.integrity`).

A ``metrics.json`` or ``provenance.json`` that cannot be read (truncated, edited) is deleted
and raises :class:`cdgtmll.io.CorruptArtifactError` naming it: the tables job fails before it
writes anything, and the next ``snakemake`` run re-runs the job that writes the file. "Edited"
includes a ``metrics.json`` whose content no longer matches the self-hash the evaluate job
sealed it with (:func:`cdgtmll.lineage.seal.read_sealed_json`): a value changed by hand never reaches a
table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from cdgtmll.io import read_json, write_json
from cdgtmll.lineage.provenance import run_machine, used_hparams
from cdgtmll.lineage.seal import read_sealed_json
from cdgtmll.lineage.worktree import code_dirty
from cdgtmll.metrics.readings import READING_COLUMNS
from cdgtmll.variants.naming import parse_variant, variant_setting

METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")
METRIC_LABEL = {"mAP": "mAP", "micro_f1": "Micro-F1", "macro_f1": "Macro-F1", "rare_f1": "Rare-F1",
                "p@1": "P@1", "p@3": "P@3", "p@5": "P@5"}

MODES = ("global", "adaptive")
#: threshold-free metrics (the same in every threshold mode)
RANKING_METRICS = ("mAP", "p@1", "p@3", "p@5")
F1_COLUMNS = ("micro_f1", "macro_f1", "rare_f1")
#: long-table columns describing how a row's F1 columns were computed
RULE_COLUMNS = tuple(f"{m}_rule" for m in F1_COLUMNS)
#: ``all_runs.csv`` column -> key of the ``oracle`` block of metrics.json (threshold-mode free)
ORACLE_COLUMNS = {**{f"oracle_{m}": m for m in METRICS}, "hamming_accuracy": "hamming_accuracy"}
#: the tail detail of a row's threshold mode (``readings`` block of metrics.json), beside READING_COLUMNS
TAIL_DETAIL_COLUMNS = ("tail_labels_f1", "rare_f1_bootstrap_lo", "rare_f1_bootstrap_hi", "rare_f1_bootstrap_B",
                       "rare_f1_bootstrap_seed")
EXCLUSION_COLUMNS = ("f1_no_positive_labels", "macro_f1_left_out", "macro_f1_of", "rare_f1_left_out", "rare_f1_of",
                     "labels_without_test_positives", "tail_labels_without_test_positives")


def equal_by_construction(method: str, hparams: dict | None = None) -> tuple[str, tuple[str, ...], str] | None:
    """``(reference row, metrics, why)`` when a row's threshold-free metrics equal another
    row's by construction, else None. ``method`` is the registered method.

    * PE: step 1 *is* the BCE row (same model, loss and seed handling), step 2 only picks
      thresholds, which change no ranking: mAP and P@k equal BCE's on every seed.
    * ETU with ``utility='precision'``: scores rank each row like the BCE marginals
      (``w_l = 1``), so P@k equals BCE's; mAP does not (the per-row rescaling changes the
      order of rows within a label). With the default ``utility='macro-recall'`` each row
      is ranked by ``eta / prior`` and nothing equals BCE's.
    * SRB trains its own surrogate: nothing is equal.
    """
    hp = hparams or {}
    if method == "PE":
        return "BCE", RANKING_METRICS, ("PE only thresholds the BCE model's probabilities, same model and seeds, "
                                        "and thresholds do not change rankings")
    if method == "ETU" and hp.get("utility", "macro-recall") == "precision":
        return "BCE", ("p@1", "p@3", "p@5"), "ETU with utility 'precision' ranks each row by the BCE marginals"
    return None


def run_provenance(seed_dir: Path, remove: bool = True) -> dict:
    """A run's ``provenance.json`` (read once per run; ``{}`` where there is none). The
    functions below take it. ``remove``: a corrupt one is deleted (see :func:`collect`)."""
    prov = seed_dir / "provenance.json"
    return read_json(prov, remove=remove) if prov.is_file() else {}


def run_method(prov: dict, method: str) -> tuple[str, dict]:
    """(registered method, hyper-parameters used) of a run, from its provenance (else the
    directory name and no hyper-parameters)."""
    spec = prov.get("config") or {}
    registered = spec.get("registered_method", method.split("@")[0])
    return registered, used_hparams(spec)


def run_construction(prov: dict, method: str) -> str:
    """``'<reference>:<m1>,<m2>,...'`` for :func:`equal_by_construction` of a run (method
    and hyper-parameters from its provenance, else the directory name), or ''."""
    eq = equal_by_construction(*run_method(prov, method))
    return f"{eq[0]}:{','.join(eq[1])}" if eq else ""


def run_deviation(prov: dict, method: str) -> str:
    """The method's own footnote on how this run differs from its paper
    (:meth:`cdgtmll.methods.base.Method.table_note` of its class, with the run's
    hyper-parameters), or ''. Read from the provenance where the training job recorded it
    (``table_note``), so that writing a table imports no method module (and so no torch);
    looked up on the method's class for a run recorded without it."""
    if "table_note" in prov:
        return prov["table_note"] or ""
    from cdgtmll.methods import base

    registered, hp = run_method(prov, method)
    try:
        cls = base.get(registered)
    except KeyError:
        return ""
    return cls.table_note(hp) or ""


def run_deterministic(prov: dict) -> bool:
    """Whether the run was planned as a deterministic method's, fitted once (its run spec says
    ``deterministic: true``; :func:`cdgtmll.config.plan.fit_seeds`): its cells are one run (n = 1)
    by design, not a std of 0 over copies, and the claims check pairs its one value with every
    run of the row it is compared with."""
    return bool((prov.get("config") or {}).get("deterministic", False))


def _f1_record(m: dict, block: dict) -> dict:
    rules = block.get("decision_rules") or {}
    rec = {f"{c}_rule": rules.get(c, "") for c in F1_COLUMNS}
    ex = m.get("f1_no_positive_labels") or {}
    left, of, none = ex.get("left_out") or {}, ex.get("of") or {}, ex.get("labels_without_positives") or {}
    rec.update({"f1_no_positive_labels": ex.get("rule", ""),
                "macro_f1_left_out": left.get("macro_f1"), "macro_f1_of": of.get("macro_f1"),
                "rare_f1_left_out": left.get("rare_f1"), "rare_f1_of": of.get("rare_f1"),
                "labels_without_test_positives": none.get("all"),
                "tail_labels_without_test_positives": none.get("tail")})
    return rec


def oracle_record(m: dict) -> dict:
    """The :data:`ORACLE_COLUMNS` of a run from its ``oracle`` block (None where absent)."""
    o = m.get("oracle") or {}
    return {col: o.get(key) for col, key in ORACLE_COLUMNS.items()}


def readings_record(m: dict, key: str) -> dict:
    """The :data:`~cdgtmll.metrics.readings.READING_COLUMNS` and :data:`TAIL_DETAIL_COLUMNS` of
    a run in the threshold mode whose metrics block is ``key`` (``global@<t>``, ``adaptive`` or
    ``method``), from its ``readings`` block (None where absent). ``tail_labels_f1`` is a JSON
    list of ``{"label", "name", "f1", "n_pos_test", "n_pos_train"}``."""
    block = (((m.get("readings") or {}).get("blocks") or {}).get(key)) or {}
    values = block.get("values") or {}
    rec: dict = {}
    for col in READING_COLUMNS:
        _, metric, reading = col.split(":")
        rec[col] = (values.get(metric) or {}).get(reading)
    boot = block.get("rare_f1_bootstrap") or {}
    tail = block.get("tail_labels")
    rec.update({"tail_labels_f1": json.dumps(tail, separators=(",", ":")) if tail is not None else None,
                "rare_f1_bootstrap_lo": boot.get("lo"), "rare_f1_bootstrap_hi": boot.get("hi"),
                "rare_f1_bootstrap_B": boot.get("B"), "rare_f1_bootstrap_seed": boot.get("seed")})
    return rec


BACKBONE_USE = {False: "ResNet-50 fine-tuned end to end",
                True: "ResNet-50 frozen (ImageNet features extracted once, heads trained on them)"}


def backbone_use(prov: dict) -> str:
    """How a run used an image backbone (its provenance's ``backbone`` block), or ''."""
    b = prov.get("backbone")
    return BACKBONE_USE[bool(b.get("frozen"))] if b else ""


def epoch_selection_record(prov: dict) -> dict:
    """``{select_epoch, selected_epoch, epochs_trained}`` of a run: the rule that chose which
    epoch's weights predicted and that epoch (its provenance's ``epoch_selection``, written by
    :func:`cdgtmll.train.run_seed` for neural methods); empty values where not recorded
    (methods without training epochs)."""
    sel = prov.get("epoch_selection") or {}
    rule = sel.get("rule") or ""
    if rule and sel.get("fallback"):
        rule += " (no finite validation mAP: last epoch)"
    return {"select_epoch": rule, "selected_epoch": sel.get("epoch"), "epochs_trained": sel.get("epochs_trained")}


def base_run_record(prov: dict) -> str:
    """Where a run's first stage came from (its provenance's ``base_run``, written by
    :func:`cdgtmll.train.run_seed` for a method that builds on another: ``Method.builds_on``):
    ``read <method> <run folder>`` when it was read from that run's model, ``own <method>: <reason>``
    when the run fitted it itself, '' for other methods."""
    b = prov.get("base_run")
    if not isinstance(b, dict):
        return ""
    if b.get("dir"):
        return f"read {b.get('method')} {Path(b['dir']).parent.as_posix()}"
    return f"own {b.get('method')}: {b.get('reason')}"


#: the training numerics settings' defaults (:func:`cdgtmll.nn.trainer.run_numerics`; config
#: ``training.optimizer_impl`` / ``allow_tf32`` / ``cudnn_benchmark``)
NUMERICS_DEFAULTS = {"optimizer_impl_requested": "auto", "allow_tf32": False, "cudnn_benchmark_requested": "auto"}


def numerics_record(prov: dict) -> str:
    """A run's training numerics settings that are not the default, as ``key: value`` joined by
    ``, `` (its provenance's ``numerics``, as configured: a setting away from ``auto`` is taken as
    it is), or '' (defaults, or not a neural run)."""
    num = prov.get("numerics") or {}
    return ", ".join(f"{key.removesuffix('_requested')}: {json_value(num[key])}"
                     for key, default in NUMERICS_DEFAULTS.items() if key in num and num[key] != default)


def json_value(v: object) -> str:
    """``true``/``false``/``null`` for Python's booleans and None, the value's text otherwise."""
    return json.dumps(v) if isinstance(v, bool) or v is None else str(v)


def run_code(prov: dict) -> dict:
    """The git commit, dirty flag and code identity (:mod:`cdgtmll.lineage.code`) a run was
    trained with, and the kind of machine it ran on (:func:`run_machine`), from its provenance
    (None where not recorded). ``git_dirty``: uncommitted changes to *code* only
    (:func:`cdgtmll.lineage.worktree.code_dirty`; an edited ``params.yaml`` or profile is an input,
    not dirt), also for a record written before that rule."""
    git = prov.get("git") or {}
    return {"git_commit": git.get("commit"), "git_dirty": code_dirty(git), "code_sha256": prov.get("code_sha256"),
            "device": run_machine(prov)}


def collect(paths: list[Path], aliases: dict[str, str] | None = None, remove: bool = True) -> pd.DataFrame:
    """Long table of the given ``.../<dataset>/<variant>/<method>/seed<k>/metrics.json`` files.

    ``aliases`` maps a setting's run folder (``.../<dataset>/<variant>/<setting>``) to the run
    folder among ``paths`` that holds its result (the same run spec, trained once): the setting
    gets rows of its own, read from that folder, with ``alias_of`` naming it
    (``<dataset>/<variant>/<method>``; empty for a run read under its own name). ``remove``: a
    corrupt ``metrics.json`` or ``provenance.json`` is deleted before the error is raised (False
    for the partial tables, which must leave the run's files to the run's own rules)."""
    by_folder: dict[str, list[Path]] = {}
    for mpath in sorted(Path(p) for p in paths):
        by_folder.setdefault(str(mpath.parent.parent), []).append(mpath)
    entries = [(mpath, mpath.parent.parent.name, "") for mpath in sorted(Path(p) for p in paths)]
    for setting_dir, run_dir in (aliases or {}).items():
        sd, rd = Path(setting_dir), Path(run_dir)
        if sd.parent != rd.parent:
            raise ValueError(f"--alias {setting_dir} {run_dir}: expected run folders of the same dataset and variant")
        if str(rd) not in by_folder:
            raise ValueError(f"--alias {setting_dir} {run_dir}: no --metrics file under {run_dir}")
        entries += [(mpath, sd.name, "/".join(rd.parts[-3:])) for mpath in by_folder[str(rd)]]
    rows = []
    for mpath, method, alias_of in entries:
        seed_dir = mpath.parent
        method_dir = seed_dir.parent
        dataset, variant = method_dir.parent.parent.name, method_dir.parent.name
        # a hand-edited value breaks its self-hash: refused. A file without one (written before files were
        # sealed: its evaluate job re-runs for the new code anyway) is read; the Snakefile's check
        # (cdgtmll.lineage.integrity) deletes one whose bytes differ from what the tables recorded
        m, digest = read_sealed_json(mpath, remove=remove, unsealed_ok=True)
        parsed = parse_variant(variant)
        sev, sseed = (None, None) if parsed is None else parsed
        prov = run_provenance(seed_dir, remove)
        backbone = backbone_use(prov)
        construction = run_construction(prov, method)
        deviation = run_deviation(prov, method)
        deterministic = run_deterministic(prov)
        code = run_code(prov)
        selection = epoch_selection_record(prov)
        base_run = base_run_record(prov)
        numerics = numerics_record(prov)
        for mode in MODES:
            key, block = mode_block(m, mode)
            own = key == "method"
            row = {"dataset": dataset, "variant": variant, "setting": variant_setting(variant),
                   "severity": sev, "sampling_seed": sseed,
                   "method": method, "seed": int(seed_dir.name[4:]), "mode": mode, "own_thresholds": own,
                   "backbone": backbone, "metrics_path": str(mpath), "metrics_sha256": digest}
            row.update({k: block.get(k) for k in METRICS})
            row.update(_f1_record(m, block))
            row.update(oracle_record(m))
            row.update(readings_record(m, key))
            row["equal_by_construction"] = construction
            row["deviation"] = deviation
            row["deterministic"] = deterministic
            untrained = m.get("labels_without_train_positives") or {}
            row["untrained_labels"] = ", ".join(untrained.get("names", []))
            row.update(selection)
            row["base_run"] = base_run
            row["numerics"] = numerics
            row.update(code)
            row["alias_of"] = alias_of
            rows.append(row)
    cols = ["dataset", "variant", "setting", "severity", "sampling_seed", "method", "seed", "mode", "own_thresholds", *METRICS,
            *RULE_COLUMNS, *EXCLUSION_COLUMNS, *ORACLE_COLUMNS, *READING_COLUMNS, *TAIL_DETAIL_COLUMNS,
            "equal_by_construction", "deviation", "deterministic", "untrained_labels",
            "backbone", "select_epoch", "selected_epoch", "epochs_trained", "base_run", "numerics",
            "git_commit", "git_dirty", "code_sha256",
            "device", "alias_of", "metrics_path", "metrics_sha256"]
    return pd.DataFrame(rows, columns=cols)


def pending_runs(paths: list, aliases: dict[str, str] | None = None) -> dict[tuple[str, str, str], list[str]]:
    """``{(dataset, setting, method): [metrics.json paths]}`` of runs not evaluated yet (the
    partial tables' ``--pending``): each path ``.../<dataset>/<variant>/<method>/seed<k>/metrics.json``
    under its own setting and, through ``aliases`` (as :func:`collect`), under every setting that
    shares its run folder."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for p in map(Path, paths):
        method_dir = p.parent.parent
        ds, setting = method_dir.parent.parent.name, variant_setting(method_dir.parent.name)
        names = [method_dir.name] + [Path(sd).name for sd, rd in (aliases or {}).items() if Path(rd) == method_dir]
        for name in names:
            out.setdefault((ds, setting, name), []).append(str(p))
    return out


def mode_block(m: dict, mode: str) -> tuple[str, dict]:
    """``(key, block)`` of a ``metrics.json`` whose metrics the tables show in threshold ``mode``:
    in ``global`` mode the method's own block (``method``, a row scored by its own thresholds)
    when it has one, else its one ``global@<t>`` block; ``adaptive`` in ``adaptive`` mode.
    ``cdgtmll audit`` reads a cell's per-run values with it too."""
    if mode == "global" and "method" in m:
        return "method", m["method"]
    key = _mode_key(m, mode)
    return key, m[key]


def _mode_key(m: dict, mode: str) -> str:
    if mode == "adaptive":
        return "adaptive"
    keys = [k for k in m if k.startswith("global@")]
    if len(keys) != 1:
        raise ValueError(f"metrics file has {len(keys)} 'global@' blocks, expected 1")
    return keys[0]


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std and n per (mode, dataset, setting, method); setting is 'clean' or the severity."""
    if df.empty:
        return pd.DataFrame(columns=["mode", "dataset", "setting", "method", "n"])
    g = df.groupby(["mode", "dataset", "setting", "method"], sort=False)
    out = g[list(METRICS)].agg(["mean", "std"])
    out.columns = [f"{m}_{s}" for m, s in out.columns]
    out["n"] = g.size()
    out["own_thresholds"] = g["own_thresholds"].any()
    out["backbone"] = g["backbone"].agg(lambda s: "; ".join(sorted(set(s) - {""})))
    if set(RULE_COLUMNS) <= set(df.columns):
        out["f1_rules"] = g[list(RULE_COLUMNS)].apply(
            lambda d: " || ".join(sorted({" | ".join(map(_s, r)) for r in d.itertuples(index=False)} - {" | ".join([""] * 3)})))
    if set(EXCLUSION_COLUMNS) <= set(df.columns):
        out["f1_exclusion"] = g[list(EXCLUSION_COLUMNS)].apply(
            lambda d: " || ".join(sorted({" | ".join(map(_s, r)) for r in d.itertuples(index=False)})))
    if "deviation" in df:
        out["deviation"] = g["deviation"].agg(lambda s: " ".join(sorted(set(map(_s, s)) - {""})))
    if "deterministic" in df:
        out["deterministic"] = g["deterministic"].agg(lambda s: bool(s.fillna(False).astype(bool).all()))
    if "untrained_labels" in df:
        out["untrained_labels"] = g["untrained_labels"].agg(lambda s: "; ".join(sorted(set(map(_s, s)) - {""})))
    if "equal_by_construction" in df:
        out["equal_by_construction"] = g["equal_by_construction"].agg(lambda s: "; ".join(sorted(set(map(_s, s)) - {""})))
    if "numerics" in df:
        out["numerics"] = g["numerics"].agg(lambda s: "; ".join(sorted(set(map(_s, s)) - {""})))
    if "select_epoch" in df:
        out["select_epoch"] = g["select_epoch"].agg(lambda s: "; ".join(sorted(set(map(_s, s)) - {""})))
        out["selected_epochs"] = g[["selected_epoch", "epochs_trained"]].apply(_epoch_range)
    if "base_run" in df:
        out["base_run"] = g["base_run"].agg(lambda s: " || ".join(sorted(set(map(_s, s)) - {""})))
    out["sources"] = g["metrics_path"].agg(list)
    return out.reset_index()


def _epoch_range(d: pd.DataFrame) -> str:
    """``'<min>-<max> of <epochs>'`` (or ``'<e> of <epochs>'``) of a cell's kept epochs, '' if none."""
    kept = sorted({int(v) for v in d["selected_epoch"] if _s(v)})
    of = sorted({int(v) for v in d["epochs_trained"] if _s(v)})
    if not kept:
        return ""
    span = str(kept[0]) if len(kept) == 1 else f"{kept[0]}-{kept[-1]}"
    return f"{span} of {'/'.join(map(str, of))}" if of else span


def _s(v) -> str:
    """Cell value as text ('' for missing; integral floats without '.0')."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)



#: the headline columns of `dvc metrics show` (means over runs): the F1s at the global threshold
#: and Rare-F1 at validation-tuned thresholds (Table 2 ``_adaptive``)
HEADLINE = (("mAP", "global", "mAP"), ("micro_f1", "global", "micro_f1"), ("macro_f1", "global", "macro_f1"),
            ("rare_f1", "global", "rare_f1"), ("rare_f1_adaptive", "adaptive", "rare_f1"))


def summary_rows(summary: pd.DataFrame) -> dict[tuple[str, str, str], dict]:
    """``{(dataset, setting, method): {headline metric: mean, ..., "n": runs}}``, 4 decimals."""
    rows: dict[tuple[str, str, str], dict] = {}
    for _, r in summary.iterrows():
        row = rows.setdefault((r["dataset"], r["setting"], r["method"]), {})
        for name, mode, metric in HEADLINE:
            if r["mode"] == mode:
                v = r[f"{metric}_mean"]
                row[name] = None if v is None or math.isnan(v) else round(float(v), 4)
        if r["mode"] == "global":
            row["n"] = int(r["n"])
    order = [name for name, _, _ in HEADLINE] + ["n"]
    return {k: {name: v[name] for name in order if name in v} for k, v in rows.items()}


def write_summary_dir(summary: pd.DataFrame, out: Path) -> list[Path]:
    """One JSON per (dataset, setting, method) under ``out`` (``<dataset>/<setting>/<method>.json``),
    so that `dvc metrics show` prints one row each with the headline metrics as columns;
    files of rows no longer in the summary are removed."""
    written = []
    for (dataset, setting, method), row in summary_rows(summary).items():
        path = out / dataset / setting / f"{method}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, row)
        written.append(path)
    if out.is_dir():
        for stale in set(out.rglob("*.json")) - set(written):
            stale.unlink()
    return written

