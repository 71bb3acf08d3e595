"""Score a run's predictions with the metrics of Appendix E.4, identically for every method.

``python -m cdgtmll.metrics.evaluate_run --clean CLEAN.npz --rundir DIR --seeds 0 1 2``

For each seed directory, reads ``predictions.npz`` and writes ``definitions.json``
with two blocks: ``global@<tau>`` (one threshold for every label, default 0.5)
and ``adaptive`` (per-label thresholds tuned on the validation split, fixed at
test; App. E.1 "Thresholds and calibration"), plus a ``method`` block for methods
whose decision rule is part of the method (plug-in estimators PE and SRB; ETU's top-k
decision).

A ``predictions.npz``, ``provenance.json`` or clean data file that cannot be read
(truncated, edited) is deleted and the job fails with ``[evaluate] ERROR corrupt file
<path>: ...``, naming the rule that writes it: the next ``snakemake`` run re-runs that job
(:class:`cdgtmll.io.CorruptArtifactError`).

Decision rule per F1 column. Every block records ``decision_rules``: the rule that
produced each of ``micro_f1``, ``macro_f1``, ``rare_f1``. For the two-step plug-in rows
the ``method`` block uses the rule that is optimal for each metric (Koyejo et al.,
NeurIPS 2015): ``micro_f1`` at the one threshold shared by all labels that maximises
validation micro-F1, ``macro_f1`` and ``rare_f1`` at the per-label thresholds that
maximise validation F1_l. Both threshold sets are tuned by the method at the end of
``fit`` and saved with its predictions (``method_thresholds_micro``,
``method_thresholds_macro`` in ``predictions.npz``, whose sha256 ``definitions.json``
records); they are also written under ``method_thresholds_by_rule``. Other methods with
their own rule (ETU) use ``method_thresholds`` for every column (rule
:data:`cdgtmll.metrics.thresholds.RULE_METHOD`).

Labels without test positives (``--f1-no-positive-labels``, config
``evaluation.f1_no_positive_labels``): ``exclude`` (default) leaves them out of
Macro-F1 and Rare-F1, exactly as mAP leaves them out; ``zero`` counts them with F1 = 0
(scikit-learn ``zero_division=0``). ``f1_no_positive_labels`` in ``definitions.json`` holds
the rule, how many labels each metric left out, and which.

Ground truth for validation and
test always comes from the *clean* processed data (R-variants edit training
labels only), and Rare-F1's tail is the bottom ``tail_fraction`` of labels by
clean training prevalence (App. E.4), i.e. the same labels an R-variant
down-samples. The record also holds the sha256 of every input, so an audit can
check that the metrics were computed from the files beside them.

What goes where. ``metrics.json`` holds what the evaluation computed and what it was computed
from, in terms that are the same on every machine that evaluates the same predictions: the
settings, the sha256 and workflow-relative path of the predictions and the clean data, and
the code identities of the evaluation and the training (module hashes and the lock file's,
no paths). Two evaluations of the same predictions, on two machines, at two times, in two
clones, write the same bytes, so that DVC sees no change and a Slurm run and a local run can
be compared byte for byte. Everything particular to one evaluation goes to its provenance
record beside it, ``metrics.provenance.json`` (:data:`EVALUATION_RECORD`): when
(``evaluated``), on which host and under which scheduler job, by which command, from which
checkout (``git``: commit and code-only dirty flag, :mod:`cdgtmll.lineage.worktree`), with which
config files (``config``: their sha256, :mod:`cdgtmll.lineage.config_record`), the sha256 of the
training's ``provenance.json`` (which holds its own host and times) and the sha256 of the
``metrics.json`` it belongs to. ``cdgtmll audit`` closes the chain through it: metrics.json
-> the predictions' sha256, which the training's ``provenance.json`` records as its output;
the evaluation record -> the metrics.json bytes and the provenance.json bytes.

Top-K predictions (``format='topk'`` in ``predictions.npz``, written by
:mod:`cdgtmll.train` when ``L > run.TOPK_MIN_LABELS``): only ``p@1``, ``p@3``, ``p@5``
are computed (:func:`cdgtmll.metrics.definitions.precision_at_k_topk`, exactly the dense P@k when ``K >= k``; the
paper reports only P@k on XMC, and App. E.2 says label-adaptive thresholds are not used
for P@k). ``mAP``, ``micro_f1``, ``macro_f1``, ``rare_f1`` are ``null`` with
``"note": "not computed for top-K predictions"``, in both blocks and the ``method``
block; ``adaptive_thresholds`` is ``null``.

What the metrics can reach (``oracle`` block, :mod:`cdgtmll.metrics.oracle`): the best
Micro-F1 (E.2), Macro-F1 (E.5) and Rare-F1 (E.6) any thresholding of the run's test scores
reaches, thresholds chosen on the test split itself (bounds, not results); mAP (E.8) and P@k
(E.9) of a perfect ranking of the test labels; and the Hamming accuracy at the global
threshold (not an E.4 metric). For top-K predictions only the perfect-ranking bounds.

Readings of the metric (``readings`` block, :mod:`cdgtmll.metrics.readings`): Micro-, Macro- and
Rare-F1 under each defensible reading of App. E.4 (as written; the tail by Sec. 3.1's cumulative
rule or as ``ceil(0.2 L)``; per-label F1 over both classes; flattened macro / weighted F1;
Hamming accuracy; sample-averaged F1), for each metrics block (``global@<tau>``, ``adaptive``,
``method``) at that block's thresholds; with every tail label's F1 and its test and (clean)
training positive counts, and a percentile bootstrap interval of Rare-F1 over **test rows**
(rows resampled with replacement, the run's scores and thresholds fixed; ``B`` =
:data:`cdgtmll.metrics.readings.BOOTSTRAP_B` resamples, seed
:data:`cdgtmll.metrics.readings.BOOTSTRAP_SEED`, both recorded). Evidence beside E.4, never a
replacement. ``null`` for top-K predictions.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from cdgtmll.data.processed import ProcessedData
from cdgtmll.io import (
    NPZ_ERRORS,
    CorruptArtifactError,
    corrupt_artifact,
    load_npz,
    read_json,
    sha256_file,
    write_json,
)
from cdgtmll.labels import TAIL_FRACTION, TIE_SEED, label_counts, tail_labels
from cdgtmll.lineage import provenance
from cdgtmll.lineage.code import identity
from cdgtmll.lineage.config_record import CONFIG_RECORD_ENV, ConfigRecordError, config_record
from cdgtmll.lineage.seal import as_read, write_sealed_json
from cdgtmll.lineage.worktree import git_state
from cdgtmll.metrics import definitions, evaluation, oracle, readings, thresholds

# --------------------------------------------------------------------------- top-K format
TOPK_NOTE = "not computed for top-K predictions"
_NOT_FROM_TOPK = ("mAP", "n_labels_in_map", "micro_f1", "macro_f1", "rare_f1", "n_labels_in_macro_f1",
                  "n_labels_in_rare_f1", "n_left_out_with_false_positives")


def _topk_block(Y_test, topk_test: np.ndarray) -> dict:
    out: dict = {m: None for m in _NOT_FROM_TOPK}
    out.update(definitions.precision_at_k_topk(Y_test, topk_test, ks=(1, 3, 5)))
    out["note"] = TOPK_NOTE
    return out


def _evaluate_topk(clean: ProcessedData, z, threshold: float, own) -> dict:
    _, Y_test = clean.part("test")
    block = _topk_block(Y_test, z["test_topk_idx"])
    result = {f"global@{float(threshold):g}": block, "adaptive": dict(block), "adaptive_thresholds": None,
              "format": "topk", "topk": int(z["topk"])}
    if own is not None:
        result["method"] = dict(block)
        result["method_thresholds"] = [float(t) for t in own]
    return result


def _method_thresholds(own: np.ndarray, by_rule: dict[str, np.ndarray]):
    """The ``method`` block's thresholds: one per F1 column for the plug-in rules
    (``method_thresholds_micro`` / ``_macro``), else ``method_thresholds`` for every column."""
    if not {"micro", "macro"} <= set(by_rule):
        return own
    return {"micro_f1": by_rule["micro"], "macro_f1": by_rule["macro"], "rare_f1": by_rule["macro"]}


def _method_block(Y_test, s_test, tail, own: np.ndarray, by_rule: dict[str, np.ndarray], rule: str) -> tuple[dict, dict]:
    """(``method`` block, extra top-level fields). ``by_rule`` holds the plug-in rules'
    thresholds saved with the predictions (``method_thresholds_micro`` / ``_macro``); when
    both are there, Micro-F1 uses the shared (micro) threshold and Macro-/Rare-F1 the
    per-label (macro) ones, else every column uses ``method_thresholds``. Either way the
    block's ``decision_rules`` says which rule produced each column."""
    if not {"micro", "macro"} <= set(by_rule):
        return evaluation.evaluate(Y_test, s_test, tail, own, rule, decision_rule=thresholds.RULE_METHOD), {}
    micro, macro = by_rule["micro"], by_rule["macro"]
    block = evaluation.evaluate(
        Y_test, s_test, tail, {"micro_f1": micro, "macro_f1": macro, "rare_f1": macro}, rule,
        decision_rule={"micro_f1": thresholds.RULE_PLUGIN_MICRO, "macro_f1": thresholds.RULE_PLUGIN_MACRO,
                       "rare_f1": thresholds.RULE_PLUGIN_MACRO})
    extra = {"method_thresholds_by_rule": {"micro": float(micro[0]), "macro": [float(t) for t in macro]}}
    return block, extra


