# CD-GTMLL benchmark pipeline. Thin entry point: validate the config, then include the rules.
#   snakemake --cores 8 all                       default profile (config/config.yaml)
#   snakemake --cores 8 all --configfile config/paper.yaml
from snakemake.logging import logger
from snakemake.utils import min_version

min_version("9.0")

from cdgtmll.config.dvc_params import settings_layer
from cdgtmll.config.loader import load_files
from cdgtmll.lineage.integrity import check_recorded_metrics
from cdgtmll.workflow.env import own_python_first, passive_openmp_waits
from cdgtmll.workflow.scheduler import one_reevaluation_timer

# Snakemake 9's scheduler starts one more self-renewing timer per finished job (passes per
# second grow with the jobs done); one pending timer at a time (cdgtmll/workflow/scheduler.py).
if not one_reevaluation_timer():
    logger.info("Snakemake's scheduler is not the version cdgtmll's timer workaround was written for: left as it is.")

# Jobs inherit OMP_WAIT_POLICY=PASSIVE unless the user set it: OpenMP threads that wait sleep
# instead of spinning on cores other jobs need (cdgtmll/workflow/env.py).
passive_openmp_waits()

# A metrics.json whose bytes differ from the sha256 the tables recorded for it is noticed even
# with an old modification time (`cp -a`): deleted when its self-hash fails (edited by hand),
# else marked as changed, so that this run re-evaluates or rebuilds (cdgtmll/lineage/integrity.py).
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


onstart:
    check_gpu_request()


rule all:
    input:
        ALL_TARGETS,
        FIGURE_TARGETS,
    default_target: True
