r"""Scale benchmark of the XMC path at the published sizes of AmazonCat-13K and Wiki10-31K.

    python benchmarks/bench_xmc_scale.py                      # both data sets, full size
    python benchmarks/bench_xmc_scale.py --datasets wiki10-31k --scale 0.1   # quick try

What it does, per data set (each stage in its own subprocess):

1. ``generate``: synthetic train/test files in the Extreme Classification Repository's
   bag-of-words format, at the data set's published shape (rows, features, labels, labels
   per row, non-zeros per row; power-law labels, seeded): :mod:`xmc_synth` (shapes and
   their sources are in its docstring: the XC Repository table, and PECOS'
   ``examples/spmm/README.md`` for nnz(X)). ``--scale`` scales the rows, ``--dim-scale``
   features and labels; the reported runs are at 1 and 1.
2. ``prepare``: the ``prepare_dataset`` rule's command, ``python -m cdgtmll.data.prepare
   --dataset <name> --raw-dir ... --out ... --no-download --val-fraction 0.1 --split-seed 0``
   with the files as the mirror (``CDGTMLL_DATA_MIRROR``): copy + sha256, parse, TF-IDF
   and l2 (:mod:`cdgtmll.data.xmc`), random validation split, save. At a scaled size the
   same :func:`cdgtmll.data.prepare.prepare` gets a registry spec with the scaled sizes.
3. ``train[<method>]`` for BCE and CD-GTMLL: what ``cdgtmll.train`` does for one seed up to
   and including ``method.fit`` (run spec from ``config/paper.yaml`` via
   :func:`cdgtmll.config.plan.run_spec`: App. E.2 XMC block, B = 512, eta = 5e-4, tfidf-linear
   backbone, d' = 512; CD-GTMLL N = 4, rho = 0.15, alpha = 0.3, beta_max = 0.2), the only
   changes being ``epochs: 1`` and one seed, and the epoch cut short: the trainer's
   ``train_epoch`` is wrapped to run ``--warmup`` steps, then ``--steps`` timed steps, of
   the epoch's seeded permutation. The rest of the epoch is the real trainer's: setup
   (fingerprint hashes, model, AdamW), validation pass over the whole validation split,
   checkpoint. The trained method is pickled for the next stage (not timed).
4. ``predict[<method>]``: :func:`cdgtmll.train.predict_topk` (top-100 per row, 512 rows per
   call) on the validation and test splits, written as ``cdgtmll.train`` writes
   ``predictions.npz`` (plus the ``labels_without_train_positives`` record in
   ``provenance.json``, the one field evaluation reads from it). Then, on real score
   blocks, the CPU time of the top-k selection :func:`cdgtmll.metrics.definitions.topk_rows` (what
   ``predict_topk``, P@k and the trainer's sparse validation pass use) against the exact
   reference :func:`cdgtmll.metrics.definitions._topk_rows`, checked equal (``TOPK`` line).
5. ``evaluate[<method>]``: the ``evaluate`` rule's command, ``python -m cdgtmll.metrics.evaluate_run
   --clean ... --rundir ... --seeds 0 ...``; P@1/3/5 are read from its ``metrics.json``.
6. ``ratio``: in one process, three training loops on the same batches, interleaved in
   blocks of ``--block`` steps (``--rounds`` rounds, order reversed every round, median
   over rounds, wall and CPU time): the pipeline's BCE step
   (:func:`cdgtmll.nn.trainer.train_epoch` with the task, SparseRows, AdamW, cosine
   schedule, clipping and divergence watch exactly as ``train`` builds them), the minimal
   hand-written loop below (:class:`MinimalNet`: same sparse-matmul backbone and linear
   head, CSR rows -> coalesced COO per batch, BCE summed over labels and averaged over the
   batch, AdamW with the same rates and weight decay, clipping at 5), and the pipeline's
   CD-GTMLL step. ``torch.profiler`` over a few steps of each pipeline loop then prints
   the top operations by self CPU time. Phase 2, after freeing the minimal and CD-GTMLL
   models (memory): the pipeline's BCE step against the same with AdamW ``fused=True``,
   interleaved the same way (a measured what-if; the trainer's optimiser is unchanged).
   Phase 3: pipeline BCE, pipeline CD-GTMLL (its training targets re-laid once as a CSR
   matrix, ``train_target_columns``, checked equal to ``train_targets`` per batch), and
   CD-GTMLL with ``train_targets`` applied to every dense batch instead (the trainer before
   that change), interleaved.
7. ``step[thp-on|off.i]`` (``--thp-pairs`` pairs, alternated): the pipeline's BCE step in
   a fresh process with and without ``THP_MEM_ALLOC_ENABLE=1`` (PyTorch's CPU allocator
   then madvises transparent huge pages for large tensors; this machine's THP mode is
   ``madvise``), ``2 x --block`` steps each: a what-if for the page faults of the 0.4 GB
   tensors each step allocates (gradient of W, AdamW temporaries).

Peak RSS of a stage is the kernel's high-water mark of its process (``ru_maxrss`` from
``os.wait4`` on that child), imports included; ``polled_rss_gib`` is the largest RSS a
psutil poll (every 0.2 s, with children) saw. Linux carries the parent's high-water mark
into a child started by vfork + exec, so the parent (this driver) never imports torch and
stays at about 30 MB. A guard thread kills a stage whose polled RSS passes
``--max-rss-gib``. Threads: ``--threads`` (default 1, as the
``train`` rule's ``CDGTMLL_THREADS``) for torch in every stage.

Extrapolation: one epoch = ``ceil(n_fit / B)`` x (mean timed step) + the validation pass +
the checkpoint, all measured in ``train``; a full run = epochs x that (20 epochs, the low
end of the paper's "20-30", and 30, config/paper.yaml), plus the ``predict`` stage. Both
in wall time (on this shared machine: inflated by other load) and in CPU time of the
process (``*_cpu_*``: what one otherwise idle core would take, roughly). The two train
stages run minutes apart, so the ratio of their step times carries the machine's drift (on
this shared machine 1.13 in one run, 1.32 in another); the CD-GTMLL/BCE per-epoch ratio is
therefore printed from the interleaved step times of ``ratio`` plus each method's measured
validation pass and checkpoint (``per_epoch`` line).

Output: ``STAGE``, ``DATA``, ``RESULT``, ``TOPK``, ``RATIO`` lines (``key=value`` fields)
and the ``PROFILE`` tables. Every stage's log is in ``<workdir>/<dataset>/logs/`` (deleted
with the data unless ``--keep``). The stages' code is in :mod:`xmc_scale_stages`.

Targets: every stage fits in memory; step <= 1.3 x minimal loop; CD-GTMLL
epoch <= 1.25 x BCE.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import xmc_synth  # noqa: E402
from xmc_scale_stages import STAGES  # noqa: E402

METHODS = ("BCE", "CD-GTMLL")
TARGET_STEP_RATIO = 1.3
TARGET_CD_RATIO = 1.25


def _slug(method: str) -> str:
    return method.replace("-", "").lower()


# =========================================================================== driver (parent)
class _Guard(threading.Thread):
    """Kills the stage process if its RSS (with children) passes ``limit`` bytes."""

    def __init__(self, pid: int, limit: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit, self.done, self.killed, self.peak = pid, limit, threading.Event(), None, 0

    def run(self) -> None:
        import psutil

        try:
            proc = psutil.Process(self.pid)
            while not self.done.wait(0.2):
                rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
                self.peak = max(self.peak, rss)
                if rss > self.limit:
                    self.killed = rss
                    proc.kill()
                    return
        except psutil.Error:
            return


def run_stage(name: str, argv: list[str], log: Path, env: dict, max_rss: float) -> tuple[float, float]:
    """Run one stage; prints its STAGE line; returns (wall seconds, peak RSS bytes)."""
    t0 = time.perf_counter()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        guard = _Guard(proc.pid, max_rss)
        guard.start()
        _, status, ru = os.wait4(proc.pid, 0)
        guard.done.set()
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    wall, peak = time.perf_counter() - t0, ru.ru_maxrss * 1024.0
    print(f"STAGE {name:<20} wall_s={wall:.1f} peak_rss_gib={peak / 2**30:.2f} "
          f"polled_rss_gib={guard.peak / 2**30:.2f} rc={rc}", flush=True)
    if rc != 0:
        tail = log.read_text(errors="replace")[-3000:]
        why = f" (killed by the guard at {guard.killed / 2**30:.2f} GiB)" if guard.killed else ""
        raise SystemExit(f"stage {name} failed{why}; log {log}:\n{tail}")
    return wall, peak


def _child(stage: str, params: dict, out: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--stage", stage, "--params", json.dumps(params),
            "--out", str(out)]


def _fmt(d: dict) -> str:
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


def bench_dataset(name: str, args: argparse.Namespace) -> dict:
    from cdgtmll.data.registry import get_spec

    full = xmc_synth.SHAPES[name]
    shape = full.scaled(args.scale, args.dim_scale)
    spec = get_spec(name)
    work = Path(args.workdir) / name
    shutil.rmtree(work, ignore_errors=True)
    (work / "logs").mkdir(parents=True)
    mirror, raw, processed = work / "mirror", work / "raw", work / "processed.npz"
    env = {**os.environ, "CDGTMLL_DATA_MIRROR": str(mirror), "CDGTMLL_THREADS": str(args.threads),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTHONHASHSEED", None)
    max_rss = args.max_rss_gib * 2**30
    base = {"dataset": name, "config": args.config, "threads": args.threads, "shape": shape.__dict__}
    print(f"== {name}: scale {args.scale:g} (rows), {args.dim_scale:g} (features, labels): {shape.n_train} train / "
          f"{shape.n_test} test rows, {shape.n_features} features, {shape.n_labels} labels; target "
          f"{shape.labels_per_row:.2f} labels/row, {shape.nnz_per_row:.2f} nnz/row ==", flush=True)
    peaks: dict[str, float] = {}

    def stage(sname, argv_or_params, child=None, extra_env=None):
        out = work / "logs" / f"{sname}.json"
        argv = _child(child, argv_or_params, out) if child else argv_or_params
        wall, peak = run_stage(sname, argv, work / "logs" / f"{sname}.log", {**env, **(extra_env or {})}, max_rss)
        peaks[sname] = peak
        return json.loads(out.read_text()) if child else {}

    gen = stage("generate", {**base, "mirror": str(mirror / spec.folder), "seed": args.seed,
                             "train_file": spec.file("train").name, "test_file": spec.file("test").name}, "generate")
    for split in ("train", "test"):
        g = gen[split]
        print(f"DATA dataset={name} split={split} rows={g['rows']} labels_per_row={g['labels_per_row']:.3f} "
              f"nnz_per_row={g['nnz_per_row']:.2f} file_gib={g['bytes'] / 2**30:.2f}")
    print(f"DATA dataset={name} top_label_share={gen['top_label_share']:.3f} "
          f"labels_without_train_rows={gen['labels_without_train_rows']} "
          + " ".join(f"frequency_baseline_{k}={v:.4f}" for k, v in gen["frequency_baseline"].items()))
    if shape == full:  # the rule's command, registry sizes
        stage("prepare", [sys.executable, "-m", "cdgtmll.data.prepare", "--dataset", name, "--raw-dir", str(raw),
                          "--out", str(processed), "--mirror", "", "--no-download", "--val-fraction", "0.1",
                          "--split-seed", "0"])
    else:
        stage("prepare", {**base, "raw": str(raw), "processed": str(processed)}, "prepare")
    shutil.rmtree(raw)  # the raw copy is not needed any more (disk)
    results = {}
    for method in METHODS:
        rundir = work / "runs" / _slug(method)
        (rundir / "seed0").mkdir(parents=True)
        p = {**base, "method": method, "processed": str(processed), "rundir": str(rundir),
             "warmup": args.warmup, "steps": args.steps}
        tr = stage(f"train[{method}]", p, "train")
        pr = stage(f"predict[{method}]", p, "predict")
        (rundir / "method.pt").unlink()
        stage(f"evaluate[{method}]", [sys.executable, "-m", "cdgtmll.metrics.evaluate_run", "--clean", str(processed), "--rundir",
                                      str(rundir), "--seeds", "0", "--tail-fraction", "0.2", "--tie-seed", "0",
                                      "--threshold", "0.5", "--f1-no-positive-labels", "exclude"])
        for f in ("checkpoint.pt",):
            (rundir / "seed0" / f).unlink(missing_ok=True)
        met = json.loads((rundir / "seed0" / "metrics.json").read_text())["global@0.5"]
        epoch_s = tr["steps_per_epoch"] * tr["step_s"] + tr["val_s"] + tr["ckpt_s"]
        epoch_cpu = tr["steps_per_epoch"] * tr["step_cpu_s"] + tr["val_cpu_s"] + tr["ckpt_cpu_s"]
        res = {"method": method, "backbone": tr["backbone"], "batch_size": tr["batch_size"], "n_fit": tr["n_fit"],
               "steps_per_epoch": tr["steps_per_epoch"], "timed_steps": tr["timed_steps"], "step_s": tr["step_s"],
               "step_cpu_s": tr["step_cpu_s"], "val_pass_s": tr["val_s"], "val_pass_cpu_s": tr["val_cpu_s"],
               "checkpoint_s": tr["ckpt_s"], "setup_s": tr["setup_s"], "load_s": tr["load_s"],
               "epoch_est_s": epoch_s, "epoch_est_cpu_s": epoch_cpu,
               "full20_est_h": (20 * epoch_s + pr["val_s"] + pr["test_s"]) / 3600,
               "full30_est_h": (30 * epoch_s + pr["val_s"] + pr["test_s"]) / 3600,
               "full20_est_cpu_h": (20 * epoch_cpu + pr["val_cpu_s"] + pr["test_cpu_s"]) / 3600,
               "predict_test_s": pr["test_s"], "predict_test_cpu_s": pr["test_cpu_s"], "predict_val_s": pr["val_s"],
               "p@1": met["p@1"], "p@3": met["p@3"], "p@5": met["p@5"]}
        print(f"RESULT dataset={name} " + _fmt(res), flush=True)
        chunks = math.ceil(pr["n_val"] / pr["topk_valpass_rows"])
        print(f"TOPK dataset={name} method={method} predict_block={pr['topk_predict_rows']}x{shape.n_labels} "
              f"k=100 cpu_s={pr['topk_predict_cpu_s']:.4f} reference_cpu_s={pr['topk_predict_ref_cpu_s']:.4f}; "
              f"valpass_block={pr['topk_valpass_rows']}x{shape.n_labels} k=5 cpu_s={pr['topk_valpass_cpu_s']:.4f} "
              f"reference_cpu_s={pr['topk_valpass_ref_cpu_s']:.4f} (medians of 5, alternated; trainer val pass: {chunks} "
              f"such blocks/epoch, through topk_rows; reference: cdgtmll.metrics.definitions._topk_rows)", flush=True)
        results[method] = res
    shutil.rmtree(work / "runs")
    rt = stage("ratio", {**base, "processed": str(processed), "rundir": str(work / "ratio"), "rounds": args.rounds,
                         "block": args.block, "profile_steps": args.profile_steps, "profile_rows": args.profile_rows},
               "ratio")
    s, c = rt["step_s"], rt["step_cpu_s"]
    print(f"RATIO dataset={name} " + _fmt({f"{k}_step_s": v for k, v in s.items()})
          + f" gather_step_s={rt['gather_s']:.4g} blocks={args.rounds}x{rt['block_steps']}")
    print(f"RATIO dataset={name} " + _fmt({f"{k}_step_cpu_s": v for k, v in c.items()}))
    print(f"RATIO dataset={name} phase=2 " + _fmt({f"{k}_step_s": v for k, v in rt["fused_step_s"].items()}))
    for what, t, f in (("wall", s, rt["fused_step_s"]), ("cpu", c, rt["fused_step_cpu_s"])):
        ratio = t["pipeline-BCE"] / t["minimal"]
        cd = t["pipeline-CD-GTMLL"] / t["pipeline-BCE"]
        fused = f["BCE-fusedAdamW"] / f["pipeline-BCE"]
        print(f"RATIO dataset={name} time={what} step_over_minimal={ratio:.3f} (target {TARGET_STEP_RATIO}: "
              f"{'met' if ratio <= TARGET_STEP_RATIO else 'MISSED'}) cdgtmll_over_bce={cd:.3f} (target "
              f"{TARGET_CD_RATIO}: {'met' if cd <= TARGET_CD_RATIO else 'MISSED'}) "
              f"fused_adamw_over_pipeline_bce={fused:.3f} (what-if)")
    print(f"RATIO dataset={name} heads: CD-GTMLL {rt['n_pairs']} (player, label) pairs vs BCE {rt['n_labels']} labels")
    print(f"RATIO dataset={name} phase=3 " + _fmt({f"{k}_step_s": v for k, v in rt["per_batch_step_s"].items()}))
    for what, t in (("wall", rt["per_batch_step_s"]), ("cpu", rt["per_batch_step_cpu_s"])):
        print(f"RATIO dataset={name} time={what} cdgtmll_over_bce={t['pipeline-CD-GTMLL'] / t['pipeline-BCE']:.3f} "
              f"targets_per_batch_cdgtmll_over_bce={t['CD-GTMLL-per-batch'] / t['pipeline-BCE']:.3f} "
              "(phase 3, interleaved)")
    # per epoch: the interleaved step times, plus each method's validation pass and checkpoint
    # (train stages); the train stages' own step times come from two processes run minutes apart
    spe = results["BCE"]["steps_per_epoch"]
    for what, t, val, ck in (("wall", s, "val_pass_s", "checkpoint_s"), ("cpu", c, "val_pass_cpu_s", "checkpoint_s")):
        ep = {m: spe * t[f"pipeline-{m}"] + results[m][val] + results[m][ck] for m in METHODS}
        r = ep["CD-GTMLL"] / ep["BCE"]
        print(f"RATIO dataset={name} time={what} per_epoch: BCE={ep['BCE']:.0f}s CD-GTMLL={ep['CD-GTMLL']:.0f}s "
              f"cdgtmll_over_bce_epoch={r:.3f} (target {TARGET_CD_RATIO}: {'met' if r <= TARGET_CD_RATIO else 'MISSED'}; "
              f"{spe} interleaved steps + validation pass + checkpoint)")
    for k, table in rt["profiles"].items():
        if "minus" in k:
            print(f"PROFILE dataset={name} diff=CD-GTMLL-minus-BCE steps={args.profile_steps} (same batches; "
                  "self CPU per step, largest differences)")
        else:
            print(f"PROFILE dataset={name} loop={k} steps={args.profile_steps} (torch.profiler, top by self CPU)")
        print(table)
    shutil.rmtree(work / "ratio", ignore_errors=True)
    if args.thp_pairs:  # what-if: THP for PyTorch's large CPU tensors (one process per setting, alternated)
        res_thp: dict = {"off": [], "on": []}
        for i in range(args.thp_pairs):
            for flag in (("off", "on") if i % 2 == 0 else ("on", "off")):
                r = stage(f"step[thp-{flag}.{i + 1}]", {**base, "processed": str(processed),
                                                       "rundir": str(work / "ratio"), "block": 2 * args.block},
                          "step",
                          {"THP_MEM_ALLOC_ENABLE": "1"} if flag == "on" else {})
                res_thp[flag].append(r)
        for what in ("step_s", "step_cpu_s"):
            off = statistics.median(r[what] for r in res_thp["off"])
            on = statistics.median(r[what] for r in res_thp["on"])
            print(f"RATIO dataset={name} what_if=THP_MEM_ALLOC_ENABLE=1 pipeline-BCE {what}: default={off:.4g} "
                  f"thp={on:.4g} thp_over_default={on / off:.3f} ({args.thp_pairs} alternated process pairs, "
                  f"{2 * args.block} steps each, medians)", flush=True)
        shutil.rmtree(work / "ratio", ignore_errors=True)
    worst = max(peaks, key=peaks.get)
    print(f"RESULT dataset={name} max_stage_peak_rss_gib={peaks[worst] / 2**30:.2f} stage={worst} "
          f"limit_gib={args.max_rss_gib:g}", flush=True)
    if not args.keep:
        shutil.rmtree(work)
    return {"results": results, "ratio": rt["step_s"], "peaks": peaks}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(xmc_synth.SHAPES), choices=list(xmc_synth.SHAPES))
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the published rows (quick tries)")
    ap.add_argument("--dim-scale", type=float, default=1.0, help="fraction of the published features and labels")
    ap.add_argument("--workdir", default="/tmp/h6-xmcscale")
    ap.add_argument("--config", default="config/paper.yaml")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps before the timed ones (train stage)")
    ap.add_argument("--steps", type=int, default=20, help="timed training steps (train stage)")
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds (ratio stage)")
    ap.add_argument("--block", type=int, default=5, help="steps per loop per round (ratio stage)")
    ap.add_argument("--thp-pairs", type=int, default=3,
                    help="process pairs for the THP_MEM_ALLOC_ENABLE what-if (0: skip)")
    ap.add_argument("--profile-steps", type=int, default=3)
    ap.add_argument("--profile-rows", type=int, default=12)
    ap.add_argument("--max-rss-gib", type=float, default=14.0, help="kill a stage above this RSS")
    ap.add_argument("--keep", action="store_true", help="keep the generated data and outputs")
    ap.add_argument("--stage", choices=list(STAGES), help=argparse.SUPPRESS)
    ap.add_argument("--params", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stage:  # child
        rec = STAGES[args.stage](json.loads(args.params))
        Path(args.out).write_text(json.dumps(rec, default=float))
        return 0
    import platform
    from importlib.metadata import version

    # the parent never imports torch: a child's ru_maxrss starts at the parent's RSS (vfork + exec)
    print(f"bench_xmc_scale: {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()}, {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB, torch {version('torch')}, "
          f"threads {args.threads}, config {args.config}", flush=True)
    for name in args.datasets:
        bench_dataset(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
