"""The stages of ``bench_xmc_scale.py``, each run in its own subprocess
(``python benchmarks/bench_xmc_scale.py --stage NAME --params JSON --out JSON``): what each
does is described in that script's docstring. Every stage returns a JSON-able dict."""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

import xmc_synth

REPO = Path(__file__).resolve().parent.parent


def _threads(p: dict) -> None:
    import torch

    torch.set_num_threads(int(p["threads"]))


def _spec(p: dict, method: str) -> dict:
    """The pipeline's run spec for (dataset, clean, method), epochs 1 and one seed (its JSON form)."""
    from cdgtmll.config import loader, plan

    config = loader.load(REPO / p["config"])
    spec = plan.run_spec(config, p["dataset"], "clean", method).to_dict()
    spec["training"] = {**spec["training"], "epochs": 1}
    spec.update(seeds=[0], device="cpu")
    return spec


def stage_generate(p: dict) -> dict:
    shape = xmc_synth.Shape(**p["shape"])
    mirror = Path(p["mirror"])
    mirror.mkdir(parents=True, exist_ok=True)
    return xmc_synth.generate(shape, mirror / p["train_file"], mirror / p["test_file"], seed=p["seed"])


def stage_prepare_scaled(p: dict) -> dict:
    """prepare() with the registry spec's sizes replaced by the scaled shape."""
    import dataclasses

    from cdgtmll.data.prepare import prepare
    from cdgtmll.data.registry import get_spec

    s = p["shape"]
    spec = dataclasses.replace(get_spec(p["dataset"]), n_train=s["n_train"], n_test=s["n_test"],
                               n_features=s["n_features"], n_labels=s["n_labels"])
    prepare(spec, p["raw"], p["processed"], allow_download=False, val_fraction=0.1, split_seed=0,
            log=lambda line: print(line, flush=True))
    return {}


def _fit_data(processed: str, spec: dict):
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.methods.base import FitData

    data = ProcessedData.load(processed)
    X_tr, Y_tr = data.part("train")
    X_va, Y_va = data.part("val")
    tail = tail_labels(Y_tr, q=spec["r_variants"]["tail_fraction"], tie_seed=spec["r_variants"]["tie_seed"])
    return data, FitData(X_tr, Y_tr, X_va, Y_va, data.label_names, tail=tail)


