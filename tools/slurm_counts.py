"""How many jobs and sbatch jobs `profiles/slurm` plans, counted from Snakemake's own dry runs.

    python tools/slurm_counts.py            # print the block (four dry runs, about 40 s)
    python tools/slurm_counts.py --write    # rewrite the block in docs/cluster.md
    python tools/slurm_counts.py --json     # the numbers behind it

Each count is one ``snakemake --profile profiles/slurm -n all --configfile <config>`` in a
throw-away copy of this checkout (no results, so every job is planned), parsed as Snakemake
prints it: one ``rule <name>:`` per job, one ``Group job <name>`` line per group job, that is per
sbatch job. A job outside every group is an sbatch job of its own unless its rule is a
``localrules:`` rule (run by Snakemake itself on the login node) or ``all`` (runs no command).

What a plan depends on besides the config is made explicit, so that the numbers are the same on
every machine (``tests/integration/slurm/test_slurm.py`` checks that docs/cluster.md holds what
this prints):

* every dataset at hand: a mirror (``$CDGTMLL_DATA_MIRROR``) holding an empty file for each raw
  file the dataset registry lists. Planning only looks whether a raw file exists
  (:mod:`cdgtmll.data.availability`); no job of a dry run reads one.
* the XMC library environments (XR-Linear, napkinXC-PLT, LibMultiLabel-1vsRest) not built, as
  after ``make venv`` (``$CDGTMLL_ENVS_ROOT`` at a folder with the locks and no ``.venv/xmc``),
  and built, as after ``make xmc-envs`` (the same folder with what planning checks of a built
  environment: ``.venv/xmc/<name>/.installed`` holding the lock's sha256 and ``bin/python``,
  :meth:`cdgtmll.external.envs.ExternalEnv.ready`). Planning never runs an environment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "cluster.md"
BEGIN = "<!-- slurm-counts:begin (tools/slurm_counts.py writes this block) -->"
END = "<!-- slurm-counts:end -->"
PROFILE = "profiles/slurm"
#: (label, config file, XMC environments built)
SCENARIOS = (("paper", "config/paper.yaml", False), ("paper+xmc", "config/paper.yaml", True),
             ("default", "config/config.yaml", False), ("quick", "config/quick.yaml", False))
#: the training rules: a run's seeds, a powered run's extra seeds (config `power`), and a
#: deterministic method's one seed
TRAIN_RULES = ("train", "train_more", "train_once")
#: the kinds of a neural method's training job, by its dataset (:func:`neural_kind`)
NEURAL_KINDS = ("neural, image", "neural, XMC", "neural, tabular on a GPU", "neural, tabular on the CPU")
#: left out of the copy at its top level: outputs, caches, environments
TOP_SKIP = {".venv", ".snakemake", "results", "logs", "figures", ".cache", "report.html", ".git", ".dvc"}
ANY_SKIP = {"__pycache__", ".pytest_cache", ".ruff_cache"}

# a dry run prints each job as "rule <name>:" and its fields; the jobs of a group job (one sbatch
# job) follow a "Group job <name> (jobs in lexicogr. order):" line, indented by 4 more spaces
JOB = re.compile(r"^( *)rule (\w+):\n((?: +\w+: .*\n)+)", flags=re.M)
GROUP = re.compile(r"^\[[^]]*\] Group job (\S+) \(jobs in lexicogr\. order\):$", flags=re.M)
STATS = re.compile(r"^total +(\d+)$", flags=re.M)


class CountError(RuntimeError):
    """A dry run failed, or printed something this parser does not understand."""


def parse_jobs(out: str) -> list[dict]:
    """Every job of a dry run's output: rule, grouped (inside a group job), wildcards, resources."""
    jobs = []
    for m in JOB.finditer(out):
        fields = dict(re.findall(r"^ +(\w+): (.*)$", m.group(3), flags=re.M))
        res = dict(kv.split("=", 1) for kv in fields.get("resources", "").split(", ") if "=" in kv)
        wc = dict(kv.split("=", 1) for kv in fields.get("wildcards", "").split(", ") if "=" in kv)
        jobs.append({"rule": m.group(2), "grouped": len(m.group(1)) > 0, "wildcards": wc, "resources": res})
    return jobs


def parse_groups(out: str) -> list[str]:
    """The group job names of a dry run's output, one per sbatch job."""
    return GROUP.findall(out)


