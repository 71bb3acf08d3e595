"""CPU of Snakemake's own process with and without the one-timer workaround
(:mod:`cdgtmll.runtime.snakemake_timer`), on a workflow whose jobs use no CPU.

    python benchmarks/bench_snakemake_scheduler.py [--jobs 60] [--sleep 2] [--rounds 2]

A workflow of ``--jobs`` independent jobs, each ``sleep <--sleep>``, runs with ``--cores 2``
in a temporary folder, alternately with Snakemake's scheduler as it is (``upstream``) and with
the workaround (``one-timer``), ``--rounds`` times each. Per run it prints the wall seconds, the
user+system CPU seconds of the Snakemake process and its children (the jobs are ``sleep``: the
children's share is their start-up only, the same in both arms), the most threads the Snakemake
process had (read from /proc every 0.25 s, Linux; each pending re-evaluation timer is one) and
the 1-minute load.
Upstream's passes per second grow with the jobs done, so its CPU grows with the jobs and the
run's length; the workaround's should not.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SNAKEFILE = """
import os
if os.environ.get("ONE_TIMER") == "1":
    from cdgtmll.runtime.snakemake_timer import one_reevaluation_timer
    assert one_reevaluation_timer()
rule all:
    input: expand("out/{{i}}.txt", i=range({jobs}))
rule job:
    output: "out/{{i}}.txt"
    shell: "sleep {sleep}; touch {{output}}"
"""


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(workdir: Path, one_timer: bool) -> dict:
    for p in (workdir / "out", workdir / ".snakemake"):
        shutil.rmtree(p, ignore_errors=True)
    env = {**os.environ, "ONE_TIMER": "1" if one_timer else "0", "PYTHONPATH": str(ROOT / "src")}
    load = os.getloadavg()[0]
    c0, t0 = child_cpu(), time.perf_counter()
    log = workdir / "snakemake.log"
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", "-q"], cwd=workdir, env=env,
                                stdout=fh, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:  # the process's thread count (each pending timer is a thread)
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peak = max(peak, int(status.split("Threads:")[1].split()[0]))
            except (OSError, IndexError):
                pass
            time.sleep(0.25)
    wall, cpu = time.perf_counter() - t0, child_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(log.read_text()[-3000:])
    return {"wall": wall, "cpu": cpu, "threads": peak, "load": load}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--sleep", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    import snakemake

    print(f"snakemake {snakemake.__version__}; {args.jobs} jobs of sleep {args.sleep} s on --cores 2; "
          f"{args.rounds} rounds, arms interleaved")
    results: dict[str, list[dict]] = {"upstream": [], "one-timer": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "Snakefile").write_text(SNAKEFILE.format(jobs=args.jobs, sleep=args.sleep))
        for r in range(args.rounds):
            for arm in ("upstream", "one-timer"):
                rec = run_once(work, arm == "one-timer")
                results[arm].append(rec)
                print(f"round {r + 1} {arm:9s}  wall {rec['wall']:6.1f} s  CPU {rec['cpu']:6.2f} s  "
                      f"peak threads {rec['threads']:4d}  load {rec['load']:.2f}", flush=True)
    med = {arm: statistics.median(x["cpu"] for x in recs) for arm, recs in results.items()}
    print(f"median CPU: upstream {med['upstream']:.2f} s, one-timer {med['one-timer']:.2f} s, "
          f"ratio {med['upstream'] / med['one-timer']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
