# The paper's figures from the studies' runs (Sec. 5.3-5.4). Each writes PDF, PNG (300 dpi),
# the CSV behind it and a .sources.json for `cdgtmll audit` (declared: removed with the figure
# when its job fails).
from cdgtmll.config.plan import study_under
from cdgtmll.figures.style import style_cli_args
from cdgtmll.tables.html import report_shell_word

# The same --style-order/--dataset-name for every figure (figure_pr in report.smk too): the
# config's aliases get the same colour in every figure, custom datasets their display name.
FIGURE_STYLE = style_cli_args(config)


# Seconds each, from files already made: on a cluster they run in Snakemake's own process (the
# login node) instead of queueing as sbatch jobs (tables, figure_pr, claims_check: report.smk).
localrules:
    figure_ablation,
    figure_robustness,
    figure_sensitivity,
    figure_diagnostics,
    study_readings,
    figure_ranks,


STUDIES = config.get("studies", {})


# --under <reading>... of a study run under other readings too (studies.<study>.under): its
# figure shows a panel (column) per reading; empty for a study without
UNDER_ARGS = {
    s: " ".join(["--under", *map(shlex.quote, study_under(config, s))]) if study_under(config, s) else ""
    for s in STUDIES
}

STUDY_FIGURES = {
    "ablation": ["figures/ablation"],
    "noise": ["figures/robustness_noise"],
    "occlusion": ["figures/robustness_occlusion"],
    "alpha": ["figures/sensitivity_alpha"],
    "players": ["figures/sensitivity_players"],
    "diagnostics": [
        "figures/specialization",
        "figures/player_ranks_heatmap",
        "figures/player_ranks_shares",
        "figures/potential",
    ],
}
FIGURE_TARGETS = [
    f"{stem}.{ext}" for s in STUDIES for stem in STUDY_FIGURES.get(s, []) for ext in ("pdf", "png", "csv")
]
# the readings study is a table, not a figure: it goes with the tables (results/tables/readings.md)
FIGURE_TARGETS += ["results/tables/readings.csv", "results/tables/readings.md"] if "readings" in STUDIES else []
# across datasets: average ranks, Friedman, Holm-corrected Wilcoxon pairs and the
# critical-difference diagram, when the profile runs two or more datasets
RANKS = len(DATASETS) >= 2
FIGURE_TARGETS += (
    [f"figures/cd_diagram.{ext}" for ext in ("pdf", "png", "csv")]
    + ["results/claims/ranks.csv", "results/claims/ranks.md"]
    if RANKS
    else []
)


rule figure_ablation:
    input:
        lambda wc: study_metrics("ablation"),
    output:
        pdf=reported("figures/ablation.pdf", category="Figures", caption="../report/ablation.rst"),
        png="figures/ablation.png",
        csv="figures/ablation.csv",
        sources="figures/ablation.sources.json",
    params:
        code=code_of("cdgtmll.figures.studies.build"),
        runs=lambda wc: " ".join(f"'{d}'" for d in study_seed_dirs("ablation")),
        aliases=lambda wc: study_alias_args("ablation"),
        full=STUDIES.get("ablation", {}).get("full", "CD-GTMLL"),
        order=" ".join(f"'{m}'" for m in STUDIES.get("ablation", {}).get("methods", [])),
        under=UNDER_ARGS.get("ablation", ""),
        style=FIGURE_STYLE,
    conda:
        ENV
    log:
        "logs/figures/ablation.log",
    benchmark:
        "logs/benchmarks/figures/ablation.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.figures.studies.build ablation --runs {params.runs} {params.aliases} --full {params.full:q} "
        "--order {params.order} {params.under} --out figures/ablation {params.style} > {log} 2>&1"


rule figure_robustness:
    input:
        lambda wc: study_metrics(wc.kind),
    output:
        pdf=reported("figures/robustness_{kind}.pdf", category="Figures", caption="../report/robustness.rst"),
        png="figures/robustness_{kind}.png",
        csv="figures/robustness_{kind}.csv",
        sources="figures/robustness_{kind}.sources.json",
    wildcard_constraints:
        kind="noise|occlusion",
    params:
        code=code_of("cdgtmll.figures.studies.build"),
        runs=lambda wc: " ".join(f"'{d}'" for d in study_seed_dirs(wc.kind)),
        aliases=lambda wc: study_alias_args(wc.kind),
        style=FIGURE_STYLE,
    conda:
        ENV
    log:
        "logs/figures/robustness_{kind}.log",
    benchmark:
        "logs/benchmarks/figures/robustness_{kind}.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.figures.studies.build robustness --kind {wildcards.kind} --runs {params.runs} {params.aliases} "
        "--out figures/robustness_{wildcards.kind} {params.style} > {log} 2>&1"


rule figure_sensitivity:
    input:
        lambda wc: study_metrics(wc.study),
    output:
        pdf=reported("figures/sensitivity_{study}.pdf", category="Figures", caption="../report/sensitivity.rst"),
        png="figures/sensitivity_{study}.png",
        csv="figures/sensitivity_{study}.csv",
        sources="figures/sensitivity_{study}.sources.json",
    wildcard_constraints:
        study="alpha|players",
    params:
        code=code_of("cdgtmll.figures.studies.build"),
        runs=lambda wc: " ".join(f"'{d}'" for d in study_seed_dirs(wc.study)),
        aliases=lambda wc: study_alias_args(wc.study),
        param=lambda wc: {"alpha": "alpha", "players": "n_players"}[wc.study],
        metrics=lambda wc: "rare_f1" if wc.study == "alpha" else "mAP rare_f1",
        under=lambda wc: UNDER_ARGS.get(wc.study, ""),
        style=FIGURE_STYLE,
    conda:
        ENV
    log:
        "logs/figures/sensitivity_{study}.log",
    benchmark:
        "logs/benchmarks/figures/sensitivity_{study}.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.figures.studies.build sweep --param {params.param} --metrics {params.metrics} "
        "--runs {params.runs} {params.aliases} {params.under} --out figures/sensitivity_{wildcards.study} "
        "{params.style} > {log} 2>&1"


