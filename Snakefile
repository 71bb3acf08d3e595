# CD-GTMLL benchmark pipeline. Thin entry point: validate the config, then include the rules.
#   snakemake all --cores all                                   default profile (config/config.yaml)
#   snakemake all --cores all --configfile config/quick.yaml    another profile (`make all CONFIG=...`)
#   snakemake --report results/report.html --configfile config/quick.yaml    the HTML report (`make report`)
import sys

from snakemake_interface_common.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.enums import PersistenceBackend
from snakemake.utils import min_version

min_version("9.0")

from cdgtmll.config.dvc_params import settings_layer
from cdgtmll.config.loader import load_files
from cdgtmll.lineage.integrity import check_recorded_metrics
from cdgtmll.pipeline.landing import PlannedRun, quiet_missing_metadata, report_path, run_status, status_html
from cdgtmll.pipeline.profile_guard import (
    MarkerError,
    ProfileMismatch,
    check,
    is_dry_run,
    mismatch_message,
    read_recorded,
    write_marker,
)
from cdgtmll.pipeline.env import own_python_first
from cdgtmll.pipeline.records import RecordsError, import_records
from cdgtmll.runtime.openmp import passive_openmp_waits
from cdgtmll.runtime.snakemake_timer import one_reevaluation_timer

# Snakemake 9's scheduler starts one more self-renewing timer per finished job (passes per
# second grow with the jobs done); one pending timer at a time (cdgtmll/runtime/snakemake_timer.py).
if not one_reevaluation_timer():
    logger.info("Snakemake's scheduler is not the version cdgtmll's timer workaround was written for: left as it is.")

# Jobs inherit OMP_WAIT_POLICY=PASSIVE unless the user set it: OpenMP threads that wait sleep
# instead of spinning on cores other jobs need (cdgtmll/runtime/openmp.py).
passive_openmp_waits()

# Outputs DVC restored (dvc pull, dvc checkout, dvc exp apply) come with Snakemake's records of the
# jobs that made them, in results/jobs.json (written by dvc.yaml's stage): where a file has the bytes
# recorded there and Snakemake's own record of it is missing or another, that record is imported, so
# that Snakemake judges the job by the code, settings and inputs it was made with; a file with other
# bytes keeps its own record (cdgtmll/pipeline/records.py). Main process only, file records only.
if workflow.is_main_process and workflow.workflow_settings.persistence_backend == PersistenceBackend.FILE:
    try:
        _imported = import_records()
    except RecordsError as e:
        raise WorkflowError(f"cdgtmll: {e}")
    for _line in _imported.lines():
        logger.info(f"cdgtmll records: {_line}")

# A metrics.json whose bytes differ from the sha256 the tables recorded for it is noticed even
# with an old modification time (`cp -a`) and even with a valid self-hash (a recomputed seal): it is
# deleted, so that this run evaluates its predictions again and rebuilds the tables
# (cdgtmll/lineage/integrity.py).
# Main process only: a job's own Snakemake (cluster, Slurm) must not act on shared files.
if workflow.is_main_process:
    for _line in check_recorded_metrics():
        logger.warning(f"cdgtmll integrity: {_line}")

# Jobs run `python -m cdgtmll...`: the interpreter of the environment this Snakemake runs in, even
# when it was started as .venv/bin/snakemake without that environment on PATH. Not with --sdm conda
# or apptainer, where each job's own environment provides its python.
own_python_first({m.name for m in workflow.deployment_settings.deployment_method})

# Jobs' shell commands run in bash, never a plain sh: params that carry display names are bash
# $'...' words (cdgtmll.tables.html.report_shell_word), and Snakemake falls back to sh only
# where no bash is found.
shell.executable("bash")

# A profile given with --configfile replaces the default instead of being merged into it,
# so config/paper.yaml and config/mulan.yaml run exactly what they say.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# The config files read again with the YAML 1.2 loader (1e-3 is a number, a duplicate key names
# its line), --config overrides merged in; JSON schema + registry checks before any job starts.
# When the config files are exactly the profile DVC runs (params.yaml: profile), the settings
# `dvc exp run -S '++settings.<key>=<value>'` wrote there are laid over it first (docs/dvc.md).
_layer = settings_layer(workflow.configfiles, workflow.basedir)
_loaded = load_files(workflow.configfiles, workflow.config_settings.config, layer=_layer)
config.clear()  # in place: the workflow's own config object is the one the rules see
config.update(_loaded)


report: "workflow/report/workflow.rst"


container: os.environ.get("CDGTMLL_IMAGE", "cdgtmll.sif")  # only with --sdm apptainer (docs/install.md)


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/variants.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/figures.smk"


# `snakemake --report` (read from the command line: Snakemake parses this file before it knows):
# Snakemake's warning per output of a job not run yet becomes one line with the count, and the
# landing page (workflow/report/workflow.rst) gets config["_report_status"], a key that exists
# only in report mode: how far the run is, what is pending, the partial tables; HTML, every value
# escaped (cdgtmll/pipeline/landing.py).
REPORT = report_path(sys.argv) if workflow.is_main_process else None
if REPORT:
    quiet_missing_metadata(logger)
    config["_report_status"] = status_html(
        run_status(
            workflow.basedir,
            [PlannedRun(m, d, v, tuple(all_metrics([(d, v, m)]))) for d, v, m in ALL_JOBS if (d, m) not in NOT_RUN],
            ALL_TARGETS + FIGURE_TARGETS,
        ),
        workflow.basedir,
        REPORT,
    )

# A results folder knows its profile (results/profile.json, cdgtmll/pipeline/profile_guard.py):
# a run of another profile into it stops before its first job (onstart below), naming both and
# the command of each way forward; a dry run only warns. --config overrides keep the profile.
PROFILE_FILES = configfile_names() or ["config/config.yaml"]
if workflow.is_main_process and not REPORT and is_dry_run(sys.argv):
    try:
        _recorded = read_recorded(workflow.basedir)
    except MarkerError as e:
        _recorded, _mismatch = None, str(e)
    else:
        _mismatch = _recorded and mismatch_message(_recorded, config["name"], PROFILE_FILES)
    if _mismatch:
        logger.warning(f"cdgtmll: {_mismatch}\n(A dry run: nothing is written; a real run stops here.)")


onstart:
    if workflow.is_main_process and not workflow.touch:
        try:
            _warning = check(workflow.basedir, config["name"], PROFILE_FILES)
        except (ProfileMismatch, MarkerError) as e:
            raise SystemExit(f"cdgtmll: {e}")
        if _warning:
            logger.warning(f"cdgtmll: {_warning}")
    check_gpu_request()
    if workflow.is_main_process:
        write_marker(workflow.basedir, config["name"], PROFILE_FILES)
    partial_onstart()  # results/partial/: tables of the runs done so far (report_common.smk)


onsuccess:
    partial_onsuccess()  # the final tables exist: results/partial/ goes


rule all:
    input:
        ALL_TARGETS,
        FIGURE_TARGETS,
    default_target: True
