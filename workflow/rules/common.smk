# Shared helpers: target lists and the per-job run spec.
import dataclasses
import functools
import json
import re
import shlex
from pathlib import Path

from snakemake.exceptions import WorkflowError

from cdgtmll.config.plan import (
    aliases,
    base_job,
    base_method,
    base_run,
    extra_seeds,
    finetunes_images,
    gpus_wanted,
    is_image_dataset,
    loader_cpus,
    not_runnable,
    pr_curve_enabled,
    powered_runs,
    pr_highlight,
    run_spec,
    shared_runs,
    study_jobs,
    train_gpus,
    train_runtime,
    variants,
    with_seeds,
)
from cdgtmll.config.plan import is_deterministic
from cdgtmll.config.names import DATASET_WILDCARD, METHOD_WILDCARD
from cdgtmll.data.availability import plan_unavailable
from cdgtmll.data.registry import data_config
from cdgtmll.lineage.code import identity
from cdgtmll.lineage.roots import train_roots
from cdgtmll.variants.naming import CLEAN, variant_id
from cdgtmll.pipeline.env import export_gpu_requests, export_mirror

DATASETS = config["experiments"]["datasets"]
METHODS = config["experiments"]["methods"]
SEEDS = config["experiments"]["seeds"]
RAW = config["data"]["raw_dir"]
# Every rule's conda environment (--sdm conda): environment.yml installs requirements.lock and
# this checkout (editable) from ${CDGTMLL_ROOT}. Snakemake hands conda a copy of the file in
# .snakemake/conda/ (or --conda-prefix), so a relative path there would not reach the checkout.
os.environ.update(CDGTMLL_ROOT=workflow.basedir)
# A job that dies in native code (signal) prints the Python stack of every thread to its log.
os.environ.setdefault("PYTHONFAULTHANDLER", "1")
ENV = "../../environment.yml"
# image_backbone.workers reaches a train job as a resource (CDGTMLL_LOADER_WORKERS), not a param
# or its run spec: the number of image-decoding processes changes no result, so changing it
# re-runs nothing (cdgtmll.config.plan.RUN_ONLY_IMAGE_KEYS).
LOADER_WORKERS = config.get("image_backbone", {}).get("workers", "auto")
# Cluster requests of a train job (the Slurm executor maps gpu -> sbatch --gpus, runtime ->
# --time and cpus_per_task -> --cpus-per-task; a local run ignores gpu and cpus_per_task).
# GPUs: one for a neural method when experiments.device is cuda, or auto on a cluster
# (config key cluster, set by profiles/slurm), except, with auto, on a tabular dataset of fewer
# training rows x labels than cluster_resources.gpu_min_cells; else 0, declared all the same:
# with a gpu_model in the profile, Slurm's plugin reads a missing gpu as 1
# (cdgtmll.config.plan.train_gpus). The shapes come from the dataset registry (or data.custom),
# so the request is known when the job is planned, dry runs included. The rules put the job's gpu
# in its environment; with GPUs by request, a job that asked for none trains on the CPU
# (cdgtmll.pipeline.env.job_device). Feature extraction (a ResNet-50 forward pass) asks for one
# under the same condition as neural training.
FEATURE_GPUS = 1 if gpus_wanted(config) else 0
export_gpu_requests(gpus_wanted(config))
# CPUs of a job that decodes images: 1 + image_backbone.workers, or with workers auto
# cluster_resources.image_job_cpus (cdgtmll.config.plan.loader_cpus)
FEATURE_CPUS = loader_cpus(config, None)


def train_gpu(wildcards):
    return train_gpus(config, wildcards.dataset, wildcards.method)


def train_time(wildcards):
    """Minutes (cdgtmll.config.plan.train_runtime: image fine-tuning from its size, epochs
    and seeds; 4 h otherwise)."""
    spec = dataset_spec(wildcards.dataset)
    return train_runtime(config, wildcards.dataset, wildcards.method, spec.n_train, spec.n_test)