rule figure_diagnostics:
    input:
        lambda wc: study_metrics("diagnostics"),
    output:
        spec=reported("figures/specialization.pdf", category="Figures", caption="../report/specialization.rst"),
        spec_png="figures/specialization.png",
        spec_csv="figures/specialization.csv",
        spec_sources="figures/specialization.sources.json",
        heat=reported("figures/player_ranks_heatmap.pdf", category="Figures", caption="../report/ranks.rst"),
        heat_png="figures/player_ranks_heatmap.png",
        heat_csv="figures/player_ranks_heatmap.csv",
        heat_sources="figures/player_ranks_heatmap.sources.json",
        shares=reported("figures/player_ranks_shares.pdf", category="Figures", caption="../report/ranks.rst"),
        shares_png="figures/player_ranks_shares.png",
        shares_csv="figures/player_ranks_shares.csv",
        shares_sources="figures/player_ranks_shares.sources.json",
        coverage_csv="figures/player_ranks_coverage.csv",
        roles_csv="figures/player_ranks_roles.csv",
        phi=reported("figures/potential.pdf", category="Figures", caption="../report/potential.rst"),
        phi_png="figures/potential.png",
        phi_csv="figures/potential.csv",
        phi_sources="figures/potential.sources.json",
    params:
        code=code_of("cdgtmll.figures.studies.build"),
        runs=lambda wc: " ".join(f"'{d}'" for d in study_seed_dirs("diagnostics")),
        aliases=lambda wc: study_alias_args("diagnostics"),
        q=config["r_variants"]["tail_fraction"],
        tie_seed=config["r_variants"]["tie_seed"],
        style=FIGURE_STYLE,
    conda:
        ENV
    log:
        "logs/figures/diagnostics.log",
    benchmark:
        "logs/benchmarks/figures/diagnostics.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "(python -m cdgtmll.figures.studies.build specialization --runs {params.runs} {params.aliases} --out figures/specialization "
        "{params.style} && "
        "python -m cdgtmll.figures.studies.build ranks --runs {params.runs} {params.aliases} --tail-fraction {params.q} "
        "--tie-seed {params.tie_seed} --out figures/player_ranks {params.style} && "
        "python -m cdgtmll.figures.studies.build potential --runs {params.runs} {params.aliases} --out figures/potential "
        "{params.style}) > {log} 2>&1"


rule study_readings:
    # CD-GTMLL under each open reading of the paper, one change at a time (docs/methods.md), with
    # the effect its seeds detect and the seeds that would detect claims.equivalence_margin; a
    # clip_scope reading reads each seed's train_log.csv and grad_norms.npy (is the clip engaged?),
    # files of the train job that no rule names: its provenance.json, rewritten with them, stands for them
    input:
        metrics=lambda wc: study_metrics("readings"),
        provenance=lambda wc: [f"{Path(m).parent}/provenance.json" for m in study_metrics("readings")],
    output:
        csv="results/tables/readings.csv",
        md="results/tables/readings.md",
        sources="results/tables/readings.sources.json",
    params:
        code=code_of("cdgtmll.figures.studies.readings"),
        runs=lambda wc: " ".join(shlex.quote(d) for d in study_seed_dirs("readings")),
        aliases=lambda wc: study_alias_args("readings"),
        method=STUDIES.get("readings", {}).get("method", "CD-GTMLL"),
        reference=STUDIES.get("readings", {}).get("reference", "BCE") or "",
        alpha=config["claims"]["alpha"],
        power=config["claims"]["power"],
        margin=config["claims"]["equivalence_margin"],
    conda:
        ENV
    log:
        "logs/figures/readings.log",
    benchmark:
        "logs/benchmarks/figures/readings.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.figures.studies.readings --runs {params.runs} {params.aliases} --method {params.method:q} "
        "--reference {params.reference:q} --alpha {params.alpha} --power {params.power} --margin {params.margin} "
        "--out results/tables/readings > {log} 2>&1"


rule figure_ranks:
    # the methods ranked across the profile's datasets (clean setting, mean over seeds), from
    # every run's row of all_runs.csv; results/claims/ranks.md is the claims page's section
    input:
        runs="results/tables/all_runs.csv",
    output:
        pdf=reported("figures/cd_diagram.pdf", category="Figures", caption="../report/cd_diagram.rst"),
        png="figures/cd_diagram.png",
        csv="figures/cd_diagram.csv",
        sources="figures/cd_diagram.sources.json",
        ranks_csv="results/claims/ranks.csv",
        ranks_md="results/claims/ranks.md",
    params:
        code=code_of("cdgtmll.figures.cd_diagram"),
        datasets=" ".join(map(report_shell_word, DATASETS)),
        methods=" ".join(map(report_shell_word, METHODS)),
        not_run=" ".join(
            f"--not-run {report_shell_word(f'{d}|{m}|{r}')}" for (d, m), r in NOT_RUN.items() if d in DATASETS
        ),
        style=FIGURE_STYLE,
    conda:
        ENV
    log:
        "logs/figures/cd_diagram.log",
    benchmark:
        "logs/benchmarks/figures/cd_diagram.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "python -m cdgtmll.figures.cd_diagram --runs {input.runs} --datasets {params.datasets} "
        "--methods {params.methods} {params.not_run} --out figures/cd_diagram --ranks-out results/claims/ranks "
        "{params.style} > {log} 2>&1"