def evaluate_run(clean: ProcessedData, pred_path: Path, tail: np.ndarray, threshold: float,
                 no_positive_labels: str = definitions.DEFAULT_F1_NO_POSITIVE, remove: bool = True,
                 tail_fraction: float = TAIL_FRACTION, tie_seed: int = TIE_SEED) -> dict:
    """Metrics of one seed's ``predictions.npz`` (module docstring). A truncated or edited
    file raises :class:`cdgtmll.io.CorruptArtifactError` and, with ``remove`` (the evaluate
    job), is deleted so that the next ``snakemake`` run re-runs its training job; ``cdgtmll
    audit`` re-evaluates with ``remove=False`` (an audit never deletes). ``tail_fraction`` and
    ``tie_seed`` (those ``tail`` was made with) give the ``readings`` block's rounded-up tail."""
    z = load_npz(pred_path, remove=remove)
    if "format" in z and str(z["format"]) == "topk":
        own = z["method_thresholds"] if "method_thresholds" in z else None
        for split, key in (("val", "idx_val"), ("test", "idx_test")):
            if not np.array_equal(z[key], clean.splits[split]):
                raise ValueError(f"{pred_path}: field '{key}' does not match the {split} rows of the clean data")
        result = _evaluate_topk(clean, z, threshold, own)
        result["f1_no_positive_labels"] = {"rule": no_positive_labels, "note": TOPK_NOTE}
        result["oracle"] = oracle.topk_oracle_block(clean.part("test")[1], TOPK_NOTE)
        result["readings"] = None
        return result
    s_val, s_test = z["val"], z["test"]
    own = z["method_thresholds"] if "method_thresholds" in z else None
    by_rule = {k[len("method_thresholds_"):]: z[k] for k in z if k.startswith("method_thresholds_")}
    for split, key in (("val", "idx_val"), ("test", "idx_test")):
        if not np.array_equal(z[key], clean.splits[split]):
            raise ValueError(f"{pred_path}: field '{key}' does not match the {split} rows of the clean data")
    _, Y_val = clean.part("val")
    _, Y_test = clean.part("test")
    Y_val, Y_test = (y if sp.issparse(y) else np.asarray(y) for y in (Y_val, Y_test))  # metrics take CSR
    result = evaluation.evaluate_all(Y_test, s_test, Y_val, s_val, tail, global_threshold=threshold,
                                  no_positive_labels=no_positive_labels)
    if own is not None:  # the method's own decision rule (PE, SRB, ETU): see Method.decision_thresholds
        block, extra = _method_block(Y_test, s_test, tail, own, by_rule, no_positive_labels)
        result["method"] = block
        result["method_thresholds"] = [float(t) for t in own]
        result.update(extra)
    result["oracle"] = oracle.oracle_block(Y_test, s_test, tail, threshold, no_positive_labels)
    blocks = {f"global@{float(threshold):g}": float(threshold), "adaptive": np.asarray(result["adaptive_thresholds"])}
    if own is not None:
        blocks["method"] = _method_thresholds(own, by_rule)
    result["readings"] = readings.readings_record(
        Y_test, s_test, clean.part("train")[1], clean.label_names, tail, blocks, no_positive_labels,
        tail_fraction=tail_fraction, tie_seed=tie_seed)
    return result


