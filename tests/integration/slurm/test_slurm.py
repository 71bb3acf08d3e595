"""Scale out on Slurm: profiles/slurm against the installed executor plugin; the job counts of
docs/cluster.md against dry runs (tools/slurm_counts.py); and config/quick.yaml end to end through a
real single-node Slurm cluster with job accounting (tools/slurm_local.sh: slurmdbd, MariaDB), the
Slurm executor on its default status command (sacct):

* its results byte-identical to a local run; a training job cancelled by the scheduler fails the
  run, and the rerun resumes from its checkpoint to identical results;
* a node that fails under a training job: Slurm requeues the job (profiles/slurm's `requeue`),
  Snakemake sees no failure, the job resumes from its checkpoint, the run exits 0 with the
  predictions of a clean local run.

Each test module gets a cluster of its own (its own state folder, ports, munged and database, in a
temporary folder), stopped at the end; no process of it outlives the module.

The end-to-end tests need `slurmctld`, `slurmdbd` and `mariadbd` (Debian: apt-get install slurm-wlm
slurmdbd munge mariadb-server) and root; they skip without them, except under CI (env var CI set),
where .ci/run installs them and a skip would hide the test, so they fail instead.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from cdgtmll.lineage.seal import SEAL_FIELD, seal_problem
from cdgtmll.methods import base
from tests.support.paths import ROOT
from tests.support.tools import load_tool
from tests.support.workflow import checkout_ignore, default_sigint, snakemake_env

PROFILE = ROOT / "profiles/slurm/config.yaml"
CLUSTER = ROOT / "tools/slurm_local.sh"
COUNTS = load_tool("slurm_counts")
# config/quick.yaml as shipped plus this overlay (a second --configfile: `--config` cannot
# carry typed nested values, Snakemake reads them as strings): one seed, 30 epochs, the clean
# split only (3 training jobs of 9 sbatch jobs; with the R variants the DAG has 9 training jobs
# of 24 and takes 3 times as long: each Slurm job costs two Snakemake start-ups, 15-25 s).
# gpu_min_cells 0: Yeast's neural jobs ask for a GPU as a large dataset's do, so that the cluster
# schedules GPU and CPU-only jobs (by default Yeast is below the threshold and asks for none; the
# dry-run counts below check that). Not part of any run spec: the local reference is the same.
SCALE = {"experiments": {"seeds": [0], "r_variants": False}, "training": {"default": {"epochs": 30}},
         "cluster_resources": {"gpu_min_cells": 0}}
N_TRAIN = 3  # quick.yaml's three methods on Yeast's clean split
CONFIGS = ["--configfile", "config/quick.yaml", "config/scale.yaml"]
# the plugin's default status command (sacct), with quicker status checks: the plugin checks
# 8 s after a submission, then 18, 28, ... s later (at 8, 26, 54 s); a job of this workflow
# takes 15-25 s here (two Snakemake start-ups in each)
QUICK_CHECKS = ["--slurm-init-seconds-before-status-checks", "8"]
SUBMITTED = re.compile(r"Job \S+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")  # a group's id is a uuid
# the sbatch job of one run: its training and evaluation (group run_{dataset}_{variant}_{method}),
# named by the group's rules: train_once and evaluate_once for a deterministic method (BR-LogReg)


def run_group(method: str) -> str:
    rules = "evaluate_once_train_once" if base.spec_of(method).deterministic else "evaluate_train"
    return f"run_yeast_clean_{method}_{rules}"


# ------------------------------------------------------------------ the profile (fast)

def _profile(edited: bool) -> dict:
    """profiles/slurm/config.yaml as shipped, or with every `# EDIT` line and the
    accounting-free pair uncommented (what a user does)."""
    text = PROFILE.read_text()
    if edited:
        lines = []
        for line in text.splitlines():
            marked = re.search(r"#\s*(EDIT \d|needs MinJobAge|no account)", line)
            if marked or line.strip() in ("# set-resources:", "#   train:", "#   evaluate:"):
                line = re.sub(r"^(\s*)# ?", r"\1", line, count=1)
            lines.append(line)
        text = "\n".join(lines)
    return yaml.safe_load(text)


def test_profile_keys_are_current_snakemake_and_plugin_options():
    """Every key of the profile (also with the marked lines uncommented) is an option of
    the installed Snakemake + Slurm plugin, and every resource it sets is one the plugin
    reads: a renamed option fails here, not on a cluster."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    import snakemake_executor_plugin_slurm as plugin
    from snakemake_executor_plugin_slurm import ExecutorSettings

    helptext = subprocess.run([sys.executable, "-m", "snakemake", "--help"], capture_output=True, text=True,
                              timeout=120).stdout
    shipped, edited = _profile(False), _profile(True)
    assert shipped["executor"] == "slurm"
    assert {"slurm-status-command", "slurm-no-account"} <= set(edited) - set(shipped)
    # a job that Slurm requeues after a node failure goes on (plugin issues #109, #485)
    assert shipped["slurm-requeue"] is True and "slurm-no-requeue" not in shipped
    assert edited["default-resources"].keys() >= {"slurm_partition", "slurm_account"}
    assert edited["set-resources"]["train"].keys() == {"slurm_partition", "gpu_model"}
    # a training job and its evaluation are one group job: one partition for both
    assert edited["set-resources"]["evaluate"] == {"slurm_partition": edited["set-resources"]["train"]["slurm_partition"]}
    plugin_flags = {"slurm-" + f.replace("_", "-") for f in ExecutorSettings.__dataclass_fields__}
    for key in edited:
        assert key in plugin_flags or f"--{key}" in helptext, f"profile key {key!r} is no snakemake option"
    source = "".join(p.read_text() for p in Path(plugin.__file__).parent.glob("*.py"))
    import snakemake_executor_plugin_slurm_jobstep as jobstep

    source += Path(jobstep.__file__).read_text()
    resources = set(edited["default-resources"]) | set(edited["set-resources"]["train"]) | {"cpus_per_task", "gpu"}
    for res in resources - {"mem_mb", "runtime"}:
        assert f'"{res}"' in source, f"resource {res!r} is not read by the installed Slurm plugin"
    assert edited["slurm-logdir"] == "logs/slurm" and edited["slurm-keep-successful-logs"] is True


