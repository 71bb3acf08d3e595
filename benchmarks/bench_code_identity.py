"""What the code identities cost a process (:mod:`cdgtmll.lineage.code`), with and without the
import index on disk, and what that is in a Snakemake start.

Each measure runs in fresh processes, alternating between the two sides (A, B, B, A, ...), and
reports the median CPU time (user + system) per side:

1. ``identity``: the identities a planning process computes (every rule's entry modules and
   the training roots of every method of ``--profile``), in-process CPU, with an empty
   ``XDG_CACHE_HOME`` (cold: every file parsed) against one holding the import index (warm);
2. ``snakemake -n``: the whole process, ``snakemake -n all --configfile <profile>`` in this
   checkout, with the import index removed before each cold start and kept for each warm one.

    python benchmarks/bench_code_identity.py                    # config/quick.yaml, 5 rounds
    python benchmarks/bench_code_identity.py --profile config/config.yaml --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cdgtmll.lineage.code import INDEX_NAME

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, resource, sys
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
from cdgtmll.config import loader, plan
from cdgtmll.lineage import code
cfg = loader.load(sys.argv[1])
specs = [plan.run_spec(cfg, d, "clean", m) for d in cfg["experiments"]["datasets"] for m in cfg["experiments"]["methods"]]
rules = ["cdgtmll.data.prepare", "cdgtmll.variants.r_variant", "cdgtmll.metrics.evaluate_run", "cdgtmll.tables.build",
         "cdgtmll.figures.pr_curve", "cdgtmll.claims.check"]
t0 = cpu()
seen = {m for r in rules for m in code.identity([r])["modules"]}
seen |= {m for s in specs for m in code.identity(code.train_roots(s))["modules"]}
n = len(seen)
print(json.dumps({"cpu_s": cpu() - t0, "modules": n}))
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: list[str], env: dict, cwd: Path = ROOT) -> tuple[float, str]:
    """(CPU seconds of the child, its stdout); exits on a failure."""
    before = _children_cpu()
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return _children_cpu() - before, res.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="config/quick.yaml")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    cache = Path(tempfile.mkdtemp(prefix="bench-code-identity-"))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    index = cache / "cdgtmll" / INDEX_NAME
    try:
        sides: dict[str, dict[str, list[float]]] = {"cold": {"identity": [], "snakemake": []},
                                                     "warm": {"identity": [], "snakemake": []}}
        modules = 0
        order = [s for r in range(args.rounds) for s in (("cold", "warm") if r % 2 == 0 else ("warm", "cold"))]
        for side in order:
            if side == "cold":
                index.unlink(missing_ok=True)
            _, out = run([sys.executable, "-c", PROBE, args.profile], env)
            got = json.loads(out)
            sides[side]["identity"].append(got["cpu_s"])
            modules = got["modules"]
            if side == "cold":
                index.unlink(missing_ok=True)
            cpu, _ = run([sys.executable, "-m", "snakemake", "-n", "all", "--configfile", args.profile], env)
            sides[side]["snakemake"].append(cpu)
        load = os.getloadavg()[0]
        print(f"profile={args.profile} rounds={args.rounds} modules={modules} load={load:.2f}")
        for what in ("identity", "snakemake"):
            cold, warm = (statistics.median(sides[s][what]) for s in ("cold", "warm"))
            print(f"RESULT measure={what} cold_cpu_s={cold:.3f} warm_cpu_s={warm:.3f} "
                  f"saved_cpu_s={cold - warm:.3f} ratio={warm / cold:.3f}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
