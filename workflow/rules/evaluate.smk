# Metrics of App. E.4 at the global threshold and at validation-tuned per-label thresholds.
# Each seed gets metrics.json (what the evaluation computed: the same bytes on every machine) and
# metrics.provenance.json (when, where, from which checkout and config files: machine-specific;
# cdgtmll/metrics/evaluate_run.py).
from cdgtmll.lineage.configs import export_record

# The config files this run read, for each evaluation's provenance record (the job takes their
# sha256). In the environment (CDGTMLL_CONFIG_RECORD), not a param: a param would re-run every
# evaluation at any edit of params.yaml; a config change re-runs the jobs whose settings it
# changes (params below, and the run spec of their training). cdgtmll/lineage/configs.py.
export_record(workflow.configfiles, workflow.basedir, workflow.config_settings.config)


rule evaluate:
    group:
        "run_{dataset}_{variant}_{method}"
    input:
        clean=lambda wc: base_data(wc.dataset),
        predictions=expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/predictions.npz", seed=SEEDS),
    output:
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/metrics.json", seed=SEEDS),
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/metrics.provenance.json", seed=SEEDS),
    params:
        code=code_of("cdgtmll.metrics.evaluate_run"),
        rundir=lambda wc, output: str(Path(output[0]).parent.parent),
        seeds=" ".join(str(s) for s in SEEDS),
        q=config["r_variants"]["tail_fraction"],
        tie_seed=config["r_variants"]["tie_seed"],
        threshold=config["thresholds"]["global"],
        f1_rule=config["evaluation"]["f1_no_positive_labels"],
    conda:
        ENV
    log:
        "logs/evaluate/{dataset}/{variant}/{method}.log",
    benchmark:
        "logs/benchmarks/evaluate/{dataset}/{variant}/{method}.tsv"
    priority: job_priority("evaluate")
    resources:
        mem_mb=4000,
        runtime=10,
    shell:
        "python -m cdgtmll.metrics.evaluate_run --clean {input.clean} --rundir {params.rundir} --seeds {params.seeds} "
        "--tail-fraction {params.q} --tie-seed {params.tie_seed} --threshold {params.threshold} "
        "--f1-no-positive-labels {params.f1_rule} > {log} 2>&1"


# The extra seeds of a powered run (train_more), evaluated alike.


rule evaluate_more:
    group:
        "run_{dataset}_{variant}_{method}"
    input:
        clean=lambda wc: base_data(wc.dataset),
        predictions=expand(
            "results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/predictions.npz", seed=MORE_SEEDS
        ),
    output:
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/metrics.json", seed=MORE_SEEDS),
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/metrics.provenance.json", seed=MORE_SEEDS),
    params:
        code=code_of("cdgtmll.metrics.evaluate_run"),
        rundir=lambda wc, output: str(Path(output[0]).parent.parent),
        seeds=" ".join(str(s) for s in EXTRA_SEEDS),
        q=config["r_variants"]["tail_fraction"],
        tie_seed=config["r_variants"]["tie_seed"],
        threshold=config["thresholds"]["global"],
        f1_rule=config["evaluation"]["f1_no_positive_labels"],
    conda:
        ENV
    log:
        "logs/evaluate/{dataset}/{variant}/{method}.more.log",
    benchmark:
        "logs/benchmarks/evaluate/{dataset}/{variant}/{method}.more.tsv"
    priority: job_priority("evaluate")
    resources:
        mem_mb=4000,
        runtime=10,
    shell:
        "python -m cdgtmll.metrics.evaluate_run --clean {input.clean} --rundir {params.rundir} --seeds {params.seeds} "
        "--tail-fraction {params.q} --tie-seed {params.tie_seed} --threshold {params.threshold} "
        "--f1-no-positive-labels {params.f1_rule} > {log} 2>&1"


# A deterministic method's one seed (train_once), evaluated alike.


rule evaluate_once:
    group:
        "run_{dataset}_{variant}_{method}"
    wildcard_constraints:
        method=ONCE_WILDCARD,
    input:
        clean=lambda wc: base_data(wc.dataset),
        predictions=expand(
            "results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/predictions.npz", seed=ONCE_SEEDS
        ),
    output:
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/metrics.json", seed=ONCE_SEEDS),
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/metrics.provenance.json", seed=ONCE_SEEDS),
    params:
        code=code_of("cdgtmll.metrics.evaluate_run"),
        rundir=lambda wc, output: str(Path(output[0]).parent.parent),
        seeds=" ".join(str(s) for s in ONCE_SEEDS),
        q=config["r_variants"]["tail_fraction"],
        tie_seed=config["r_variants"]["tie_seed"],
        threshold=config["thresholds"]["global"],
        f1_rule=config["evaluation"]["f1_no_positive_labels"],
    conda:
        ENV
    log:
        "logs/evaluate/{dataset}/{variant}/{method}.once.log",
    benchmark:
        "logs/benchmarks/evaluate/{dataset}/{variant}/{method}.once.tsv"
    priority: job_priority("evaluate")
    resources:
        mem_mb=4000,
        runtime=10,
    shell:
        "python -m cdgtmll.metrics.evaluate_run --clean {input.clean} --rundir {params.rundir} --seeds {params.seeds} "
        "--tail-fraction {params.q} --tie-seed {params.tie_seed} --threshold {params.threshold} "
        "--f1-no-positive-labels {params.f1_rule} > {log} 2>&1"


ruleorder: evaluate_once > evaluate


rule runs_all:
    input:
        all_metrics(),
