# Tables (and, with later rules, figures) from every run's metrics.
from cdgtmll.config import variant_setting

TABLES = [
    f"results/tables/{stem}{suffix}.{ext}"
    for stem in ("table1_standard", "table2_rare")
    for suffix in ("", "_adaptive")
    for ext in ("csv", "md", "tex")
]
FIGURES = ["figures/pr_tail.pdf", "figures/pr_tail.png", "figures/pr_tail.csv"] if pr_curve_enabled(config) else []
# `dvc metrics show`: one small file per (dataset, setting, method) with the headline metrics
METRIC_ROWS = sorted(
    dict.fromkeys(
        f"results/metrics/{d}/{variant_setting(v)}/{m}.json" for d, v, m in ALL_JOBS if (d, m) not in NOT_RUN
    )
)
ALL_TARGETS = TABLES + FIGURES + METRIC_ROWS + [
    "results/tables/metrics_full.csv",
    "results/metrics.json",
    "results/claims/claims_check.csv",
    "results/claims/claims_check.md",
]


rule tables:
    input:
        all_metrics(),
    output:
        tables=[report(t, category="Tables", caption="../report/tables.rst") if t.endswith(".md") else t for t in TABLES],
        full="results/tables/metrics_full.csv",
        long="results/tables/all_runs.csv",
        summary="results/metrics.json",
        rows=METRIC_ROWS,
    params:
        methods=" ".join(f"'{m}'" for m in METHODS),
        not_run=" ".join(f"--not-run '{d}|{m}|{r}'" for (d, m), r in NOT_RUN.items()),
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
        "--threshold {params.threshold} {params.not_run} --out results/tables --summary-json {output.summary} --summary-dir results/metrics > {log} 2>&1"


rule figure_pr:
    input:
        predictions=pr_inputs,
        clean=lambda wc: base_data(config["figures"]["pr_curve"]["dataset"]),
    output:
        pdf=report("figures/pr_tail.pdf", category="Figures", caption="../report/pr_tail.rst"),
        png="figures/pr_tail.png",
        csv="figures/pr_tail.csv",
    params:
        q=config["r_variants"]["tail_fraction"],
        tie_seed=config["r_variants"]["tie_seed"],
        title=lambda wc: "{}-R @{:.0f}%: tail-label PR".format(
            config["figures"]["pr_curve"]["dataset"], 100 * config["figures"]["pr_curve"]["severity"]
        ),
        out=lambda wc, output: str(Path(output.pdf).with_suffix("")),
    conda:
        ENV
    log:
        "logs/report/figure_pr.log",
    benchmark:
        "benchmarks/out/report/figure_pr.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.figures pr --predictions {input.predictions} --clean {input.clean} "
        "--q {params.q} --tie-seed {params.tie_seed} --title '{params.title}' --out {params.out} > {log} 2>&1"


rule claims_check:
    # The paper's reported numbers (src/cdgtmll/claims/paper_claims.csv, each with its place in
    # the paper) against this configuration's runs. Claims on datasets or methods not run are
    # listed as "not checked", never as passed or failed.
    input:
        runs="results/tables/all_runs.csv",
        pr=[f for f in FIGURES if f.endswith(".csv")],
        spec=["figures/specialization.csv"] if "diagnostics" in config.get("studies", {}) else [],
    output:
        csv="results/claims/claims_check.csv",
        md=report("results/claims/claims_check.md", category="Claims", caption="../report/claims.rst"),
    params:
        pr=lambda wc, input: f"--pr-csv {input.pr[0]}" if input.pr else "",
        spec=lambda wc, input: f"--spec-csv {input.spec[0]}" if input.spec else "",
    conda:
        ENV
    log:
        "logs/report/claims_check.log",
    benchmark:
        "benchmarks/out/report/claims_check.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.claims.check --runs {input.runs} {params.pr} {params.spec} --out results/claims/claims_check > {log} 2>&1"
