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
    for name in ("predictions.npz", "provenance.json", "metrics.json")
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
        methods=" ".join(map(report_shell_word, METHODS)),
        not_run=" ".join(f"--not-run {report_shell_word(f'{d}|{m}|{r}')}" for (d, m), r in NOT_RUN.items()),
        threshold=config["thresholds"]["global"],
        # when a column cannot separate methods (no marks, a footnote): tables.min_ceiling, min_tail_labels
        min_ceiling=config["tables"]["min_ceiling"],
        min_tail_labels=config["tables"]["min_tail_labels"],
        # the columns of table{1,2,3}_configured: every configured dataset with its title, and
        # its configured R-variant severities
        datasets=" ".join(
            report_shell_word(f"{d}={get_spec(d, config['data']['custom']).display_name}") for d in DATASETS
        ),
        severities=" ".join(
            "--severities "
            + report_shell_word(
                "{}={}".format(
                    d,
                    (
                        ",".join(str(s) for s in config["r_variants"]["severities"].get(d, []))
                        if config["experiments"].get("r_variants", True)
                        else ""
                    ),
                )
            )
            for d in DATASETS
        ),
        profile=report_shell_word(config["name"]),
        # a function: the file is also among the shipped profiles in input (a string that names an
        # input file is what --lint flags)
        profile_file=lambda wc: " ".join(map(report_shell_word, configfile_names())) or "config/config.yaml",
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
        "python -m cdgtmll.tables.build --part tables --metrics {input.metrics} --methods {params.methods} "
        "--threshold {params.threshold} {params.not_run} --datasets {params.datasets} {params.severities} "
        "--min-ceiling {params.min_ceiling} --min-tail-labels {params.min_tail_labels} "
        "--profile {params.profile} --profile-file {params.profile_file} --out results/tables > {log} 2>&1"


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
        # the settings that share another's run (common.smk RUN_OF): rows of their own in all_runs.csv
        aliases=alias_args(),
        profile=report_shell_word(config["name"]),
        profile_file=lambda wc: " ".join(map(report_shell_word, configfile_names())) or "config/config.yaml",
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
        "python -m cdgtmll.tables.build --part summary --metrics {input.metrics} {params.aliases} "
        "--profile {params.profile} --profile-file {params.profile_file} --out results/tables "
        "--summary-json {output.summary} --summary-dir results/metrics > {log} 2>&1"


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
        pr=[f for f in FIGURES if f.endswith(".csv")],
        spec=["figures/specialization.csv"] if "diagnostics" in config.get("studies", {}) else [],
        # average ranks across datasets (rule figure_ranks, figures.smk: two or more datasets)
        ranks=lambda wc: ["results/claims/ranks.md"] if RANKS else [],
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
        pr=lambda wc, input: f"--pr-csv {input.pr[0]}" if input.pr else "",
        spec=lambda wc, input: f"--spec-csv {input.spec[0]}" if input.spec else "",
        ranks=lambda wc, input: f"--ranks-md {input.ranks[0]}" if input.ranks else "",
        # the config's claims: section (cdgtmll.claims.verdict.ClaimSettings)
        claims=" ".join(f"--{k.replace('_', '-')} {float(v):g}" for k, v in sorted(config.get("claims", {}).items())),
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
        "python -m cdgtmll.claims.check --runs {input.runs} {params.pr} {params.spec} {params.ranks} {params.claims} "
        "--out results/claims/claims_check > {log} 2>&1"
