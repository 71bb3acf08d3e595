"""Every run near the hardware floor: five measurements, each against its target, in one run.

All timings are CPU seconds of this process (``time.process_time``) at one torch thread,
measured side by side and interleaved (A, B, B, A, ...; median per side), so that a loaded
machine changes both sides alike; wall ratios are printed beside the CPU ratios of row 1.

Rows (each with the ratio it should stay under):

1. ``overhead``: the project's BCE fit (``build("BCE").fit``: trainer defaults, i.e.
   ``select_epoch: best_val`` with validation mAP every epoch, checkpoints at the default cadence,
   the log) against a minimal hand-written loop with the same arithmetic (MLP 512x2, B 256,
   AdamW, cosine decay, global-norm clipping 5), Yeast train file, ``--overhead-epochs`` epochs
   (100 = the paper's protocol; the loop's loss is torch's ``binary_cross_entropy_with_logits``,
   which :func:`cdgtmll.nn.losses.common.bce_terms` also takes at Yeast's 256 x 14 batches);
   the loop validates once at the end, and again with a
   validation mAP and a copy of the best weights after every epoch (what ``best_val`` needs:
   that second reference isolates the trainer's overhead from the default rule's work). Target
   <= 1.10, CPU and wall.
2. ``CD-GTMLL / BCE`` per epoch on Delicious (983 labels) through the trainer's epoch loop
   (:func:`cdgtmll.nn.trainer.train_epoch`), ``--epochs`` timed epochs each after one warm-up.
   Target <= 1.20. Reference lines: the ratio of the two models' matmul FLOPs per training row
   (:func:`matmul_flop_ratio`); the ratio if CD-GTMLL's only extra work were its matrix
   products (BCE's epoch plus the extra products timed alone, :func:`matmuls_alone_epoch`); and
   each objective alone per epoch (:func:`objective_alone`) beside what the target leaves for
   CD-GTMLL's: ``target x BCE epoch - (BCE epoch - BCE's loss) - the extra head products``.
3. the same on Yeast. Target <= 1.15.
4. ``BCE on Delicious / FLOP floor``: the project's BCE fit for ``--epochs`` epochs (validation
   and checkpoints included; the default ``optimizer_impl: for_loop`` and ``fused``, ``--rounds``
   fits of each interleaved, median), CPU seconds
   per epoch against the epoch's matmul FLOPs
   (``2n(3(dh + hh + hL) - dh)``: forward, weight gradients, input gradients of layers 2-3) at
   the single-thread matmul peak measured here (best of 2048^2 sgemm). Target <= 1.4. A
   reference line times the fit's matrix products alone at their shapes (cache-warm), what no
   fp32 fit of this model can beat on this CPU.
5. ``imports``: CPU seconds (user + system) of a fresh interpreter importing what a training job
   imports (``cdgtmll.train``, the method via the registry, the trainer, deterministic mode, an
   AdamW step as the trainer takes it; the registry imports only the method's own module);
   median of 3; it names any of scikit-learn, sympy,
   ``torch._inductor`` it finds loaded. Target <= 3 s.

Data: MULAN train files under ``$CDGTMLL_DATA_MIRROR`` (default /work/shared/datasets); the
validation rows are carved from them as the pipeline carves them (iterative stratification,
``data.val_fraction`` and ``data.split_seed`` of config/config.yaml: 10%, seed 0; Yeast 1,344 fit
and 156 validation rows, Delicious 11,544 and 1,376).

    python benchmarks/bench_floor.py                 # the full table (about 10 min on 1 core)
    python benchmarks/bench_floor.py --quick         # few epochs, for development
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cdgtmll_cost import DATASETS, load_mulan  # noqa: E402

from cdgtmll.config.loader import read_yaml  # noqa: E402
from cdgtmll.data.splits import carve_validation  # noqa: E402
from cdgtmll.methods.base import FitData, RunContext, build  # noqa: E402
from cdgtmll.nn.trainer import TrainConfig, cosine_factor, make_optimizer, seed_everything, train_epoch  # noqa: E402
from cdgtmll.nn.val_metrics import validation_metrics  # noqa: E402

DEFAULT_PROFILE = Path(__file__).resolve().parents[1] / "config" / "config.yaml"
TARGETS = {"overhead": 1.10, "cd_delicious": 1.20, "cd_yeast": 1.15, "floor": 1.4, "imports": 3.0}
IMPORT_SNIPPET = (
    "import cdgtmll.train\n"
    "from cdgtmll.methods.base import build\n"
    "build({method!r}, {{}})\n"
    "from cdgtmll.runtime.torch_determinism import set_deterministic\n"
    "from cdgtmll.runtime.torch_optim import eager_optimizer_methods, optimizer_step\n"
    "set_deterministic(True)\n"
    "import torch\n"
    "eager_optimizer_methods()  # what make_optimizer does first\n"
    "p = torch.nn.Parameter(torch.zeros(1))\n"
    "opt = torch.optim.AdamW([p])\n"
    "p.grad = torch.ones(1)\n"
    "optimizer_step(opt)\n"
    "import sys\n"
    "print(' '.join(m for m in ('sklearn', 'sympy', 'torch._inductor') if m in sys.modules) or '-')\n"
)


def shipped_split_settings(profile: Path = DEFAULT_PROFILE) -> tuple[float, int]:
    """``(data.val_fraction, data.split_seed)`` of the shipped default profile."""
    data = read_yaml(profile)["data"]
    return float(data["val_fraction"]), int(data["split_seed"])


def split(X: np.ndarray, Y: np.ndarray) -> FitData:
    """Fit and validation rows of a train file as the pipeline carves them (``cdgtmll.data.prepare``:
    :func:`cdgtmll.data.splits.carve_validation` with the default profile's ``val_fraction`` and
    ``split_seed``), so the per-epoch validation costs what it costs in a pipeline run."""
    fraction, seed = shipped_split_settings()
    tr, va = carve_validation(Y, fraction=fraction, seed=seed)
    return FitData(X[tr], Y[tr], X[va], Y[va], [f"l{k}" for k in range(Y.shape[1])])


def cpu_wall(fn) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def interleaved(fns: dict, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """``(CPU, wall)`` seconds of each of ``fns`` per round, the order reversed every other round
    (A, B, B, A, ...), so that a change of the machine's load falls on every side alike."""
    out: dict[str, list[tuple[float, float]]] = {k: [] for k in fns}
    for r in range(rounds):
        for side in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            out[side].append(cpu_wall(fns[side]))
    return out


