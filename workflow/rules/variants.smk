# R-variants (App. E.3): down-sample tail positives of the training split only.
from cdgtmll.variants.naming import parse_noise, parse_occlusion, parse_variant


rule r_variant:
    wildcard_constraints:
        variant=r"R[0-9.]+-s[0-9]+",
    group:
        "data_{dataset}"
    input:
        lambda wc: base_data(wc.dataset),
    output:
        data="results/data/{dataset}/variants/{variant}.npz",
        bookkeeping="results/data/{dataset}/variants/{variant}.json",
    params:
        code=code_of("cdgtmll.variants.r_variant"),
        severity=lambda wc: parse_variant(wc.variant)[0],
        sampling_seed=lambda wc: parse_variant(wc.variant)[1],
        q=config["r_variants"]["tail_fraction"],
        tie_seed=config["r_variants"]["tie_seed"],
    conda:
        ENV
    log:
        "logs/variants/{dataset}/{variant}.log",
    benchmark:
        "logs/benchmarks/variants/{dataset}/{variant}.tsv"
    priority: PRIORITY["data"]
    resources:
        mem_mb=4000,
        runtime=10,
    shell:
        "python -m cdgtmll.variants.r_variant --in {input} --severity {params.severity} "
        "--sampling-seed {params.sampling_seed} --q {params.q} --tie-seed {params.tie_seed} "
        "--out {output.data} --bookkeeping {output.bookkeeping} > {log} 2>&1"


rule noise_variant:
    # Label noise (Sec. 5.3 "Noise-rho"): each training positive flipped to 0 with prob. rho.
    wildcard_constraints:
        variant=r"N[0-9.]+-s[0-9]+",
    group:
        "data_{dataset}"
    input:
        lambda wc: base_data(wc.dataset),
    output:
        data="results/data/{dataset}/variants/{variant}.npz",
        bookkeeping="results/data/{dataset}/variants/{variant}.json",
    params:
        code=code_of("cdgtmll.variants.noise"),
        rate=lambda wc: parse_noise(wc.variant)[0],
        seed=lambda wc: parse_noise(wc.variant)[1],
    conda:
        ENV
    log:
        "logs/variants/{dataset}/{variant}.log",
    benchmark:
        "logs/benchmarks/variants/{dataset}/{variant}.tsv"
    priority: PRIORITY["data"]
    resources:
        mem_mb=4000,
        runtime=10,
    shell:
        "python -m cdgtmll.variants.noise --in {input} --rate {params.rate} --seed {params.seed} "
        "--out {output.data} --bookkeeping {output.bookkeeping} > {log} 2>&1"


rule occlusion_variant:
    # Occluded training images (Sec. 5.3 "Occ-gamma"): a fixed k x k black patch per training
    # image, pasted when the image is decoded; labels, validation and test images unchanged.
    wildcard_constraints:
        variant=r"O[0-9.]+-s[0-9]+",
    group:
        "data_{dataset}"
    input:
        lambda wc: processed(wc.dataset),
    output:
        data="results/data/{dataset}/variants/{variant}.npz",
        bookkeeping="results/data/{dataset}/variants/{variant}.json",
    params:
        code=code_of("cdgtmll.variants.occlusion"),
        gamma=lambda wc: parse_occlusion(wc.variant)[0],
        seed=lambda wc: parse_occlusion(wc.variant)[1],
    conda:
        ENV
    log:
        "logs/variants/{dataset}/{variant}.log",
    benchmark:
        "logs/benchmarks/variants/{dataset}/{variant}.tsv"
    priority: PRIORITY["data"]
    resources:
        mem_mb=4000,
        runtime=10,
    shell:
        "python -m cdgtmll.variants.occlusion --in {input} --gamma {params.gamma} --seed {params.seed} "
        "--out {output.data} --bookkeeping {output.bookkeeping} > {log} 2>&1"
