"""LibMultiLabel linear one-vs-rest worker: ``libmultilabel.linear`` in ``.venv/xmc/libmultilabel``
(requirements-libmultilabel.lock).

Run by :class:`cdgtmll.methods.xmc.peers.LibMultiLabel1vsRestMethod` with that environment's
Python; the request loop is :mod:`worker_protocol` (imports numpy, scipy and libmultilabel).

The calls are those of LibMultiLabel's linear quick start (docs "Linear Model for
Multi-label Classification", auto_examples/plot_linear_quickstart.py; API page "Linear
Classifier API": ``model = linear.train_1vsrest(train_y, train_x, options)``,
``linear.predict_values(model, test_x)``): one LIBLINEAR binary problem per label, with
``options`` the LIBLINEAR option string (default ``""``, as in the quick start:
LibMultiLabel then adds ``-s 1`` (L2-regularised L2-loss SVM, dual), LIBLINEAR's C = 1 and
no bias term). Features are given numerically, so LibMultiLabel's ``Preprocessor`` would
pass ``x`` through unchanged (it vectorises text only) and only binarise the labels; the
pipeline's 0/1 label matrix is given directly, so that labels without a training positive
keep their column. ``predict_values`` returns the raw decision values ``x.w_l`` (+ the
model's thresholds, 0 for 1vsrest).

Threads: ``train_1vsrest`` trains labels on ``psutil.cpu_count(logical=False)`` Python
threads, all drawing LIBLINEAR's coordinate order from one process-wide generator
(liblinear-multicore ``linear.cpp``, ``rand_int``: a static seed, not per thread), so
with more than one thread the result depends on thread timing. ``params["threads"]``
(default 1) replaces that count for the call; with 1 thread and a fresh worker process per
fit the run is reproducible (checked: identical scores in two processes; two threads
differ by up to 0.08 in decision value on Bibtex). LibMultiLabel sets no seed; there is
none to set (the generator starts from the thread number), so ``seed`` is unused.
"""

from __future__ import annotations

import sys
from unittest import mock

import numpy as np
import scipy.sparse as sp
from worker_protocol import serve, topk_dense

DISTS = ("libmultilabel", "liblinear-multicore")


def probe() -> None:
    import libmultilabel.linear  # noqa: F401


def fit(X: sp.csr_matrix, Y: sp.csr_matrix, params: dict, seed: int, workdir: str):
    import libmultilabel.linear as linear
    import libmultilabel.linear.linear as impl

    # train_1vsrest starts one training thread per psutil.cpu_count(logical=False) (it has
    # no argument for it): the count is set to params["threads"] for the call
    threads = int(params.get("threads", 1))
    with mock.patch.object(impl.psutil, "cpu_count", lambda logical=True: threads):
        return linear.train_1vsrest(sp.csr_matrix(Y, dtype=np.float64), sp.csr_matrix(X, dtype=np.float64),
                                    options=str(params.get("options", "")), verbose=False)


def predict(model, X: sp.csr_matrix, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    import libmultilabel.linear as linear

    return topk_dense(linear.predict_values(model, sp.csr_matrix(X, dtype=np.float64)), top_k)


if __name__ == "__main__":
    sys.exit(serve(fit, predict, DISTS, probe))