def stage_train(p: dict) -> dict:
    """cdgtmll.train's steps up to method.fit, with the epoch cut to warmup + timed steps."""
    import torch

    from cdgtmll import train as run
    from cdgtmll.methods.base import RunContext, build_for_protocol
    from cdgtmll.nn import trainer

    _threads(p)
    spec = _spec(p, p["method"])
    t0 = time.perf_counter()
    data, fit = _fit_data(p["processed"], spec)
    load_s = time.perf_counter() - t0
    warm, steps = int(p["warmup"]), int(p["steps"])
    rec: dict = {"load_s": load_s, "ckpt_s": 0.0}
    orig_epoch, orig_ckpt = trainer.train_epoch, trainer.save_checkpoint  # the names train() calls

    def partial_epoch(task, model, opt, sched, X_t, Y_t, perm, batch_size, step0, total_steps, grad_clip, **kw):
        B = batch_size
        n_steps = -(-perm.numel() // B)
        w = min(warm, n_steps - 1)  # at least one timed step
        k = min(steps, n_steps - w)
        sums = {}
        if w:
            sums = orig_epoch(task, model, opt, sched, X_t, Y_t, perm[: w * B], B, step0, total_steps, grad_clip, **kw)
        t, c = time.perf_counter(), time.process_time()
        s2 = orig_epoch(task, model, opt, sched, X_t, Y_t, perm[w * B : (w + k) * B], B, step0 + w, total_steps,
                        grad_clip, **kw)
        rec.update(timed_steps=k, step_s=(time.perf_counter() - t) / max(k, 1),
                   step_cpu_s=(time.process_time() - c) / max(k, 1), warmup_steps=w,
                   steps_per_epoch=n_steps, batch_size=B, n_fit=int(perm.numel()), epoch_end_cpu=time.process_time())
        return {key: sums.get(key, 0.0) + s2[key] for key in s2}

    def timed_ckpt(*a, **kw):  # called right after the validation pass (and the task's epoch_end)
        t, c = time.perf_counter(), time.process_time()
        rec["val_cpu_s"] = c - rec.pop("epoch_end_cpu")
        orig_ckpt(*a, **kw)
        rec["ckpt_s"] += time.perf_counter() - t
        rec["ckpt_cpu_s"] = time.process_time() - c

    trainer.train_epoch, trainer.save_checkpoint = partial_epoch, timed_ckpt
    run.set_seed(0)
    method = build_for_protocol(spec["registered_method"], spec["hparams"], spec["training"])
    ctx = RunContext(seed=0, workdir=Path(p["rundir"]) / "seed0", device="cpu",
                     extra={"training": spec["training"], "image_backbone": spec.get("image_backbone")})
    t0 = time.perf_counter()
    method.fit(fit, ctx)
    rec["fit_s"] = time.perf_counter() - t0
    row = method.train_log[-1]
    rec.update(epoch_s=row["epoch_time"], val_s=row["val_time"], loss=row["loss"],
               val_p1=row.get("val_p@1"), backbone=type(method.model.backbone).__name__)
    rec["setup_s"] = rec["fit_s"] - rec["epoch_s"] - rec["val_s"] - rec["ckpt_s"]
    torch.save(method, Path(p["rundir"]) / "method.pt")
    prov = {"labels_without_train_positives": run.untrained_labels(fit.Y_train, data.label_names)}
    (Path(p["rundir"]) / "seed0" / "provenance.json").write_text(json.dumps(prov))
    return rec


def stage_predict(p: dict) -> dict:
    """Top-K predictions of the trained method on val and test, as cdgtmll.train writes them."""
    import numpy as np
    import torch

    from cdgtmll import train as run
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.io import atomic_path

    _threads(p)
    data = ProcessedData.load(p["processed"])
    method = torch.load(Path(p["rundir"]) / "method.pt", weights_only=False)
    arrays = {"format": np.asarray("topk"), "topk": np.asarray(min(run.TOPK, data.n_labels), dtype=np.int64)}
    rec = {}
    for split in ("val", "test"):
        X_s, _ = data.part(split)
        t0, c0 = time.perf_counter(), time.process_time()
        idx, score = run.predict_topk(method, X_s, data.splits[split].size, data.n_labels, p["method"], split)
        rec[f"{split}_s"], rec[f"{split}_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
        arrays[f"{split}_topk_idx"], arrays[f"{split}_topk_score"] = idx, score
    arrays.update({"idx_val": data.splits["val"], "idx_test": data.splits["test"]})
    with atomic_path(Path(p["rundir"]) / "seed0" / "predictions.npz", suffix=".npz") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    rec["rows_per_s_test"] = data.splits["test"].size / rec["test_s"]
    # top-k selection: cdgtmll.metrics.definitions.topk_rows (used by predict_topk) against the
    # reference cdgtmll.metrics.definitions._topk_rows, on real score blocks: 512 rows, k = TOPK (predict)
    # and 4096 rows float32, k = 5 (what the trainer's sparse validation pass selects)
    from cdgtmll.metrics.definitions import _topk_rows, topk_rows

    X_va, _ = data.part("val")
    for tag, rows, k, dtype in (("predict", 512, run.TOPK, np.float64), ("valpass", 4096, 5, np.float32)):
        s = method.predict_proba(X_va[:rows]).astype(dtype)
        if not np.array_equal(topk_rows(s, k), _topk_rows(s, k)):
            raise AssertionError(f"topk_rows differs from _topk_rows on the {tag} block")
        cpu: dict = {"new": [], "ref": []}
        for r in range(5):  # alternated, medians
            for name in (("new", "ref") if r % 2 == 0 else ("ref", "new")):
                c0 = time.process_time()
                (topk_rows if name == "new" else _topk_rows)(s, k)
                cpu[name].append(time.process_time() - c0)
        rec[f"topk_{tag}_cpu_s"] = statistics.median(cpu["new"])
        rec[f"topk_{tag}_ref_cpu_s"] = statistics.median(cpu["ref"])
        rec[f"topk_{tag}_rows"] = s.shape[0]
    rec["n_val"] = int(data.splits["val"].size)
    return rec


class MinimalNet:
    """The reference: ``h = x W + b`` (sparse x), ``logits = h A^T + c``; plain torch."""

    def __init__(self, D: int, d: int, L: int, lr: float, weight_decay: float) -> None:
        import torch
        from torch import nn

        bound = 1.0 / math.sqrt(D)
        self.W = nn.Parameter(torch.empty(D, d).uniform_(-bound, bound))
        self.b = nn.Parameter(torch.empty(d).uniform_(-bound, bound))
        self.head = nn.Linear(d, L)
        self.params = [self.W, self.b, *self.head.parameters()]
        self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay)

    def step(self, X, Y, idx) -> None:
        import numpy as np
        import torch
        import torch.nn.functional as F

        xb, yb = X[idx], Y[idx]
        rows = np.repeat(np.arange(len(idx)), np.diff(xb.indptr))
        ind = torch.from_numpy(np.vstack([rows, xb.indices.astype(np.int64)]))
        x = torch.sparse_coo_tensor(ind, torch.from_numpy(xb.data), xb.shape, is_coalesced=True,
                                    check_invariants=False)  # as cdgtmll.nn.sparse.csr_to_torch
        y = torch.from_numpy(yb.toarray())
        logits = self.head(torch.sparse.mm(x, self.W) + self.b)
        loss = F.binary_cross_entropy_with_logits(logits, y, reduction="none").sum(1).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 5.0)
        self.opt.step()


