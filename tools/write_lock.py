"""Write requirements.lock and environment.yml's pip section from a `pip freeze --all` listing.

Usage: python tools/write_lock.py FREEZE.txt   (run by `make lock`)
"""

import sys
from pathlib import Path

LOCK_HEADER = """# Exact pins of every package in the project's environment (pip freeze --all of a clean
# install on Python 3.11.7, x86_64). environment.yml's pip section carries the same pins
# (tests/test_environment.py checks). Regenerate with: make lock
"""
ENV_HEADER = """# Conda environment for the cdgtmll pipeline. The pip section carries exactly the pins of
# requirements.lock (tests/test_environment.py asserts it); regenerate both with `make lock`.
# Usage: conda env create -f environment.yml && conda activate cdgtmll && pip install --no-deps -e .
name: cdgtmll
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - pip:
"""


def main(freeze: str) -> None:
    pins = sorted(
        (line.strip() for line in Path(freeze).read_text().splitlines()
         if "==" in line and not line.lower().startswith("cdgtmll")),
        key=lambda pin: pin.split("==")[0].lower(),
    )
    Path("requirements.lock").write_text(LOCK_HEADER + "\n".join(pins) + "\n")
    env_pins = [p for p in pins if not p.startswith("pip==")]
    Path("environment.yml").write_text(ENV_HEADER + "".join(f"      - {p}\n" for p in env_pins))


if __name__ == "__main__":
    main(sys.argv[1])