def localrules(root: Path = ROOT) -> set[str]:
    """The rules named in a ``localrules:`` block of the Snakefile or ``workflow/rules/*.smk``."""
    names: set[str] = set()
    for smk in [root / "Snakefile", *sorted((root / "workflow" / "rules").glob("*.smk"))]:
        for block in re.findall(r"^localrules:\s*\n((?:[ \t]+\w+,?[ \t]*\n)+)", smk.read_text(), flags=re.M):
            names.update(re.findall(r"\w+", block))
    return names


def copy_checkout(dst: Path) -> Path:
    """This checkout at ``dst`` without outputs and caches, with empty results/ and figures/."""
    def ignore(d: str, names: list[str]) -> list[str]:
        top = Path(d).resolve() == ROOT
        return [n for n in names if n in ANY_SKIP or n.endswith(".egg-info") or (top and n in TOP_SKIP)]

    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)
    for d in ("results", "figures"):
        (dst / d).mkdir(exist_ok=True)
    return dst


def full_mirror(dst: Path) -> Path:
    """A mirror with an empty file for every raw file of every registered dataset (module docstring)."""
    from cdgtmll.data.registry import REGISTRY

    for spec in REGISTRY.values():
        for f in spec.files:
            path = dst / spec.folder / f.name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    return dst


def envs_root(dst: Path, built: bool) -> Path:
    """A checkout root for :mod:`cdgtmll.external.envs` with the locks, and with the three
    environments marked built when ``built`` (module docstring)."""
    from cdgtmll.external.envs import ENVS_DIR, LIBRARIES

    dst.mkdir(parents=True, exist_ok=True)
    for name in LIBRARIES:
        lock = ROOT / f"requirements-{name}.lock"
        if not lock.is_file():
            raise CountError(f"{lock} not found: the XMC environments' locks are part of the checkout")
        shutil.copy(lock, dst / lock.name)
        if built:
            env = dst / ENVS_DIR / name
            (env / "bin").mkdir(parents=True, exist_ok=True)
            (env / "bin" / "python").symlink_to(sys.executable)
            (env / ".installed").write_text(hashlib.sha256(lock.read_bytes()).hexdigest() + "\n")
    return dst


def dry_run(repo: Path, config: str, env: dict) -> str:
    """``snakemake --profile profiles/slurm -n all --configfile <config>`` in ``repo``: its output."""
    cmd = [sys.executable, "-m", "snakemake", "--profile", PROFILE, "-n", "all", "--configfile", config]
    res = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    if res.returncode != 0:
        raise CountError(f"{' '.join(cmd[1:])} exited {res.returncode} in {repo}:\n{out[-3000:]}")
    return out


def neural_kind(config: dict, dataset: str, gpu: str) -> str:
    """The kind of a neural method's training job on ``dataset`` (:data:`NEURAL_KINDS`): image
    (fine-tuning, or frozen features), XMC (the registry's kind), or tabular, told apart by the
    GPU the job asks for (``cluster_resources.gpu_min_cells``)."""
    from cdgtmll.config import plan
    from cdgtmll.data.registry import get_spec

    if plan.is_image_dataset(config, dataset):
        return NEURAL_KINDS[0]
    if get_spec(dataset, config["data"].get("custom")).kind == "xmc":
        return NEURAL_KINDS[1]
    return NEURAL_KINDS[2] if gpu != "0" else NEURAL_KINDS[3]


