"""napkinXC PLT worker: ``napkinxc.models.PLT`` in ``.venv/xmc/napkinxc`` (requirements-napkinxc.lock).

Run by :class:`cdgtmll.methods.xmc.peers.NapkinXCPLTMethod` with that environment's Python;
the request loop is :mod:`worker_protocol` (imports numpy, scipy and napkinxc only).

The calls are those of napkinXC's minimal example (mwydmuch/napkinXC docs/quick_start.rst,
"Usage"; python/examples/basic_usage.py): ``plt = PLT(model_dir)``, ``plt.fit(X, Y)`` with
``Y`` as lists of label indices, then ``plt.predict_proba(X, top_k=k)`` (lists of
``(label, probability)`` pairs, the PLT's estimates of P(y_l = 1 | x)). Every PLT
constructor argument keeps napkinXC's default (python/napkinxc/models.py, ``PLT.__init__``:
hierarchical k-means tree of arity 2 with at most 100 labels per leaf node, unit-norm
features with a bias feature 1.0, LIBLINEAR L2-regularised logistic regression per node
with C = 10 and eps = 0.1, weights below 0.1 pruned, exact tree search), except
``seed`` (the run's seed; napkinXC's default None seeds from the clock) and ``threads``
(from ``params``, default 1; napkinXC's default 0 = all CPUs): with more than one thread
the trained model depends on thread timing (checked on Bibtex: scores differ by up to
0.01 between two runs with 2 threads, identical with 1 thread in a fresh process).
``params`` may set any other ``PLT`` argument by name. The model directory is the
client's temporary directory.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import scipy.sparse as sp
from worker_protocol import serve, topk_rows

DISTS = ("napkinxc",)


def probe() -> None:
    from napkinxc.models import PLT  # noqa: F401


class _Model:
    def __init__(self, plt, n_labels: int) -> None:
        self.plt, self.n_labels = plt, n_labels


def label_lists(Y: sp.csr_matrix) -> list[list[int]]:
    """Rows of a 0/1 CSR matrix as lists of label indices (napkinXC's multi-label format)."""
    Y = sp.csr_matrix(Y)
    Y.eliminate_zeros()
    Y.sort_indices()
    return [Y.indices[a:b].tolist() for a, b in zip(Y.indptr[:-1], Y.indptr[1:])]


def fit(X: sp.csr_matrix, Y: sp.csr_matrix, params: dict, seed: int, workdir: str) -> _Model:
    from napkinxc.models import PLT

    out = os.path.join(workdir, "plt-model")
    plt = PLT(out, seed=int(seed), **params)
    plt.fit(sp.csr_matrix(X, dtype=np.float64), label_lists(Y))
    return _Model(plt, Y.shape[1])


def predict(model: _Model, X: sp.csr_matrix, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    k = min(int(top_k), model.n_labels)
    pred = model.plt.predict_proba(sp.csr_matrix(X, dtype=np.float64), top_k=k)
    return topk_rows([[lab for lab, _ in row] for row in pred], [[p for _, p in row] for row in pred], k)


if __name__ == "__main__":
    sys.exit(serve(fit, predict, DISTS, probe))
