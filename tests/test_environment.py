"""The lock file and environment.yml pin the same packages; pyproject's deps are all pinned."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[_norm(name)] = version
    return pins


def test_environment_yml_matches_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict))
    env_pins = dict((_norm(p.split("==")[0]), p.split("==")[1]) for p in pip_section)
    lock = lock_pins()
    lock.pop("pip", None)  # conda provides pip itself
    assert env_pins == lock


def test_pyproject_dependencies_pinned_in_lock():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        deps += extra
    lock = lock_pins()
    for d in deps:
        name = _norm(re.split(r"[<>=!~ \[]", d)[0])
        assert name in lock, f"pyproject dependency {d!r} is not pinned in requirements.lock"


def test_toolchain_versions_pinned():
    lock = lock_pins()
    assert lock["torch"] == "2.14.1" and lock["snakemake"] == "9.27.1" and lock["dvc"] == "3.67.1"
    assert int(lock["pandas"].split(".")[0]) < 3
