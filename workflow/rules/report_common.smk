# Helpers of report.smk (and figures.smk): which outputs Snakemake's HTML report shows
# (`snakemake --report results/report.html`), with which labels, and the tables' file list.
import os
import re
import shlex

from snakemake.io import regex_from_filepattern
from snakemake.logging import logger

from cdgtmll.variants.naming import variant_setting
from cdgtmll.data.registry import get_spec
from cdgtmll.tables.html import report_label
from cdgtmll.tables.layout import table_stems
from cdgtmll.tables.partial import PARTIAL_DIR, PLAN, refresh_soon, remove_partial, write_plan


def reported(path, category, caption, **kwargs):
    """``path`` marked for the report when it exists now, else plain. `snakemake --report`
    parses the workflow again and reports the outputs of the DAG of *its* config; flagging
    only files that are there lets it report what a run of another profile (or a partial
    run) left, instead of failing on the first output that run never made. A pattern with
    wildcards is marked when every target of this config that it matches exists."""
    if "{" in path:
        rx = re.compile(regex_from_filepattern(path))
        wanted = [t for t in ALL_TARGETS + globals().get("FIGURE_TARGETS", []) if rx.match(t)]
        present = bool(wanted) and all(os.path.exists(t) for t in wanted)
    else:
        present = os.path.exists(path)
    return report(path, category=category, caption=caption, **kwargs) if present else path


def _produced_by():
    """The profile recorded by the last `tables` job (results/tables/profile.json), when it
    differs from this config's: the report then labels its tables with it and warns."""
    try:
        with open("results/tables/profile.json") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return {}
    name, files = rec.get("profile") or "", rec.get("configfiles") or []
    if not name or name == config["name"]:
        return {}
    # a label is embedded in the report's <script> as plain JSON (cdgtmll.tables.html.report_label)
    return {"produced by profile": report_label(name + (f" ({', '.join(files)})" if files else ""))}


PRODUCED_BY = _produced_by()


def configfile_names():
    """The --configfile paths of this invocation, relative to the workflow when inside it (so
    that the tables' stamp is the same in every clone)."""
    root = Path(workflow.basedir).resolve()
    paths = [Path(f).resolve() for f in workflow.overwrite_configfiles]
    return [str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in paths]


# labels of the report's Tables entries; the list is sorted by them ("as" before "configured"),
# and the threshold mode is a toggle above it (first value: global)
TABLE_TITLES = {
    "table1_standard": "Table 1 (as in the paper)",
    "table2_rare": "Table 2 (as in the paper)",
    "table3_xmc": "Table 3 (as in the paper)",
    "table1_configured": "Table 1 (configured datasets)",
    "table2_configured": "Table 2 (configured datasets)",
    "table3_configured": "Table 3 (configured datasets)",
}
MODE_LABELS = {"": f"global {config['thresholds']['global']}", "_adaptive": "label-adaptive"}
TABLES = [
    f"results/tables/{stem}{suffix}.{ext}"
    for stem in table_stems()
    for suffix in MODE_LABELS
    for ext in ("csv", "md", "tex", "html")
]


def table_output(path):
    """A table file; its HTML page is in the report, labelled with the table and the mode."""
    if not path.endswith(".html"):
        return path
    stem = os.path.basename(path)[: -len(".html")]
    suffix = "_adaptive" if stem.endswith("_adaptive") else ""
    labels = {"table": TABLE_TITLES[stem[: len(stem) - len(suffix)]], "thresholds": MODE_LABELS[suffix]}
    return reported(path, "Tables", "../report/tables.rst", labels={**labels, **PRODUCED_BY})


# The options of report.smk's rules tables, metrics_summary and claims_check, as raw words: the rules quote them for bash
# (report_shell_word), the partial results' plan (partial_onstart) keeps them as they are.


def shell_words(words):
    """Words as one bash string: each through report_shell_word (params that carry a config's text
    are embedded in Snakemake's report, cdgtmll.tables.html)."""
    return " ".join(map(report_shell_word, words))