def _copy_repo(dst: Path) -> Path:
    shutil.copytree(ROOT, dst, symlinks=True, ignore=checkout_ignore())
    for d in ("results", "figures"):
        (dst / d).mkdir(exist_ok=True)
    (dst / "config/scale.yaml").write_text(yaml.safe_dump(SCALE))
    return dst


_env = snakemake_env


def _snakemake(repo: Path, env: dict, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=timeout)


class _Resources(dict):
    __getattr__ = dict.__getitem__


_jobs = COUNTS.parse_jobs  # every job of a dry run: rule, grouped, wildcards, resources


@pytest.mark.slow
def test_train_jobs_request_gpu_and_loader_cpus(tmp_path):
    """With experiments.device cuda a train job asks Slurm for one GPU (of the profile's
    type), and an image dataset fine-tuned end to end asks for 1 + image_backbone.workers
    CPUs (the training process and its DataLoader processes): the resources Snakemake
    computes, turned into the sbatch line by the installed plugin's own functions."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    repo = _copy_repo(tmp_path / "repo")
    gpu = {"name": "gpu-dry",
           "experiments": {"datasets": ["voc2007", "yeast"], "methods": ["BCE"], "seeds": [0], "device": "cuda",
                           "r_variants": False},
           "training": {"voc2007": {"backbone": "resnet50", "epochs": 1, "batch_size": 8}},
           "image_backbone": {"mode": "finetune", "pretrained": False, "workers": 3}}
    (repo / "config/gpu.yaml").write_text(yaml.safe_dump(gpu))
    res = _snakemake(repo, _env(), "-n", "all", "--configfile", "config/quick.yaml", "config/gpu.yaml", timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    found = {j["wildcards"]["dataset"]: j["resources"] for j in _jobs(res.stdout + res.stderr) if j["rule"] == "train"}
    assert found["voc2007"]["gpu"] == "1" and found["voc2007"]["cpus_per_task"] == "4"
    assert found["yeast"]["gpu"] == "1" and found["yeast"]["cpus_per_task"] == "1"  # tabular: no loader

    train = _profile(True)["set-resources"]["train"]
    job = SimpleNamespace(threads=1, resources=_Resources(
        gpu=1, cpus_per_task=int(found["voc2007"]["cpus_per_task"]), mem_mb=8000, runtime=240, **train))
    params = {"run_uuid": "x", "slurm_logfile": "logs/slurm/%j.log", "comment_str": "rule_train",
              "account": "", "partition": f" -p {train['slurm_partition']}", "workdir": "/w"}
    call = get_submit_command(job, params) + set_gres_string(job)
    assert "--cpus-per-task=4" in call and f"--gpus={train['gpu_model']}:1" in call and "-p gpu" in call
    # the profile with its marked lines filled in parses, and sends train jobs to the GPU
    # partition with the GPU type (and their evaluation, which runs in the same sbatch job)
    edited = tmp_path / "edited"
    edited.mkdir()
    (edited / "config.yaml").write_text(yaml.safe_dump(_profile(True)))
    res = _snakemake(repo, _env(), "--profile", str(edited), "-n", "all", "--configfile", "config/quick.yaml",
                     "config/gpu.yaml", timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    jobs = _jobs(out)
    train = [j["resources"] for j in jobs if j["rule"] == "train"]
    other = [j["resources"] for j in jobs if j["rule"] not in ("train", "evaluate")]
    assert train and all(r["slurm_partition"] == "gpu" and r["gpu_model"] == "a100" for r in train), train
    assert all(j["resources"]["slurm_partition"] == "gpu" and "gpu_model" not in j["resources"]
               for j in jobs if j["rule"] == "evaluate")
    assert other and all(r["slurm_partition"] == "cpu" and "gpu_model" not in r for r in other), other
    # a local run of a shipped config (device auto, no cluster: true) asks for no GPU; with the
    # profile's GPU type set, gpu=0 gives sbatch --gpus=<type>:0
    res = _snakemake(repo, _env(), "-n", "all", *CONFIGS, timeout=300)
    out = res.stdout + res.stderr
    train = [j["resources"] for j in _jobs(out) if j["rule"] == "train"]
    assert res.returncode == 0 and train and all(r["gpu"] == "0" for r in train), out[-3000:]
    job.resources["gpu"], job.resources["cpus_per_task"] = 0, 1
    call = get_submit_command(job, params) + set_gres_string(job)
    assert "--cpus-per-task=1" in call and re.search(r"--gpus=\S*:0\b", call) and ":1" not in call, call


@pytest.mark.slow
def test_paper_profile_under_slurm_asks_gpus_for_neural_training_and_submits_few_jobs(tmp_path):
    """`snakemake --profile profiles/slurm -n all` of the shipped configs (config/paper.yaml without
    and with the XMC environments, config/config.yaml, config/quick.yaml; experiments.device auto),
    counted by tools/slurm_counts.py: every training job of a neural method on an image or XMC
    dataset asks for one GPU, one on a tabular dataset only from cluster_resources.gpu_min_cells
    training rows x labels (the registry's sizes: Yeast's 1,500 x 14 is below, Mediamill's
    30,993 x 101 above), every classical one (BR-LogReg, ...) and every other job for none; an
    image job asks for cluster_resources.image_job_cpus CPUs (workers: auto); each training job
    and its evaluation are one sbatch job, a dataset's preparation and variants one more, the
    tables and figures none (localrules); COCO's fine-tuning jobs get more than 4 h.
    docs/cluster.md holds these counts."""
    from cdgtmll.config import loader
    from cdgtmll.data.registry import get_spec

    measured = COUNTS.measure(tmp_path)
    print("\n[slurm counts]", json.dumps({k: {f: v[f] for f in ("jobs", "sbatch", "train", "train_gpu", "login_jobs")}
                                          for k, v in measured.items()}))
    gpu_kinds = {f"{r}, {k}" for r in COUNTS.TRAIN_RULES for k in COUNTS.NEURAL_KINDS[:3]}
    for label, m in measured.items():
        kinds, where = m["kinds"], m["kind_datasets"]
        cfg = loader.load(ROOT / m["config"])
        limit = cfg["cluster_resources"]["gpu_min_cells"]
        assert all(set(v) == {"1"} for k, v in kinds.items() if k in gpu_kinds), (label, kinds)
        assert all(set(v) == {"0"} for k, v in kinds.items() if k not in gpu_kinds), (label, kinds)
        for rule in COUNTS.TRAIN_RULES:  # the tabular datasets on each side of the threshold
            for kind, below in ((f"{rule}, neural, tabular on a GPU", False), (f"{rule}, neural, tabular on the CPU", True)):
                for d in where.get(kind, []):
                    spec = get_spec(d, cfg["data"]["custom"])
                    assert spec.kind == "tabular" and (spec.n_train * spec.n_labels < limit) is below, (label, kind, d)
        # GPUs: every neural job on images or XMC and on tabular data from the threshold, no other
        assert m["train_gpu"] == sum(sum(v.values()) for k, v in kinds.items() if k in gpu_kinds), (label, m)
        image = {d for d in cfg["experiments"]["datasets"] if get_spec(d).kind == "image"}
        assert all(m["train_cpus"][d] == ([cfg["cluster_resources"]["image_job_cpus"]] if d in image else [1])
                   for d in m["train_cpus"]), (label, m["train_cpus"])
        # sbatch jobs: the group jobs; every job outside a group runs on the login node
        assert not m["own_sbatch"] and not m["other_groups"], (label, m)
        assert m["run_groups"] == m["train"] == sum(sum(kinds.get(k, {}).values()) for k in ("evaluate", "evaluate_more")), \
            (label, m)
        assert m["data_groups"] == sum(kinds["prepare_dataset"].values()), (label, m)
        assert m["sbatch"] == m["run_groups"] + m["data_groups"] < m["jobs"] - 1, (label, m)
    paper = measured["paper"]
    assert paper["kind_datasets"]["train, neural, image"] == ["coco2014", "voc2007"]
    assert paper["kind_datasets"]["train, neural, XMC"] == ["amazoncat-13k", "eurlex-4k", "wiki10-31k"]
    assert paper["kind_datasets"]["train, neural, tabular on a GPU"] == ["mediamill"]
    assert paper["kind_datasets"]["train, neural, tabular on the CPU"] == ["yeast"]
    for label in ("default", "quick"):  # Yeast only: no training job asks for a GPU
        assert measured[label]["train_gpu"] == 0 < measured[label]["train"], measured[label]
    assert "train_more, neural, tabular on the CPU" in measured["default"]["kinds"]  # config power
    for kind in ("evaluate", "login node", "prepare_dataset", "r_variant", "train, BR-LogReg"):
        assert kind in paper["kinds"], kind
    assert {"claims_check", "tables", "metrics_summary", "figure_pr", "figure_ablation"} <= set(paper["login"])
    xmc = {k for k in measured["paper+xmc"]["kinds"]} - set(paper["kinds"])
    assert xmc == {"train, XR-Linear", "train, napkinXC-PLT", "train, LibMultiLabel-1vsRest"}, xmc
    coco = paper["train_runtimes"]["coco2014"]
    others = {r for d, rs in paper["train_runtimes"].items() if d != "coco2014" for r in rs}
    assert min(coco) > 240 and others == {240}, (coco, others)
    # the docs' numbers are these (python tools/slurm_counts.py --write)
    assert COUNTS.block_in(COUNTS.TARGET.read_text()) == COUNTS.render(measured), "run: python tools/slurm_counts.py --write"


# ------------------------------------------------------------------ a real cluster (slow)

def _environ(pid: int) -> set[str]:
    try:
        return set(Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0"))
    except OSError:
        return set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    except (ProcessLookupError, FileNotFoundError):
        return False
    except PermissionError:
        return True


def _leftovers(cluster: SimpleNamespace | None, under: Path | None = None) -> list[str]:
    """'pid cmdline' of every live process of ``cluster`` (its daemons carry
    CDGTMLL_SLURM_CLUSTER=<its folder>, its jobs' processes SLURM_CLUSTER_NAME=<its name>) and,
    with ``under``, of every process whose working directory is below it; never this one."""
    marks = {f"CDGTMLL_SLURM_CLUSTER={cluster.dir}", f"SLURM_CLUSTER_NAME={cluster.name}"} if cluster else set()
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid() or not _alive(int(proc.name)):
            continue
        try:
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:
            cwd = None
        below = under is not None and cwd is not None and (cwd == under or under in cwd.parents)
        if below or marks & _environ(int(proc.name)):
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
            except OSError:
                continue
            out.append(f"{proc.name} {cmd}")
    return out


def _job_processes(cluster: SimpleNamespace, job: str | None = None, first: bool = False) -> list[str]:
    """'pid cmdline' of the live processes of ``cluster``'s jobs (Slurm puts SLURM_CLUSTER_NAME in
    their environment), or of ``job``'s; with ``first``, of its first allocation only (a requeued
    job's later ones carry SLURM_RESTART_COUNT)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid() or not _alive(int(proc.name)):
            continue
        env = _environ(int(proc.name))
        if f"SLURM_CLUSTER_NAME={cluster.name}" not in env or (job and f"SLURM_JOB_ID={job}" not in env) or \
                (first and any(e.startswith("SLURM_RESTART_COUNT=") and e != "SLURM_RESTART_COUNT=0" for e in env)):
            continue
        try:
            out.append(f"{proc.name} " + (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160])
        except OSError:
            pass
    return out