def count(out: str, config: dict, local: set[str]) -> dict:
    """The numbers of one dry run (``config``: the loaded config, to tell neural methods apart)."""
    from cdgtmll.config import plan
    from cdgtmll.methods import base

    jobs, groups = parse_jobs(out), parse_groups(out)
    stats = STATS.findall(out)
    if not jobs or not stats or int(stats[0]) != len(jobs):
        raise CountError(f"parsed {len(jobs)} jobs, Snakemake's job stats say {stats[:1] or 'nothing'}")
    alone = [j["rule"] for j in jobs if not j["grouped"] and j["rule"] != "all"]
    own_sbatch = sorted(r for r in alone if r not in local)
    # a group name may come twice: a powered run's extra seeds (train_more, evaluate_more) are in
    # the group of its train job, and Snakemake submits them as a group job of their own
    kinds: dict[str, dict[str, int]] = {}
    kind_datasets: dict[str, set[str]] = {}
    for j in jobs:
        # a deterministic method's one seed (rules train_once, evaluate_once) counts as the
        # training or evaluation job it is
        kind = {"train_once": "train", "evaluate_once": "evaluate"}.get(j["rule"], j["rule"])
        gpu = j["resources"].get("gpu", "0")
        if kind in TRAIN_RULES:
            method, dataset = j["wildcards"]["method"], j["wildcards"]["dataset"]
            neural = base.spec_of(plan.resolve_method(config, method)[0]).neural
            kind = f"{kind}, {neural_kind(config, dataset, gpu) if neural else method}"
            kind_datasets.setdefault(kind, set()).add(dataset)
        elif kind in local:
            kind = "login node"
        kinds.setdefault(kind, {}).setdefault(gpu, 0)
        kinds[kind][gpu] += 1
    train = [j for j in jobs if j["rule"] in TRAIN_RULES]
    runtimes: dict[str, set[int]] = {}
    cpus: dict[str, set[int]] = {}
    for j in train:
        runtimes.setdefault(j["wildcards"]["dataset"], set()).add(int(j["resources"]["runtime"]))
        cpus.setdefault(j["wildcards"]["dataset"], set()).add(int(j["resources"].get("cpus_per_task", 1)))
    return {
        "jobs": len(jobs),
        "sbatch": len(groups) + len(own_sbatch),
        "run_groups": sum(g.startswith("run_") for g in groups),
        "data_groups": sum(g.startswith("data_") for g in groups),
        "other_groups": sorted(g for g in groups if not g.startswith(("run_", "data_"))),
        "own_sbatch": own_sbatch,
        "login": sorted(set(alone) & local),
        "login_jobs": sum(r in local for r in alone),
        "train": len(train),
        "train_gpu": sum(j["resources"].get("gpu", "0") != "0" for j in train),
        "kinds": {k: dict(sorted(v.items())) for k, v in sorted(kinds.items())},
        "kind_datasets": {k: sorted(v) for k, v in sorted(kind_datasets.items())},
        "train_runtimes": {d: sorted(r) for d, r in sorted(runtimes.items())},  # minutes, per dataset
        "train_cpus": {d: sorted(c) for d, c in sorted(cpus.items())},  # cpus_per_task, per dataset
    }


