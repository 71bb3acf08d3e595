"""Methods that declare ``deterministic = True`` (their run is trained once, n = 1:
:func:`cdgtmll.config.plan.fit_seeds`) write the same predictions under every seed.

Each declared built-in method is trained as rule ``train`` trains it (:func:`cdgtmll.train.run_seed`,
which seeds Python, NumPy and torch from the seed) with two seeds on MULAN Yeast (the full
training file: 1200 training, 150 validation, 150 test rows) and its ``predictions.npz`` files
are compared byte for byte, so a wrong declaration fails here. RF-300, which is seeded, is the
control: the same comparison tells its two seeds apart."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from cdgtmll.methods import base
from tests.support.specs import clean_spec

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def yeast_data():
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from tests.support.mirror import yeast_arrays

    X, Y = yeast_arrays()
    n = X.shape[0]
    splits = {"train": np.arange(0, n - 300), "val": np.arange(n - 300, n - 150), "test": np.arange(n - 150, n)}
    data = ProcessedData("yeast", X, Y, [f"Class{k + 1}" for k in range(14)], splits, {})
    return data, tail_labels(data.part("train")[1])


def _predictions(yeast_data, tmp_path, method: str, hparams: dict) -> list[bytes]:
    from cdgtmll import train

    data, tail = yeast_data
    spec = clean_spec("yeast", method, seeds=SEEDS, training={}, hparams=hparams)
    out = []
    for seed in SEEDS:
        pred = train.run_seed(data, tail, spec, seed, tmp_path / method / f"seed{seed}", {})
        out.append(pred.read_bytes())
    return out


def _declared() -> list[str]:
    return sorted(n for n in base.builtin_names() if base.spec_of(n).deterministic)


def test_the_declared_methods_are_the_classical_ones_that_take_no_seed():
    assert _declared() == ["BR-LogReg", "kNN-15"]
    assert not base.spec_of("RF-300").deterministic and not base.spec_of("BCE").deterministic


@pytest.mark.parametrize("method", _declared())
def test_a_deterministic_method_writes_the_same_bytes_under_every_seed(yeast_data, tmp_path, method):
    a, b = _predictions(yeast_data, tmp_path, method, {})
    assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest()
    with np.load(tmp_path / method / "seed0" / "predictions.npz") as z:
        s = z["test"]
        assert s.shape == (150, 14) and 0.0 < s.mean() < 1.0 and np.unique(s).size > 10  # a real fit (kNN-15: k/15)


def test_the_comparison_tells_a_seeded_method_apart(yeast_data, tmp_path):
    a, b = _predictions(yeast_data, tmp_path, "RF-300", {"n_estimators": 10})
    assert a != b