def check_gpu_request():
    """Before the first job of a run whose jobs run elsewhere (a non-local executor: Slurm):
    with experiments.device auto, the config must say cluster: true, or neural training jobs
    would land on nodes without a GPU and train on their CPUs. profiles/slurm sets it in its
    `config:` list, which a --config on the command line replaces. Dry runs and local runs
    are not checked (the dry run's executor is not the one of the real run)."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.common_settings.local_exec:
        return
    if config["experiments"].get("device", "auto") == "auto" and not config.get("cluster", False):
        raise WorkflowError(
            f"experiments.device is auto and the jobs run on '{plugin.name}' nodes, but the config does not "
            "say cluster: true, so no training job would ask for a GPU. Add cluster=True to --config "
            "(profiles/slurm has it in its config: list; a --config on the command line replaces that "
            "list), or set experiments.device to cuda (GPUs for neural methods) or cpu (none)."
        )


def dataset_spec(dataset):
    from cdgtmll.data.registry import get_spec

    return get_spec(dataset, config["data"]["custom"])


def train_cpus(wildcards, threads):
    """CPUs: the training process's threads plus, for an image dataset fine-tuned end to
    end, its DataLoader processes (cdgtmll.config.plan.loader_cpus: image_backbone.workers, or
    with auto cluster_resources.image_job_cpus in all, of which the job runs all but one as
    workers), so the loader never runs on CPUs the job was not given."""
    return loader_cpus(config, wildcards.dataset, threads)


# The patterns the config check holds every dataset and method name to (cdgtmll.config.names):
# one definition, so a name the check accepts always makes its jobs.
wildcard_constraints:
    dataset=DATASET_WILDCARD,
    variant=r"clean|R[0-9.]+-s[0-9]+|N[0-9.]+-s[0-9]+|O[0-9.]+-s[0-9]+",
    method=METHOD_WILDCARD,


def processed(dataset):
    return f"results/data/{dataset}/processed.npz"


def frozen_features(dataset):
    """Image dataset (training backbone resnet50) with image_backbone.mode frozen."""
    return is_image_dataset(config, dataset) and not finetunes_images(config, dataset)


def base_data(dataset):
    """What methods train on for a dataset's clean split: the processed file (tabular data,
    XMC, and image datasets fine-tuned end to end: row ids + image paths), or the cached
    frozen ResNet-50 features of an image dataset in mode frozen."""
    if frozen_features(dataset):
        return f"results/data/{dataset}/features.npz"
    return processed(dataset)


def variant_file(dataset, variant):
    """What methods train on for one variant of a dataset."""
    if variant == CLEAN:
        return base_data(dataset)
    if variant.startswith("O") and frozen_features(dataset):
        return f"results/data/{dataset}/variants/{variant}.features.npz"
    return f"results/data/{dataset}/variants/{variant}.npz"


def variant_data(wc):
    return variant_file(wc.dataset, wc.variant)


# Every (dataset, variant, method) job: the main experiments (tables) and the studies (figures).
MAIN_JOBS = [(d, v, m) for d in DATASETS for v in variants(config, d) for m in METHODS]
STUDY_JOBS = study_jobs(config)
ALL_JOBS = list(dict.fromkeys(MAIN_JOBS + [j for js in STUDY_JOBS.values() for j in js]))
ALL_DATASETS = list(dict.fromkeys(d for d, _, _ in ALL_JOBS))


# Datasets that cannot be had here (cdgtmll.data.availability: a raw file nothing here provides,
# or a recorded failure of their prepare_dataset) are said before any job and left out; their cells
# say n.r. with the reason. data.unavailable: error stops here instead.
UNAVAILABLE = plan_unavailable(config, ALL_DATASETS, identity(("cdgtmll.data.prepare",))["sha256"], processed)
if UNAVAILABLE and config["data"]["unavailable"] == "error":
    raise WorkflowError(
        "data.unavailable is error and these datasets cannot be had:\n"
        + "\n".join(f"  {d}: {r}" for d, r in UNAVAILABLE.items())
    )
if workflow.is_main_process:
    for _d, _r in UNAVAILABLE.items():
        logger.warning(f"cdgtmll: {_d} is left out of this run: {_r}")

# Methods that cannot run here (e.g. no pretrained encoder configured) are not scheduled;
# the tables print their reason instead of a number (a dataset's own reason first).
NOT_RUN = {
    (d, m): r
    for d, m in dict.fromkeys((d, m) for d, _, m in ALL_JOBS)
    if (r := UNAVAILABLE.get(d) or not_runnable(config, d, m))
}


@functools.cache
def job_spec(dataset, variant, method):
    return with_base_run(config, run_spec(config, dataset, variant, method), SEEDS)


# Rows built on another row's run (Method.builds_on: PE, ETU and LSFA read BCE's model): the run
# spec names the base run (cdgtmll.config.plan.base_run), whose per-seed provenance files are
# inputs of the job (base_inputs), so a change to BCE's run re-runs them; a base run with other
# settings, or none planned, leaves the row fitting its first stage itself, the spec says why.
def with_base_run(cfg, spec, base_seeds):
    """``spec`` (a RunSpec) with its base_run entry (only for a method that builds on another)."""
    if base_method(cfg, spec.method) is None:
        return spec
    planned = [j for j in ALL_JOBS if (j[0], j[2]) not in NOT_RUN]
    base = base_job(cfg, planned, spec.dataset, spec.variant, spec.method, own=MAIN_JOBS)
    seeds = base_seeds(base) if callable(base_seeds) else base_seeds
    return dataclasses.replace(spec, base_run=base_run(cfg, spec, base, seeds))


def base_inputs(spec):
    """The base run's per-seed provenance files a job reads (none without a base run)."""
    b = spec.base_run or {}
    return [f"{b['dir']}/seed{s}/provenance.json" for s in spec.seeds] if b.get("dir") else []


