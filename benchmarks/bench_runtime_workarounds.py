"""Each run-time workaround against its fallback, side by side in one run (CPU seconds).

Every arm runs in fresh processes, the arms interleaved round by round (A, B, ..., then the
reverse order), and the median over the rounds is printed with the date and the load average.
CPU is user + system of the child process, from the OS (``RUSAGE_CHILDREN``).

1. ``torch``: what a training process spends on torch's compiler stack. A fresh process imports
   the training job's command module (``cdgtmll.train``), turns deterministic algorithms on,
   builds AdamW with a cosine ``LambdaLR`` over a small linear model and runs ``--steps`` steps.
   The arms take, for each of the three private-API bypasses a training process could use,
   either the bypass or the public API: ``det`` (``torch._C._set_deterministic_algorithms``
   instead of ``torch.use_deterministic_algorithms``, which imports ``torch._inductor.config``),
   ``seed`` (seeding ``__dynamo_disable`` on ``Optimizer``'s wrapped methods, so that the first
   call does not import ``torch._dynamo``), ``step`` (the unwrapped ``Optimizer.step`` under
   ``no_grad`` plus ``opt._opt_called``, instead of ``opt.step()`` whose wrapper imports
   ``torch._dynamo``). Printed per arm: the process's CPU, the CPU per step after the first,
   whether ``torch._dynamo`` / ``sympy`` got imported, and a digest of the trained weights
   (every arm must train the same bytes).
2. ``index``: the import index of the code identities (the imports of each source file kept on
   disk under the sha256 of its bytes). A fresh process computes the identities a planning
   process computes for ``--profile`` (every rule's entry modules and every method's training
   roots) by parsing each file (``parse``) or by looking its imports up in a table read from a
   JSON file that an earlier process wrote (``index``: what the index did, its file read
   included). Printed: the CPU of the identities alone.
3. ``scheduler``: Snakemake's own process on ``--jobs`` jobs of ``sleep --sleep`` with
   ``--cores 2``, with upstream's scheduler and with the one-timer workaround
   (:mod:`cdgtmll.runtime.snakemake_timer`; ``benchmarks/bench_snakemake_scheduler.py``).
4. ``openmp``: a 2-thread torch job (ResNet-50 forward passes,
   ``benchmarks/bench_openmp_wait.py``) with ``OMP_WAIT_POLICY`` unset and ``PASSIVE``
   (:mod:`cdgtmll.runtime.openmp`), on the machine as it is (no busy loops added).

    python benchmarks/bench_runtime_workarounds.py                       # all four, 3 rounds
    python benchmarks/bench_runtime_workarounds.py --only torch index --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

TORCH_PROBE = r"""
import hashlib, inspect, json, resource, sys
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
import cdgtmll.train  # the training job's command module and what it imports
import torch
use = set(sys.argv[1].split(",")) - {""}
steps = int(sys.argv[2])
if "det" in use:
    torch._C._set_deterministic_algorithms(True, warn_only=False)
else:
    torch.use_deterministic_algorithms(True)
if "seed" in use:
    for name in ("__init__", "zero_grad", "state_dict", "load_state_dict", "add_param_group"):
        fn = getattr(getattr(torch.optim.Optimizer, name, None), "__wrapped__", None)
        if fn is not None and getattr(fn, "__dynamo_disable", None) is None:
            setattr(fn, "__dynamo_disable", fn)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 16))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + __import__("math").cos(3.14159 * s / 10**4)))
x, y = torch.randn(256, 64), torch.rand(256, 16)
def step():
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
    if "step" in use and "torch._dynamo" not in sys.modules:
        with torch.no_grad():
            inspect.unwrap(type(opt).step)(opt)
        opt._opt_called = True
    else:
        opt.step()
    sched.step()
step()
t0 = cpu()
for _ in range(steps - 1):
    step()
per_step = (cpu() - t0) / max(steps - 1, 1)
h = hashlib.sha256()
for p in model.parameters():
    h.update(p.detach().numpy().tobytes())