def _node_state(node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], capture_output=True, text=True, timeout=60).stdout.strip()


def _seconds(elapsed: str) -> float:
    """sacct's [D-][HH:]MM:SS[.mmm] in seconds."""
    days, _, hms = elapsed.rpartition("-")
    parts = [float(x) for x in hms.split(":")]
    return (int(days) if days else 0) * 86400 + sum(v * 60 ** i for i, v in enumerate(reversed(parts)))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A single-node Slurm cluster with job accounting of this module's own (tools/slurm_local.sh
    start DIR: its state, ports, munged and MariaDB in a temporary folder); every Slurm client of
    the module finds it through SLURM_CONF. Stopped at teardown, which checks that none of its
    processes (daemons, jobs) remains, nor any process working in the module's folders."""
    why = None
    if any(c.isspace() for c in sys.executable):
        # upstream: snakemake-interface-executor-plugins 9.4.0 (executors/real.py, format_job_exec)
        # writes the Python path into each job's script unquoted; docs/cluster.md says so
        why = (f"the Python of this checkout ({sys.executable}) has a space in its path, which the Slurm "
               "executor writes into each job script unquoted (snakemake-interface-executor-plugins 9.4.0)")
        pytest.skip(why)
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [c for c in ("slurmctld", "slurmdbd", "mariadbd") if shutil.which(c, path=path) is None]
    if missing:
        why = f"{', '.join(missing)} not installed (apt-get install slurm-wlm slurmdbd munge mariadb-server)"
    elif os.geteuid() != 0:
        why = "a local Slurm cluster needs root (slurmd runs the jobs as their submitter)"
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {why}: .ci/run installs Slurm and runs as root")
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("cluster")
    t0 = time.monotonic()
    start = subprocess.run([str(CLUSTER), "start", str(folder)], capture_output=True, text=True, timeout=300)
    conf = folder / "slurm.conf"
    env = dict(line.split("=", 1) for line in (folder / "cluster.env").read_text().split()) \
        if (folder / "cluster.env").is_file() else {}
    info = SimpleNamespace(dir=folder, conf=conf, name=env.get("NAME", "?"), node=None)
    try:
        assert start.returncode == 0 and start.stdout.split() == ["started", f"SLURM_CONF={conf}"], \
            start.stdout + start.stderr
        print(f"\n[slurm] cluster {info.name} in {folder} up in {time.monotonic() - t0:.0f} s")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SLURM_CONF", str(conf))
            info.node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True,
                                       timeout=60).stdout.strip()
            assert info.node, "sinfo names no node"
            yield info
            # (sacct adds a job's steps up into its TotalCPU, so not with -X)
            rows = subprocess.run(["sacct", "-a", "-n", "-P", "-o", "JobID,TotalCPU"], capture_output=True, text=True,
                                  timeout=60).stdout.split()
            cpu = [_seconds(r.split("|")[1]) for r in rows if "." not in r.split("|")[0]]
            print(f"\n[slurm] the module's {len(cpu)} Slurm jobs used {sum(cpu):.0f} s CPU (sacct TotalCPU)")
    finally:
        stop = subprocess.run([str(CLUSTER), "stop", str(folder)], capture_output=True, text=True, timeout=300)
        if stop.returncode == 0:
            shutil.rmtree(folder / "db", ignore_errors=True)  # the accounting database: 100 MB; its logs stay
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert subprocess.run([str(CLUSTER), "status", str(folder)]).returncode != 0
        left = _leftovers(info, under=tmp_path_factory.getbasetemp())
        assert not left, f"processes of the test cluster left after stop: {left}"


