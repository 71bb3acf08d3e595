"""OpenMP's wait policy for a 2-thread torch job, alone and beside busy processes.

Runs a fixed torch workload (frozen ResNet-50 forward passes at 32 px, batch 64, the shape of
the frozen-feature job on the tests' VOC fixture) in a fresh process with ``OMP_NUM_THREADS``
threads, once with ``OMP_WAIT_POLICY`` unset (OpenMP's default: a waiting thread spins for a
while) and once with ``PASSIVE`` (the workflow's jobs: :mod:`cdgtmll.runtime.openmp`), with 0
and with ``--busy`` pure-Python busy loops running beside it. Rounds alternate the order.
Prints the job's wall and CPU seconds (user + system, from the OS), the median of the rounds,
and whether the outputs were the same bytes under both policies.

    python benchmarks/bench_openmp_wait.py                   # 2 threads, 0 and 2 busy, 2 rounds
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

WORKLOAD = """
import hashlib, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50(num_classes=20).eval()
x = torch.randn({batch}, 3, 32, 32)
h = hashlib.sha256()
with torch.no_grad():
    for _ in range({batches}):
        h.update(m(x).numpy().tobytes())
print(h.hexdigest())
"""

POLICIES = {"default": None, "PASSIVE": "PASSIVE"}


def run_job(policy: str | None, threads: int, batch: int, batches: int) -> tuple[float, float, str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_NUM_THREADS"] = str(threads)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    before, t0 = os.times(), time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WORKLOAD.format(batch=batch, batches=batches)], env=env,
                         capture_output=True, text=True, check=True)
    wall, after = time.perf_counter() - t0, os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--busy", type=int, default=2, help="busy loops beside the job in the contended arm")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at start; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; job: {args.threads} threads, "
          f"{args.batches} ResNet-50 forward passes of {args.batch} x 3 x 32 x 32")
    digests: set[str] = set()
    for busy in (0, args.busy):
        res: dict[str, list[tuple[float, float]]] = {k: [] for k in POLICIES}
        for r in range(args.rounds):
            for name in (list(POLICIES) if r % 2 == 0 else list(POLICIES)[::-1]):
                loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
                try:
                    wall, cpu, digest = run_job(POLICIES[name], args.threads, args.batch, args.batches)
                finally:
                    for p in loops:
                        p.kill()
                        p.wait()
                res[name].append((wall, cpu))
                digests.add(digest)
        for name, v in res.items():
            wall, cpu = statistics.median(w for w, _ in v), statistics.median(c for _, c in v)
            print(f"{busy} busy loops beside it, OMP_WAIT_POLICY {name:8s}: wall {wall:6.1f} s, CPU {cpu:6.1f} s "
                  f"(rounds: {', '.join(f'{w:.1f}/{c:.1f}' for w, c in v)})")
    same = len(digests) == 1
    print(f"outputs under both policies: {'the same bytes' if same else 'DIFFERENT'}; "
          f"load average {os.getloadavg()[0]:.2f} at end")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