def load_clean(path: Path) -> ProcessedData:
    """The clean processed data; a damaged file is deleted and raises
    :class:`cdgtmll.io.CorruptArtifactError` (the next ``snakemake`` run prepares it again)."""
    try:
        return ProcessedData.load(path)
    except FileNotFoundError:
        raise
    except CorruptArtifactError:
        raise
    except NPZ_ERRORS as exc:
        raise corrupt_artifact(path, exc, remove=True) from exc


#: what evaluation does with a label that has no positive among the run's training rows
UNTRAINED_RULE = "counted"


def untrained_record(prov: dict | None, run: Path, tail: np.ndarray) -> dict | None:
    """The run's labels without training positives (recorded by :mod:`cdgtmll.train` in
    ``provenance.json``), with the rule evaluation applies to them: they are **counted**
    in every metric like any other label (a method that cannot learn a label is scored on
    it; only labels without *test* positives are left out, see the module docstring).
    Prints a warning to the log when there are any. None for runs that did not record it.
    ``prov``: the run's ``provenance.json``, read by the caller; ``run``: its folder."""
    rec = (prov or {}).get("labels_without_train_positives")
    if rec is None:
        return None
    in_tail = sorted(set(rec["labels"]) & {int(t) for t in tail})
    out = {**rec, "in_tail": len(in_tail), "rule": UNTRAINED_RULE}
    if rec["count"]:
        print(f"[evaluate] WARNING {run}: {rec['count']} label(s) without training positives "
              f"({', '.join(rec['names'][:20])}; {len(in_tail)} in the tail) are {UNTRAINED_RULE} in every metric",
              flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clean", required=True, type=Path)
    ap.add_argument("--rundir", required=True, type=Path)
    ap.add_argument("--seeds", required=True, type=int, nargs="+")
    ap.add_argument("--tail-fraction", type=float, default=0.2)
    ap.add_argument("--tie-seed", type=int, default=0)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--f1-no-positive-labels", choices=definitions.F1_NO_POSITIVE_RULES,
                    default=definitions.DEFAULT_F1_NO_POSITIVE,
                    help="labels without test positives in Macro-/Rare-F1: 'exclude' (as mAP; default) "
                         "or 'zero' (count them with F1 = 0)")
    ap.add_argument("--config-record", default=os.environ.get(CONFIG_RECORD_ENV),
                    help="the workflow's config files as JSON (cdgtmll.lineage.configs.record_text; default: "
                         f"${CONFIG_RECORD_ENV}, which workflow/rules/evaluate.smk sets): their sha256 go into "
                         "metrics.provenance.json")
    args = ap.parse_args(argv)
    try:
        return _main(args)
    except CorruptArtifactError as exc:  # named, deleted: no traceback, the message says what to do
        print(f"[evaluate] ERROR {exc}", file=sys.stderr, flush=True)
        return 1
    except ConfigRecordError as exc:
        print(f"[evaluate] ERROR {exc}", file=sys.stderr, flush=True)
        return 2