def _squeue(repo: Path, *args: str) -> list[list[str]]:
    """(job id, state, comment) of the jobs submitted from ``repo`` (their working
    directory), finished ones included."""
    out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%k|%Z", *args], capture_output=True,
                         text=True, timeout=60).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return [r[:3] for r in rows if r[3] == str(repo)]


def _cancel_jobs_of(repo: Path) -> None:
    """No job of a failed test outlives it."""
    ids = [jid for jid, state, _ in _squeue(repo) if state in ("PENDING", "RUNNING", "CONFIGURING", "REQUEUED")]
    if ids:
        subprocess.run(["scancel", *ids], timeout=60)


def _metrics(path: Path) -> dict:
    """A run's metrics.json less the fields that may record when it was made, where it has them:
    the evaluation time, the hash of the provenance record (which holds the training's
    start/finish times) and the self-hash over all (``integrity``), which must hold.
    (:func:`_output_bytes` compares the files byte for byte.)"""
    m = json.loads(path.read_text())
    assert seal_problem(m) is None, (path, seal_problem(m))
    m.pop("evaluated", None)
    m["inputs"].get("provenance", {}).pop("sha256", None)
    m.pop(SEAL_FIELD)
    return m


def _results(repo: Path) -> dict[str, object]:
    """What a run computed, by path: predictions, the metrics file DVC tracks and the table
    CSVs byte for byte (all_runs.csv less its column of metrics.json hashes); every run's
    metrics.json by content (less its timestamps)."""
    files = list(repo.glob("results/runs/**/predictions.npz")) + [repo / "results/metrics.json"]
    files += [p for p in repo.glob("results/tables/*.csv") if p.name != "all_runs.csv"]
    out: dict[str, object] = {str(p.relative_to(repo)): p.read_bytes() for p in files}
    out.update({str(p.relative_to(repo)): _metrics(p) for p in repo.glob("results/runs/**/metrics.json")})
    rows = list(csv.DictReader((repo / "results/tables/all_runs.csv").open()))
    out["all_runs.csv"] = [{k: v for k, v in r.items() if k != "metrics_sha256"} for r in rows]
    return out