def train_base(wc):
    return base_inputs(job_spec(wc.dataset, wc.variant, wc.method))


def more_train_base(wc):
    return base_inputs(more_job_spec(wc.dataset, wc.variant, wc.method))


# Each distinct run spec is trained once (cdgtmll.config.plan.shared_runs): a study setting
# whose spec equals an earlier job's (CD-GTMLL@alpha=0.4 is CD-GTMLL; CD-GTMLL@alpha=0.0 is
# No-Curiosity) reads that job's run folder, and the figures and tables still name the setting
# (--alias <setting's folder> <run folder>). The tables' rows (MAIN_JOBS) have folders of their own.
RUN_OF = shared_runs([j for j in ALL_JOBS if (j[0], j[2]) not in NOT_RUN], job_spec, own=MAIN_JOBS)
ALIASES = aliases(RUN_OF)

# Seeds with power (config `power`, cdgtmll.config.plan.powered_runs): the run folders of the
# compared rows and studies train experiments.seeds (rule train) and EXTRA_SEEDS (rule train_more,
# a job of its own with the same spec but for its seeds, so that adding power re-runs nothing);
# every other run trains SEEDS. Whatever lists a run's seed folders asks run_seeds.
EXTRA_SEEDS = extra_seeds(config)
POWERED_RUNS = powered_runs(config, RUN_OF, MAIN_JOBS, STUDY_JOBS)


def run_seeds(job):
    """The training seeds of a setting's run folder (RUN_OF): SEEDS, then EXTRA_SEEDS when
    powered; ONCE_SEEDS for a deterministic method's (below)."""
    run = RUN_OF.get(job, job)
    if run[2] in ONCE_METHODS:
        return ONCE_SEEDS
    return SEEDS + EXTRA_SEEDS if run in POWERED_RUNS else SEEDS


# Methods whose fit does not depend on the seed (deterministic in the method's spec;
# cdgtmll.config.plan.fit_seeds): their run folders hold one seed folder, the first of
# SEEDS, trained by rule train_once and evaluated by rule evaluate_once (their method wildcard
# matches only these names, and ruleorder puts them before train and evaluate, whose outputs name
# every seed); power adds no seed to them. Every table, claim and figure reads them as n = 1.
ONCE_SEEDS = SEEDS[:1]
ONCE_METHODS = sorted({m for _, _, m in ALL_JOBS if is_deterministic(config, m)})
# the method wildcard of rules train_once and evaluate_once: exactly these names ("(?!)" matches none)
ONCE_WILDCARD = "|".join(re.escape(m) for m in ONCE_METHODS) or "(?!)"


# Scheduling order (Snakemake `priority`: among the jobs ready to run, the highest first): the
# data first (cheap; Table 2's rows need the R-variants), every evaluation as soon as its training
# ends, Table 1's rows (the clean variant of MAIN_JOBS) trained first, then the other tables' rows,
# then the studies' settings, and the tables written as soon as their rows are evaluated
# (report.smk), so that the first complete Table 1 comes as early as the DAG allows (the partial
# tables show it: cdgtmll.tables.partial) and a run stopped early has the tables rather than half
# of every sweep.
PRIORITY = {
    "data": 50,
    "tables": 45,
    "evaluate_table1": 42,
    "evaluate_table": 40,
    "evaluate_study": 30,
    "train_table1": 25,
    "train_table": 20,
    "train_study": 10,
}
TABLE_JOBS = frozenset(MAIN_JOBS)


def job_priority(step):
    """The priority function of a train or evaluate job (step: 'train' | 'evaluate')."""

    def priority(wc):
        job = (wc.dataset, wc.variant, wc.method)
        kind = ("table1" if wc.variant == CLEAN else "table") if job in TABLE_JOBS else "study"
        return PRIORITY[f"{step}_{kind}"]

    return priority


def run_dir(job):
    return "results/runs/{}/{}/{}".format(*job)


def run_dirs(jobs=None):
    """The run folders that hold the jobs' results (shared ones once)."""
    js = ALL_JOBS if jobs is None else jobs
    return list(dict.fromkeys(run_dir(RUN_OF[j]) for j in js if (j[0], j[2]) not in NOT_RUN))


