"""Classical (non-neural) sanity baselines."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from cdgtmll.methods.base import FitData, Method, RunContext, register


@register("BR-LogReg")
class BinaryRelevanceLogReg(Method):
    """Binary relevance with per-label L2 logistic regression (scikit-learn, lbfgs).

    One independent ``LogisticRegression(C)`` per label on standardised features.
    A label with a single class in the training rows (possible after R-variant
    down-sampling) gets the constant prior probability instead of a fit.
    Not a method of the paper: a classic, fully deterministic reference row that
    checks the data, split and metric plumbing independently of any neural code.
    """

    description = "per-label logistic regression (scikit-learn), standardised features"

    hparam_space = {
        "C": {"type": "number", "exclusiveMinimum": 0},  # inverse L2 strength (scikit-learn: > 0)
        "max_iter": {"type": "integer", "minimum": 1},  # lbfgs iterations
    }

    def __init__(self, C: float = 1.0, max_iter: int = 1000) -> None:
        self.C = float(C)
        self.max_iter = int(max_iter)
        self._models: list[Any] = []

    def fit(self, data: FitData, ctx: RunContext) -> BinaryRelevanceLogReg:
        X = np.asarray(data.X_train, dtype=np.float64)
        Y = np.asarray(data.Y_train)
        self._scaler = StandardScaler().fit(X)
        Xs = self._scaler.transform(X)
        self._models = []
        for k in range(Y.shape[1]):
            y = Y[:, k]
            if y.min() == y.max():
                self._models.append(float(y.mean()))
                continue
            clf = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=ctx.seed)
            self._models.append(clf.fit(Xs, y))
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        Xs = self._scaler.transform(np.asarray(X, dtype=np.float64))
        out = np.empty((Xs.shape[0], len(self._models)), dtype=np.float64)
        for k, m in enumerate(self._models):
            out[:, k] = m if isinstance(m, float) else m.predict_proba(Xs)[:, 1]
        return out
