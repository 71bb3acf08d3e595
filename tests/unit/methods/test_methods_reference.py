"""The scikit-learn reference rows of the ceiling panel: kNN-15 and RF-300 give one
probability per label, deterministic for a seed, and a label seen with one class only in
training gets that class's constant."""

from __future__ import annotations

import numpy as np

from cdgtmll.methods import base
from cdgtmll.methods.base import FitData, RunContext


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 5))
    Y = (X[:, :3] > 0).astype(np.uint8)
    Y = np.column_stack([Y, np.zeros(60, np.uint8)])  # a label without a training positive
    return FitData(X_train=X, Y_train=Y, X_val=X[:10], Y_val=Y[:10], label_names=list("abcd")), X


def test_knn_and_rf_scores(tmp_path):
    data, X = _data()
    for name in ("kNN-15", "RF-300"):
        m = base.build(name, {})
        s1 = m.fit(data, RunContext(seed=1, workdir=tmp_path)).predict_proba(X)
        assert s1.shape == (60, 4) and (s1 >= 0).all() and (s1 <= 1).all()
        assert (s1[:, 3] == 0).all()  # never seen positive
        assert (s1[:, 0][data.Y_train[:, 0] == 1].mean() > s1[:, 0][data.Y_train[:, 0] == 0].mean())
        s2 = base.build(name, {}).fit(data, RunContext(seed=1, workdir=tmp_path)).predict_proba(X)
        assert np.array_equal(s1, s2)
    knn = base.build("kNN-15", {}).fit(data, RunContext(seed=0, workdir=tmp_path))
    assert np.allclose(knn.predict_proba(X) * 15, np.round(knn.predict_proba(X) * 15))  # shares of 15 neighbours
