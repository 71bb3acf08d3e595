# Acquisition (mirror -> packaged copy -> official URL, sha256-verified) and the processed format.


rule prepare_dataset:
    output:
        "results/data/{dataset}/processed.npz",
    params:
        raw=RAW,
        mirror=lambda wc: config["data"]["mirror"] or "",
        download="" if config["data"]["allow_download"] else "--no-download",
        val_fraction=config["data"]["val_fraction"],
        split_seed=config["data"]["split_seed"],
        options=lambda wc: (
            f"--loader-options '{json.dumps(config['data']['loader_options'][wc.dataset], sort_keys=True)}'"
            if wc.dataset in config["data"]["loader_options"]
            else ""
        ),
        custom=lambda wc: (
            f"--dataset-config '{json.dumps(config['data']['custom'][wc.dataset], sort_keys=True)}'"
            if wc.dataset in config["data"]["custom"]
            else ""
        ),
    conda:
        ENV
    log:
        "logs/prepare/{dataset}.log",
    benchmark:
        "benchmarks/out/prepare/{dataset}.tsv"
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "python -m cdgtmll.data.prepare --dataset {wildcards.dataset} --raw-dir {params.raw} "
        "--out {output} --mirror '{params.mirror}' {params.download} "
        "--val-fraction {params.val_fraction} --split-seed {params.split_seed} "
        "{params.custom} {params.options} > {log} 2>&1"


rule data_all:
    input:
        [processed(d) for d in ALL_DATASETS],
        sorted({f"results/data/{d}/variants/{v}.npz" for d, v, _ in ALL_JOBS if v != CLEAN}),
