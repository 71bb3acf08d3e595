# Two commands a researcher needs:
#   make all    create .venv (pinned, offline-capable) and run `snakemake all --cores all`
#   make test   create .venv and run the test suite
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# jobs at once: every core of this machine (`make all CORES=2` for fewer)
CORES ?= all
# the profile to run; `make all CONFIG=config/paper.yaml` runs the paper's full protocol
CONFIG ?= config/config.yaml
# Offline data: the mirror beside the checkout is used when present (env var wins).
# (found by the shell, not $(wildcard): a checkout path may contain spaces)
export CDGTMLL_DATA_MIRROR ?= $(shell test -f ../shared/datasets/MANIFEST.tsv && cd ../shared/datasets && pwd)
export MPLCONFIGDIR ?= $(CURDIR)/.cache/matplotlib
export XDG_CACHE_HOME ?= $(CURDIR)/.cache
export DVC_NO_ANALYTICS = 1

.PHONY: all test test-fast venv lock lint report clean-results

# The environment: pip bootstraps uv (the version requirements.lock pins), uv makes the venv
# exactly the lock for this platform (`uv pip sync`: the lock's markers pick the Linux or macOS
# set) and installs this checkout editable, all compiled to bytecode (PYTHONDONTWRITEBYTECODE
# machines would otherwise compile torch's Python again in every job). uv reads no pip.conf: UV_INDEX_URL / UV_FIND_LINKS
# name another index or local wheel folders; its cache is $(XDG_CACHE_HOME)/uv.
UV_PIN = $(shell grep -m1 '^uv==' requirements.lock)
$(BIN)/.installed: requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile '$(UV_PIN)'
	$(BIN)/uv pip sync --quiet --compile-bytecode --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python --no-deps --no-build-isolation -e .
	$(BIN)/python -m compileall -q src
	touch $@

venv: $(BIN)/.installed

# check-config first: a YAML syntax error then names the file and line (Snakemake's own
# parser names neither); --show-failed-logs prints the tail of a failed rule's log. The target
# comes before --configfile, which takes one or more files. An interrupted run is picked up
# where it stopped (profiles/default/config.yaml: rerun-incomplete). The isolated environments
# the profile's methods need are built first (a failed build: the tables say why, not run).
# Every dataset is prepared first, going on past failures: a dataset whose data fails leaves
# its reason (results/data/<name>/unavailable.json), and the main run leaves it out, its cells
# n.r. with that reason (cdgtmll/data/availability.py; data.unavailable: error stops instead).
all: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/cdgtmll check-config "$(CONFIG)"
	@envs=$$($(BIN)/cdgtmll envs "$(CONFIG)") && for e in $$envs; do \
	  $(MAKE) --no-print-directory -f mk/xmc-envs.mk $(XMC_DIR)/$$e/.installed || true; done
	@mkdir -p logs && PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --keep-going datasets --cores $(CORES) --configfile "$(CONFIG)" >logs/make-datasets.log 2>&1 || echo "make all: a dataset could not be prepared (logs/make-datasets.log); the run below names it and why, and runs without it"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake all --cores $(CORES) --show-failed-logs --configfile "$(CONFIG)"

# three pytest workers on two cores: the third runs a file while the Slurm test waits on its
# scheduler (measured: docs/testing.md)
test: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -n 3 --dist loadfile -q

# the fast loop: no process start (git neither), no Snakemake, no fine-tuning (docs/testing.md)
test-fast: venv
	$(BIN)/python -m pytest -m "not integration and not slow" -q

report: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --report results/report.html --configfile "$(CONFIG)"

# style checks, as CI runs them: ruff ([tool.ruff]), snakefmt ([tool.snakefmt]), snakemake --lint
lint: venv
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/snakefmt --check Snakefile workflow/
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --lint

# requirements.lock from pyproject.toml, one lock for Linux and macOS (tools/write_lock.py);
# pins stay unless LOCK_ARGS asks, e.g. make lock LOCK_ARGS="--upgrade-package torch"
lock: venv
	$(BIN)/python tools/write_lock.py $(LOCK_ARGS)

# Container image of the lock + package, for `snakemake --sdm apptainer` (docs/install.md):
# `make image` needs docker, `make sif` apptainer; CDGTMLL_IMAGE=<image> names another one.
IMAGE ?= cdgtmll:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
.PHONY: image sif
image:
	docker build -t $(IMAGE) .
sif:
	apptainer build cdgtmll.sif docker-daemon://$(IMAGE)

clean-results:
	rm -rf results/data results/runs results/tables results/metrics.json figures/*.p* logs

# Scale out on a Slurm cluster: one sbatch job per run (training + evaluation) and per dataset,
# tables and figures on the login node (edit the marked lines of profiles/slurm/config.yaml first). A cluster without job accounting (no slurmdbd)
# also needs SLURM_ARGS="--slurm-status-command squeue --slurm-no-account".
PROFILE ?= profiles/slurm
SLURM_ARGS ?=
.PHONY: cluster
cluster: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/cdgtmll check-config "$(CONFIG)"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake all --profile $(PROFILE) $(SLURM_ARGS) --configfile "$(CONFIG)"

# DVC: share and restore results (docs/dvc.md); the profile DVC runs is params.yaml's `profile`
# The remote's url: CDGTMLL_DVC_REMOTE when given, else the shipped folder pinned as an absolute
# path in .dvc/config.local (once; a url set there is kept): DVC 3.67 resolves the relative url of
# .dvc/config against the root of the file system in `dvc exp push`/`dvc exp pull` (docs/dvc.md)
DVC_PIN = { $(BIN)/dvc config --local remote.cdgtmll.url >/dev/null 2>&1 || { url=$$($(BIN)/dvc config remote.cdgtmll.url) \
  && case "$$url" in /*) $(BIN)/dvc remote modify --local cdgtmll url "$$url";; esac; }; }
DVC_REMOTE = $(if $(CDGTMLL_DVC_REMOTE),$(BIN)/dvc remote modify --local cdgtmll url '$(CDGTMLL_DVC_REMOTE)',$(DVC_PIN)) &&
.PHONY: push pull checkout restore gc
push: venv
	$(DVC_REMOTE) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc push
# The remote verifies what it sends (verify = true in .dvc/config): a corrupt object fails the pull;
# DVC names only the output folder, the failed-pull report names each file and what the remote holds
pull: venv
	$(DVC_REMOTE) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc pull || { PATH="$(CURDIR)/$(BIN):$$PATH" \
	  $(BIN)/python -c 'from cdgtmll.lineage.dvc import explain_failed_pull as e; e()'; exit 1; }
# Free the DVC cache but keep what the workspace, every branch and tag and every experiment use
# (plain `dvc gc -w` drops the experiments' outputs, and `dvc exp apply` then fails half-way)
gc: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc gc --force --workspace --all-branches --all-tags --all-experiments
# dvc checkout (e.g. after `git checkout <rev> dvc.lock params.yaml`); plain `dvc checkout` is the same
checkout: venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc checkout
# Kept as a name only: no restore step is needed. Snakemake's records of the outputs travel with them
# (results/jobs.json) and the Snakefile imports them where the restored files have the recorded bytes
restore:
	@echo "restore: nothing to do: after dvc pull, dvc checkout or dvc exp apply, snakemake imports the records of results/jobs.json by itself (docs/dvc.md)"

# Isolated environments of the external XMC libraries (XR-Linear, napkinXC, LibMultiLabel)
include mk/xmc-envs.mk
