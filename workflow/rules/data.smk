# Acquisition (mirror -> packaged copy -> official URL, sha256-verified) and the processed format.


rule prepare_dataset:
    # No inputs: the raw data is known by content (params.sources, common.smk prepare_identity),
    # not by the path of a mirror file.
    group:
        "data_{dataset}"
    output:
        "results/data/{dataset}/processed.npz",
    params:
        code=code_of("cdgtmll.data.prepare"),
        raw=RAW,
        sources=prepare_identity,
        download="" if config["data"]["allow_download"] else "--no-download",
        val_fraction=config["data"]["val_fraction"],
        split_seed=config["data"]["split_seed"],
        min_split_rows=config["data"]["min_split_rows"],
        # JSON values as single shell words ({params.x:q} quotes each element): a quote, $, a
        # backtick or a newline in a display name or a path stays data, never shell syntax.
        options=lambda wc: (
            ["--loader-options", json.dumps(config["data"]["loader_options"][wc.dataset], sort_keys=True)]
            if wc.dataset in config["data"]["loader_options"]
            else []
        ),
        # without display_name and notes (cdgtmll.data.registry.data_config): text for people
        # re-runs only the tables and figures that print it
        custom=lambda wc: (
            ["--dataset-config", json.dumps(data_config(config["data"]["custom"][wc.dataset]), sort_keys=True)]
            if wc.dataset in config["data"]["custom"]
            else []
        ),
    conda:
        ENV
    log:
        "logs/prepare/{dataset}.log",
    benchmark:
        "logs/benchmarks/prepare/{dataset}.tsv"
    priority: PRIORITY["data"]
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "python -m cdgtmll.data.prepare --dataset {wildcards.dataset} --raw-dir {params.raw} "
        "--out {output} {params.download} "
        "--val-fraction {params.val_fraction} --split-seed {params.split_seed} --min-split-rows {params.min_split_rows} "
        "{params.custom:q} {params.options:q} --code {params.code} --log-path {log:q} > {log} 2>&1"


IMG = config["image_backbone"]
FEATURE_ARGS = (
    f"--image-size {IMG['image_size']} --batch-size {IMG['batch_size']} --workers {IMG['workers']} "
    + (
        "--no-pretrained"
        if not IMG["pretrained"]
        else (f"--weights {shlex.quote(IMG['weights'])}" if IMG["weights"] else "")
    )
    + f" --seed {IMG['init_seed']} --device {config['experiments']['device']}"
)


rule extract_features:
    # Frozen ResNet-50 features of an image dataset (image_backbone.mode frozen), once per dataset.
    group:
        "data_{dataset}"
    input:
        "results/data/{dataset}/processed.npz",
    output:
        "results/data/{dataset}/features.npz",
    params:
        code=code_of("cdgtmll.images.features"),
        args=FEATURE_ARGS,
    conda:
        ENV
    log:
        "logs/prepare/{dataset}.features.log",
    benchmark:
        "logs/benchmarks/prepare/{dataset}.features.tsv"
    threads: 2
    priority: PRIORITY["data"]
    resources:
        mem_mb=16000,
        runtime=600,
        gpu=FEATURE_GPUS,
        cpus_per_task=FEATURE_CPUS,  # the DataLoader workers get their own cores on a cluster
    shell:
        "python -m cdgtmll.images.features --in {input} --out {output} {params.args} > {log} 2>&1"


rule extract_features_occluded:
    # Frozen features of an occlusion variant: training images occluded, the rest clean.
    wildcard_constraints:
        variant=r"O[0-9.]+-s[0-9]+",
    group:
        "data_{dataset}"
    input:
        "results/data/{dataset}/variants/{variant}.npz",
    output:
        "results/data/{dataset}/variants/{variant}.features.npz",
    params:
        code=code_of("cdgtmll.images.features"),
        args=FEATURE_ARGS,
    conda:
        ENV
    log:
        "logs/variants/{dataset}/{variant}.features.log",
    benchmark:
        "logs/benchmarks/variants/{dataset}/{variant}.features.tsv"
    threads: 2
    priority: PRIORITY["data"]
    resources:
        mem_mb=16000,
        runtime=600,
        gpu=FEATURE_GPUS,
        cpus_per_task=FEATURE_CPUS,  # the DataLoader workers get their own cores on a cluster
    shell:
        "python -m cdgtmll.images.features --in {input} --out {output} {params.args} > {log} 2>&1"


# `make all` prepares every dataset first (--keep-going): one whose data fails leaves its reason
# (cdgtmll.data.availability), and the main run then leaves it out instead of stopping at it.
rule datasets:
    input:
        [processed(d) for d in ALL_DATASETS if d not in UNAVAILABLE],


rule data_all:
    input:
        [base_data(d) for d in ALL_DATASETS if d not in UNAVAILABLE],
        sorted({variant_file(d, v) for d, v, _ in ALL_JOBS if v != CLEAN and d not in UNAVAILABLE}),
