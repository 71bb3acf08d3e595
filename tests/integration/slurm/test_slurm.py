"""Scale out on Slurm: profiles/slurm against the installed executor plugin, and
config/quick.yaml end to end through a real single-node Slurm cluster (tools/slurm_local.sh),
its results byte-identical to a local run; a training job cancelled by the scheduler fails
the run, and the rerun resumes from its checkpoint to identical metrics.

The end-to-end test needs `slurmctld` (Debian: apt-get install slurm-wlm munge) and root; it
skips without them, except under CI (env var CI set), where .ci/run installs them and a skip
would hide the test, so it fails instead.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from cdgtmll.lineage.seal import SEAL_FIELD, seal_problem
from tests.support.paths import ROOT
from tests.support.workflow import checkout_ignore, snakemake_env

PROFILE = ROOT / "profiles/slurm/config.yaml"
CLUSTER = ROOT / "tools/slurm_local.sh"
LOCK = Path("/tmp/cdgtmll-slurm-test.lock")  # one test session at a time on this machine's cluster
# config/quick.yaml as shipped plus this overlay (a second --configfile: `--config` cannot
# carry typed nested values, Snakemake reads them as strings): one seed, 30 epochs, the clean
# split only (3 training jobs of 9 sbatch jobs; with the R variants the DAG has 9 training jobs
# of 24 and takes 3 times as long: each Slurm job costs two Snakemake start-ups, 15-25 s).
SCALE = {"experiments": {"seeds": [0], "r_variants": False}, "training": {"default": {"epochs": 30}}}
N_TRAIN = 3  # quick.yaml's three methods on Yeast's clean split
CONFIGS = ["--configfile", "config/quick.yaml", "config/scale.yaml"]
# the documented pair for clusters without job accounting, and quicker status checks: the
# plugin checks 8 s after a job ended, then 18, 28, ... s later (at 8, 26, 54 s); a job of
# this workflow takes 15-25 s here (two Snakemake start-ups in each)
ACCOUNTING_FREE = ["--slurm-status-command", "squeue", "--slurm-no-account",
                   "--slurm-init-seconds-before-status-checks", "8"]
SUBMITTED = re.compile(r"Job \S+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")  # a group's id is a uuid
# the sbatch job of one run: its training and evaluation (group run_{dataset}_{variant}_{method})
RUN_GROUP = "run_yeast_clean_{}_evaluate_train"


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


# a dry run prints each job as "rule <name>:" and its fields; the jobs of a group job (one sbatch
# job) follow a "Group job <name> (jobs in lexicogr. order):" line, indented by 4 more spaces
JOB = re.compile(r"^( *)rule (\w+):\n((?: +\w+: .*\n)+)", flags=re.M)
GROUP = re.compile(r"^\[[^]]*\] Group job (\S+) \(jobs in lexicogr\. order\):$", flags=re.M)
# what runs in Snakemake's own process on the login node (localrules; `all` runs no command)
LOCAL = {"tables", "metrics_summary", "figure_pr", "claims_check", "figure_ablation", "figure_robustness",
         "figure_sensitivity", "figure_diagnostics", "study_readings", "figure_ranks", "all"}


def _jobs(out: str) -> list[dict]:
    """Every job of a dry run: rule, grouped (inside a group job), wildcards, resources."""
    jobs = []
    for m in JOB.finditer(out):
        fields = dict(re.findall(r"^ +(\w+): (.*)$", m.group(3), flags=re.M))
        res = dict(kv.split("=", 1) for kv in fields.get("resources", "").split(", ") if "=" in kv)
        wc = dict(kv.split("=", 1) for kv in fields.get("wildcards", "").split(", ") if "=" in kv)
        jobs.append({"rule": m.group(2), "grouped": len(m.group(1)) > 0, "wildcards": wc, "resources": res})
    return jobs


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
    """`snakemake --profile profiles/slurm -n all --configfile config/paper.yaml` (the shipped
    paper config, experiments.device auto): every training job of a neural method asks for one
    GPU, every classical one (BR-LogReg, ...) and every other job for none; each training job
    and its evaluation are one sbatch job, a dataset's preparation and variants one more, the
    tables and figures none (localrules); COCO's fine-tuning jobs get more than 4 h."""
    from cdgtmll.config import loader, plan
    from cdgtmll.methods import catalog

    repo = _copy_repo(tmp_path / "repo")
    res = _snakemake(repo, _env(), "--profile", "profiles/slurm", "-n", "all", "--configfile", "config/paper.yaml",
                     timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    cfg = loader.load(repo / "config/paper.yaml")
    jobs = _jobs(out)
    gpus: dict[str, dict[str, int]] = {}
    for j in jobs:
        if j["rule"] == "train":
            registered = plan.resolve_method(cfg, j["wildcards"]["method"])[0]
            kind = "neural train" if catalog.is_neural(registered) else "classical train"
        else:
            kind = j["rule"]
        n = j["resources"].get("gpu", "0")
        gpus.setdefault(kind, {}).setdefault(n, 0)
        gpus[kind][n] += 1
    print("\n[paper dry run] GPUs per job kind {kind: {gpus: jobs}}:", gpus)
    assert set(gpus["neural train"]) == {"1"} and set(gpus["classical train"]) == {"0"}, gpus
    assert all(set(v) == {"0"} for k, v in gpus.items() if not k.endswith(" train")), gpus
    for kind in ("evaluate", "tables", "metrics_summary", "claims_check", "figure_pr", "figure_ablation", "prepare_dataset",
                 "r_variant"):
        assert kind in gpus, kind

    # sbatch jobs: the group jobs; every job outside a group runs on the login node
    groups = GROUP.findall(out)
    assert {j["rule"] for j in jobs if not j["grouped"]} <= LOCAL
    train = [j for j in jobs if j["rule"] == "train"]
    datasets = {j["wildcards"]["dataset"] for j in jobs if j["rule"] == "prepare_dataset"}
    assert len(groups) == len(set(groups)) == len(train) + len(datasets), (len(groups), len(train), len(datasets))
    assert sum(j["rule"] == "evaluate" for j in jobs) == len(train)
    print(f"[paper dry run] {len(jobs)} jobs, {len(groups)} sbatch jobs ({len(train)} training + evaluation, "
          f"{len(datasets)} data), {len(jobs) - sum(j['grouped'] for j in jobs)} on the login node")
    coco = {int(j["resources"]["runtime"]) for j in train if j["wildcards"]["dataset"] == "coco2014"}
    others = {int(j["resources"]["runtime"]) for j in train if j["wildcards"]["dataset"] != "coco2014"}
    assert coco and min(coco) > 240 and others == {240}, (coco, others)


# ------------------------------------------------------------------ a real cluster (slow)

def _pids() -> dict[str, int]:
    out = {}
    for name, f in (("slurmctld", "/run/slurmctld.pid"), ("slurmd", "/run/slurmd.pid"),
                    ("munged", "/run/munge/munged.pid")):
        try:
            out[name] = int(Path(f).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")


@pytest.fixture(scope="module")
def cluster():
    """A single-node Slurm cluster for the module; stopped (and checked) at teardown when
    this fixture started it (one that was already up is left running). One test session
    at a time uses it (a lock file), since a machine has one cluster."""
    why = None
    if any(c.isspace() for c in sys.executable):
        # upstream: snakemake-interface-executor-plugins 9.4.0 (executors/real.py, format_job_exec)
        # writes the Python path into each job's script unquoted; docs/cluster.md says so
        why = (f"the Python of this checkout ({sys.executable}) has a space in its path, which the Slurm "
               "executor writes into each job script unquoted (snakemake-interface-executor-plugins 9.4.0)")
        pytest.skip(why)
    if shutil.which("slurmctld") is None:
        why = "slurmctld is not installed (apt-get install slurm-wlm munge)"
    elif os.geteuid() != 0:
        why = "a local Slurm cluster needs root (slurmd runs the jobs as their submitter)"
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {why}: .ci/run installs Slurm and runs as root")
        pytest.skip(why)
    lock = open(LOCK, "a+")
    deadline = time.monotonic() + 1800
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                pytest.fail(f"another test session held {LOCK} for 30 min")
            time.sleep(2)
    try:
        yield from _cluster_up()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _cluster_up():
    start = subprocess.run([str(CLUSTER), "start"], capture_output=True, text=True, timeout=120)
    if start.returncode == 3:  # this machine has a Slurm of its own: leave it alone
        (pytest.fail if os.environ.get("CI") else pytest.skip)(start.stderr.strip())
    assert start.returncode == 0, start.stdout + start.stderr
    started = start.stdout.strip().endswith("started")
    yield
    if started:
        pids = _pids()
        assert set(pids) >= {"slurmctld", "slurmd"}, pids
        if not Path("/run/cdgtmll-slurm-local.munged").exists():
            pids.pop("munged", None)  # a munged the script did not start stays
        stop = subprocess.run([str(CLUSTER), "stop"], capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not [n for n, p in pids.items() if _alive(p)], f"still running after stop: {pids}"
        assert subprocess.run([str(CLUSTER), "status"]).returncode != 0
        # the stopped form of slurm.conf: a client fails at once instead of retrying for 9 s
        # (snakemake-executor-plugin-slurm runs `scontrol show config` at every Snakemake start)
        t0 = time.monotonic()
        probe = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=60)
        assert probe.returncode != 0 and time.monotonic() - t0 < 2, (time.monotonic() - t0, probe.stderr)


def _squeue(repo: Path, *args: str) -> list[list[str]]:
    """(job id, state, comment) of the jobs submitted from ``repo`` (their working
    directory), finished ones included."""
    out = subprocess.run(["squeue", "-h", "--states=all", "-o", "%i|%T|%k|%Z", *args], capture_output=True,
                         text=True, timeout=60).stdout
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    return [r[:3] for r in rows if r[3] == str(repo)]


def _cancel_jobs_of(repo: Path) -> None:
    """No job of a failed test outlives it."""
    ids = [jid for jid, state, _ in _squeue(repo) if state in ("PENDING", "RUNNING", "CONFIGURING")]
    if ids:
        subprocess.run(["scancel", *ids], timeout=60)


def _metrics(path: Path) -> dict:
    """A run's metrics.json less the three fields that record when it was made: the
    evaluation time, the hash of the provenance record (which holds the training's
    start/finish times) and the self-hash over both (``integrity``), which must hold."""
    m = json.loads(path.read_text())
    assert seal_problem(m) is None, (path, seal_problem(m))
    m.pop("evaluated")
    m["inputs"]["provenance"].pop("sha256")
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


def _log_rows(path: Path) -> list[dict]:
    return list(csv.DictReader(path.open())) if path.is_file() else []


def _slurm(repo: Path, env: dict, *targets: str, log: Path) -> subprocess.Popen:
    """`snakemake --profile profiles/slurm` (plus the accounting-free pair) in the background."""
    with log.open("w") as fh:
        return subprocess.Popen([sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", *ACCOUNTING_FREE,
                                 *targets, *CONFIGS], cwd=repo, env=env, stdout=fh, stderr=subprocess.STDOUT)


@pytest.fixture
def slurm_copy(cluster, tmp_path):
    """A copy of the project to run on the cluster; its jobs still queued or running at the
    end (a failed test) are cancelled."""
    repo = _copy_repo(tmp_path / "slurm")
    yield repo
    _cancel_jobs_of(repo)


def _finish(proc: subprocess.Popen, log: Path, timeout: int = 900) -> tuple[int, str]:
    try:
        rc = proc.wait(timeout=timeout)
    except BaseException:
        proc.terminate()  # Snakemake scancels its jobs on SIGTERM
        proc.wait(timeout=120)
        raise
    return rc, log.read_text()


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
def test_quick_profile_on_slurm_matches_local_and_resumes_after_scancel(mirror, slurm_copy, tmp_path):
    """config/quick.yaml (one seed, 30 epochs, clean split) through `snakemake --profile
    profiles/slurm`, on a real Slurm cluster, with a scheduler failure on the way:

    * once CD-GTMLL's training job has written its first checkpoint it is cancelled with
      scancel; Snakemake reports that job failed and the run exits non-zero;
    * the rerun finishes the workflow, and the cancelled job resumes from its checkpoint (the
      epochs before the cancel keep their logged timings);
    * every training job ran with its evaluation as one sbatch job, the dataset's preparation as
      another, the tables and the claims check on the login node (Slurm job ids in the log, COMPLETED in
      squeue, with the rule's memory/time/CPU request);
    * the predictions, results/metrics.json and the tables are byte-identical to an
      uncancelled local run of the same config (each run's metrics.json identical but for
      its timestamps)."""
    env = {**_env(mirror), "CDGTMLL_CHECKPOINT_EVERY": "1"}  # a checkpoint after epoch 1, before the scancel
    local, slurm = _copy_repo(tmp_path / "local"), slurm_copy

    # config/quick.yaml as shipped (R variants, 3 seeds) is 24 sbatch jobs without the groups and
    # localrules; with them, one per run (its training and evaluation) and one for the dataset
    res = _snakemake(slurm, env, "--profile", "profiles/slurm", "-n", "all", "--configfile", "config/quick.yaml")
    jobs, groups = _jobs(res.stdout + res.stderr), GROUP.findall(res.stdout + res.stderr)
    assert res.returncode == 0 and {j["rule"] for j in jobs if not j["grouped"]} <= LOCAL, res.stdout[-3000:]
    n_runs = sum(j["rule"] == "train" for j in jobs)
    assert len(groups) == n_runs + 1 < 24, (len(groups), n_runs)
    print(f"\n[slurm] config/quick.yaml as shipped: {len(jobs)} jobs, {len(groups)} sbatch jobs")

    t0 = time.monotonic()
    res = _snakemake(local, env, "--profile", "profiles/local", "all", *CONFIGS)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    t_local = time.monotonic() - t0
    reference = _results(local)
    assert len(reference) >= 2 * N_TRAIN + 1

    # ---- run 1: cancel CD-GTMLL's training job after its first checkpoint
    t0 = time.monotonic()
    run_dir = slurm / "results/runs/yeast/clean/CD-GTMLL"
    ckpt, log_csv = run_dir / "seed0/checkpoint.pt", run_dir / "seed0/train_log.csv"
    proc = _slurm(slurm, env, "all", log=tmp_path / "run1.log")
    try:
        deadline = time.monotonic() + 600
        while not (ckpt.is_file() and _log_rows(log_csv)):
            assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint before the run ended"
            time.sleep(0.1)
        running = [jid for jid, state, comment in _squeue(slurm)
                   if comment == "rule_" + RUN_GROUP.format("CD-GTMLL") and state == "RUNNING"]
        assert len(running) == 1, _squeue(slurm)
        subprocess.run(["scancel", running[0]], check=True, timeout=60)
    except BaseException:
        proc.terminate()
        proc.wait(timeout=120)
        raise
    rc, out1 = _finish(proc, tmp_path / "run1.log")
    assert rc != 0, out1[-3000:]
    # the plugin's "SLURM-job '<id>' failed, SLURM status is: ..." is not printed for a group job
    # (Snakemake 9.27's GroupJob.log_error drops the message); squeue says CANCELLED below
    assert "Error in group run_yeast_clean_CD-GTMLL" in out1, out1[-3000:]
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
        assert sched["kind"] == "slurm" and sched["slurm_job_id"] == last_job["group_" + RUN_GROUP.format(d.name)], \
            (d, sched, last_job)
    states = {jid: (state, comment) for jid, state, comment in _squeue(slurm, "-j", ",".join(j for j, _ in train))}
    for jid, log in train:
        want = "CANCELLED" if jid == running[0] else "COMPLETED"
        assert states[jid][0] == want and states[jid][1].startswith("rule_run_yeast_clean_"), states
        assert Path(log).is_file() and "rule train:" in Path(log).read_text(), log
        job = subprocess.run(["scontrol", "show", "job", "-o", jid], capture_output=True, text=True).stdout
        # the group's request: the larger memory, the two rules' times added (240 + 10 min), 1 CPU
        assert "MinMemoryNode=8000M" in job and "TimeLimit=04:10:00" in job and "NumCPUs=1 " in job, job
        # one GPU for a neural method, none for BR-LogReg (tools/slurm_local.sh's node declares
        # GPUs without devices: the job is scheduled as on a GPU cluster and trains on the CPU)
        gpu = "TresPerJob=gres:gpu:1" in job
        assert gpu is (not states[jid][1].startswith("rule_" + RUN_GROUP.format("BR-LogReg"))) and \
            ("gres:gpu" in job) is gpu, job
    assert _results(slurm) == reference
    print(f"\n[slurm] local run {t_local:.0f} s; Slurm run 1 (cancelled after epoch {len(rows_at_cancel)}) "
          f"{t_run1:.0f} s + run 2 {t_run2:.0f} s; {len(submitted)} sbatch jobs ({len(train)} training + evaluation)")