def check_predictions(pred: Path, train_prov: dict | None) -> str:
    """The predictions are the bytes their training wrote: the sha256 its provenance records
    (``outputs.predictions``) must match, else the file was edited or damaged after training
    (also one that still loads): it is deleted, so that the next run trains it again.
    Returns the file's sha256 (recorded in ``metrics.json``)."""
    sha = sha256_file(pred)
    rec = ((train_prov or {}).get("outputs") or {}).get("predictions")
    if rec and sha != rec.get("sha256"):
        raise corrupt_artifact(pred, f"its sha256 {sha[:16]}… differs from the {rec['sha256'][:16]}… "
                                     "its training recorded (provenance.json outputs.predictions)", remove=True)
    return sha


def evaluate_code() -> dict:
    """The code identity of the evaluation job (:mod:`cdgtmll.lineage.code`)."""
    return identity([__spec__.name if __spec__ is not None else "cdgtmll.metrics.evaluate_run"])


#: the evaluate job's settings, recorded in every ``metrics.json`` (``settings``) so that
#: :func:`reevaluate` scores the predictions exactly as the job did: command-line flag -> key
SETTINGS = ("threshold", "tail_fraction", "tie_seed", "f1_no_positive_labels")
#: top-level fields of ``metrics.json`` that are not computed from the predictions and data
#: (what they came from and by which code); every other field :func:`reevaluate` re-makes.
#: ``evaluated`` and ``git``: in files written before they moved to :data:`EVALUATION_RECORD`
RECORD_FIELDS = frozenset({"inputs", "evaluated", "git", "code", "settings", "integrity",
                           "labels_without_train_positives"})
