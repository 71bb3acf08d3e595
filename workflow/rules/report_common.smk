# Helpers of report.smk (and figures.smk): which outputs Snakemake's HTML report shows
# (`snakemake --report results/report.html`), with which labels, and the tables' file list.
import os
import re
import shlex

from snakemake.io import regex_from_filepattern

from cdgtmll.variants.naming import variant_setting
from cdgtmll.data.registry import get_spec
from cdgtmll.tables.html import report_label
from cdgtmll.tables.layout import table_stems


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
