"""Train one (dataset, variant, method) job for every configured seed.

``python -m cdgtmll.train --data VARIANT.npz --clean CLEAN.npz --spec SPEC.json --outdir DIR``

One job trains all seeds in one process (a fresh Python process with torch costs
about 3 s; see shared notes), and writes per seed, under ``DIR/seed<k>/``:

* ``predictions.npz`` – validation and test probabilities (float64) and row indices,
  or, for large label spaces (``L > TOPK_MIN_LABELS``), the top-``TOPK`` labels per row
  (see "Top-K predictions" below),
* ``provenance.json`` – git state, run-spec hash, input hashes, seed, packages, device, and
  for a neural method ``epoch_selection``: the rule (``select_epoch``) and the epoch whose
  weights gave the predictions, with its validation mAP (:func:`cdgtmll.nn.trainer.epoch_selection`),
  ``outputs``: the sha256 of the predictions and of a neural method's final ``checkpoint.pt``,
  and for a method that builds on another run (``base_run`` in the spec: PE, ETU, LSFA on BCE)
  the base seed folder it read its first stage from with the sha256 of its provenance and
  checkpoint, or why it fitted that stage itself (:func:`base_run_record`),
  and ``numerics``: the AdamW implementation it took and why, TF32 and cuDNN autotuning
  (:func:`cdgtmll.nn.trainer.run_numerics`),
* anything the method writes into its work dir (``train_log.csv``, checkpoints, ...).

Files are written atomically; a seed whose ``predictions.npz`` exists and whose
recorded spec hash matches (and whose base run, if any, still holds the checkpoint it read:
:func:`base_unchanged`) is skipped, so a killed job resumes where it stopped.

Progress (:mod:`cdgtmll.nn.progress`): after each seed one line ``[run] <dataset>/<variant>/<method>
seed <s> (<i> of <n>) done: <epochs>, fit <seconds>, val mAP <x>; job ETA <t>`` goes to
stderr and, when stdout is another file, to stdout too; ``--progress`` adds one
``[epoch] ...`` line per epoch on stderr. Everything else the job prints (warnings,
a method's own output) goes to stderr. The ``train`` rule sends stderr to the job's log
and leaves stdout to Snakemake, so the terminal (or the Slurm log) shows one line per
seed and the log shows everything.

Top-K predictions (large label spaces)
--------------------------------------
A dense score matrix is impossible for XMC test sets (AmazonCat-13K: 306,782 x 13,330
float64 = 32.7 GB). When ``L > TOPK_MIN_LABELS`` (2000) ``predict_proba`` is called on
row chunks of ``PREDICT_ROWS`` rows (methods are row-independent) and only each row's
top ``K = min(TOPK, L)`` labels are kept, ordered by score descending, ties by lower
label index (the convention of :func:`cdgtmll.metrics.definitions.precision_at_k`):
``predictions.npz`` then holds ``format='topk'``, ``topk=K``, and per split
``<split>_topk_idx`` (int32 ``[n, K]``) and ``<split>_topk_score`` (float32 ``[n, K]``),
plus ``idx_val``/``idx_test`` and ``method_thresholds`` as before. Memory is
O(PREDICT_ROWS x L) for scoring plus O(n x K) for the result. P@k for k <= K computed
from it equals the dense P@k exactly (:func:`cdgtmll.metrics.definitions.precision_at_k_topk`).
Files without ``format`` are the dense format (unchanged for ``L <= TOPK_MIN_LABELS``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from cdgtmll.config.run_spec import RunSpec
from cdgtmll.data.processed import ProcessedData
from cdgtmll.images.datasets import is_image_rows
from cdgtmll.io import atomic_path, read_json, sha256_file, write_json
from cdgtmll.labels import label_counts, tail_labels
from cdgtmll.lineage import provenance
from cdgtmll.lineage.code import identity
from cdgtmll.lineage.roots import train_roots
from cdgtmll.methods import base
from cdgtmll.methods.base import FitData, RunContext, build_for_protocol
from cdgtmll.metrics.definitions import mean_average_precision, precision_at_k_topk, topk_from_scores
from cdgtmll.nn.progress import RunProgress
from cdgtmll.pipeline.env import job_device

#: label spaces with more labels than this store top-K predictions (see module docstring)
TOPK_MIN_LABELS = 2000
#: environment variable: checkpoint every this many epochs (default cdgtmll.nn.trainer.CHECKPOINT_EVERY)
CHECKPOINT_EVERY_ENV = "CDGTMLL_CHECKPOINT_EVERY"
#: labels kept per row in the top-K format
TOPK = 100
#: rows per predict_proba call in the top-K path
PREDICT_ROWS = 512


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    if "torch" in sys.modules:
        import torch

        torch.manual_seed(seed)


def torch_threads() -> None:
    """torch's intra-op threads to the job's budget ``$CDGTMLL_THREADS`` (the rule's ``threads``),
    once the method's module has imported torch: a classical method's job never loads torch
    (~1.6 s CPU), and Snakemake's ``OMP_NUM_THREADS`` bounds torch if it is loaded later."""
    threads = os.environ.get("CDGTMLL_THREADS")
    if threads and "torch" in sys.modules:
        import torch

        torch.set_num_threads(int(threads))


_JOB_CODE: dict[str, dict] = {}


def job_code(spec: RunSpec) -> dict:
    """The code identity of this training job (:mod:`cdgtmll.lineage.code`): the trainer, the
    method's module and its loss's module with everything they import, and the lock file. A seed
    trained by other code is trained again; the identity goes into every seed's provenance."""
    key = spec.sha256()
    if key not in _JOB_CODE:
        _JOB_CODE[key] = identity(train_roots(spec))
    return _JOB_CODE[key]


def run_seed(data: ProcessedData, tail: np.ndarray, spec: RunSpec, seed: int, outdir: Path,
             inputs: dict[str, Path], progress: bool | RunProgress = False) -> Path:
    """Train and predict one seed into ``outdir`` (module docstring). ``progress``: a
    :class:`~cdgtmll.nn.progress.RunProgress` of the job, or a bool (per-epoch lines on
    stderr or not); the per-seed line is written in every case."""
    if not isinstance(progress, RunProgress):
        progress = RunProgress(spec.label, [seed], epochs=bool(progress))
    spec_sha = spec.sha256()
    pred_path = outdir / "predictions.npz"
    prov_path = outdir / "provenance.json"
    if pred_path.exists() and prov_path.exists():
        try:
            prev = read_json(prov_path)
            if (prev.get("config_sha256") == spec_sha and prev.get("code_sha256") == job_code(spec)["sha256"]
                    and base_unchanged(prev, spec, seed)):
                progress.seed_skipped(seed)
                return pred_path
        except (OSError, ValueError):
            pass
    outdir.mkdir(parents=True, exist_ok=True)
    progress.seed_started(seed)
    started = provenance.now()
    t0 = time.perf_counter()
    X_tr, Y_tr = data.part("train")
    X_va, Y_va = data.part("val")
    X_te, _ = data.part("test")
    images = None
    if is_image_rows(data):  # fine-tuning on images; imported here so that classical jobs never load torch
        from cdgtmll.images.trainer_input import ImageSource

        images = ImageSource.from_data(data)
    no_pos = untrained_labels(Y_tr, data.label_names)
    if no_pos["count"]:
        print(f"[run] WARNING {spec.dataset}/{spec.variant}: {no_pos['count']} label(s) have no positive "
              f"in the training split: {', '.join(no_pos['names'][:20])}. No method can learn them; they are "
              "kept in every metric (see metrics.json 'labels_without_train_positives').", flush=True)
    fit = FitData(X_tr, Y_tr, X_va, Y_va, data.label_names, tail=tail, images=images)
    set_seed(seed)
    method = build_for_protocol(spec.registered, spec.hparams, spec.training)
    torch_threads()
    set_seed(seed)  # again: building the method may have imported torch, which is seeded from here on
    if images is not None and (why := base.image_input_reason(method)):
        raise ValueError(f"{spec.dataset}/{spec.variant}: {why}")
    # a cluster job that asked for no GPU trains on the CPU (cdgtmll.pipeline.env.job_device)
    ctx = RunContext(seed=seed, workdir=outdir, device=job_device(spec.device), progress=progress,
                     extra={"training": spec.training, "image_backbone": spec.image_backbone,
                            # the trainer's checkpoint cadence (epochs; results do not depend on it)
                            "checkpoint_every": os.environ.get(CHECKPOINT_EVERY_ENV),
                            "base_run": base_seed_run(spec, seed)})
    method.fit(fit, ctx)
    fit_seconds = time.perf_counter() - t0
    if data.n_labels > TOPK_MIN_LABELS:
        arrays = {"format": np.asarray("topk"), "topk": np.asarray(min(TOPK, data.n_labels), dtype=np.int64)}
        for split, X_s in (("val", X_va), ("test", X_te)):
            idx, score = predict_topk(method, X_s, data.splits[split].size, data.n_labels, spec.method, split)
            arrays[f"{split}_topk_idx"], arrays[f"{split}_topk_score"] = idx, score
        scores = {"val P@1": precision_at_k_topk(Y_va, arrays["val_topk_idx"], ks=(1,))["p@1"]}
    else:
        s_val = np.asarray(method.predict_proba(X_va), dtype=np.float64)
        s_test = np.asarray(method.predict_proba(X_te), dtype=np.float64)
        for split, s in (("val", s_val), ("test", s_test)):
            _check_scores(s, data.splits[split].size, data.n_labels, spec.method, split)
        arrays = {"val": s_val, "test": s_test}
        scores = {"val mAP": mean_average_precision(Y_va, s_val)}  # Eq. (E.8), for the progress line only
    extra = method.extra_outputs()
    if extra:
        write_json(outdir / "method_outputs.json", extra)
    arrays.update({"idx_val": data.splits["val"], "idx_test": data.splits["test"]})
    own = method.decision_thresholds()
    if own is not None:
        own = np.broadcast_to(np.asarray(own, dtype=np.float64), (data.n_labels,)).copy()
        arrays["method_thresholds"] = own
    for rule, tau in (method.decision_thresholds_by_rule() or {}).items():
        arrays[f"method_thresholds_{rule}"] = np.broadcast_to(np.asarray(tau, dtype=np.float64), (data.n_labels,)).copy()
    with atomic_path(pred_path, suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    rec = provenance.record(spec=spec, code=job_code(spec), inputs=inputs, seed=seed,
                            device=str(getattr(method, "device", ctx.device)), started=started,
                            extra={"fit_seconds": round(fit_seconds, 3),
                                   "labels_without_train_positives": no_pos,
                                   "data_sources": data.meta.get("source_files"),
                                   "backbone": backbone_record(data, method),
                                   "epoch_selection": getattr(method, "epoch_selection", None),
                                   # steps, clipped steps, max and median pre-clip gradient norm (trainer.clip_summary)
                                   "grad_clip": getattr(method, "grad_clip_summary", None),
                                   # AdamW path, TF32 and cuDNN autotuner of a neural run (trainer.run_numerics)
                                   "numerics": getattr(method, "numerics", None),
                                   # which kinds of machine trained which epochs (more than one: resumed elsewhere)
                                   "training_machines": provenance.training_machines(getattr(method, "train_log", None)),
                                   # the tables' footnote on how this run differs from its paper, in the
                                   # words of the code that trained it (tables need not import the method)
                                   "table_note": type(method).table_note(provenance.used_hparams(spec.to_dict())) or "",
                                   **base_run_record(spec, method),
                                   "outputs": provenance.file_hashes(run_outputs(pred_path, method))})
    write_json(prov_path, rec)
    progress.seed_done(seed, fit_seconds, scores)
    return pred_path


def base_seed_run(spec: RunSpec, seed: int) -> dict | None:
    """The seed folder of the run spec's base run for ``seed`` (``base_run``:
    :func:`cdgtmll.config.plan.base_run`) as the method reads it, with the code identity of that
    run's training now (:func:`job_code` of its recorded spec); None without one."""
    b = spec.base_run or {}
    if not b.get("dir"):
        return None
    seed_dir = Path(b["dir"]) / f"seed{seed}"
    prov_path = seed_dir / "provenance.json"
    try:  # the code identity of the base run's training now (checked against its record)
        code = job_code(provenance.recorded_spec(read_json(prov_path), str(prov_path)))["sha256"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        code = None  # no readable record: cdgtmll.nn.checkpoint.base_checkpoint names the file
    return {"method": b["method"], "dir": str(seed_dir), "spec_sha256": b["spec_sha256"], "code_sha256": code}


def base_unchanged(prev: dict, spec: RunSpec, seed: int) -> bool:
    """Whether the base run a finished seed read (its provenance ``prev``'s ``base_run``) still
    holds the checkpoint it read: a base run trained again since is read again (True without
    a base run)."""
    b = spec.base_run or {}
    if not b.get("dir"):
        return True
    ckpt = Path(b["dir"]) / f"seed{seed}" / "checkpoint.pt"
    recorded = (prev.get("base_run") or {}).get("checkpoint_sha256")
    return bool(recorded) and ckpt.is_file() and sha256_file(ckpt) == recorded


def base_run_record(spec: RunSpec, method: base.Method) -> dict:
    """Provenance of a method that builds on another's run (``Method.builds_on``): ``base_run``,
    what was read (folder, seed, the sha256 of its provenance and checkpoint), or, when the run
    fitted its first stage itself, ``{method, dir: null, reason}`` from the spec. Nothing for
    other methods."""
    if spec.base_run is None:
        return {}
    read = getattr(method, "base_record", None)
    return {"base_run": read if read else {**spec.base_run, "dir": None}}


def run_outputs(pred_path: Path, method: base.Method) -> dict[str, Path]:
    """The files a seed's provenance hashes: the predictions, and a neural method's final
    checkpoint (a run built on it checks its sha256: :func:`cdgtmll.nn.checkpoint.base_checkpoint`)."""
    out = {"predictions": pred_path}
    ckpt = pred_path.parent / "checkpoint.pt"
    if method.neural and ckpt.is_file():
        out["checkpoint"] = ckpt
    return out


def untrained_labels(Y_train, label_names: list[str]) -> dict:
    """Labels with no positive among the training rows of this run (after R-variant
    down-sampling or label noise, for variants): ``{count, labels, names}``."""
    zero = np.flatnonzero(label_counts(Y_train) == 0)
    return {"count": int(zero.size), "labels": [int(k) for k in zero], "names": [label_names[k] for k in zero]}


def backbone_record(data: ProcessedData, method: base.Method) -> dict | None:
    """How an image dataset's backbone was used: fine-tuned end to end (weights file and
    sha256, AMP dtype; from the method) or frozen features (from the features file's
    meta); None for other data."""
    info = getattr(method, "backbone_info", None)
    if info:
        return {"frozen": False, **info}
    meta = data.meta
    if meta.get("backbone_frozen"):
        return {"frozen": True, "backbone": meta.get("backbone"), "weights_sha256": meta.get("backbone_weights_sha256"),
                "image_size": meta.get("image_size"), "occlusion": meta.get("occlusion")}
    return None


def _check_scores(s: np.ndarray, n: int, L: int, method: str, split: str) -> None:
    if s.shape != (n, L):
        raise ValueError(f"{method}: predict_proba returned {s.shape} for split '{split}', expected {(n, L)}")
    finite = np.isfinite(s)
    if not finite.all():  # NaN/inf are not "outside [0, 1]": say what they are, and how many
        n_nan, n_pinf = int(np.isnan(s).sum()), int(np.isposinf(s).sum())
        n_bad = s.size - int(finite.sum())
        rows = int((~finite).any(axis=1).sum()) if s.ndim == 2 else n_bad
        raise ValueError(
            f"{method}: predict_proba returned {n_bad} non-finite value(s) of {s.size} on '{split}' "
            f"({n_nan} NaN, {n_pinf} +inf, {n_bad - n_nan - n_pinf} -inf; in {rows} of {s.shape[0]} rows): "
            "the model's output is not a probability (diverged training or non-finite inputs?)"
        )
    lo, hi = (float(s.min()), float(s.max())) if s.size else (0.0, 0.0)
    if lo < 0 or hi > 1:
        n_out = int(((s < 0) | (s > 1)).sum())
        raise ValueError(
            f"{method}: predict_proba returned {n_out} value(s) of {s.size} outside [0, 1] on '{split}' "
            f"(min {lo:.6g}, max {hi:.6g})"
        )


def predict_topk(method: base.Method, X, n: int, L: int, name: str = "method", split: str = "?",
                 k: int | None = None, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-``min(k, L)`` labels (int32) and scores (float32) per row of ``X``, scoring
    ``rows`` rows per ``predict_proba`` call (never the whole dense matrix); defaults
    ``TOPK`` and ``PREDICT_ROWS``."""
    K = min(int(TOPK if k is None else k), L)
    rows = int(PREDICT_ROWS if rows is None else rows)
    idx = np.empty((n, K), dtype=np.int32)
    score = np.empty((n, K), dtype=np.float32)
    for a in range(0, n, rows):
        b = min(n, a + rows)
        s = np.asarray(method.predict_proba(X[a:b]), dtype=np.float64)
        _check_scores(s, b - a, L, name, split)
        idx[a:b], score[a:b] = topk_from_scores(s, K)
    return idx, score


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, type=Path, help="processed dataset (clean or R-variant)")
    ap.add_argument("--clean", required=True, type=Path, help="clean processed dataset (defines the tail)")
    ap.add_argument("--spec", required=True, help="run spec as JSON text or @file (cdgtmll.config.run_spec)")
    ap.add_argument("--outdir", required=True, type=Path)
    ap.add_argument("--progress", action="store_true",
                    help="one line per epoch on stderr (the per-seed lines are always written)")
    args = ap.parse_args(argv)
    spec = read_spec(args.spec)
    # stdout carries the per-seed lines only (the train rule leaves it to Snakemake's terminal);
    # anything else printed during the job goes to stderr, i.e. the job's log
    report = RunProgress(spec.label, list(spec.seeds), epochs=args.progress, terminal=sys.stdout)
    with contextlib.redirect_stdout(sys.stderr):
        return _main(args, spec, report)


def read_spec(arg: str) -> RunSpec:
    """The run spec of ``--spec``: JSON text, or ``@FILE`` holding it. A spec that is not one
    raises :class:`~cdgtmll.config.run_spec.RunSpecError` naming ``--spec`` (or the file) and the field."""
    if arg.startswith("@"):
        return RunSpec.from_json(Path(arg[1:]).read_text(), f"--spec {arg}")
    return RunSpec.from_json(arg, "--spec")


def _main(args: argparse.Namespace, spec: RunSpec, report: RunProgress) -> int:
    from cdgtmll.config.plugins import import_plugins

    import_plugins(list(spec.plugins or ()), source="run spec")
    data = ProcessedData.load(args.data)
    clean = ProcessedData.load(args.clean)
    tail = tail_labels(clean.part("train")[1], q=spec.r_variants["tail_fraction"],
                       tie_seed=spec.r_variants["tie_seed"])
    inputs = {"data": args.data, "clean": args.clean}
    for seed in spec.seeds:
        try:
            run_seed(data, tail, spec, seed, args.outdir / f"seed{seed}", inputs, report)
        except Exception as exc:  # one line on the terminal; the traceback follows in the log
            report.seed_failed(seed, exc)
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
