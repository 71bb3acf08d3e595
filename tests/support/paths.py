"""Where things are: the checkout the tests run in, and the shared folder beside it."""

from __future__ import annotations

from pathlib import Path

#: the repository root (this file is tests/support/paths.py)
ROOT = Path(__file__).resolve().parents[2]
#: ``../shared`` beside the checkout: the dataset mirror (``datasets/``) and the paper (``paper/``)
SHARED = ROOT.parent / "shared"
