"""How many BCE models a profile's dry run plans to train, and where: in the BCE row's own jobs,
or again inside the rows built on it (PE, ETU, LSFA: ``Method.builds_on``).

    python tools/base_fits.py                                  # config/config.yaml and config/paper.yaml
    python tools/base_fits.py --json config/quick.yaml          # the numbers of one config

Each count is one ``snakemake -n -p all --configfile <config>`` in a throw-away copy of this
checkout (no results, so every job is planned), with the data mirror ``$CDGTMLL_DATA_MIRROR``.
Every planned ``train``/``train_more`` job's shell command holds its run spec (``--spec``): a job
of a method that builds on another trains that method's model once per seed unless its spec names
a base run (``base_run.dir``, :func:`cdgtmll.config.plan.base_run`); such a job must then have
the base run's provenance files among its inputs. Per base method: its own jobs and seed fits,
and the seed fits inside other rows (``inside``; 0 when every such row reads the base run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("config/config.yaml", "config/paper.yaml")
TOP_SKIP = {".venv", ".snakemake", "results", "logs", "figures", ".cache", "report.html", ".git", ".dvc"}
ANY_SKIP = {"__pycache__", ".pytest_cache", ".ruff_cache"}
JOB = re.compile(r"^ *(?:local)?rule (\w+):\n((?: +\w+: .*\n)+)", flags=re.M)


class CountError(RuntimeError):
    """A dry run failed, or printed something this parser does not understand."""


def copy_checkout(dst: Path) -> Path:
    """This checkout at ``dst`` without outputs and caches."""
    def ignore(d: str, names: list[str]) -> list[str]:
        top = Path(d).resolve() == ROOT
        return [n for n in names if n in ANY_SKIP or n.endswith(".egg-info") or (top and n in TOP_SKIP)]

    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)
    return dst


def dry_run(repo: Path, config: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [sys.executable, "-m", "snakemake", "-n", "-p", "all", "--configfile", config]
    res = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    if res.returncode != 0:
        raise CountError(f"{' '.join(cmd[1:])} exited {res.returncode} in {repo}:\n{out[-3000:]}")
    return out


def train_jobs(out: str) -> list[dict]:
    """Every train/train_more job of a ``-n -p`` output: its run spec (parsed:
    :class:`cdgtmll.config.run_spec.RunSpec`) and its inputs."""
    from cdgtmll.config.run_spec import RunSpec

    jobs = []
    for m in JOB.finditer(out):
        if m.group(1) not in ("train", "train_more"):
            continue
        fields = dict(re.findall(r"^ +(\w+): (.*)$", m.group(2), flags=re.M))
        shell = out[m.end():].lstrip("\n").split("\n\n", 1)[0]
        words = shlex.split(shell.replace("\n", " "))
        if "--spec" not in words:
            raise CountError(f"a {m.group(1)} job ({fields.get('wildcards')}) prints no --spec: {shell[:300]}")
        spec = RunSpec.from_json(words[words.index("--spec") + 1], f"the {m.group(1)} job {fields.get('wildcards')}")
        jobs.append({"rule": m.group(1), "spec": spec, "input": fields.get("input", "").split(", ")})
    return jobs


def count(jobs: list[dict], config: dict) -> dict:
    """Per base method: ``jobs`` and ``fits`` (seed fits) of its own rows, ``inside`` (seed fits
    of it inside rows built on it), ``read`` (seed fits read from its runs instead), and the
    problems found (a job built on a base run without the base run's provenance among its inputs)."""
    from cdgtmll.config import plan

    out: dict[str, dict] = {}
    problems = []
    for j in jobs:
        spec, n = j["spec"], len(j["spec"].seeds)
        registered = spec.registered
        b = plan.base_method(config, spec.method)
        if b is None:
            row = out.setdefault(registered, {"jobs": 0, "fits": 0, "inside": {}, "read": {}})
            row["jobs"] += 1
            row["fits"] += n
            continue
        row = out.setdefault(b, {"jobs": 0, "fits": 0, "inside": {}, "read": {}})
        base = spec.base_run or {}
        key = "read" if base.get("dir") else "inside"
        row[key][spec.method] = row[key].get(spec.method, 0) + n
        if base.get("dir"):
            want = [f"{base['dir']}/seed{s}/provenance.json" for s in spec.seeds]
            missing = [w for w in want if w not in j["input"]]
            if missing:
                problems.append(f"{spec.label}: inputs lack {missing}")
    return {"methods": out, "problems": problems}


def measure(config_file: str) -> dict:
    from cdgtmll.config import loader

    with tempfile.TemporaryDirectory(prefix="base-fits-") as tmp:
        repo = copy_checkout(Path(tmp) / "repo")
        jobs = train_jobs(dry_run(repo, config_file))
    return count(jobs, loader.load(ROOT / config_file))


def summary(label: str, numbers: dict) -> str:
    lines = []
    for b, row in sorted(numbers["methods"].items()):
        if not row["inside"] and not row["read"]:
            continue
        inside = sum(row["inside"].values())
        lines.append(f"{label}: {b} {row['jobs']} jobs / {row['fits']} seed fits; {b} fits inside other rows: "
                     f"{inside} ({', '.join(f'{m} {k}' for m, k in sorted(row['inside'].items())) or 'none'}); "
                     f"read from {b}'s runs: {', '.join(f'{m} {k}' for m, k in sorted(row['read'].items())) or 'none'}")
    if not lines:
        lines.append(f"{label}: no planned row builds on another row's run")
    lines += [f"{label}: PROBLEM {p}" for p in numbers["problems"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    numbers = {c: measure(c) for c in args.configs}
    print(json.dumps(numbers, indent=1, sort_keys=True) if args.json
          else "\n".join(summary(c, n) for c, n in numbers.items()))
    return 1 if any(n["problems"] for n in numbers.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