print(json.dumps({"per_step_s": per_step, "dynamo": "torch._dynamo" in sys.modules,
                  "sympy": "sympy" in sys.modules, "digest": h.hexdigest()[:16]}))
"""

TORCH_ARMS = {
    "all bypasses": "det,seed,step",
    "public API": "",
    "only det": "det",
    "det + seed": "det,seed",
    "seed + step": "seed,step",
}

INDEX_PROBE = r"""
import hashlib, json, resource, sys
from pathlib import Path
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
from cdgtmll.config import loader, plan
from cdgtmll.lineage import code
from cdgtmll.lineage.roots import train_roots
profile, arm, table_file = sys.argv[1:4]
cfg = loader.load(profile)
specs = [plan.run_spec(cfg, d, "clean", m) for d in cfg["experiments"]["datasets"] for m in cfg["experiments"]["methods"]]
rules = ["cdgtmll.data.prepare", "cdgtmll.variants.r_variant", "cdgtmll.metrics.evaluate_run", "cdgtmll.tables.build",
         "cdgtmll.figures.pr_curve", "cdgtmll.claims.check"]
roots = [[r] for r in rules] + [train_roots(s) for s in specs]
real = code.parse_imports
seen = {}
def recording(source, path, module):
    seen[f"{module} {path}"] = found = list(real(source, path, module))
    return tuple(found)
t0 = cpu()
if arm == "index":
    table = json.loads(Path(table_file).read_text())
    code.parse_imports = lambda source, path, module: tuple(table[f"{module} {path}"])
else:
    code.parse_imports = recording
ids = [code.identity(r)["sha256"] for r in roots]
spent = cpu() - t0
if arm == "parse":
    Path(table_file).write_text(json.dumps(seen))
