"""CPU cost of planning: ``snakemake -n all`` and ``cdgtmll check-config`` on a shipped profile.

    python benchmarks/bench_parse.py [--config config/config.yaml] [--repeat 3]

Each command runs in a child process under ``python -X importtime``; the script prints, per
command and cache state, the median user+system CPU seconds of the child (load on this
machine does not inflate CPU time the way it inflates wall time), the wall time with the
1-minute load beside it, and which of torch / scikit-learn / the method modules the child
imported. Cache states (``$XDG_CACHE_HOME/cdgtmll/``: the source files' sha256 that
:mod:`cdgtmll.data.acquire` remembers): ``warm`` (as after an earlier parse) and ``cold`` (an
empty ``XDG_CACHE_HOME``). Planning reads the method specs (:mod:`cdgtmll.methods.spec`), which
import no method. Target: a warm dry run of the default profile under
3 s of CPU, importing neither torch nor scikit-learn.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WATCH = ("torch", "sklearn", "cdgtmll.methods.neural")


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: list[str], env: dict) -> tuple[float, float, float, list[str]]:
    """(CPU s, wall s, load, watched modules imported) of one child run."""
    load = os.getloadavg()[0]
    c0, t0 = child_cpu(), time.perf_counter()
    res = subprocess.run([sys.executable, "-X", "importtime", *cmd], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.perf_counter() - t0, child_cpu() - c0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-3000:]}")
    imported = sorted({w for w in WATCH for line in res.stderr.splitlines()
                       if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == w})
    return cpu, wall, (load + os.getloadavg()[0]) / 2, imported


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    commands = {
        "snakemake -n all": ["-m", "snakemake", "all", "-n", "--configfile", args.config],
        "cdgtmll check-config": ["-m", "cdgtmll.cli", "check-config", args.config],
    }
    base_env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    print(f"machine: {os.cpu_count()} CPUs; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}; "
          f"config {args.config}; median of {args.repeat}")
    for state in ("warm", "cold"):
        for name, cmd in commands.items():
            rows = []
            for _ in range(args.repeat):
                env = dict(base_env)
                if state == "cold":
                    env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="cdgtmll-cold-")
                rows.append(run(cmd, env))
            cpu = statistics.median(r[0] for r in rows)
            wall = statistics.median(r[1] for r in rows)
            load = statistics.mean(r[2] for r in rows)
            imported = sorted(set().union(*(r[3] for r in rows)))
            print(f"RESULT cache={state} command='{name}' cpu_s={cpu:.2f} wall_s={wall:.2f} load1={load:.2f} "
                  f"imports={','.join(imported) or 'none of ' + '/'.join(WATCH)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
