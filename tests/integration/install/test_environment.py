"""The install files agree (offline): requirements.lock is one universal lock whose markers give
a Linux x86-64 and a macOS arm64 set, pyproject's dependencies are pinned in it, environment.yml
installs it plus the checkout, the Makefile and the Dockerfile install it, and the Docker build
context holds what the Dockerfile copies. tests/integration/install/test_install.py resolves and
builds for real."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

import yaml

from tests.support.lock import lock_pins, norm, pins_for
from tests.support.paths import ROOT


def test_lock_gives_a_linux_and_a_macos_set():
    linux, mac = pins_for("linux-x86_64"), pins_for("macos-arm64")
    for platform_pins in (linux, mac):
        assert platform_pins["torch"] == "2.14.1" and platform_pins["torchvision"] == "0.29.1"
    cuda = {n for n in linux if n.startswith(("nvidia-", "cuda-")) or n == "triton"}
    assert "nvidia-cudnn-cu13" in cuda and "triton" in cuda
    assert set(mac) < set(linux)
    # Linux only: torch's CUDA wheels, and greenlet (SQLAlchemy's marker names aarch64, not arm64)
    assert set(linux) - set(mac) == cuda | {"greenlet"}
    assert all(linux[n] == v for n, v in mac.items())


def test_pyproject_dependencies_pinned_in_lock():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(meta["dependencies"])
    for extra, reqs in meta["optional-dependencies"].items():
        if not extra.startswith("dvc-"):  # remote plugins: installed on demand, not locked
            deps += reqs
    lock = lock_pins()
    for d in deps:
        name = norm(re.split(r"[<>=!~ \[;]", d)[0])
        assert name in lock, f"pyproject dependency {d!r} is not pinned in requirements.lock"
        exact = re.search(r"==\s*([^,;\s]+)", d)
        if exact:
            assert lock[name] == exact.group(1), f"pyproject pins {d!r}, requirements.lock {lock[name]}"


def test_toolchain_versions_pinned():
    lock = lock_pins()
    expected = {"torch": "2.14.1", "torchvision": "0.29.1", "numpy": "2.4.6", "pandas": "2.3.3",
                "snakemake": "9.27.1", "dvc": "3.67.1", "seaborn": "0.13.2",
                "snakemake-executor-plugin-slurm": "2.8.0", "river": "0.26.1"}
    assert {n: lock.get(n) for n in expected} == expected


def _expand(line: str, root: Path) -> str:
    return line.replace("${CDGTMLL_ROOT}", str(root))


def test_environment_yml_installs_lock_and_checkout():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict))
    # absolute through ${CDGTMLL_ROOT}: conda runs pip beside Snakemake's copy of this file
    assert all("${CDGTMLL_ROOT}" in line for line in pip_section), pip_section
    options = [_expand(line, ROOT).split(None, 1) for line in pip_section]
    assert [o for o, _ in options] == ["-r", "-e"], pip_section
    lock, project = (Path(p) for _, p in options)
    assert lock == ROOT / "requirements.lock" and lock.is_file()
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "cdgtmll"


def test_rules_use_environment_yml_and_set_its_root():
    common = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    env_path = re.search(r'^ENV = "([^"]+)"', common, re.M).group(1)
    # a conda: path is relative to the file holding the directive (workflow/rules/*.smk)
    assert (ROOT / "workflow" / "rules" / env_path).resolve() == ROOT / "environment.yml"
    # update(): snakemake --lint flags os.environ[...] =
    assert re.search(r'^os\.environ\.update\(CDGTMLL_ROOT=workflow\.basedir\)$', common, re.M)
    snakefile = (ROOT / "Snakefile").read_text()
    assert re.search(r"^container: ", snakefile, re.M), "the Snakefile names the image for --sdm apptainer"


def test_makefile_installs_the_lock_with_its_uv(tmp_path):
    out = subprocess.run(["make", "-n", "venv", f"VENV={tmp_path / 'v'}"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    uv_pin = f"uv=={lock_pins()['uv']}"
    assert f"-m pip install --quiet --no-compile '{uv_pin}'" in out
    v = tmp_path / "v"
    # compiled to bytecode at install: PYTHONDONTWRITEBYTECODE machines never write it later
    assert f"{v}/bin/uv pip sync --quiet --compile-bytecode --python {v}/bin/python requirements.lock" in out
    assert "--compile-bytecode --python" in out.split("-e .")[0].splitlines()[-1]
    assert "--no-deps --no-build-isolation -e ." in out
    assert f"{v}/bin/python -m compileall -q src" in out


def _dockerignore_admits(path: str) -> bool:
    """Docker's rule: the last matching .dockerignore pattern decides; `!` re-includes."""
    admitted = True
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or (pattern.startswith("**/") and fnmatch.fnmatch(path, pattern[3:])):
            admitted = negate
    return admitted


def test_dockerfile_copies_what_exists_and_the_context_holds_it():
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    base = next(line.split()[1] for line in lines if line.startswith("FROM "))
    assert re.fullmatch(r"python:3\.11[.\w-]*", base), f"pinned Python 3.11 base image, got {base}"
    copies = [line.split()[1:-1] for line in lines if line.startswith("COPY ")]
    sources = [s for srcs in copies for s in srcs]
    assert {"requirements.lock", "pyproject.toml", "src"} <= set(sources)
    for src in sources:
        assert (ROOT / src).exists(), f"Dockerfile COPY {src}: no such file in the checkout"
        assert _dockerignore_admits(src), f".dockerignore leaves {src} out of the build context"
    for heavy in (".venv", ".git", "results", ".snakemake", ".cache"):
        assert not _dockerignore_admits(heavy), f".dockerignore lets {heavy} into the build context"
    text = "\n".join(lines)
    assert "grep -m1 '^uv==' requirements.lock" in text and "-r requirements.lock" in text


def test_env_var_name_matches_between_files():
    """The variable environment.yml reads is the one common.smk sets (pip expands only
    ${NAME} with upper-case letters, digits and underscores)."""
    names = set(re.findall(r"\$\{([^}]+)\}", (ROOT / "environment.yml").read_text()))
    assert names == {"CDGTMLL_ROOT"}


def test_the_image_compiles_bytecode_at_install():
    """The image sets PYTHONDONTWRITEBYTECODE, so bytecode exists only if the install wrote it: every
    `uv pip install` of the Dockerfile compiles (without it each job recompiles torch's Python)."""
    text = (ROOT / "Dockerfile").read_text()
    assert "PYTHONDONTWRITEBYTECODE=1" in text
    installs = [line for line in text.splitlines() if "uv pip install --system" in line]
    assert len(installs) == 2 and all("--compile-bytecode" in line for line in installs), installs