def _pipeline_loop(method: str, p: dict, X, Y, fit, fused: bool = False, per_batch: bool = False):
    """(run(idx_tensor), task, model, cfg): train_epoch over the given rows, set up as
    train() does (targets re-laid once on the CSR matrix when the task names its columns).
    Comparisons (the pipeline's code is not changed): ``fused`` builds the trainer's AdamW
    with ``fused=True``; ``per_batch`` (CD-GTMLL) applies ``train_targets`` to every dense
    batch instead, as the trainer did before ``train_target_columns``."""
    import torch

    from cdgtmll.methods.base import RunContext, build_for_protocol
    from cdgtmll.nn import divergence, trainer
    from cdgtmll.nn import sparse as sparse_mod

    spec = _spec(p, method)
    m = build_for_protocol(spec["registered_method"], spec["hparams"], spec["training"])
    m._backbone_kind, m._sparse_input, m.device = "tfidf-linear", True, torch.device("cpu")
    m.prepare(fit, RunContext(seed=0, workdir=Path(p["rundir"]), device="cpu"))
    cfg = m.train_config(RunContext(seed=0, workdir=Path(p["rundir"])))
    trainer.seed_everything(0)
    model = m.build_model(X, Y)
    total = cfg.epochs * math.ceil(X.shape[0] / cfg.batch_size)
    if fused:  # what-if: the trainer's AdamW with fused=True (same groups, rates, decay)
        orig = torch.optim.AdamW
        torch.optim.AdamW = lambda *a, **kw: orig(*a, fused=True, **kw)
        try:
            opt, sched = trainer.make_optimizer(m, model, cfg, total)
        finally:
            torch.optim.AdamW = orig
    else:
        opt, sched = trainer.make_optimizer(m, model, cfg, total)
    X_t = sparse_mod.SparseRows(X, "cpu")
    Y_t = trainer.sparse_train_targets(m, model, Y, "cpu", once=not per_batch)  # as the trainer builds it
    if not per_batch:
        probe = torch.arange(min(64, Y.shape[0]))
        if not torch.equal(Y_t[probe], trainer.sparse_train_targets(m, model, Y, "cpu", once=False)[probe]):
            raise AssertionError("targets re-laid once differ from train_targets per batch")
    watch = divergence.FiniteWatch(torch.device("cpu"), immediate=True)
    state = {"step": 0}

    def go(idx):
        trainer.train_epoch(m, model, opt, sched, X_t, Y_t, idx, cfg.batch_size, state["step"], total,
                            cfg.grad_clip, watch=watch)
        state["step"] += -(-idx.numel() // cfg.batch_size)
        for q in model.parameters():
            q.grad = None  # no loop keeps a 0.4 GB gradient while the others run

    return go, m, model, cfg


def _interleave(loops: dict, rounds: int, S: int, batch_rows) -> tuple[dict, dict]:
    """Median wall and CPU seconds per step of each loop: ``rounds`` rounds, each loop runs
    the same ``S`` batches per round, the order reversed every other round."""
    times: dict = {k: [] for k in loops}
    cpu: dict = {k: [] for k in loops}
    names = list(loops)
    for r in range(rounds):
        idx = batch_rows(S)
        for k in names if r % 2 == 0 else names[::-1]:
            t, c = time.perf_counter(), time.process_time()
            loops[k](idx)
            times[k].append((time.perf_counter() - t) / S)
            cpu[k].append((time.process_time() - c) / S)
    return ({k: statistics.median(v) for k, v in times.items()}, {k: statistics.median(v) for k, v in cpu.items()})


def stage_ratio(p: dict) -> dict:
    """Phase 1, interleaved: pipeline BCE / minimal loop / pipeline CD-GTMLL, then the
    profiles. Phase 2 (the others freed, to bound memory), interleaved: pipeline BCE / the
    same with fused AdamW."""
    import gc

    import torch

    from cdgtmll.nn import sparse as sparse_mod

    _threads(p)
    torch.use_deterministic_algorithms(True)  # as train() on CPU, for every loop
    spec = _spec(p, "BCE")
    data, fit = _fit_data(p["processed"], spec)
    X, Y = sparse_mod.as_csr32(fit.X_train), sparse_mod.as_csr32(fit.Y_train)
    del data
    loops = {}
    loops["pipeline-BCE"], _, bce_model, cfg = _pipeline_loop("BCE", p, X, Y, fit)
    ref = MinimalNet(X.shape[1], bce_model.backbone.out_dim, Y.shape[1], cfg.lr_backbone, cfg.weight_decay)

    def minimal(idx):
        for a in range(0, idx.numel(), cfg.batch_size):
            ref.step(X, Y, idx[a : a + cfg.batch_size].numpy())
        for q in ref.params:
            q.grad = None

    loops["minimal"] = minimal
    loops["pipeline-CD-GTMLL"], _, cd_model, _ = _pipeline_loop("CD-GTMLL", p, X, Y, fit)
    n_pairs = int(cd_model.n_pairs)
    B, S, rounds = cfg.batch_size, int(p["block"]), int(p["rounds"])
    perm = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(1))
    pos = 0

    def batch_rows(n_steps):
        nonlocal pos
        if pos + n_steps * B > perm.numel():
            pos = 0
        out = perm[pos : pos + n_steps * B]
        pos += n_steps * B
        return out

    warm = batch_rows(2)
    for f in loops.values():
        f(warm)
    med, med_cpu = _interleave(loops, rounds, S, batch_rows)
    # data part of a step: the SparseRows gathers of one batch (X -> COO, Y -> dense)
    X_t, Y_t = sparse_mod.SparseRows(X, "cpu"), sparse_mod.SparseRows(Y, "cpu", dense=True)
    idx = batch_rows(S)
    t = time.perf_counter()
    for a in range(0, idx.numel(), B):
        X_t[idx[a : a + B]], Y_t[idx[a : a + B]]
    gather_s = (time.perf_counter() - t) / S
    profiles, self_ms = {}, {}
    if int(p["profile_steps"]) > 0:
        from torch.profiler import ProfilerActivity, profile

        idx = batch_rows(int(p["profile_steps"]))  # the same batches for both
        for k in ("pipeline-BCE", "pipeline-CD-GTMLL"):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                loops[k](idx)
            ka = prof.key_averages()
            profiles[k] = ka.table(sort_by="self_cpu_time_total", row_limit=int(p["profile_rows"]),
                                   max_name_column_width=42)
            self_ms[k] = {e.key: e.self_cpu_time_total / 1e3 / int(p["profile_steps"]) for e in ka}
        # which operations make up CD-GTMLL's extra time per step
        b, c = self_ms["pipeline-BCE"], self_ms["pipeline-CD-GTMLL"]
        diff = sorted(((c.get(op, 0.0) - b.get(op, 0.0), op) for op in set(b) | set(c)), reverse=True)
        profiles["CD-GTMLL minus BCE"] = "\n".join(
            f"  {op:<44} {c.get(op, 0.0):9.1f} ms {b.get(op, 0.0):9.1f} ms {d:+9.1f} ms"
            for d, op in diff[: int(p["profile_rows"])])
        profiles["CD-GTMLL minus BCE"] = (f"  {'self CPU per step':<44} {'CD-GTMLL':>12} {'BCE':>12} {'diff':>12}\n"
                                          + profiles["CD-GTMLL minus BCE"]
                                          + f"\n  {'total':<44} {sum(c.values()):9.1f} ms {sum(b.values()):9.1f} ms "
                                          f"{sum(c.values()) - sum(b.values()):+9.1f} ms")
    # phase 2: fused AdamW what-if
    del loops["minimal"], minimal  # the closure held the last reference to the minimal net
    gc.collect()
    loops["BCE-fusedAdamW"], _, _, _ = _pipeline_loop("BCE", p, X, Y, fit, fused=True)
    loops["BCE-fusedAdamW"](batch_rows(2))
    fused, fused_cpu = _interleave({k: loops[k] for k in ("pipeline-BCE", "BCE-fusedAdamW")}, rounds, S,
                                   batch_rows)
    # phase 3: CD-GTMLL with its targets re-laid per batch (the trainer before train_target_columns)
    del loops["BCE-fusedAdamW"]
    gc.collect()
    loops["CD-GTMLL-per-batch"], _, _, _ = _pipeline_loop("CD-GTMLL", p, X, Y, fit, per_batch=True)
    loops["CD-GTMLL-per-batch"](batch_rows(2))
    pre, pre_cpu = _interleave(loops, rounds, S, batch_rows)
    return {"step_s": med, "step_cpu_s": med_cpu, "fused_step_s": fused, "fused_step_cpu_s": fused_cpu,
            "per_batch_step_s": pre, "per_batch_step_cpu_s": pre_cpu,
            "gather_s": gather_s, "block_steps": S, "profiles": profiles, "n_pairs": n_pairs,
            "n_labels": int(Y.shape[1])}