# ------------------------------------------------------------------ row 1: overhead


def minimal_loop(data: FitData, epochs: int, seed: int = 0, B: int = 256, validate_each_epoch: bool = False) -> float:
    """The hand-written reference: same model, optimiser, schedule and clipping as the
    project's BCE, no checkpoints, no log; validation mAP once at the end, or
    (``validate_each_epoch``) after every epoch with a copy of the best epoch's weights, the work
    ``select_epoch: best_val`` (the default) needs."""
    seed_everything(seed)
    X = np.asarray(data.X_train, dtype=np.float64)
    mean, std = X.mean(0), X.std(0)
    std = np.where(std < 1e-8, 1.0, std)
    mu, inv = torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(1.0 / std, dtype=torch.float32)
    d, L = X.shape[1], data.Y_train.shape[1]
    body = nn.Sequential(nn.Linear(d, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU())
    head = nn.Linear(512, L)
    model = nn.Sequential(body, head)
    Xt = (torch.from_numpy(np.ascontiguousarray(data.X_train, dtype=np.float32)) - mu) * inv
    Yt = torch.from_numpy(np.asarray(data.Y_train, dtype=np.float32))
    n = Xt.shape[0]
    total = epochs * math.ceil(n / B)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_factor(s, total))
    gen = torch.Generator().manual_seed(seed)
    params = list(model.parameters())
    Xv = (torch.from_numpy(np.ascontiguousarray(data.X_val, dtype=np.float32)) - mu) * inv
    best, best_state = -1.0, None
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        for s in range(0, n, B):
            idx = perm[s : s + B]
            loss = F.binary_cross_entropy_with_logits(model(Xt[idx]), Yt[idx], reduction="sum") / idx.numel()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(params, 5.0)
            opt.step()
            sched.step()
        if validate_each_epoch:
            with torch.no_grad():
                score = validation_metrics(data.Y_val, torch.sigmoid(model(Xv)).numpy())["val_mAP"]
            if score > best:
                best, best_state = score, {k: v.clone() for k, v in model.state_dict().items()}
    if best_state is not None:  # predict with the best epoch's weights, as best_val does
        model.load_state_dict(best_state)
    with torch.no_grad():
        S = torch.sigmoid(model((torch.from_numpy(np.ascontiguousarray(data.X_val, dtype=np.float32)) - mu) * inv))
    return validation_metrics(data.Y_val, S.numpy())["val_mAP"]