digest = hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16]
print(json.dumps({"cpu_s": spent, "identities": len(ids), "files": len(seen), "digest": digest}))
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_probe(code: str, args: list[str]) -> tuple[float, dict]:
    """(the child's CPU seconds, its last stdout line as JSON). The child runs one intra-op thread,
    as a training job does (its rule's ``threads: 1``), so that OpenMP threads waiting beside
    other processes do not add their spinning to the CPU measured."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "CDGTMLL_THREADS": "1"}
    before = _children_cpu()
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=ROOT, capture_output=True, text=True)
    spent = _children_cpu() - before
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return spent, json.loads(out.stdout.strip().splitlines()[-1])


def interleaved(arms: list[str], rounds: int):
    for r in range(rounds):
        yield from (arms if r % 2 == 0 else arms[::-1])


def bench_torch(rounds: int, steps: int) -> None:
    res: dict[str, list[tuple[float, dict]]] = {a: [] for a in TORCH_ARMS}
    for arm in interleaved(list(TORCH_ARMS), rounds):
        res[arm].append(run_probe(TORCH_PROBE, [TORCH_ARMS[arm], str(steps)]))
    base = statistics.median(c for c, _ in res["public API"])
    print(f"torch: a training process ({steps} AdamW steps of a 64-128-16 MLP, batch 256), {rounds} rounds")
    for arm, v in res.items():
        cpu = statistics.median(c for c, _ in v)
        step = statistics.median(o["per_step_s"] for _, o in v)
        info = v[0][1]
        print(f"  {arm:13s} process CPU {cpu:5.2f} s ({cpu - base:+5.2f} s vs public API)  "
              f"per step {step * 1e3:6.3f} ms  torch._dynamo {'yes' if info['dynamo'] else 'no '}  "
              f"sympy {'yes' if info['sympy'] else 'no '}  weights {info['digest']}"
              f"  (rounds: {', '.join(f'{c:.2f}' for c, _ in v)})")
    digests = {o["digest"] for v in res.values() for _, o in v}
    print(f"  trained weights: {'the same bytes in every arm' if len(digests) == 1 else 'DIFFERENT: ' + str(digests)}")


def bench_index(rounds: int, profile: str) -> None:
    res: dict[str, list[tuple[float, dict]]] = {"parse": [], "index": []}
    with tempfile.TemporaryDirectory() as tmp:
        table = str(Path(tmp) / "imports.json")
        run_probe(INDEX_PROBE, [profile, "parse", table])  # writes the table the index arm reads
        for arm in interleaved(list(res), rounds):
            res[arm].append(run_probe(INDEX_PROBE, [profile, arm, table]))
    digests = {o["digest"] for v in res.values() for _, o in v}
    print(f"index: the code identities of a planning process ({profile}; "
          f"{res['parse'][0][1]['identities']} identities over {res['parse'][0][1]['files']} files), {rounds} rounds")
    for arm, v in res.items():
        ident = statistics.median(o["cpu_s"] for _, o in v)
        proc = statistics.median(c for c, _ in v)
        print(f"  {arm:6s} identities CPU {ident:5.2f} s  process CPU {proc:5.2f} s"
              f"  (rounds: {', '.join(format(o['cpu_s'], '.2f') for _, o in v)})")
    print(f"  identities: {'the same in both arms' if len(digests) == 1 else 'DIFFERENT'}")


def bench_scheduler(rounds: int, jobs: int, sleep: float) -> None:
    import bench_snakemake_scheduler as sched

    res: dict[str, list[dict]] = {"upstream": [], "one-timer": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "Snakefile").write_text(sched.SNAKEFILE.format(jobs=jobs, sleep=sleep))
        for arm in interleaved(list(res), rounds):
            res[arm].append(sched.run_once(work, arm == "one-timer"))
    print(f"scheduler: Snakemake on {jobs} jobs of sleep {sleep} s, --cores 2, {rounds} rounds")
    for arm, v in res.items():
        print(f"  {arm:9s} CPU {statistics.median(x['cpu'] for x in v):6.2f} s  wall "
              f"{statistics.median(x['wall'] for x in v):6.1f} s  peak threads {max(x['threads'] for x in v)}"
              f"  (rounds: {', '.join(format(x['cpu'], '.2f') for x in v)})")


def bench_openmp(rounds: int, batches: int) -> None:
    import bench_openmp_wait as omp

    res: dict[str, list[tuple[float, float, str]]] = {k: [] for k in omp.POLICIES}
    for arm in interleaved(list(res), rounds):
        res[arm].append(omp.run_job(omp.POLICIES[arm], 2, 64, batches))
    print(f"openmp: 2-thread job, {batches} ResNet-50 forward passes of 64 x 3 x 32 x 32, {rounds} rounds")
    for arm, v in res.items():
        print(f"  OMP_WAIT_POLICY {arm:8s} CPU {statistics.median(c for _, c, _ in v):6.2f} s  wall "
              f"{statistics.median(w for w, _, _ in v):6.2f} s  (rounds: {', '.join(f'{c:.2f}' for _, c, _ in v)})")
    digests = {d for v in res.values() for _, _, d in v}
    print(f"  outputs: {'the same bytes' if len(digests) == 1 else 'DIFFERENT'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=["torch", "index", "scheduler", "openmp"],
                    default=["torch", "index", "scheduler", "openmp"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200, help="training steps of the torch probe")
    ap.add_argument("--profile", default="config/config.yaml", help="the profile whose identities are computed")
    ap.add_argument("--jobs", type=int, default=40, help="scheduler: jobs of the workflow")
    ap.add_argument("--sleep", type=float, default=1.0, help="scheduler: seconds each job sleeps")
    ap.add_argument("--batches", type=int, default=10, help="openmp: forward passes of the job")
    args = ap.parse_args(argv)
    import snakemake
    import torch

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.2f} at start; python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"snakemake {snakemake.__version__}", flush=True)
    for part in args.only:
        if part == "torch":
            bench_torch(args.rounds, args.steps)
        elif part == "index":
            bench_index(args.rounds, args.profile)
        elif part == "scheduler":
            bench_scheduler(args.rounds, args.jobs, args.sleep)
        else:
            bench_openmp(args.rounds, args.batches)
        print(f"  (load average {os.getloadavg()[0]:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