def stage_step(p: dict) -> dict:
    """The pipeline's BCE step alone, ``--block`` steps after 2 warm-up steps: run once
    with and once without ``THP_MEM_ALLOC_ENABLE=1`` in the environment (PyTorch's CPU
    allocator then asks for transparent huge pages for large tensors; read once per
    process, hence a process per setting)."""
    import os

    import torch

    from cdgtmll.nn import sparse as sparse_mod

    _threads(p)
    torch.use_deterministic_algorithms(True)
    data, fit = _fit_data(p["processed"], _spec(p, "BCE"))
    X, Y = sparse_mod.as_csr32(fit.X_train), sparse_mod.as_csr32(fit.Y_train)
    del data
    go, _, _, cfg = _pipeline_loop("BCE", p, X, Y, fit)
    B, S = cfg.batch_size, int(p["block"])
    gen = torch.Generator().manual_seed(1)
    reps = -(-(2 + S) * B // X.shape[0])  # permutations back to back (tiny data sets)
    perm = torch.cat([torch.randperm(X.shape[0], generator=gen) for _ in range(reps)])
    go(perm[: 2 * B])
    t, c = time.perf_counter(), time.process_time()
    go(perm[2 * B : (2 + S) * B])
    return {"step_s": (time.perf_counter() - t) / S, "step_cpu_s": (time.process_time() - c) / S,
            "thp": os.environ.get("THP_MEM_ALLOC_ENABLE", "")}


STAGES = {"generate": stage_generate, "prepare": stage_prepare_scaled, "train": stage_train,
          "predict": stage_predict, "ratio": stage_ratio, "step": stage_step}