def profile_options():
    """--profile and --profile-file: the config's name and the --configfile paths of this invocation."""
    return ["--profile", config["name"], "--profile-file", *(configfile_names() or ["config/config.yaml"])]


def tables_options():
    """The options of `python -m cdgtmll.tables.build --part tables` besides --metrics and --out."""
    severities = {
        d: (
            ",".join(str(s) for s in config["r_variants"]["severities"].get(d, []))
            if config["experiments"].get("r_variants", True)
            else ""
        )
        for d in DATASETS
    }
    return [
        "--methods",
        *METHODS,
        "--threshold",
        str(config["thresholds"]["global"]),
        *[w for (d, m), r in NOT_RUN.items() for w in ("--not-run", f"{d}|{m}|{r}")],
        # the columns of table{1,2,3}_configured: every configured dataset with its title, and
        # its configured R-variant severities
        "--datasets",
        *[f"{d}={get_spec(d, config['data']['custom']).display_name}" for d in DATASETS],
        *[w for d in DATASETS for w in ("--severities", f"{d}={severities[d]}")],
        # when a column cannot separate methods (no marks, a footnote): tables.min_ceiling, min_tail_labels
        "--min-ceiling",
        str(config["tables"]["min_ceiling"]),
        "--min-tail-labels",
        str(config["tables"]["min_tail_labels"]),
        *profile_options(),
    ]


def summary_options():
    """The options of `python -m cdgtmll.tables.build --part summary` besides --metrics, --out
    and the summary files: the settings that share another's run (common.smk RUN_OF) get rows of
    their own in all_runs.csv."""
    return [*alias_words(), *profile_options()]


def claims_options():
    """The config's claims: section (cdgtmll.claims.verdict.ClaimSettings) as options of
    `python -m cdgtmll.claims.check`."""
    return [
        w for k, v in sorted(config.get("claims", {}).items()) for w in (f"--{k.replace('_', '-')}", f"{float(v):g}")
    ]


def claims_figures():
    """{option: [file]} of the claims check's figure inputs (the first file of each is given)."""
    return {
        "--pr-csv": [f for f in FIGURES if f.endswith(".csv")],
        "--spec-csv": ["figures/specialization.csv"] if "diagnostics" in config.get("studies", {}) else [],
        # average ranks across datasets (figures.smk, figure_ranks; two or more datasets)
        "--ranks-md": ["results/claims/ranks.md"] if RANKS else [],
    }


def partial_onstart():
    """The Snakefile's onstart: results/partial/plan.json, what `python -m cdgtmll.tables.partial`
    needs to show the tables, metrics_full and the claims page of the runs done while the workflow
    runs (the logger plugin starts it after evaluate jobs): the three rules' options and expected
    files, and which of those files this run (re)makes. A partial folder a stopped run left is
    removed first. Never stops the run: a failure is a warning."""
    try:
        remove_partial(PARTIAL_DIR)
        metrics = all_metrics()
        wanted = set(metrics) | {f for fs in claims_figures().values() for f in fs}
        remade = sorted({str(f) for job in workflow.dag.needrun_jobs() for f in job.output if str(f) in wanted})
        plan = {
            "out": str(PARTIAL_DIR),
            "remade": remade,
            "tables": {"options": tables_options(), "metrics": all_metrics(MAIN_JOBS)},
            "summary": {"options": summary_options(), "metrics": metrics},
            "claims": {"options": claims_options(), "figures": claims_figures()},
        }
        write_plan(plan, PLAN)
        if any(Path(p).is_file() for p in metrics):
            refresh_soon(PLAN)  # a resumed run shows the runs it already has at once
    except Exception as exc:
        logger.warning(f"cdgtmll: no partial results in this run ({type(exc).__name__}: {exc})")


def partial_onsuccess():
    """The Snakefile's onsuccess: the final tables exist, results/partial/ goes (after a failure
    or an interrupt it stays)."""
    remove_partial(PARTIAL_DIR)
