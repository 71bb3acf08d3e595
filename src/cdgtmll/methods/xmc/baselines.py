r"""Extreme multi-label (XMC) baselines: ETU, XR-Linear, XR-Transformer, MatchXML.

ETU (Schultheis et al., "Generalized test utilities for long-tail performance in
extreme multi-label classification", NeurIPS 2023; ``schultheis2023generalized``)
------------------------------------------------------------------------------------
An inference-time rule. A probabilistic base model estimates the label marginals
``eta_il = P(y_il = 1 | x_i)``: here the BCE row's model (shared MLP backbone + linear
head + BCE, shared trainer and trainer hyper-parameters). For a utility that is a
sum over labels of per-label recall / precision terms whose denominators do not
depend on the prediction, the expected test utility of a top-k prediction is linear
in the predicted sets, so the optimal prediction for row i is the ``k`` labels with
the largest ``u_il = w_l * eta_il``:

* ``utility='macro-recall'`` (default): expected macro-recall@k
  ``= 1/L sum_l E[sum_i y_il yhat_il] / (n pi_l)``, with the per-label positive count
  ``sum_i y_il`` replaced by its expectation ``n pi_l`` (the standard ETU
  approximation for recall), so ``w_l = 1 / pi_l``;
* ``utility='precision'`` (reference): expected precision@k = ``1/k sum_l eta_il
  yhat_il``, so ``w_l = 1`` and the rule is plain top-k by eta.

``pi_l`` is the training prior. Default (``priors='xcolumns'``), as the official code
(mwydmuch/xCOLUMNs, the ETU paper's code base): ``pi_l = n_l / n``
(``labels_priors`` in ``experiments/utils.py``, commit
8472bdcea353bb599933dd6fb5d6578db54d442e, called on the training labels by
``experiments/run_neurips_2023_bca_experiment.py``, commit
0e0cea7952a8944dd6457da9f7e8b286bf1ba4ee) and ``w_l = 1 / (pi_l + epsilon)``,
``epsilon = 1e-6`` (``predict_optmizing_macro_recall`` in ``xcolumns/weighted_prediction.py``,
commit ac69f9ebe7071ca51776833ccaa6eebc81e1146e), so a label without training
positives gets the weight 1e6. ``priors='laplace'`` keeps this project's former
estimate, Laplace-smoothed ``pi_l = (n_l + a) / (n + 2a)`` with ``a = prior_smoothing``
(default 1.0; ``a > 0``; no epsilon). (A test-set plug-in, ``pi_l = mean_i eta_il`` over
the rows being predicted, is another common estimate; we use the training prior so that a
row's decision does not depend on the other test rows, as the official experiment does.)
The paper does not say which utility its ETU row optimised; the default is
macro-recall@k and ``k`` defaults to 5. Neither is tuned. Ties: the official
``np.argpartition`` leaves the order of equal gains unspecified; here the lower label
index wins (below).

Output of ``predict_proba`` (the one documented behaviour): a score matrix ``S`` in
[0, 1) whose per-row ranking is the ETU ranking by ``u`` (ties: lower label index
first, the convention of :func:`cdgtmll.metrics.definitions.precision_at_k`) and whose
0.5-threshold is exactly the ETU top-k decision. Per row,
``S_il = u_il / (u_il + t_i)`` with ``t_i`` the midpoint between the k-th and
(k+1)-th largest ``u`` (the odds ``S/(1-S)`` are the utility relative to the top-k
boundary); the k chosen labels are then lifted to at least 0.5 and the others
capped just below 0.5 (only matters for exact ties at the boundary). Consequences:
P@k' for every k' is the ETU prediction at k' (the top-k rule is nested in k'), so
``k`` only sets the thresholded decision; the global@0.5 / ``method`` blocks score
the ETU top-k sets (``decision_thresholds`` returns 0.5 for every label); mAP and the
adaptive-threshold F1 of this row are computed on these utility scores, which are
*not* calibrated probabilities (per-row normalisation changes the order across
rows within a label). The paper's XMC table uses ETU for P@k only. The base model's
marginals are available from :meth:`ETUMethod.marginals`.

XR-Linear (Yu et al., PECOS; the linear stage of XR-Transformer, Zhang et al. 2021)
------------------------------------------------------------------------------------
PECOS ``XLinearModel``: PIFA label embeddings (normalised sum of the label's
positive instances' features), a hierarchical label tree by balanced (spherical)
k-means, one-vs-rest linear rankers (L2-loss SVM, dual CD) per tree level with
teacher-forced negatives, beam search at test time. The calls are PECOS's XR-Linear quick
start (amzn/pecos README.md "Quick Tour"; src/cdgtmll/external/pecos_worker.py). Runs on
the dataset's given features (the processed features every row gets: for the MULAN sets
the ARFF's binary/count vectors, for the XMC benchmarks the provided sparse TF-IDF
vectors), rows l2-normalised when ``normalize=True``; the k-means seed is the run's seed.

libpecos 1.2.8 (the newest on PyPI) declares ``numpy<2`` and ``scipy<1.14`` and fails on
numpy 2 / scipy >= 1.14 (removed ``scipy.sparse.sputils`` API, numpy-2 ``copy=``
semantics), so it runs in an environment of its own: ``.venv/xmc/pecos``, built by make
(mk/xmc-envs.mk) from ``requirements-pecos.lock`` (numpy 1.26.4, scipy 1.13.1; libpecos's
XR-Transformer dependencies torch/transformers/peft/datasets/sentencepiece are not
installed, ``pecos.xmc.xlinear`` does not import them). The method trains and predicts in
a worker process of that environment (:class:`cdgtmll.methods.xmc.external.ExternalMethod`);
the pipeline reads its predictions through the ordinary predictions format. When the
environment cannot be built, ``not_runnable_reason`` says why and the tables print "not
run: <reason>". This row is named "XR-Linear", never "XR-Transformer".
``predict_proba``: PECOS's scores (post processor ``l3-hinge``, combined along the tree
path, in [0, 1]) for the ``only_topk`` labels found by beam search, 0 for every other
label. ``threads=-1`` (PECOS: all CPUs) uses the job's thread budget ``$CDGTMLL_THREADS``
when the pipeline sets one.

XR-Transformer and MatchXML
---------------------------
Both need a pretrained transformer text encoder (and the raw texts). Hyper-parameter
``encoder`` (path to a local HuggingFace-format model directory, default None). With
no encoder, ``fit`` raises :class:`NotRunnable` ("not run: needs pretrained
encoder"; :class:`NotRunnable` is :class:`cdgtmll.methods.base.NotRunnable`, a
RuntimeError); with one, :class:`NotImplementedError` (the transformer stages are not
implemented in this pipeline). ``not_runnable_reason`` reports either case before
scheduling, so the tables show "not run: <reason>". No substitute model is ever run
under these names. XR-Linear's environment, when it cannot be built, is reported the
same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cdgtmll.methods.base import FitData, Method, NotRunnable, RunContext, register
from cdgtmll.methods.neural import BCEMethod
from cdgtmll.methods.requirements import encoder_reason, missing_encoder
from cdgtmll.methods.xmc.external import ExternalMethod, job_threads

UTILITIES = ("macro-recall", "precision")
_ROW_CHUNK = 2048


# ------------------------------------------------------------------------------- ETU


PRIORS = ("xcolumns", "laplace")
#: xCOLUMNs' ``epsilon`` of ``1 / (priors + epsilon)`` (``predict_optmizing_macro_recall``)
XCOLUMNS_EPSILON = 1e-6


def label_priors(counts: np.ndarray, n_train: int, smoothing: float = 1.0, kind: str = "xcolumns") -> np.ndarray:
    """Training priors: ``n_l / n`` (``kind='xcolumns'``, the official ``labels_priors``)
    or Laplace-smoothed ``(n_l + a) / (n + 2a)`` (``kind='laplace'``, ``a = smoothing``)."""
    counts = np.asarray(counts, dtype=np.float64)
    if kind == "xcolumns":
        return counts / float(n_train)
    if kind != "laplace":
        raise ValueError(f"ETU: unknown priors '{kind}'; choose one of {PRIORS}")
    if smoothing <= 0:
        raise ValueError(f"ETU: prior_smoothing must be > 0, got {smoothing}")
    return (counts + smoothing) / (float(n_train) + 2.0 * smoothing)


def utility_weights(utility: str, priors: np.ndarray, epsilon: float = XCOLUMNS_EPSILON) -> np.ndarray:
    """Per-label weights ``w_l`` of the linear expected utility (module docstring):
    macro-recall ``1 / (pi_l + epsilon)`` (xCOLUMNs; ``epsilon=0`` for the Laplace priors)."""
    if utility == "macro-recall":
        return 1.0 / (np.asarray(priors, dtype=np.float64) + float(epsilon))
    if utility == "precision":
        return np.ones(len(priors), dtype=np.float64)
    raise ValueError(f"ETU: unknown utility '{utility}'; choose one of {UTILITIES}")


def _rank(u: np.ndarray) -> np.ndarray:
    """Per-row label order by ``u`` descending, ties by lower label index."""
    return np.argsort(-u, axis=1, kind="stable")


def etu_topk(eta: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """ETU decision: indices ``[n, k]`` of the labels maximising expected utility,
    in decreasing order of ``u = eta * w``."""
    u = np.asarray(eta, dtype=np.float64) * np.asarray(weights, dtype=np.float64)[None, :]
    return _rank(u)[:, : min(int(k), u.shape[1])]


def etu_scores(eta: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """Scores in [0, 1) ranked like ``u = eta * w`` with ``S >= 0.5`` exactly on the ETU
    top-k set of each row (module docstring)."""
    eta = np.asarray(eta, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    n, L = eta.shape
    k = max(1, min(int(k), L))
    below = np.nextafter(0.5, 0.0)
    out = np.empty((n, L), dtype=np.float64)
    for s in range(0, n, _ROW_CHUNK):
        u = eta[s : s + _ROW_CHUNK] * w[None, :]
        order = _rank(u)
        rows = np.arange(u.shape[0])
        uk = u[rows, order[:, k - 1]]
        t = 0.5 * (uk + u[rows, order[:, k]]) if k < L else 0.5 * uk
        t = np.maximum(t, np.finfo(np.float64).tiny)[:, None]
        S = u / (u + t)
        chosen = np.zeros(u.shape, dtype=bool)
        np.put_along_axis(chosen, order[:, :k], True, axis=1)
        out[s : s + _ROW_CHUNK] = np.where(chosen, np.maximum(S, 0.5), np.minimum(S, below))
    return out


@register("ETU")
class ETUMethod(BCEMethod):
    """BCE marginals + the ETU top-k rule at prediction (module docstring)."""

    def __init__(
        self,
        *,
        utility: str,
        k: int,
        prior_smoothing: float,
        priors: str,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if utility not in UTILITIES:
            raise ValueError(f"ETU: unknown utility '{utility}'; choose one of {UTILITIES}")
        if int(k) < 1:
            raise ValueError(f"ETU: k must be >= 1, got {k}")
        if float(prior_smoothing) <= 0:
            raise ValueError(f"ETU: prior_smoothing must be > 0, got {prior_smoothing}")
        self.utility = utility
        self.k = int(k)
        if priors not in PRIORS:
            raise ValueError(f"ETU: unknown priors '{priors}'; choose one of {PRIORS}")
        self.prior_smoothing = float(prior_smoothing)
        self.priors = priors
        self.priors_: np.ndarray | None = None
        self.weights_: np.ndarray | None = None

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        super().prepare(data, ctx)
        self.priors_ = label_priors(data.counts, data.n_train, self.prior_smoothing, self.priors)
        eps = XCOLUMNS_EPSILON if self.priors == "xcolumns" else 0.0
        self.weights_ = utility_weights(self.utility, self.priors_, eps)

    def marginals(self, X: Any) -> np.ndarray:
        """The base BCE model's probabilities ``eta``."""
        return super().predict_proba(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        if self.weights_ is None:
            raise RuntimeError("ETU: predict_proba before fit")
        return etu_scores(self.marginals(X), self.weights_, self.k)

    def decision_thresholds(self) -> np.ndarray | None:
        return None if self.weights_ is None else np.full(self.weights_.shape[0], 0.5)

    def extra_outputs(self) -> dict[str, Any]:
        if self.priors_ is None:
            return {}
        return {"etu_utility": self.utility, "etu_k": self.k, "etu_prior_kind": self.priors,
                "etu_priors": [float(p) for p in self.priors_]}


# ------------------------------------------------------------------------- XR-Linear


#: the library pin of XR-Linear's environment (requirements-pecos.lock)
PECOS_PIN = "libpecos==1.2.8"


@register("XR-Linear")
class XRLinearMethod(ExternalMethod):
    """PECOS XR-Linear (XLinearModel) on the given features, in ``.venv/xmc/pecos`` (module docstring)."""

    def __init__(
        self,
        *,
        nr_splits: int,
        max_leaf_size: int,
        Cp: float,
        Cn: float,
        threshold: float,
        beam_size: int,
        only_topk: int,
        post_processor: str,
        normalize: bool,
        threads: int,
    ) -> None:
        self.nr_splits = int(nr_splits)
        self.max_leaf_size = int(max_leaf_size)
        self.Cp, self.Cn, self.threshold = float(Cp), float(Cn), float(threshold)
        self.beam_size, self.only_topk = int(beam_size), int(only_topk)
        self.post_processor = str(post_processor)
        self.normalize = bool(normalize)
        self.threads = int(threads)

    def worker_params(self) -> dict[str, Any]:
        return {"nr_splits": self.nr_splits, "max_leaf_size": self.max_leaf_size, "Cp": self.Cp, "Cn": self.Cn,
                "threshold": self.threshold, "beam_size": self.beam_size, "only_topk": self.only_topk,
                "post_processor": self.post_processor, "normalize": self.normalize,
                "threads": job_threads(self.threads, -1)}

    def request_top_k(self, n_labels: int) -> int:
        return min(self.only_topk, n_labels)


# ---------------------------------------------------------- encoder-based (not run)


class _EncoderMethod(Method):
    """A method that needs a pretrained transformer text encoder (not implemented)."""

    def __init__(self, *, encoder: str | None) -> None:
        self.encoder = None if encoder is None else str(encoder)

    def not_runnable_reason(self) -> str | None:
        return encoder_reason(self.encoder)

    def fit(self, data: FitData, ctx: RunContext) -> _EncoderMethod:
        missing = missing_encoder(self.encoder)
        if missing is not None:
            raise NotRunnable(f"{self.name}: not run: {missing}")
        raise NotImplementedError(
            f"{self.name}: the transformer stage (encoder '{self.encoder}') is not implemented in this pipeline; "
            "no substitute model is run under this name"
        )

    def predict_proba(self, X: Any) -> np.ndarray:
        raise RuntimeError(f"{self.name}: predict_proba before a successful fit")


@register("XR-Transformer")
class XRTransformerMethod(_EncoderMethod):
    """XR-Transformer (Zhang et al. 2021): needs a pretrained text encoder; not run here."""



@register("MatchXML")
class MatchXMLMethod(_EncoderMethod):
    """MatchXML (Ye et al. 2024): needs a pretrained text encoder; not run here."""

