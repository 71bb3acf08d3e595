"""XR-Linear worker: PECOS ``XLinearModel`` in ``.venv/xmc/pecos`` (requirements-pecos.lock).

Run by :class:`cdgtmll.methods.xmc.baselines.XRLinearMethod` with that environment's Python; the
request loop is :mod:`worker_protocol` (imports numpy, scipy and pecos only).

The calls are those of PECOS's XR-Linear quick start (amzn/pecos README.md, "Quick Tour":
``LabelEmbeddingFactory.create(Y, X, method="pifa")``, ``Indexer.gen(label_feat,
indexer_type="hierarchicalkmeans", ...)``, ``XLinearModel.train(X, Y, C=cluster_chain)``,
``model.predict(Xt)``), with the parameters named in ``params``:
``nr_splits``, ``max_leaf_size`` (HierarchicalKMeans.TrainParams, pecos/xmc/base.py; PECOS
defaults 16 and 100), ``threshold``, ``Cp``, ``Cn`` (MLModel.TrainParams: 0.1, 1, 1),
``beam_size``, ``only_topk``, ``post_processor`` (MLModel.PredParams: 10, 20, "l3-hinge"),
``threads`` (-1: all CPUs), and ``normalize`` (rows l2-normalised before training and
prediction, as PECOS's benchmark TF-IDF inputs are). The k-means seed is the run's seed.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import scipy.sparse as sp
from worker_protocol import serve, topk_rows

DISTS = ("libpecos", "scikit-learn")


def _csr32(X: sp.csr_matrix, normalize: bool) -> sp.csr_matrix:
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()
    if normalize:
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0
        X = sp.csr_matrix(sp.diags((1.0 / norms).astype(np.float32)) @ X, dtype=np.float32)
        X.sort_indices()
    return X


class _Model:
    def __init__(self, xlm: Any, params: dict, n_labels: int) -> None:
        self.xlm, self.params, self.n_labels = xlm, params, n_labels


def probe() -> None:
    from pecos.xmc import Indexer, LabelEmbeddingFactory  # noqa: F401
    from pecos.xmc.xlinear.model import XLinearModel  # noqa: F401


def fit(X: sp.csr_matrix, Y: sp.csr_matrix, params: dict, seed: int, workdir: str) -> _Model:
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    p = params
    X = _csr32(X, bool(p["normalize"]))
    Y = sp.csc_matrix(Y, dtype=np.float32)
    emb = LabelEmbeddingFactory.create(Y, X, method="pifa")
    C = Indexer.gen(emb, indexer_type="hierarchicalkmeans", nr_splits=int(p["nr_splits"]),
                    max_leaf_size=int(p["max_leaf_size"]), seed=int(seed), threads=int(p["threads"]))
    xlm = XLinearModel.train(
        X, Y, C=C, threshold=float(p["threshold"]), Cp=float(p["Cp"]), Cn=float(p["Cn"]), threads=int(p["threads"]),
        beam_size=int(p["beam_size"]), only_topk=min(int(p["only_topk"]), Y.shape[1]),
        post_processor=str(p["post_processor"]),
    )
    return _Model(xlm, p, Y.shape[1])


def predict(model: _Model, X: sp.csr_matrix, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    p = model.params
    P = model.xlm.predict(
        _csr32(X, bool(p["normalize"])), beam_size=int(p["beam_size"]),
        only_topk=min(int(p["only_topk"]), model.n_labels), post_processor=str(p["post_processor"]),
        threads=int(p["threads"]),
    )
    P = sp.csr_matrix(P)
    rows = [(P.indices[a:b], P.data[a:b]) for a, b in zip(P.indptr[:-1], P.indptr[1:])]
    return topk_rows([r[0] for r in rows], [r[1] for r in rows], min(int(top_k), model.n_labels))


if __name__ == "__main__":
    sys.exit(serve(fit, predict, DISTS, probe))
