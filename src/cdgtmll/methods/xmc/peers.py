r"""Two XMC libraries as reference rows (**not in the paper**): napkinXC's PLT and
LibMultiLabel's linear one-vs-rest.

Neither appears in the paper's tables; they are standard, maintained XMC baselines run
through their official Python APIs with their documented defaults, so that the paper's
XMC rows can be read against real peers. Each runs in a virtual environment of its own
(``.venv/xmc/napkinxc``, ``.venv/xmc/libmultilabel``; mk/xmc-envs.mk, pinned locks
``requirements-napkinxc.lock`` / ``requirements-libmultilabel.lock``) through a worker
process (:class:`cdgtmll.methods.xmc.external.ExternalMethod`), on the processed features the
pipeline gives every row (the inputs BCE gets, before BCE's own standardisation): neither
library's protocol asks for other features when numerical features are given. When an
environment cannot be built, the tables print "not run: <reason>".

napkinXC-PLT (Jasinska-Kobus, Wydmuch, Dembczynski, Kuznetsov, Busa-Fekete, "Probabilistic
Label Trees for Extreme Multi-label Classification", JMLR 2021; napkinxc 0.7.2)
------------------------------------------------------------------------------------
``napkinxc.models.PLT`` with every default of ``PLT.__init__`` (python/napkinxc/models.py)
as in napkinXC's minimal example (docs/quick_start.rst): a label tree by balanced
hierarchical 2-means on label feature centroids (at most 100 labels under a pre-leaf
node), features scaled to unit norm plus a bias feature, one L2-regularised logistic
regression per tree node (LIBLINEAR dual, C = 10, eps = 0.1, weights below 0.1 pruned).
A node's classifier estimates P(node positive | parent positive, x); a label's
probability is the product along its path, eta_l(x) = prod_{v in path(l)} P(z_v = 1 |
z_pa(v) = 1, x), and prediction returns the top-k labels by eta by exact tree search
(uniform-cost search). ``predict_proba`` returns eta for every label of a small label space
(``top_k`` = L when L <= 2000; 100 per row above that, the pipeline's top-K format), so
scores are probability estimates in [0, 1]. Deviations: ``seed`` is the run's seed
(napkinXC's default None seeds from the clock) and ``threads`` is 1 (napkinXC's default 0
uses all CPUs, and then the model depends on thread timing: on Bibtex two 2-thread runs
with the same seed differ by up to 0.01 in score; 1 thread in a fresh worker process is
reproducible).

LibMultiLabel-1vsRest (Lin et al., "LibMultiLabel", linear module; libmultilabel 0.10.0)
------------------------------------------------------------------------------------
``libmultilabel.linear.train_1vsrest(y, x, options="")`` and ``predict_values`` as in
LibMultiLabel's linear quick start (docs: "Linear Model for Multi-label Classification"):
one binary LIBLINEAR problem per label, with the default option string (LibMultiLabel
adds ``-s 1``: L2-regularised L2-loss SVM solved in the dual, C = 1, no bias term),
decision values ``f_l(x) = w_l . x``. ``predict_proba`` returns ``sigma(f_l(x))``: a monotone
map into [0, 1] (the per-row ranking, hence P@k, is LibMultiLabel's; the 0.5 threshold is
its decision rule f > 0), **not** a calibrated probability. Numerical features pass
through LibMultiLabel's ``Preprocessor`` unchanged (it vectorises text only), so the
0/1 label matrix is given directly (labels without a training positive keep their
column; the preprocessor's binariser would drop them). Deviation: one training thread
(``threads = 1``) instead of LibMultiLabel's one per physical core. Its threads share
LIBLINEAR's process-wide coordinate-order generator (liblinear-multicore ``rand_int``), so
with several the model depends on thread timing (two 2-thread runs on Bibtex differ by
up to 0.08 in decision value); one thread in a fresh worker process is reproducible.
LibMultiLabel has no seed to set; the run's seed is unused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit

from cdgtmll.methods.base import register
from cdgtmll.methods.xmc.external import ExternalMethod

_TOP_K_SPACE = {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 1}]}


@register("napkinXC-PLT")
class NapkinXCPLTMethod(ExternalMethod):
    """napkinXC's Probabilistic Label Tree with its defaults (module docstring; not in the paper)."""

    def __init__(self, *, arity: int, max_leaves: int, liblinear_c: float, liblinear_eps: float,
                 weights_threshold: float, loss: str, threads: int,
                 top_k: int | None) -> None:
        self.arity, self.max_leaves = int(arity), int(max_leaves)
        self.liblinear_c, self.liblinear_eps = float(liblinear_c), float(liblinear_eps)
        self.weights_threshold, self.loss = float(weights_threshold), str(loss)
        self.threads = int(threads)
        self.top_k = None if top_k is None else int(top_k)

    def worker_params(self) -> dict[str, Any]:
        return {"arity": self.arity, "max_leaves": self.max_leaves, "liblinear_c": self.liblinear_c,
                "liblinear_eps": self.liblinear_eps, "weights_threshold": self.weights_threshold, "loss": self.loss,
                "threads": self.threads}


@register("LibMultiLabel-1vsRest")
class LibMultiLabel1vsRestMethod(ExternalMethod):
    """LibMultiLabel's linear one-vs-rest with its defaults (module docstring; not in the paper)."""

    def __init__(self, *, options: str, threads: int, top_k: int | None) -> None:
        self.options = str(options)
        self.threads = int(threads)
        self.top_k = None if top_k is None else int(top_k)

    def worker_params(self) -> dict[str, Any]:
        return {"options": self.options, "threads": self.threads}

    def to_unit(self, raw: np.ndarray) -> np.ndarray:
        return expit(np.asarray(raw, dtype=np.float64))

