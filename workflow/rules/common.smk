# Shared helpers: target lists and the per-job run spec.
import json
from pathlib import Path

from cdgtmll.config import CLEAN, not_runnable, pr_curve_enabled, run_spec, variant_id, variants

DATASETS = config["experiments"]["datasets"]
METHODS = config["experiments"]["methods"]
SEEDS = config["experiments"]["seeds"]
RAW = config["data"]["raw_dir"]
ENV = "../../environment.yml"  # every rule runs in the project environment
GPU_JOBS = 1 if config["experiments"].get("device") == "cuda" else 0


wildcard_constraints:
    dataset=r"[A-Za-z0-9_.\-]+",
    variant=r"clean|R[0-9.]+-s[0-9]+",
    method=r"[A-Za-z0-9_.\-]+",


def processed(dataset):
    return f"results/data/{dataset}/processed.npz"


def variant_data(wc):
    if wc.variant == CLEAN:
        return processed(wc.dataset)
    return f"results/data/{wc.dataset}/variants/{wc.variant}.npz"


# Methods that cannot run here (e.g. no pretrained encoder configured) are not scheduled;
# the tables print their reason instead of a number.
NOT_RUN = {(d, m): r for d in DATASETS for m in METHODS if (r := not_runnable(config, d, m))}


def run_dirs():
    return [
        f"results/runs/{d}/{v}/{m}"
        for d in DATASETS
        for v in variants(config, d)
        for m in METHODS
        if (d, m) not in NOT_RUN
    ]


def all_metrics():
    return [f"{r}/seed{s}/metrics.json" for r in run_dirs() for s in SEEDS]


def spec_json(wc):
    return json.dumps(run_spec(config, wc.dataset, wc.variant, wc.method), sort_keys=True)


def pr_inputs(wc):
    fig = config["figures"]["pr_curve"]
    d, sev = fig["dataset"], fig["severity"]
    return [
        f"results/runs/{d}/{variant_id(sev, s)}/{m}/seed{k}/predictions.npz"
        for s in config["r_variants"]["sampling_seeds"]
        for m in METHODS
        if (d, m) not in NOT_RUN
        for k in SEEDS
    ]