def measure(workdir: Path | None = None, scenarios=SCENARIOS) -> dict[str, dict]:
    """Every scenario's numbers (:func:`count`), from dry runs in a copy of the checkout under
    ``workdir`` (a temporary folder, removed afterwards, when None)."""
    from cdgtmll.config import loader

    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="slurm-counts-") as tmp:
            return measure(Path(tmp), scenarios)
    repo = copy_checkout(workdir / "repo")
    mirror = full_mirror(workdir / "mirror")
    local = localrules(repo)
    env = {k: v for k, v in os.environ.items() if k not in ("SNAKEMAKE_PROFILE",)}
    env.update({"CDGTMLL_DATA_MIRROR": str(mirror), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
                "XDG_CACHE_HOME": env.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache"), "MPLCONFIGDIR": "/tmp/cdgtmll-mpl"})
    out = {}
    for label, config, xmc in scenarios:
        root = envs_root(workdir / ("envs-built" if xmc else "envs-none"), xmc)
        text = dry_run(repo, config, {**env, "CDGTMLL_ENVS_ROOT": str(root)})
        out[label] = {"config": config, "xmc_envs": xmc,
                      **count(text, loader.load(repo / config, {"cluster": True}), local)}
    return out


def _n(x: int) -> str:
    return f"{x:,}"


def _gpus(kind: dict[str, int]) -> str:
    return ", ".join(sorted(kind))


def render(m: dict[str, dict]) -> str:
    """The Markdown block of docs/cluster.md."""
    paper, xmc = m["paper"], m["paper+xmc"]
    for label, s in m.items():
        if s["own_sbatch"] or s["other_groups"]:
            raise CountError(f"{label}: jobs outside the run/data groups and the local rules would be sbatch jobs "
                             f"of their own: {s['own_sbatch'] + s['other_groups']}")
    lines = [BEGIN,
             "Counted with `python tools/slurm_counts.py` from dry runs (`snakemake --profile profiles/slurm -n all "
             "--configfile <config>`, one `Group job` line per sbatch job), with every dataset's raw files at hand; "
             "\"XMC environments built\": after `make xmc-envs` (XR-Linear, napkinXC-PLT and LibMultiLabel-1vsRest "
             "run only then). The Slurm test checks that this block is what the script prints.",
             "",
             "| job kind (`config/paper.yaml`) | jobs | jobs, XMC environments built | GPUs each |",
             "|---|---|---|---|"]
    neural = [f"{rule}, {k}" for rule in TRAIN_RULES for k in NEURAL_KINDS
              if f"{rule}, {k}" in paper["kinds"] or f"{rule}, {k}" in xmc["kinds"]]
    order = [*neural, *sorted(k for k in set(paper["kinds"]) | set(xmc["kinds"])
                              if k.startswith(TRAIN_RULES) and k not in neural),
             "evaluate", "prepare_dataset", "r_variant", "noise_variant", "occlusion_variant", "login node"]
    order += sorted((set(paper["kinds"]) | set(xmc["kinds"])) - set(order) - {"all"})
    what = {NEURAL_KINDS[0]: "images (ResNet-50 fine-tuning)", NEURAL_KINDS[1]: "XMC",
            NEURAL_KINDS[2]: "tabular, from `cluster_resources.gpu_min_cells` rows x labels",
            NEURAL_KINDS[3]: "tabular, below `cluster_resources.gpu_min_cells` (trains on the CPU)"}
    names = {k: f"`{k.split(', ', 1)[0]}`, neural methods, {what[k.split(', ', 1)[1]]}: "
                + ", ".join(sorted(set(paper["kind_datasets"].get(k, [])) | set(xmc["kind_datasets"].get(k, []))))
             for k in neural}
    names["login node"] = "on the login node: " + ", ".join(f"`{r}`" for r in paper["login"])
    for kind in order:
        a, b = paper["kinds"].get(kind, {}), xmc["kinds"].get(kind, {})
        if not a and not b:
            continue
        rule, _, what_ = kind.partition(", ")
        name = names.get(kind) or (f"`{rule}`, {what_}" if rule in TRAIN_RULES else f"`{kind}`")
        gpus = _gpus({**a, **b})
        lines.append(f"| {name} | {_n(sum(a.values())) if a else '-'} | {_n(sum(b.values())) if b else '-'} | {gpus} |")
    lines += ["",
              "| config | jobs | sbatch jobs | training jobs (with a GPU) | on the login node |",
              "|---|---|---|---|---|"]
    for label, name in (("paper", "`config/paper.yaml`"), ("paper+xmc", "`config/paper.yaml`, XMC environments built"),
                        ("default", "`config/config.yaml`"), ("quick", "`config/quick.yaml`")):
        s = m[label]
        lines.append(f"| {name} | {_n(s['jobs'])} | {_n(s['sbatch'])} ({_n(s['run_groups'])} runs, "
                     f"{_n(s['data_groups'])} dataset{'s' if s['data_groups'] != 1 else ''}) | {_n(s['train'])} ({_n(s['train_gpu'])}) | "
                     f"{s['login_jobs']} (+ `all`) |")
    more = {label: sum(sum(v.values()) for k, v in m[label]["kinds"].items() if k.startswith("train_more, "))
            for label in ("paper", "paper+xmc", "default", "quick")}
    if any(more.values()):
        lines += ["", "Training jobs and runs include the extra seeds of powered runs (config `power`; rule "
                  "`train_more`, a group job of its own): " + ", ".join(
                      f"{n} in `{m[label]['config']}`" for label, n in more.items() if n and label != "paper+xmc") + "."]
    lines += ["",
              "Without the groups and local rules, every job but `all` would be its own sbatch job ("
              + ", ".join(_n(m[k]["jobs"] - 1) for k in ("paper", "paper+xmc", "default", "quick")) + ").",
              END]
    return "\n".join(lines)


def block_in(text: str) -> str:
    """The block as it stands in docs/cluster.md's text."""
    if BEGIN not in text or END not in text:
        raise CountError(f"{TARGET} has no '{BEGIN}' ... '{END}' block")
    return BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END


def write(block: str, target: Path = TARGET) -> None:
    """Replace the block in ``target`` (a temporary file, then renamed over it)."""
    text = target.read_text()
    old = block_in(text)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text.replace(old, block, 1))
    tmp.replace(target)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help=f"rewrite the block in {TARGET.relative_to(ROOT)}")
    what.add_argument("--json", action="store_true", help="print the measured numbers as JSON")
    args = ap.parse_args(argv)
    try:
        m = measure()
        if args.json:
            print(json.dumps(m, indent=1))
            return 0
        block = render(m)
    except CountError as e:
        print(f"slurm_counts: {e}", file=sys.stderr)
        return 1
    if args.write:
        write(block)
    else:
        print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
