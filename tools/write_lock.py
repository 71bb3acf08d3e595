"""Write requirements.lock: one universal lock (Linux and macOS) of pyproject.toml's dependencies.

    python tools/write_lock.py [UV-ARGS...]   (run by `make lock`; e.g. --upgrade-package torch)
    python tools/write_lock.py --check        exit 1 when the lock is not what pyproject.toml gives

`uv pip compile --universal` resolves once for every platform and writes environment markers
(`; sys_platform == 'linux'`) on the packages one platform needs, e.g. torch's CUDA wheels.
The versions already in requirements.lock are kept (uv prefers the pins of its output file)
unless pyproject.toml excludes them or UV-ARGS asks for an upgrade. uv reads no pip.conf:
UV_INDEX_URL, UV_FIND_LINKS and UV_CACHE_DIR configure it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
PYTHON_VERSION = "3.11"
#: extras installed by `make venv`; dvc-s3/-gs/-ssh stay out (docs/install.md: installed on demand)
EXTRAS = ("pipeline", "packaged-data", "test", "lint", "cluster")
HEADER = """\
# Exact pins of every package of the cdgtmll environment, for Python 3.11 on Linux and macOS:
# a universal lock (`uv pip compile --universal`); a marker such as `; sys_platform == 'linux'`
# names the platforms a package is installed on (torch's CUDA wheels: Linux only).
# Install: make venv (uv pip sync). Regenerate after editing pyproject.toml: make lock
# (tools/write_lock.py; keeps the pins below unless asked to upgrade one).
"""


def uv() -> list[str]:
    """The uv of this environment (pinned in the lock's test extra), else one on PATH."""
    beside = Path(sys.executable).with_name("uv")
    if beside.exists():
        return [str(beside)]
    if shutil.which("uv"):
        return ["uv"]
    sys.exit("write_lock: uv not found; `make venv` installs the version requirements.lock pins")


def compile_command(output: Path, extra_args: list[str]) -> list[str]:
    cmd = uv() + ["pip", "compile", "pyproject.toml", "--universal",  # relative: cwd is ROOT
                  "--python-version", PYTHON_VERSION, "--no-header", "--quiet", "-o", str(output)]
    for extra in EXTRAS:
        cmd += ["--extra", extra]
    return cmd + extra_args


def requirement_lines(text: str) -> list[str]:
    """The pins with their markers: the lines that are neither comments nor blank."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def compile_lock(extra_args: list[str]) -> str:
    """The lock pyproject.toml gives, preferring the versions requirements.lock pins now."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "requirements.lock"
        if LOCK.exists():
            shutil.copyfile(LOCK, out)  # uv's preferences: the pins of its output file
        subprocess.run(compile_command(out, extra_args), check=True, cwd=ROOT)
        return HEADER + out.read_text()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        new = compile_lock(argv[1:])
        old = LOCK.read_text()
        if requirement_lines(new) != requirement_lines(old):
            missing = sorted(set(requirement_lines(new)) - set(requirement_lines(old)))
            extra = sorted(set(requirement_lines(old)) - set(requirement_lines(new)))
            print(f"requirements.lock is not what pyproject.toml gives (run `make lock`):\n"
                  f"  would add: {missing}\n  would remove: {extra}", file=sys.stderr)
            return 1
        return 0
    new = compile_lock(argv)
    tmp = LOCK.with_name(LOCK.name + ".tmp")
    tmp.write_text(new)
    os.replace(tmp, LOCK)
    print(f"wrote {LOCK.relative_to(ROOT)}: {len(requirement_lines(new))} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