def all_metrics(jobs=None):
    """The metrics files of the jobs' run folders (shared ones once), every seed of each."""
    js = ALL_JOBS if jobs is None else jobs
    runs = dict.fromkeys(RUN_OF[j] for j in js if (j[0], j[2]) not in NOT_RUN)
    return [f"{run_dir(r)}/seed{s}/metrics.json" for r in runs for s in run_seeds(r)]


def study_seed_dirs(study):
    """The seed folders of a study's settings, named as the settings are (a shared one's
    files are read from its run folder: alias_args)."""
    jobs = [j for j in STUDY_JOBS.get(study, []) if (j[0], j[2]) not in NOT_RUN]
    return [f"{run_dir(j)}/seed{s}" for j in jobs for s in run_seeds(j)]


def alias_words(jobs=None):
    """``--alias <setting's folder> <run folder>`` for each of the jobs that shares another's run, as words."""
    js = ALL_JOBS if jobs is None else jobs
    return [w for j in dict.fromkeys(js) if j in ALIASES for w in ("--alias", run_dir(j), run_dir(ALIASES[j]))]


def alias_args(jobs=None):
    """:func:`alias_words` as one shell string."""
    return " ".join(map(shlex.quote, alias_words(jobs)))


def study_alias_args(study):
    return alias_args(STUDY_JOBS.get(study, []))


def spec_json(wc):
    return job_spec(wc.dataset, wc.variant, wc.method).to_json()


# The jobs of a powered run's extra seeds (rules train_more, evaluate_more): the config with
# experiments.seeds = EXTRA_SEEDS, so that their spec differs from the base job's in `seeds` only.
MORE_CONFIG = with_seeds(config, EXTRA_SEEDS)
# Their outputs' seeds. A rule needs an output, so without extra seeds it names a seed folder that
# nothing asks for (seed-unused): the rules are then never scheduled.
MORE_SEEDS = EXTRA_SEEDS or ["-unused"]


@functools.cache
def more_job_spec(dataset, variant, method):
    # the base run's extra seeds exist when its run folder is powered too
    powered = lambda base: EXTRA_SEEDS if base is not None and RUN_OF.get(base, base) in POWERED_RUNS else []
    return with_base_run(MORE_CONFIG, run_spec(MORE_CONFIG, dataset, variant, method), powered)


def more_spec_json(wc):
    return more_job_spec(wc.dataset, wc.variant, wc.method).to_json()


def more_train_time(wildcards):
    """Minutes of a train_more job (train_time for EXTRA_SEEDS)."""
    spec = dataset_spec(wildcards.dataset)
    return train_runtime(MORE_CONFIG, wildcards.dataset, wildcards.method, spec.n_train, spec.n_test)


# Code is an input (cdgtmll.lineage.code): every rule's params hold the sha256 of the code its
# job runs (the static import closure of its command module, plus the lock file). A training
# job's closure adds its method's module and its loss's module, so an edit re-runs exactly the
# jobs whose code changed, and everything downstream of them.
def code_of(*modules):
    return identity(modules)["sha256"]


def train_code(wc):
    return identity(train_roots(job_spec(wc.dataset, wc.variant, wc.method)))["sha256"]


def pr_inputs(wc):
    fig = config["figures"]["pr_curve"]
    d, sev = fig["dataset"], fig["severity"]
    return [
        f"results/runs/{d}/{variant_id(sev, s)}/{m}/seed{k}/predictions.npz"
        for s in config["r_variants"]["sampling_seeds"]
        for m in METHODS
        if (d, m) not in NOT_RUN
        for k in run_seeds((d, variant_id(sev, s), m))
    ]


def study_metrics(study):
    """The metrics files a study's figure reads (shared runs once)."""
    return all_metrics(STUDY_JOBS.get(study, []))


def prepare_identity(wc):
    """What the raw data of this dataset is, by content (cdgtmll.data.acquire.content_identity:
    pinned sha256s, or the sha256 of unpinned local sources), as canonical JSON: a param of
    prepare_dataset, so an edited unpinned source re-runs prepare and everything downstream,
    while a byte-identical mirror in another folder re-runs nothing. The mirror's path is not part
    of any job's identity: the jobs find it in CDGTMLL_DATA_MIRROR (set below from data.mirror)."""
    from cdgtmll.data.acquire import content_identity
    from cdgtmll.data.registry import get_spec

    spec = get_spec(wc.dataset, config["data"]["custom"])
    return json.dumps(
        content_identity(spec, config["data"]["mirror"], config["data"]["allow_download"]), sort_keys=True
    )


# data.mirror reaches prepare_dataset through the environment (cdgtmll.pipeline.env.export_mirror),
# not as a param: a param's change re-runs the job, and a folder is not data.
export_mirror(config["data"]["mirror"])