def _output_bytes(repo: Path) -> dict[str, bytes]:
    """What DVC tracks of a run whose bytes must not depend on the machine:
    each run's metrics.json, the table CSVs and the figure CSVs."""
    files = [*repo.glob("results/runs/**/metrics.json"), *repo.glob("results/tables/**/*.csv"), *repo.glob("figures/**/*.csv")]
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(files)}


def _json_diff(a: object, b: object, at: str = "") -> list[str]:
    """The paths (``inputs.provenance.sha256``) at which two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _json_diff(a.get(k), b.get(k), f"{at}.{k}" if at else k)]
    return [] if a == b else [at or "(value)"]


def _byte_differences(got: dict[str, bytes], want: dict[str, bytes]) -> list[str]:
    """Which files differ, and for a JSON file the fields that do."""
    out = [f"{f}: only {'here' if f in got else 'in the reference'}" for f in sorted(set(got) ^ set(want))]
    for f in sorted(set(got) & set(want)):
        if got[f] != want[f]:
            fields = _json_diff(json.loads(got[f]), json.loads(want[f])) if f.endswith(".json") else []
            out.append(f"{f}: {'fields ' + ', '.join(fields) if fields else 'bytes differ'}")
    return out


def _log_rows(path: Path) -> list[dict]:
    return list(csv.DictReader(path.open())) if path.is_file() else []


def _slurm(repo: Path, env: dict, *targets: str, log: Path) -> subprocess.Popen:
    """`snakemake --profile profiles/slurm` (the plugin's default status command) in the background."""
    with log.open("w") as fh:
        return subprocess.Popen([sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", *QUICK_CHECKS,
                                 *targets, *CONFIGS], cwd=repo, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                preexec_fn=default_sigint)  # the test interrupts it as Ctrl-C does


@pytest.fixture
def slurm_copy(cluster, tmp_path):
    """A copy of the project to run on the cluster; at the end its jobs still queued or running
    (a failed test) are cancelled, and no process of the cluster's jobs, nor any process working
    in the copy, may remain."""
    repo = _copy_repo(tmp_path / "slurm")
    yield repo
    _cancel_jobs_of(repo)
    deadline = time.monotonic() + 30
    while (left := _job_processes(cluster) + _leftovers(None, under=repo)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes left behind by the test's Slurm jobs: {left}"


@pytest.fixture(scope="module")
def reference(mirror, tmp_path_factory):
    """The clean local run of config/quick.yaml at test scale that every Slurm run must equal:
    its checkout, what it computed (:func:`_results`), its machine-independent bytes
    (:func:`_output_bytes`), and how long it took."""
    local = _copy_repo(tmp_path_factory.mktemp("local") / "local")
    env = {**_env(mirror), "CDGTMLL_CHECKPOINT_EVERY": "1"}
    t0 = time.monotonic()
    res = _snakemake(local, env, "--profile", "profiles/local", "all", *CONFIGS)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return SimpleNamespace(repo=local, results=_results(local), bytes=_output_bytes(local), seconds=time.monotonic() - t0)


def _finish(proc: subprocess.Popen, log: Path, timeout: int = 900) -> tuple[int, str]:
    try:
        rc = proc.wait(timeout=timeout)
    except BaseException:
        proc.terminate()  # Snakemake scancels its jobs on SIGTERM
        proc.wait(timeout=120)
        raise
    return rc, log.read_text()


def _wait_for_checkpoint(proc: subprocess.Popen, ckpt: Path, log_csv: Path) -> None:
    deadline = time.monotonic() + 600
    while not (ckpt.is_file() and _log_rows(log_csv)):
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint before the run ended"
        time.sleep(0.1)


def _running_job(repo: Path, method: str) -> str:
    """The Slurm job id of ``method``'s run on Yeast's clean split, running now."""
    running = [jid for jid, state, comment in _squeue(repo)
               if comment == "rule_" + run_group(method) and state == "RUNNING"]
    assert len(running) == 1, _squeue(repo)
    return running[0]


SACCT_FIELDS = "JobIDRaw,JobName%40,State,ExitCode,NodeList,Submit,Start,End"


def _sacct(*jobs: str, duplicates: bool = False) -> tuple[list[dict], str]:
    """sacct's allocation records of ``jobs`` (with ``duplicates`` also those of a job's runs
    before a requeue), as dicts, and as sacct prints them."""
    args = ["sacct", "-X", "-j", ",".join(jobs), "-o", SACCT_FIELDS] + (["-D"] if duplicates else [])
    res = subprocess.run([*args, "-P"], capture_output=True, text=True, timeout=60, check=True)
    text = subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
    return list(csv.DictReader(res.stdout.splitlines(), delimiter="|")), text


def _job_field(job: str, field: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=60).stdout
    m = re.search(rf"\b{field}=(\S*)", out)
    return m.group(1) if m else ""


@pytest.mark.slow
def test_device_auto_without_cluster_key_stops_before_the_first_sbatch(mirror, slurm_copy, tmp_path):
    """A --config on the command line replaces profiles/slurm's `config: [cluster=True]`; with
    experiments.device auto the run would then ask no GPU for any job: it stops before its
    first submission, naming the fix."""
    proc = _slurm(slurm_copy, _env(mirror), "all", "--config", "cluster=False", log=tmp_path / "run.log")
    rc, out = _finish(proc, tmp_path / "run.log", timeout=600)
    assert rc != 0 and "does not say cluster: true" in out and "Add cluster=True to --config" in out, out[-3000:]
    assert not SUBMITTED.search(out) and not _squeue(slurm_copy), out[-3000:]


@pytest.mark.slow
def test_quick_profile_on_slurm_matches_local_and_resumes_after_scancel(mirror, slurm_copy, reference, tmp_path):
    """config/quick.yaml (one seed, 30 epochs, clean split) through `snakemake --profile
    profiles/slurm`, on a real Slurm cluster with accounting (status by sacct), with a scheduler
    failure on the way:

    * once CD-GTMLL's training job has written its first checkpoint it is cancelled with
      scancel; Snakemake (plugin 2.8.0, status by sacct) does not notice and waits on, until
      interrupted (Ctrl-C), and exits non-zero;
    * the rerun finishes the workflow, and the cancelled job resumes from its checkpoint (the
      epochs before the cancel keep their logged timings);
    * every training job ran with its evaluation as one sbatch job, the dataset's preparation as
      another, the tables and the claims check on the login node (Slurm job ids in the log, COMPLETED in
      squeue and sacct, with the rule's memory/time/CPU request and the cluster's account);
    * the predictions, results/metrics.json and the tables are byte-identical to an
      uncancelled local run of the same config (each run's metrics.json identical but for
      its timestamps); and so is every run's metrics.json, table CSV and figure CSV, byte for
      byte."""
    env = {**_env(mirror), "CDGTMLL_CHECKPOINT_EVERY": "1"}  # a checkpoint after epoch 1, before the scancel
    slurm = slurm_copy
    assert len(reference.results) >= 2 * N_TRAIN + 1

    # ---- run 1: cancel CD-GTMLL's training job after its first checkpoint
    t0 = time.monotonic()
    run_dir = slurm / "results/runs/yeast/clean/CD-GTMLL"
    ckpt, log_csv = run_dir / "seed0/checkpoint.pt", run_dir / "seed0/train_log.csv"
    proc = _slurm(slurm, env, "all", log=tmp_path / "run1.log")
    try:
        _wait_for_checkpoint(proc, ckpt, log_csv)
        cancelled = _running_job(slurm, "CD-GTMLL")
        subprocess.run(["scancel", cancelled], check=True, timeout=60)
        # plugin 2.8.0 on sacct does not see the cancel: sacct says "CANCELLED by 0", and the plugin
        # compares whole states ("CANCELLED"), so it takes the job for one still running. Shown: once
        # every other job has ended, Snakemake has checked at least twice (8 and 26 s after the
        # last job ended) and waits on, having reported nothing; the user interrupts it (Ctrl-C)
        deadline = time.monotonic() + 600
        while [s for jid, s, _ in _squeue(slurm) if jid != cancelled and s not in ("COMPLETED", "CANCELLED")]:
            assert proc.poll() is None and time.monotonic() < deadline, _squeue(slurm)
            time.sleep(0.5)
        time.sleep(30)
        states = {r["JobIDRaw"]: r["State"] for r in _sacct(cancelled)[0]}
        assert proc.poll() is None and states == {cancelled: "CANCELLED by 0"}, (proc.poll(), states)
        proc.send_signal(signal.SIGINT)
    except BaseException:
        proc.terminate()
        proc.wait(timeout=120)
        raise
    rc, out1 = _finish(proc, tmp_path / "run1.log")
    assert rc != 0 and "Error in group" not in out1, out1[-3000:]
    rows_at_cancel = _log_rows(log_csv)
    assert 1 <= len(rows_at_cancel) < 30 and ckpt.is_file() and not (run_dir / "seed0/predictions.npz").exists()
    t_run1 = time.monotonic() - t0

    # ---- run 2: the rest of the workflow; the cancelled job resumes
    t0 = time.monotonic()
    rc, out2 = _finish(_slurm(slurm, env, "all", log=tmp_path / "run2.log"), tmp_path / "run2.log")
    assert rc == 0, out2[-5000:]
    t_run2 = time.monotonic() - t0
    rows = _log_rows(log_csv)
    assert len(rows) == 30 and rows[:len(rows_at_cancel)] == rows_at_cancel  # resumed, not retrained

    submitted = SUBMITTED.findall(out1) + SUBMITTED.findall(out2)
    train = [(jid, log) for jid, log in submitted if "/group_run_yeast_clean_" in log]
    # every sbatch job is a group job: the 3 runs (training + evaluation; one of them twice) and the
    # dataset's preparation; the tables, the PR figure and the claims check ran on the login node
    assert len(submitted) == N_TRAIN + 2 and all("/group_" in log for _, log in submitted), submitted
    assert len([log for _, log in submitted if "/group_data_yeast_prepare_dataset/" in log]) == 1, submitted
    for rule in ("tables", "metrics_summary", "claims_check"):
        assert f"localrule {rule}:" in out2, out2[-3000:]
    run_dirs = sorted(p for p in slurm.glob("results/runs/*/*/*") if p.is_dir())
    assert len(run_dirs) == N_TRAIN and len({Path(log).parent for _, log in train}) == N_TRAIN, submitted
    assert len(train) == N_TRAIN + 1 and len({jid for jid, _ in train}) == N_TRAIN + 1  # + the resubmission
    # nothing trained in Snakemake's own process: the successful run never ran train locally (run 1's
    # output holds the cancelled job's Slurm log, where the job's inner Snakemake says "localrule train"),
    # and each run's provenance names the Slurm job that wrote it: the last one submitted for its folder
    assert "localrule train" not in out2, out2[-3000:]
    last_job = {Path(log).parent.name: jid for jid, log in train}  # group_run_yeast_clean_<method>_evaluate_train
    for d in run_dirs:
        sched = json.loads((d / "seed0/provenance.json").read_text())["scheduler"]
        assert sched["kind"] == "slurm" and sched["slurm_job_id"] == last_job["group_" + run_group(d.name)], \
            (d, sched, last_job)
    states = {jid: (state, comment) for jid, state, comment in _squeue(slurm, "-j", ",".join(j for j, _ in train))}
    for jid, log in train:
        want = "CANCELLED" if jid == cancelled else "COMPLETED"
        assert states[jid][0] == want and states[jid][1].startswith("rule_run_yeast_clean_"), states
        assert Path(log).is_file() and re.search(r"rule train(_once)?:", Path(log).read_text()), log
        job = subprocess.run(["scontrol", "show", "job", "-o", jid], capture_output=True, text=True).stdout
        # the group's request: the larger memory, the two rules' times added (240 + 10 min), 1 CPU;
        # the account the plugin found (the cluster's, for root); requeue after a node failure
        assert "MinMemoryNode=8000M" in job and "TimeLimit=04:10:00" in job and "NumCPUs=1 " in job, job
        assert "Account=cdgtmll " in job and "Requeue=1 " in job, job
        # one GPU for a neural method, none for BR-LogReg (tools/slurm_local.sh's node declares
        # GPUs without devices: the job is scheduled as on a GPU cluster and trains on the CPU)
        gpu = "TresPerJob=gres:gpu:1" in job
        assert gpu is (not states[jid][1].startswith("rule_" + run_group("BR-LogReg"))) and \
            ("gres:gpu" in job) is gpu, job
    # sacct (slurmdbd) has every job as squeue does: what the plugin's status checks read
    acct, _ = _sacct(*(j for j, _ in train))
    assert {r["JobIDRaw"]: r["State"].split()[0] for r in acct} == {jid: states[jid][0] for jid, _ in train}, acct
    assert _results(slurm) == reference.results
    print(f"\n[slurm] local run {reference.seconds:.0f} s; Slurm run 1 (cancelled after epoch {len(rows_at_cancel)}) "
          f"{t_run1:.0f} s + run 2 {t_run2:.0f} s; {len(submitted)} sbatch jobs ({len(train)} training + evaluation)")
    differ = _byte_differences(_output_bytes(slurm), reference.bytes)
    assert not differ, "Slurm and local runs differ in bytes:\n" + "\n".join(differ)


@pytest.mark.slow
def test_node_failure_requeues_the_job_and_it_resumes_from_its_checkpoint(mirror, cluster, slurm_copy, reference,
                                                                           tmp_path):
    """The node fails under CD-GTMLL's training job (scontrol update state=down) after its first
    checkpoint: Slurm kills the job and requeues it (the job asked for it: profiles/slurm's
    `requeue: true` gives sbatch --requeue; the test cluster has JobRequeue=0), sacct shows the
    allocation the failure ended and the second one; the Slurm executor, on sacct, reports no
    failure; none of the first allocation's processes is left; the node comes back, the job
    starts again, resumes from its checkpoint, and the run exits 0 with the predictions and
    metrics of the clean local run. Only the data job and this run's job are submitted."""
    env = {**_env(mirror), "CDGTMLL_CHECKPOINT_EVERY": "1"}
    slurm = slurm_copy
    run_dir = slurm / "results/runs/yeast/clean/CD-GTMLL"
    ckpt, log_csv = run_dir / "seed0/checkpoint.pt", run_dir / "seed0/train_log.csv"
    target = "results/runs/yeast/clean/CD-GTMLL/seed0/metrics.json"
    t0 = time.monotonic()
    proc = _slurm(slurm, env, target, log=tmp_path / "run.log")
    try:
        _wait_for_checkpoint(proc, ckpt, log_csv)
        job = _running_job(slurm, "CD-GTMLL")
        rows_at_failure = _log_rows(log_csv)
        subprocess.run(["scontrol", "update", f"nodename={cluster.node}", "state=down",
                        "reason=cdgtmll test: node failure"], check=True, timeout=60)
        t_down = time.monotonic()
        while _job_field(job, "Restarts") != "1":
            assert time.monotonic() < t_down + 120 and proc.poll() is None, \
                (subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout, proc.poll())
            time.sleep(0.2)
        # the first allocation's processes end (one left over would write the checkpoint the second
        # allocation resumes from); the second's carry SLURM_RESTART_COUNT=1
        while left := _job_processes(cluster, job, first=True):
            assert time.monotonic() < t_down + 60, f"the failed node's job processes still run: {left}"
            time.sleep(0.5)
        t_requeued = time.monotonic()
    except BaseException:
        proc.terminate()
        proc.wait(timeout=120)
        raise
    finally:
        # the node answers again at once (ReturnToService=2 brings it back when slurmd responds); on a
        # cluster of many nodes the job would start on another. Resume it should it still be down.
        if _node_state(cluster.node).startswith("down"):
            subprocess.run(["scontrol", "update", f"nodename={cluster.node}", "state=resume"], timeout=60)
    rc, out = _finish(proc, tmp_path / "run.log")
    t_run = time.monotonic() - t0
    assert rc == 0, out[-5000:]
    assert "Error in group" not in out and "Error executing" not in out, out[-5000:]
    submitted = SUBMITTED.findall(out)
    assert [jid for jid, log in submitted if "/group_run_yeast_clean_" in log] == [job], submitted
    assert len(submitted) == 2, submitted  # the data job and this run's: Snakemake submitted nothing again

    # sacct: the allocation the node failure ended, and the one that completed
    acct, text = _sacct(job, duplicates=True)
    print(f"\n[slurm] node failure under job {job}: sacct -X -D -j {job} -o {SACCT_FIELDS}\n{text}")
    assert [r["JobIDRaw"] for r in acct] == [job, job], acct
    assert acct[0]["State"] in ("NODE_FAIL", "REQUEUED") and acct[1]["State"] == "COMPLETED", acct
    assert _job_field(job, "Restarts") == "1" and _job_field(job, "Requeue") == "1"

    # resumed from the checkpoint: the epochs up to it keep their logged rows
    train_log = (slurm / "logs/train/yeast/clean/CD-GTMLL.log").read_text()
    resumed = re.search(r"resuming after epoch (\d+)/30 \(checkpoint\)", train_log)
    # after epoch 1 and before the last: from a checkpoint, not from scratch (the job may train a few more
    # epochs between the rows read above and slurmd's kill: the node goes down asynchronously; measured:
    # 1 row read, resumed after epoch 3)
    assert resumed and 1 <= int(resumed.group(1)) < 30, (rows_at_failure, train_log[:2000])
    done = int(resumed.group(1))
    rows = _log_rows(log_csv)
    assert len(rows) == 30 and rows[:min(done, len(rows_at_failure))] == rows_at_failure[:done]
    # what it computed is the clean local run's
    path = "results/runs/yeast/clean/CD-GTMLL/seed0"
    assert (slurm / path / "predictions.npz").read_bytes() == reference.results[f"{path}/predictions.npz"]
    assert _metrics(slurm / path / "metrics.json") == reference.results[f"{path}/metrics.json"]
    print(f"[slurm] node-failure run {t_run:.0f} s: node down at {t_down - t0:.0f} s after epoch {len(rows_at_failure)}, "
          f"requeued and its processes gone {t_requeued - t_down:.0f} s later; resumed after epoch {done}")
