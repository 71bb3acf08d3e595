# Tables, the PR figure and the claims check from every run's metrics; what Snakemake's HTML
# report (`snakemake --report results/report.html`) shows of them (helpers: report_common.smk).


import shlex

from cdgtmll.tables.html import report_shell_word


include: "report_common.smk"


# Seconds each, from the runs' metrics: on a cluster they run in Snakemake's own process (the
# login node) instead of queueing as sbatch jobs (the figures: figures.smk).
localrules:
    tables,
    metrics_summary,
    figure_pr,
    claims_check,


FIGURES = ["figures/pr_tail.pdf", "figures/pr_tail.png", "figures/pr_tail.csv"] if pr_curve_enabled(config) else []
# `dvc metrics show`: one small file per (dataset, setting, method) with the headline metrics
METRIC_ROWS = sorted(
    dict.fromkeys(f"results/metrics/{d}/{variant_setting(v)}/{m}.json" for d, v, m in ALL_JOBS if (d, m) not in NOT_RUN)
)
# every run's files (`cdgtmll audit` follows them) are targets too: Snakemake re-makes a missing
# file only when a target needs it, so a file deleted by its reader as corrupt (cdgtmll.io) would
# otherwise stay missing once the tables are up to date
RUN_FILES = [
    f"{d}/{name}"
    for d in dict.fromkeys(str(Path(m).parent) for m in all_metrics())
    for name in ("predictions.npz", "provenance.json", "metrics.json", "metrics.provenance.json")
]
ALL_TARGETS = (
    TABLES
    + FIGURES
    + METRIC_ROWS
    + RUN_FILES
    + [
        "results/tables/metrics_full.csv",
        "results/tables/metrics_full.html",
        "results/metrics.json",
        "results/claims/claims_check.csv",
        "results/claims/claims_check.md",
        "results/claims/claims_check.html",
    ]
)


rule tables:
    # the paper's tables from the tables' own runs (MAIN_JOBS: never another's run), so that they
    # are written as soon as those runs are evaluated, before the studies' settings train
    # (priority); every run's summary: metrics_summary below
    input:
        metrics=all_metrics(MAIN_JOBS),
        # the n.r. footnotes name the shipped profiles that run a missing dataset or method
        shipped_profiles=sorted(str(p) for p in Path("config").glob("*.yaml")),
    output:
        tables=[table_output(t) for t in TABLES],
        # each table's lineage record (cdgtmll audit): removed with the tables when the job fails
        sources=[f"results/tables/{stem}{suffix}.sources.json" for stem in table_stems() for suffix in MODE_LABELS],
        profile="results/tables/profile.json",
    priority: PRIORITY["tables"]
    # params that carry a config's text (names, display names, reasons) are bash words through
    # report_shell_word: Snakemake's report embeds the params of a reported output's job in a
    # <script> unescaped, and formats {...} in a params string (cdgtmll.tables.html)
    params:
        code=code_of("cdgtmll.tables.build"),
        # tables_options(); a function: the profile file is also among the shipped profiles in
        # input (a string that names an input file is what --lint flags)
        options=lambda wc: shell_words(tables_options()),
    conda:
        ENV
    log:
        "logs/report/tables.log",
    benchmark:
        "logs/benchmarks/report/tables.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.tables.build --part tables --metrics {input.metrics} {params.options} "
        "--out results/tables > {log} 2>&1"


rule metrics_summary:
    # every run's metrics (the studies' settings too): the long table, the full metrics table,
    # the flat summary and the per-row files `dvc metrics show` reads
    input:
        metrics=all_metrics(),
        # after the tables: the two jobs never read a metrics.json at the same time (a corrupt one
        # is named and deleted by its first reader, cdgtmll.io)
        after="results/tables/profile.json",
    output:
        full="results/tables/metrics_full.csv",
        full_md="results/tables/metrics_full.md",
        full_html=reported("results/tables/metrics_full.html", "Metrics", "../report/metrics_full.rst"),
        long="results/tables/all_runs.csv",
        summary="results/metrics.json",
        rows=METRIC_ROWS,
    params:
        code=code_of("cdgtmll.tables.build"),
        options=lambda wc: shell_words(summary_options()),
    conda:
        ENV
    log:
        "logs/report/metrics_summary.log",
    benchmark:
        "logs/benchmarks/report/metrics_summary.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.tables.build --part summary --metrics {input.metrics} {params.options} "
        "--out results/tables --summary-json {output.summary} --summary-dir results/metrics > {log} 2>&1"


rule figure_pr:
    input:
        predictions=pr_inputs,
        clean=lambda wc: base_data(config["figures"]["pr_curve"]["dataset"]),
    output:
        pdf=reported("figures/pr_tail.pdf", category="Figures", caption="../report/pr_tail.rst"),
        png="figures/pr_tail.png",
        csv="figures/pr_tail.csv",
        sources="figures/pr_tail.sources.json",
    params:
        code=code_of("cdgtmll.figures.pr_curve"),
        q=config["r_variants"]["tail_fraction"],
        tie_seed=config["r_variants"]["tie_seed"],
        # the title (display name, R-variant, sampling seeds) comes from the inputs; the
        # style arguments are figures.smk's FIGURE_STYLE (read when the DAG is built)
        style=lambda wc: FIGURE_STYLE,
        # figures.pr_curve.highlight: in colour; the run's other methods grey (None: all in colour)
        highlight=lambda wc: (
            "" if (h := pr_highlight(config)) is None else "--highlight " + " ".join(map(report_shell_word, h))
        ),
        # configured methods that cannot run on the figure's dataset: named under the legend
        no_runs=lambda wc: " ".join(
            f"--no-runs {report_shell_word(f'{m}={r}')}"
            for (d, m), r in NOT_RUN.items()
            if d == config["figures"]["pr_curve"]["dataset"]
        ),
        out=lambda wc, output: str(Path(output.pdf).with_suffix("")),
    conda:
        ENV
    log:
        "logs/report/figure_pr.log",
    benchmark:
        "logs/benchmarks/report/figure_pr.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.figures.pr_curve pr --predictions {input.predictions} --clean {input.clean} "
        "--q {params.q} --tie-seed {params.tie_seed} --out {params.out} {params.style} {params.highlight} {params.no_runs} "
        "> {log} 2>&1"


rule claims_check:
    # The paper's reported numbers (src/cdgtmll/claims/paper_claims.csv, each with its place in
    # the paper) against this configuration's runs. Claims on datasets or methods not run are
    # listed as "not checked", never as passed or failed.
    input:
        runs="results/tables/all_runs.csv",
        # claims_figures(); functions: RANKS is defined in figures.smk, read when the DAG is built
        pr=lambda wc: claims_figures()["--pr-csv"],
        spec=lambda wc: claims_figures()["--spec-csv"],
        ranks=lambda wc: claims_figures()["--ranks-md"],
    output:
        csv="results/claims/claims_check.csv",
        md="results/claims/claims_check.md",
        html=reported(
            "results/claims/claims_check.html",
            "Claims",
            "../report/claims.rst",
            labels={"check": "Paper claims vs. reproduced runs", **PRODUCED_BY},
        ),
    params:
        code=code_of("cdgtmll.claims.check"),
        figures=lambda wc: shell_words(w for opt, files in claims_figures().items() if files for w in (opt, files[0])),
        options=shell_words(claims_options()),
    conda:
        ENV
    log:
        "logs/report/claims_check.log",
    benchmark:
        "logs/benchmarks/report/claims_check.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.claims.check --runs {input.runs} {params.figures} {params.options} "
        "--out results/claims/claims_check > {log} 2>&1"
