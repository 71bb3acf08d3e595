# Training: one job per (dataset, variant, method) trains every seed (process start-up
# dominates small runs). The run spec is a param, so a change of any setting that
# affects the job re-runs exactly the affected jobs.
# Progress (cdgtmll.nn.progress): stderr -> the job's log (everything: one line per epoch,
# warnings, tracebacks); stdout -> Snakemake's terminal, or the job's Slurm log under the
# Slurm profile: one "[run] <dataset>/<variant>/<method> seed <s> (<i> of <n>) done: ..."
# line per seed (also in the log), so parallel jobs add a few labelled lines, never epochs.


rule train:
    group:
        "run_{dataset}_{variant}_{method}"
    input:
        data=variant_data,
        clean=lambda wc: base_data(wc.dataset),
        base=train_base,
    output:
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/predictions.npz", seed=SEEDS),
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/provenance.json", seed=SEEDS),
    params:
        code=train_code,
        spec=spec_json,
        outdir=lambda wc, output: str(Path(output[0]).parent.parent),
    conda:
        ENV
    log:
        "logs/train/{dataset}/{variant}/{method}.log",
    benchmark:
        "logs/benchmarks/train/{dataset}/{variant}/{method}.tsv"
    threads: 1
    priority: job_priority("train")
    resources:
        mem_mb=8000,
        runtime=train_time,
        gpu=train_gpu,
        cpus_per_task=train_cpus,
        loader_workers=LOADER_WORKERS,
    shell:
        "CDGTMLL_JOB_GPUS={resources.gpu} CDGTMLL_THREADS={threads} CDGTMLL_LOADER_WORKERS={resources.loader_workers} python -m cdgtmll.train --data {input.data} --clean {input.clean} "
        "--spec {params.spec:q} --outdir {params.outdir} --progress 2> {log}"


# A powered run's seeds besides experiments.seeds (config `power`; common.smk EXTRA_SEEDS,
# POWERED_RUNS): the same training into the same run folder, asked for only by the powered run
# folders' consumers, with the base job's spec but for its `seeds`, so that the base job's
# identity is unchanged and adding power re-runs nothing that exists.


rule train_more:
    group:
        "run_{dataset}_{variant}_{method}"
    input:
        data=variant_data,
        clean=lambda wc: base_data(wc.dataset),
        base=more_train_base,
    output:
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/predictions.npz", seed=MORE_SEEDS),
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/provenance.json", seed=MORE_SEEDS),
    params:
        code=train_code,
        spec=more_spec_json,
        outdir=lambda wc, output: str(Path(output[0]).parent.parent),
    conda:
        ENV
    log:
        "logs/train/{dataset}/{variant}/{method}.more.log",
    benchmark:
        "logs/benchmarks/train/{dataset}/{variant}/{method}.more.tsv"
    threads: 1
    priority: job_priority("train")
    resources:
        mem_mb=8000,
        runtime=more_train_time,
        gpu=train_gpu,
        cpus_per_task=train_cpus,
        loader_workers=LOADER_WORKERS,
    shell:
        "CDGTMLL_JOB_GPUS={resources.gpu} CDGTMLL_THREADS={threads} CDGTMLL_LOADER_WORKERS={resources.loader_workers} python -m cdgtmll.train --data {input.data} --clean {input.clean} "
        "--spec {params.spec:q} --outdir {params.outdir} --progress 2> {log}"


# A deterministic method's run (common.smk ONCE_METHODS): one seed, ONCE_SEEDS, into the same run
# folder; its run spec says seeds: [s0] and deterministic: true (cdgtmll.config.plan.fit_seeds).
# Its log and benchmark (.once) are its own, so that the job logs tell its time from a train job's.


rule train_once:
    group:
        "run_{dataset}_{variant}_{method}"
    wildcard_constraints:
        method=ONCE_WILDCARD,
    input:
        data=variant_data,
        clean=lambda wc: base_data(wc.dataset),
    output:
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/predictions.npz", seed=ONCE_SEEDS),
        expand("results/runs/{{dataset}}/{{variant}}/{{method}}/seed{seed}/provenance.json", seed=ONCE_SEEDS),
    params:
        code=train_code,
        spec=spec_json,
        outdir=lambda wc, output: str(Path(output[0]).parent.parent),
    conda:
        ENV
    log:
        "logs/train/{dataset}/{variant}/{method}.once.log",
    benchmark:
        "logs/benchmarks/train/{dataset}/{variant}/{method}.once.tsv"
    threads: 1
    priority: job_priority("train")
    resources:
        mem_mb=8000,
        runtime=train_time,
        gpu=train_gpu,
        cpus_per_task=train_cpus,
        loader_workers=LOADER_WORKERS,
    shell:
        "CDGTMLL_JOB_GPUS={resources.gpu} CDGTMLL_THREADS={threads} CDGTMLL_LOADER_WORKERS={resources.loader_workers} python -m cdgtmll.train --data {input.data} --clean {input.clean} "
        "--spec {params.spec:q} --outdir {params.outdir} --progress 2> {log}"


ruleorder: train_once > train
