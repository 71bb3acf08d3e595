"""Classical (non-neural) reference rows: binary-relevance logistic regression (BR-LogReg),
k-nearest neighbours (kNN-15) and a random forest (RF-300), all scikit-learn."""

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
    Not a method of the paper: a classic reference row that checks the data, split and metric
    plumbing independently of any neural code.

    Deterministic: lbfgs (scikit-learn's default solver) is a full-batch quasi-Newton method
    that draws no random numbers (``random_state`` is read by the ``sag``, ``saga`` and
    ``liblinear`` solvers only, which shuffle the data), and the scaler is exact, so the fit
    does not take the seed at all and its run is trained once (``Method.deterministic``).
    """

    def __init__(self, *, C: float, max_iter: int) -> None:
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
            clf = LogisticRegression(C=self.C, max_iter=self.max_iter, solver="lbfgs")
            self._models.append(clf.fit(Xs, y))
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        Xs = self._scaler.transform(np.asarray(X, dtype=np.float64))
        out = np.empty((Xs.shape[0], len(self._models)), dtype=np.float64)
        for k, m in enumerate(self._models):
            out[:, k] = m if isinstance(m, float) else m.predict_proba(Xs)[:, 1]
        return out


def _per_label_positive_proba(probas: Any, classes: Any, n_rows: int) -> np.ndarray:
    """``[n, L]`` probability of class 1 from scikit-learn's multi-output ``predict_proba``
    (a list with one ``[n, n_classes_l]`` array per label, columns in ``classes_[l]`` order):
    a label seen with one class only in training gets 1.0 or 0.0 (its single class)."""
    if not isinstance(probas, list):  # one label: scikit-learn returns the array itself
        probas, classes = [probas], [classes]
    out = np.zeros((n_rows, len(probas)), dtype=np.float64)
    for k, (p, c) in enumerate(zip(probas, classes)):
        hit = np.flatnonzero(np.asarray(c) == 1)
        if hit.size:
            out[:, k] = p[:, hit[0]]
    return out


@register("kNN-15")
class KNearestNeighbours(Method):
    """Multi-label k-nearest neighbours: ``sklearn.neighbors.KNeighborsClassifier`` (k = 15,
    uniform weights, Euclidean distance) on standardised features, fitted once on the label
    matrix (scikit-learn's native multi-output support); a label's score is the share of the k
    neighbours that have it.

    Not a method of the paper: a reference model of the panel over which the claims check
    takes its F1 ceilings (``above every model run here``; :mod:`cdgtmll.claims.compare`).
    Deterministic: neither the scaler nor the exact neighbour search (kd-tree, ball tree or brute
    force, as scikit-learn picks; ties broken by row order) draws a random number, so the fit does
    not take the seed and its run is trained once (``Method.deterministic``). Reference:
    scikit-learn user guide, "Nearest Neighbors classification" and "Multiclass and multioutput
    algorithms" (multioutput classification).
    """

    def __init__(self, *, n_neighbors: int) -> None:
        self.n_neighbors = int(n_neighbors)

    def fit(self, data: FitData, ctx: RunContext) -> KNearestNeighbours:
        from sklearn.neighbors import KNeighborsClassifier

        X = np.asarray(data.X_train, dtype=np.float64)
        Y = np.asarray(data.Y_train)
        self._scaler = StandardScaler().fit(X)
        k = min(self.n_neighbors, X.shape[0])
        self._model = KNeighborsClassifier(n_neighbors=k).fit(self._scaler.transform(X), Y)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        Xs = self._scaler.transform(np.asarray(X, dtype=np.float64))
        probas = self._model.predict_proba(Xs)
        return _per_label_positive_proba(probas, self._model.classes_, Xs.shape[0])


@register("RF-300")
class RandomForest(Method):
    """Multi-label random forest: ``sklearn.ensemble.RandomForestClassifier`` with 300 trees,
    fitted once on the label matrix (multi-output trees; scikit-learn's defaults otherwise:
    Gini impurity, ``max_features='sqrt'``, bootstrap samples), ``random_state`` = the run's
    training seed, one core. A label's score is the trees' mean probability of the label.

    Not a method of the paper: a reference model of the panel over which the claims check takes
    its F1 ceilings (``above every model run here``; :mod:`cdgtmll.claims.compare`). Reference:
    Breiman, "Random Forests", Machine Learning 45 (2001); scikit-learn user guide, "Forests of
    randomized trees".
    """

    def __init__(self, *, n_estimators: int, min_samples_leaf: int) -> None:
        self.n_estimators = int(n_estimators)
        self.min_samples_leaf = int(min_samples_leaf)

    def fit(self, data: FitData, ctx: RunContext) -> RandomForest:
        from sklearn.ensemble import RandomForestClassifier

        X = np.asarray(data.X_train, dtype=np.float64)
        Y = np.asarray(data.Y_train)
        self._model = RandomForestClassifier(n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
                                             random_state=int(ctx.seed), n_jobs=1).fit(X, Y)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        return _per_label_positive_proba(self._model.predict_proba(X), self._model.classes_, X.shape[0])