#: the provenance record of an evaluation, beside its ``metrics.json`` (module docstring)
EVALUATION_RECORD = "metrics.provenance.json"
#: its ``schema``
EVALUATION_SCHEMA = "cdgtmll.lineage.evaluation/1"
#: what its ``record`` field says of it
EVALUATION_NOTE = ("provenance of the evaluation that wrote the metrics.json beside it: when, where, by which "
                   "command, from which checkout and config files. Machine-specific: it differs between machines "
                   "and between evaluations of the same predictions; metrics.json holds none of it")


def workflow_path(path: Path) -> str:
    """``path`` as ``metrics.json`` records it: relative to the working directory (the workflow's
    root) when it lies under it, so that the record is the same in every clone; else as given."""
    try:
        return Path(os.path.abspath(path)).relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def evaluation_record(metrics: Path, train_prov: Path, config: dict | None, git: dict) -> dict:
    """The provenance record of one seed's evaluation (:data:`EVALUATION_RECORD`, module
    docstring), for the ``metrics.json`` just written at ``metrics``."""
    return {
        "schema": EVALUATION_SCHEMA,
        "record": EVALUATION_NOTE,
        "metrics": {"path": workflow_path(metrics), "sha256": sha256_file(metrics)},
        "inputs": {"provenance": ({"path": workflow_path(train_prov), "sha256": sha256_file(train_prov)}
                                  if train_prov.is_file() else None)},
        "config": config,
        "git": git,
        "host": socket.gethostname(),
        "scheduler": provenance.scheduler_info(),
        "command": sys.argv,
        "evaluated": provenance.now(),
    }


def settings_record(args: argparse.Namespace) -> dict:
    """The ``settings`` block of ``metrics.json``: every flag that changes a metric."""
    return {"threshold": float(args.threshold), "tail_fraction": float(args.tail_fraction),
            "tie_seed": int(args.tie_seed), "f1_no_positive_labels": args.f1_no_positive_labels}


def reevaluate(record: dict, where: str | Path = "metrics.json", clean: ProcessedData | None = None) -> dict:
    """Every computed field of a ``metrics.json`` record made again, by this module's own code,
    from the predictions and clean data its ``inputs`` name, with the ``settings`` it records
    (``cdgtmll audit`` compares them with the record: :func:`differences`). Deletes nothing.
    ``clean``: the clean data, when the caller has it loaded already. Raises ``KeyError``
    naming ``where`` and the field when the record lacks what is needed (a file written
    before the settings were recorded: re-run its evaluate job)."""
    inputs = record.get("inputs") or {}
    for role in ("predictions", "clean_data"):
        if not (inputs.get(role) or {}).get("path"):
            raise KeyError(f"{where}: field 'inputs.{role}.path' is missing")
    settings = record.get("settings")
    if not isinstance(settings, dict) or any(k not in settings for k in SETTINGS):
        raise KeyError(f"{where}: field 'settings' ({', '.join(SETTINGS)}) is missing: written before the evaluate "
                       "job recorded its settings; re-run it (`snakemake all`)")
    clean = clean if clean is not None else ProcessedData.load(Path(inputs["clean_data"]["path"]))
    Y_train = clean.part("train")[1]
    tail = tail_labels(Y_train, q=settings["tail_fraction"], tie_seed=settings["tie_seed"])
    result = evaluate_run(clean, Path(inputs["predictions"]["path"]), tail, settings["threshold"],
                          settings["f1_no_positive_labels"], remove=False,
                          tail_fraction=settings["tail_fraction"], tie_seed=settings["tie_seed"])
    result.update(_label_fields(clean, tail, Y_train))
    return as_read(result)  # as the record's reader sees it (JSON numbers, lists)


