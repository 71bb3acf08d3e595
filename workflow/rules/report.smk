# Tables (and, with later rules, figures) from every run's metrics.

TABLES = [
    f"results/tables/{stem}{suffix}.{ext}"
    for stem in ("table1_standard", "table2_rare")
    for suffix in ("", "_adaptive")
    for ext in ("csv", "md", "tex")
]
ALL_TARGETS = TABLES + ["results/tables/metrics_full.csv", "results/metrics.json"]


rule tables:
    input:
        all_metrics(),
    output:
        tables=[report(t, category="Tables", caption="../report/tables.rst") if t.endswith(".md") else t for t in TABLES],
        full="results/tables/metrics_full.csv",
        long="results/tables/all_runs.csv",
        summary="results/metrics.json",
    params:
        methods=" ".join(f"'{m}'" for m in METHODS),
        threshold=config["thresholds"]["global"],
    conda:
        ENV
    log:
        "logs/report/tables.log",
    benchmark:
        "benchmarks/out/report/tables.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.tables --metrics {input} --methods {params.methods} "
        "--threshold {params.threshold} --out results/tables --summary-json {output.summary} > {log} 2>&1"
