"""The short Yeast runs whose outputs, from the reference trainer at commit bb9c07c, are stored
once in tests/fixtures/yeast_reference_runs.json (BCE and CD-GTMLL, 4 epochs, seed 3, ``last``
and ``best_val``; its ``_about`` says how): the fixture and the split those runs used."""

from __future__ import annotations

import json

from cdgtmll.methods.base import FitData
from tests.support.mirror import yeast_arrays
from tests.support.paths import ROOT

REFERENCE = ROOT / "tests" / "fixtures" / "yeast_reference_runs.json"


def reference_outputs() -> dict:
    return json.loads(REFERENCE.read_text())


def reference_data() -> FitData:
    """Yeast's first 600 rows: 450 to train on, 150 to predict."""
    X, Y = yeast_arrays(600)
    return FitData(X[:450], Y[:450], X[450:], Y[450:], [f"l{k}" for k in range(Y.shape[1])])
