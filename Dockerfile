# Image of the cdgtmll pipeline: Python 3.11, the pins of requirements.lock (its Linux set,
# CUDA torch included) and the package itself. For Snakemake's `--sdm apptainer` (the Snakefile's
# `container:` line; docs/install.md):
#   make image                       docker build -t cdgtmll:<version> .
#   make sif                         apptainer build cdgtmll.sif docker-daemon://cdgtmll:<version>
# Rebuild it after changing src/: jobs in the container run the package installed here.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_NO_CACHE=1 \
    MPLCONFIGDIR=/tmp/matplotlib

WORKDIR /opt/cdgtmll

# The lock first: this layer stays cached while only the code changes.
COPY requirements.lock ./
# uv: the version the lock pins; then exactly the lock (its markers select the Linux set),
# compiled to bytecode now: PYTHONDONTWRITEBYTECODE stops every job from writing it, and
# without it each job process compiles torch's Python again (seconds of CPU per job).
RUN pip install --no-cache-dir "$(grep -m1 '^uv==' requirements.lock)" \
    && uv pip install --system --no-cache --compile-bytecode -r requirements.lock

COPY pyproject.toml README.md ./
COPY src ./src
# Not editable: the image carries its own copy of the code (--no-deps: the lock has them all).
RUN uv pip install --system --no-cache --compile-bytecode --no-deps --no-build-isolation . \
    && rm -rf build src/*.egg-info \
    && python -c "from importlib import resources; resources.files('cdgtmll.config').joinpath('schema.yaml').read_text()" \
    && cdgtmll --help > /dev/null

LABEL org.opencontainers.image.title="cdgtmll" \
      org.opencontainers.image.description="CD-GTMLL benchmark pipeline: requirements.lock + the cdgtmll package"

CMD ["bash"]