def _label_fields(clean: ProcessedData, tail: np.ndarray, Y_train) -> dict:
    return {"tail_labels": [int(t) for t in tail], "tail_label_names": [clean.label_names[t] for t in tail],
            "train_counts": [int(c) for c in label_counts(Y_train)]}


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return a == b
    if np.isnan(a) or np.isnan(b):
        return bool(np.isnan(a) and np.isnan(b))
    return abs(a - b) <= 1e-12 + 1e-9 * abs(b)  # the same code on the same bytes: equal up to summation order


def differences(recorded: dict, recomputed: dict) -> list[tuple[str, object, object]]:
    """``(field, recorded value, recomputed value)`` for every field of :func:`reevaluate`'s
    result that the record holds otherwise (dotted path, ``[i]`` for list items, e.g.
    ``global@0.5.micro_f1``), and every top-level field of the record evaluation does not
    make (recomputed value ``None``: a block added by hand). Empty when they agree."""
    out: list[tuple[str, object, object]] = []
    missing = "(absent)"

    def walk(path: str, rec, new) -> None:
        if isinstance(new, dict) and isinstance(rec, dict):
            for k in sorted(set(new) | set(rec)):
                walk(f"{path}.{k}" if path else k, rec.get(k, missing), new.get(k, missing))
        elif isinstance(new, list) and isinstance(rec, list) and len(new) == len(rec):
            for i, (r, n) in enumerate(zip(rec, new)):
                walk(f"{path}[{i}]", r, n)
        elif not _same(rec, new):
            out.append((path, rec, new))

    walk("", {k: v for k, v in recorded.items() if k not in RECORD_FIELDS}, recomputed)
    return out


def _main(args: argparse.Namespace) -> int:
    clean = load_clean(args.clean)
    Y_train = clean.part("train")[1]
    tail = tail_labels(Y_train, q=args.tail_fraction, tie_seed=args.tie_seed)
    clean_sha = sha256_file(args.clean)
    code = evaluate_code()
    config = config_record(args.config_record)  # before any output: a wrong argument writes nothing
    git = git_state()
    for seed in args.seeds:
        d = args.rundir / f"seed{seed}"
        pred = d / "predictions.npz"
        prov_path = d / "provenance.json"
        train_prov = read_json(prov_path, remove=True) if prov_path.is_file() else None
        result = evaluate_run(clean, pred, tail, args.threshold, args.f1_no_positive_labels,  # unreadable: named
                              tail_fraction=args.tail_fraction, tie_seed=args.tie_seed)
        pred_sha = check_predictions(pred, train_prov)  # readable, but not the bytes training wrote
        result["labels_without_train_positives"] = untrained_record(train_prov, d, tail)
        result.update(_label_fields(clean, tail, Y_train))
        result.update({
            "settings": settings_record(args),
            # the same in every clone and on every machine (module docstring): no time, host or absolute path,
            # and not the hash of provenance.json (which holds training's host and times: in the evaluation record)
            "inputs": {
                "predictions": {"path": workflow_path(pred), "sha256": pred_sha},
                "clean_data": {"path": workflow_path(args.clean), "sha256": clean_sha},
            },
            # the code identity of this evaluation (cdgtmll.lineage.code) and the training code's
            "code": {"evaluate": code, "train_sha256": (train_prov or {}).get("code_sha256")},
        })
        write_sealed_json(d / "metrics.json", result)  # self-hash: a hand edit is refused by its readers
        write_json(d / EVALUATION_RECORD, evaluation_record(d / "metrics.json", prov_path, config, git))
    return 0


if __name__ == "__main__":
    sys.exit(main())