def project_fit(data: FitData, epochs: int, method: str = "BCE", seed: int = 0, **hp) -> float:
    with tempfile.TemporaryDirectory() as wd:
        m = build(method, {"epochs": epochs, **hp})
        m.fit(data, RunContext(seed=seed, workdir=Path(wd)))
        return float(m.train_log[-1]["val_mAP"])


def row_overhead(mirror: Path, epochs: int, rounds: int) -> dict:
    data = split(*load_mulan(mirror / DATASETS["yeast"][0], DATASETS["yeast"][1]))
    minimal_loop(data, 1), project_fit(data, 1)  # warm-up (lazy imports, allocator)
    fns = {"minimal": lambda: minimal_loop(data, epochs),
           "minimal_val": lambda: minimal_loop(data, epochs, validate_each_epoch=True),
           "project": lambda: project_fit(data, epochs)}
    t = interleaved(fns, rounds)
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in t.items()}
    return {ref: {"cpu": med["project"][0] / med[ref][0], "wall": med["project"][1] / med[ref][1],
                  "ref_cpu": med[ref][0], "project_cpu": med["project"][0]} for ref in ("minimal", "minimal_val")}


# ------------------------------------------------------------------ rows 2-3: CD-GTMLL / BCE


def row_cd_over_bce(mirror: Path, name: str, epochs: int, B: int = 256) -> dict:
    X, Y = load_mulan(mirror / DATASETS[name][0], DATASETS[name][1])
    data = FitData(X, Y, None, None, [f"l{k}" for k in range(Y.shape[1])])
    ctx = RunContext(seed=0, workdir=Path("."))
    n = X.shape[0]
    steps = -(-n // B)
    X_t, Y_t = torch.from_numpy(X), torch.from_numpy(Y.astype(np.float32))
    runs = {}
    for method in ("BCE", "CD-GTMLL"):
        m = build(method, {"batch_size": B})
        m.prepare(data, ctx)
        seed_everything(0)
        model = m.build_model(X, Y)
        cfg = TrainConfig(epochs=epochs + 1, batch_size=B, lr_backbone=m.lr_backbone, lr_head=m.lr_head)
        opt, sched = make_optimizer(m, model, cfg, (epochs + 1) * steps)
        runs[method] = (m, model, opt, sched, m.train_targets(model, Y_t), [])
    gen = torch.Generator().manual_seed(0)

    def one_epoch(method: str, ep: int) -> None:
        m, model, opt, sched, targets, times = runs[method]
        perm = torch.randperm(n, generator=gen)
        c0 = time.process_time()
        train_epoch(m, model, opt, sched, X_t, targets, perm, B, ep * steps, (epochs + 1) * steps, 5.0)
        times.append(time.process_time() - c0)

    for method in runs:
        one_epoch(method, 0)
        runs[method][5].clear()
    for ep in range(1, epochs + 1):
        for method in (("BCE", "CD-GTMLL") if ep % 2 else ("CD-GTMLL", "BCE")):
            one_epoch(method, ep)
    bce, cd = statistics.median(runs["BCE"][5]), statistics.median(runs["CD-GTMLL"][5])
    net = runs["CD-GTMLL"][1]
    flops = matmul_flop_ratio(X.shape[1], net)
    # the budget: what CD-GTMLL's epoch adds to BCE's that is matrix products (cache-warm, so at
    # most what they cost in the epoch), and each objective alone, from fixed logits
    h = net.heads.in_features
    mm = {k: min(matmuls_alone_epoch(n, X.shape[1], h, K, B, peers=o) for _ in range(3))
          for k, K, o in (("L", flops["labels"], 0), ("P", flops["pairs"], 0), ("P+peers", flops["pairs"], flops["overlap_pairs"]))}
    obj = {method: objective_alone(*runs[method][:2], X_t, runs[method][4], B, steps) for method in runs}
    return {"ratio": cd / bce, "bce_s": bce, "cd_s": cd, **flops,
            "mm_bound": (bce + mm["P+peers"] - mm["L"]) / bce,
            "bce_objective_s": obj["BCE"], "cd_objective_s": obj["CD-GTMLL"],
            # at the target, CD-GTMLL's epoch = BCE's - BCE's loss + its extra head products + its objective
            "cd_objective_budget_s": TARGETS[f"cd_{name}"] * bce - (bce - obj["BCE"]) - (mm["P"] - mm["L"])}


def objective_alone(task, model: torch.nn.Module, X_t: torch.Tensor, targets: torch.Tensor, B: int, steps: int) -> float:
    """CPU seconds of ``steps`` forward and backward passes of the method's objective alone
    (:meth:`training_step` and ``backward``) from fixed logits of one batch: BCE's loss on its
    [B, L] logits; CD-GTMLL's potential on its [B, P] pair logits, the EMA peers' product
    included. The model's logit function is replaced on the instance for the duration."""
    xb, yb = X_t[:B], targets[:B]
    model.train()
    attr = "pair_logits" if hasattr(model, "pair_logits") else "forward"
    with torch.no_grad():
        fixed = getattr(model, attr)(xb)
    leaf = (lambda: (fixed[0], fixed[1].detach().requires_grad_(True))) if attr == "pair_logits" \
        else (lambda: fixed.detach().requires_grad_(True))
    setattr(model, attr, lambda x: current)
    try:
        best = math.inf
        for rep in range(4):  # the first pass warms up; best of the other three
            c0 = time.process_time()
            for _ in range(steps):
                current = leaf()
                loss, _ = task.training_step(model, xb, yb, 0.5)
                loss.backward()
            if rep:
                best = min(best, time.process_time() - c0)
        return best
    finally:
        delattr(model, attr)


def matmul_flop_ratio(d: int, net: torch.nn.Module) -> dict:
    """CD-GTMLL's matmul FLOPs per training row against BCE's, from the model's shapes: both
    ``2(3(dh + hh + hK) - dh)`` with K = L for BCE and K = P (one head row per (player, label)
    pair) for CD-GTMLL, which adds the forward-only product of the EMA peers, ``2h|O|``
    (|O| = overlap pairs). Neither side's element-wise work counts: at equal matmul speed the
    epoch ratio cannot be lower than this."""
    h = net.heads.in_features
    P, L = net.n_pairs, net.n_labels
    n_ov = P - net.n_single if net.ema_weight is not None else 0

    def flops(K: int) -> int:
        return 2 * (3 * (d * h + h * h + h * K) - d * h)

    return {"flop_ratio": (flops(P) + 2 * h * n_ov) / flops(L), "pairs": P, "labels": L, "overlap_pairs": n_ov}


# ------------------------------------------------------------------ row 4: FLOP floor


def matmul_peak(size: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = math.inf
    for _ in range(repeats):
        c0 = time.process_time()
        a @ b
        best = min(best, time.process_time() - c0)
    return 2 * size**3 / best


def matmuls_alone_epoch(n: int, d: int, h: int, L: int, B: int = 256, peers: int = 0) -> float:
    """CPU seconds of one epoch of the BCE fit's matrix products alone, at their shapes and in
    their layouts (per step: the three forward ``addmm`` with bias, then the weight gradients of
    all three layers and the input gradients of layers 2-3, as autograd computes them), on
    operands reused from step to step (cache-warm: a lower bound for the fit, whose batch rows
    are gathered fresh and whose weights the optimiser rewrites every step). ``peers``: rows of
    CD-GTMLL's forward-only EMA-peer product on the features (0: none)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, d, generator=g)
    W = [torch.randn(o, i, generator=g) * 0.05 for i, o in ((d, h), (h, h), (h, L), (h, peers))]
    b = [torch.zeros(o) for o in (h, h, L, peers)]
    steps = -(-n // B)

    def step() -> None:
        a1 = torch.addmm(b[0], x, W[0].t())
        a2 = torch.addmm(b[1], a1, W[1].t())
        z = torch.addmm(b[2], a2, W[2].t())
        if peers:
            torch.addmm(b[3], a2, W[3].t())
        gz = z  # stands for dL/dz: same shape
        gz.t().mm(a2), gz.mm(W[2])           # layer 3: weight and input gradients
        ga2 = a2
        ga2.t().mm(a1), ga2.mm(W[1])         # layer 2
        a1.t().mm(x)                         # layer 1: weight gradient only

    step()
    c0 = time.process_time()
    for _ in range(steps):
        step()
    return time.process_time() - c0


def row_floor(mirror: Path, epochs: int, rounds: int = 1,
              impls: tuple[str, ...] = ("for_loop", "fused")) -> dict[str, dict]:
    """The project's BCE fit per optimizer_impl, against the FLOP floor: ``rounds`` fits of
    ``epochs`` epochs each, interleaved (A, B, B, A, ...), the median per impl, after a 1-epoch
    warm-up of each (the first fit of a process pays lazy imports and first-touch costs); and the
    fit's matrix products alone (:func:`matmuls_alone_epoch`, best of ``epochs``) against it."""
    data = split(*load_mulan(mirror / DATASETS["delicious"][0], DATASETS["delicious"][1]))
    n, d = data.X_train.shape
    L, h = data.Y_train.shape[1], 512
    flop_epoch = 2 * n * (3 * (d * h + h * h + h * L) - d * h)
    peak = matmul_peak()
    for impl in impls:
        project_fit(data, 1, optimizer_impl=impl)
    runs = interleaved({impl: (lambda impl=impl: project_fit(data, epochs, optimizer_impl=impl)) for impl in impls},
                       rounds)
    cpu = {impl: statistics.median(c for c, _ in v) / epochs for impl, v in runs.items()}
    cpu["matmuls alone"] = min(matmuls_alone_epoch(n, d, h, L) for _ in range(max(epochs, 2)))
    peak = max(peak, matmul_peak())  # before and after: the better of the two
    floor_epoch = flop_epoch / peak
    return {impl: {"ratio": c / floor_epoch, "cpu_epoch": c, "floor_epoch": floor_epoch,
                   "peak_gflops": peak / 1e9, "achieved_gflops": flop_epoch / c / 1e9,
                   "tflop_100": flop_epoch * 100 / 1e12, "n": n} for impl, c in cpu.items()}


# ------------------------------------------------------------------ row 5: imports


def row_imports(method: str = "CD-GTMLL", repeats: int = 3) -> dict:
    code = IMPORT_SNIPPET.format(method=method)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cpus, loaded = [], "?"
    for _ in range(repeats):
        before = os.times()
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        after = os.times()
        cpus.append((after.children_user - before.children_user) + (after.children_system - before.children_system))
        loaded = out.stdout.strip()
    return {"cpu": statistics.median(cpus), "all": cpus, "heavy_modules": loaded}


def verdict(value: float, target: float) -> str:
    return "PASS" if value <= target else "FAIL"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overhead-epochs", type=int, default=100, help="epochs of row 1 (paper: 100)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of rows 1 and 4")
    ap.add_argument("--epochs", type=int, default=5, help="timed epochs of rows 2-4")
    ap.add_argument("--quick", action="store_true", help="20 epochs in row 1, 2 rounds, 2 epochs in rows 2-4")
    ap.add_argument("--rows", default="overhead,cd_delicious,cd_yeast,floor,imports")
    ap.add_argument("--mirror", type=Path, default=Path(os.environ.get("CDGTMLL_DATA_MIRROR", "/work/shared/datasets")))
    args = ap.parse_args(argv)
    if args.quick:
        args.overhead_epochs, args.rounds, args.epochs = 20, 2, 2
    torch.set_num_threads(1)
    rows = args.rows.split(",")
    print(f"torch {torch.__version__}, 1 thread, CPU time; load average {os.getloadavg()[0]:.2f} at start; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'measure':58s} {'value':>18s} {'target':>8s}  verdict")
    ok = True

    def line(label: str, value: float, shown: str, key: str, note: str = "", reference: bool = False) -> None:
        nonlocal ok
        v = "ref." if reference else verdict(value, TARGETS[key])  # a reference line has no verdict
        ok = ok and v in ("PASS", "ref.")
        print(f"{label:58s} {shown:>18s} {'<= ' + format(TARGETS[key], 'g'):>8s}  {v}  {note}", flush=True)

    if "overhead" in rows:
        res = row_overhead(args.mirror, args.overhead_epochs, args.rounds)
        for ref, what in (("minimal", "minimal loop"), ("minimal_val", "minimal loop + val mAP/epoch")):
            r = res[ref]
            line(f"project BCE / {what}, Yeast {args.overhead_epochs} ep, CPU", r["cpu"], f"{r['cpu']:.3f}",
                 "overhead", f"({r['project_cpu']:.2f} s vs {r['ref_cpu']:.2f} s)")
            line(f"project BCE / {what}, Yeast {args.overhead_epochs} ep, wall", r["wall"], f"{r['wall']:.3f}",
                 "overhead")
    for key, name in (("cd_delicious", "delicious"), ("cd_yeast", "yeast")):
        if key in rows:
            r = row_cd_over_bce(args.mirror, name, args.epochs)
            line(f"CD-GTMLL / BCE per epoch, {name.capitalize()}", r["ratio"], f"{r['ratio']:.3f}", key,
                 f"({r['cd_s'] * 1e3:.0f} ms vs {r['bce_s'] * 1e3:.0f} ms)")
            line(f"CD-GTMLL / BCE matmul FLOPs per row, {name.capitalize()}", r["flop_ratio"],
                 f"{r['flop_ratio']:.3f}", key, f"({r['pairs']} head rows vs {r['labels']}; EMA peers on "
                 f"{r['overlap_pairs']} overlap pairs)", reference=True)
            line(f"CD-GTMLL / BCE if its only extra were matmuls, {name.capitalize()}", r["mm_bound"],
                 f"{r['mm_bound']:.3f}", key, "(BCE's epoch + the extra products, timed alone)", reference=True)
            budget = r["cd_objective_budget_s"]
            print(f"  objective alone per epoch, fwd+bwd from fixed logits: BCE {r['bce_objective_s'] * 1e3:.0f} ms, "
                  f"CD-GTMLL {r['cd_objective_s'] * 1e3:.0f} ms; at the target CD-GTMLL's may take "
                  f"{'at most ' + format(budget * 1e3, '.0f') + ' ms' if budget > 0 else 'no time at all'} "
                  f"({budget / r['bce_objective_s']:.2f}x BCE's loss)", flush=True)
    if "floor" in rows:
        for impl, r in row_floor(args.mirror, args.epochs, args.rounds).items():
            ref = impl == "matmuls alone"
            what = "the fit's matmuls alone, cache-warm" if ref else f"{args.epochs} ep fit, {impl}, median of {args.rounds}"
            line(f"BCE on Delicious / FLOP floor ({what})", r["ratio"], f"{r['ratio']:.3f}x",
                 "floor", f"({r['achieved_gflops']:.1f} of {r['peak_gflops']:.1f} GFLOP/s peak; "
                 f"{r['tflop_100']:.2f} TFLOP per 100 epochs, n={r['n']})", reference=ref)
    if "imports" in rows:
        r = row_imports()
        line("imports of one training job process (CPU s)", r["cpu"], f"{r['cpu']:.2f} s", "imports",
             f"(runs {', '.join(f'{c:.2f}' for c in r['all'])}; heavy modules loaded: {r['heavy_modules']})")
    print(f"load average {os.getloadavg()[0]:.2f} at end; {'all rows pass' if ok else 'some rows FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
