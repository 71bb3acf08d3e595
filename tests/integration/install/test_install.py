"""Installing cdgtmll for real, short of downloading gigabytes:

- resolution (needs the package index): requirements.lock resolves, wheel for wheel, on Linux
  x86-64 and macOS arm64 to exactly its pins there; it is what pyproject.toml gives; the pip
  lines of environment.yml resolve from where conda runs them. Skipped, with the reason, when
  the index is unreachable; failed instead under CI (env CI=1).
- the wheel (offline) holds every data file of the package, and the package installed from it
  reads its schema and claims;
- Snakemake (stub conda/apptainer binaries): `--sdm conda` hands conda a copy of
  environment.yml whose pip lines reach this checkout; `--sdm apptainer` uses the Snakefile's
  image, and CDGTMLL_IMAGE replaces it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.support.lock import PLATFORMS, UV_PLATFORMS, lock_pins, parse_pins, pins_for
from tests.support.paths import ROOT
from tests.support.workflow import snakemake_env

UV = [sys.executable, "-m", "uv"]


def _index_url() -> str:
    return (os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL") or "https://pypi.org/simple").rstrip("/")


@pytest.fixture(scope="module")
def index() -> str:
    """The package index uv resolves against; skip (fail under CI) when it is unreachable."""
    url = _index_url()
    try:
        with urllib.request.urlopen(f"{url}/uv/", timeout=15) as r:
            r.read(1)
    except (urllib.error.URLError, OSError) as e:
        why = f"package index {url} unreachable ({e}); resolving the lock needs it"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{why} (CI={os.environ['CI']}: a resolution check may not be skipped)")
        pytest.skip(f"{why} (under CI=1 this fails instead)")
    return url


def _uv_env(platform: str) -> dict:
    env = dict(os.environ)
    env.update(UV_PLATFORMS[platform][1])
    return env


def test_uv_is_the_locked_version():
    out = subprocess.run(UV + ["--version"], capture_output=True, text=True, check=True).stdout
    assert out.split()[1] == lock_pins()["uv"]


@pytest.mark.network
@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_lock_resolves_for_platform(index, platform):
    """uv resolves requirements.lock for the platform (a wheel of the right platform tag for
    every pin, or an sdist), and the result is exactly the lock's pins whose markers hold there."""
    proc = subprocess.run(UV + ["pip", "compile", "requirements.lock", "--python-platform",
                                UV_PLATFORMS[platform][0], "--python-version", "3.11", "--no-header",
                                "--no-annotate", "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, env=_uv_env(platform))
    assert proc.returncode == 0, f"requirements.lock does not resolve for {platform}:\n{proc.stderr}"
    resolved = {n: v for n, v, _ in parse_pins(proc.stdout)}
    assert resolved == pins_for(platform)


@pytest.mark.network
def test_lock_is_what_pyproject_gives(index):
    """`make lock` would write the same pins: pyproject.toml and requirements.lock agree."""
    proc = subprocess.run([sys.executable, "tools/write_lock.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.network
def test_conda_pip_lines_resolve_from_snakemakes_copy(index, tmp_path):
    """conda writes the pip section to a requirements file beside the environment file it is
    given (Snakemake's copy in .snakemake/conda/) and runs pip there: from such a folder, with
    CDGTMLL_ROOT set as common.smk sets it, the lines resolve to the lock's Linux pins + cdgtmll."""
    env_file = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lines = next(d["pip"] for d in env_file["dependencies"] if isinstance(d, dict))
    copy_dir = tmp_path / ".snakemake" / "conda"
    copy_dir.mkdir(parents=True)
    req = copy_dir / "condaenv.test.requirements.txt"
    req.write_text("\n".join(pip_lines) + "\n")
    env = {**_uv_env("linux-x86_64"), "CDGTMLL_ROOT": str(ROOT)}
    proc = subprocess.run(UV + ["pip", "compile", req.name, "--python-platform", UV_PLATFORMS["linux-x86_64"][0],
                                "--python-version", "3.11", "--no-header", "--no-annotate", "--quiet"],
                          cwd=copy_dir, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert {n: v for n, v, _ in parse_pins(proc.stdout)} == pins_for("linux-x86_64")
    editable = [line for line in proc.stdout.splitlines() if line.startswith("-e ")]
    assert len(editable) == 1 and "CDGTMLL_ROOT" in editable[0]


def _package_copy(tmp_path: Path) -> Path:
    """The files a wheel is built from, copied out of the checkout (no build/ or egg-info there)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, proj / name)
    shutil.copytree(ROOT / "src", proj / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return proj


def test_wheel_holds_every_data_file_and_works_installed(tmp_path):
    proj = _package_copy(tmp_path)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", "-w", str(tmp_path / "dist"), str(proj)], check=True, capture_output=True, text=True)
    (wheel,) = (tmp_path / "dist").glob("cdgtmll-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = proj / "src" / "cdgtmll"
    data_files = sorted(p.relative_to(proj / "src").as_posix() for p in package.rglob("*")
                        if p.is_file() and p.suffix not in (".py", ".pyc"))
    assert "cdgtmll/config/schema.yaml" in data_files and "cdgtmll/claims/paper_claims.csv" in data_files
    missing = [f for f in data_files if f not in names]
    assert not missing, f"the wheel lacks package data {missing}: add them to [tool.setuptools.package-data]"
    modules = sorted(p.relative_to(proj / "src").as_posix() for p in package.rglob("*.py"))
    assert [m for m in modules if m not in names] == []

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    check = textwrap.dedent(f"""
        import cdgtmll, pathlib
        from cdgtmll.config import loader
        from cdgtmll.claims.paper import read_claims
        assert pathlib.Path(cdgtmll.__file__).is_relative_to({str(site)!r}), cdgtmll.__file__
        cfg = loader.load({str(ROOT / 'config' / 'config.yaml')!r})   # validated by the packaged schema
        print(len(cfg["experiments"]["datasets"]), len(read_claims()))
    """)
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    n_datasets, n_claims = map(int, out.stdout.split())
    assert n_datasets > 0 and n_claims > 0


def _workflow_copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for item in ("Snakefile", "workflow", "config", "environment.yml", "requirements.lock", "pyproject.toml"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / item)
    return repo


def _stub(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    # a shell script that runs the Python body: a shebang line cannot hold an interpreter path
    # with a space (a checkout at such a path)
    (bin_dir / f"{name}.py").write_text(textwrap.dedent(body))
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$0.py" "$@"\n')
    path.chmod(0o755)


CONDA_STUB = """
    import json, os, sys
    from pathlib import Path
    args = sys.argv[1:]
    if args == ["--version"]:
        print("conda 24.11.3")
    elif args[:2] == ["info", "--json"]:
        print(json.dumps({"conda_prefix": os.environ["STUB_CONDA_PREFIX"], "platform": "linux-64"}))
    elif args[:2] == ["config", "--get"]:
        print(json.dumps({"get": {"channel_priority": "strict"}}))
    elif args[:1] == ["clean"]:  # Snakemake's --conda-cleanup-pkgs (default: tarballs)
        pass
    elif args[:2] == ["env", "create"]:
        # record what a real conda would see, then make an (empty) environment
        file = args[args.index("--file") + 1]
        prefix = args[args.index("--prefix") + 1]
        with open(os.environ["STUB_CONDA_LOG"], "a") as log:
            log.write(json.dumps({"file": os.path.abspath(file), "cwd": os.getcwd(),
                                  "CDGTMLL_ROOT": os.environ.get("CDGTMLL_ROOT")}) + "\\n")
        Path(prefix, "bin").mkdir(parents=True)
    else:
        sys.exit(f"conda stub: unexpected {args}")
"""


@pytest.mark.slow
def test_sdm_conda_env_file_reaches_the_checkout(tmp_path, mirror):
    """`snakemake --sdm conda --conda-create-envs-only` with a stub conda: Snakemake hands conda
    its copy of environment.yml in .snakemake/conda/ with CDGTMLL_ROOT set to the workflow's
    folder; resolved the way conda runs pip (beside that copy), the pip lines name this
    workflow's requirements.lock and project, where a relative path would not."""
    repo = _workflow_copy(tmp_path)
    log = tmp_path / "conda.log"
    _stub(tmp_path / "bin", "conda", CONDA_STUB)
    env = snakemake_env(mirror)
    env.update(PATH=f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}", PYTHONPATH=str(ROOT / "src"),
               STUB_CONDA_LOG=str(log), STUB_CONDA_PREFIX=str(tmp_path / "conda"))
    env.pop("CDGTMLL_ROOT", None)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "all", "--cores", "1", "--configfile", "config/quick.yaml",
                           "--sdm", "conda", "--conda-create-envs-only"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = [json.loads(line) for line in log.read_text().splitlines()]  # one environment for all rules
    copy = Path(record["file"])
    assert copy.parent == repo / ".snakemake" / "conda" and copy.read_text() == (ROOT / "environment.yml").read_text()
    assert record["CDGTMLL_ROOT"] == str(repo)
    pip_lines = next(d["pip"] for d in yaml.safe_load(copy.read_text())["dependencies"] if isinstance(d, dict))
    targets = [Path(copy.parent, line.split(None, 1)[1].replace("${CDGTMLL_ROOT}", record["CDGTMLL_ROOT"]))
               for line in pip_lines]
    assert targets[0] == repo / "requirements.lock" and targets[0].is_file()
    assert tomllib.loads((targets[1] / "pyproject.toml").read_text())["project"]["name"] == "cdgtmll"
    assert not (copy.parent / "requirements.lock").exists()  # why the path is not relative


@pytest.mark.slow
def test_sdm_apptainer_uses_the_configured_image(tmp_path, mirror):
    """`snakemake -n --sdm apptainer` (stub apptainer): every job gets the Snakefile's image,
    CDGTMLL_IMAGE names another one."""
    repo = _workflow_copy(tmp_path)
    _stub(tmp_path / "bin", "apptainer", """
        import sys
        if sys.argv[1:] == ["--version"]:
            print("apptainer version 1.3.6")
        else:
            sys.exit(f"apptainer stub: unexpected {sys.argv[1:]}")
    """)
    env = snakemake_env(mirror)
    image = "docker://registry.example.org/cdgtmll:test"
    env.update(PATH=f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}", PYTHONPATH=str(ROOT / "src"), CDGTMLL_IMAGE=image)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "all", "-n", "--cores", "1", "--configfile",
                           "config/quick.yaml", "--sdm", "apptainer"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert f"Singularity image {image} will be pulled." in out
    assert out.count("will be pulled") == 1  # one image for every rule
