"""Base class of the methods whose library runs in an environment of its own.

A method's spec names its environment (``env``, :mod:`cdgtmll.external.envs`); its class, the
parameters it sends to its worker (:meth:`ExternalMethod.worker_params`) and how the
library's raw scores become scores in [0, 1] (:meth:`ExternalMethod.to_unit`). Everything
else is the ordinary :class:`~cdgtmll.methods.base.Method` contract: ``fit`` trains in the
worker (the training rows the pipeline gives every method, as CSR), ``predict_proba``
returns a dense ``[n, L]`` matrix (labels the library did not return score 0), and
``cdgtmll.train`` writes it to ``predictions.npz`` exactly as for any other row, so
evaluation and tables are unchanged.

Provenance: :meth:`ExternalMethod.hparams` adds the environment, the lock's sha256 and the
library's pin to the run spec's ``resolved_hparams`` (a lock change therefore re-runs the
method's jobs, as a changed hyper-parameter does), and ``method_outputs.json`` records the
versions the worker imported, its training wall time and CPU time and its peak RSS.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from cdgtmll.external.client import WorkerClient
from cdgtmll.external.envs import ExternalEnv
from cdgtmll.methods.base import FitData, Method, NotRunnable, RunContext
from cdgtmll.methods.requirements import env_hparams, env_reason

#: labels requested per row when the label space is large (the pipeline's top-K format
#: keeps this many; cdgtmll.train.TOPK)
LARGE_TOP_K = 100
#: label spaces up to this size are scored densely (cdgtmll.train.TOPK_MIN_LABELS)
DENSE_MAX_LABELS = 2000


def job_threads(threads: int, all_cpus: int) -> int:
    """``threads``, except that the library's "all CPUs" value becomes the job's thread
    budget ``$CDGTMLL_THREADS`` when the pipeline sets one (Snakemake's ``threads``)."""
    budget = os.environ.get("CDGTMLL_THREADS")
    return int(budget) if threads == all_cpus and budget and int(budget) > 0 else int(threads)


class ExternalMethod(Method):
    """A method run by a worker in ``.venv/xmc/<spec.env>`` (module docstring)."""

    _client: WorkerClient | None = None
    n_labels: int = 0
    fit_info_: dict | None = None

    def env(self) -> ExternalEnv:
        return ExternalEnv.of(self.spec.env)

    def worker_params(self) -> dict[str, Any]:
        """The library parameters sent to the worker with ``fit``."""
        return {}

    def request_top_k(self, n_labels: int) -> int:
        """Labels per row to ask the library for: ``self.top_k`` when a subclass sets one,
        else all labels of a small label space and ``LARGE_TOP_K`` of a large one."""
        k = getattr(self, "top_k", None)
        if k is not None:
            return min(int(k), n_labels)
        return n_labels if n_labels <= DENSE_MAX_LABELS else min(LARGE_TOP_K, n_labels)

    def to_unit(self, raw: np.ndarray) -> np.ndarray:
        """The library's raw scores mapped to [0, 1], order-preserving."""
        return np.clip(raw, 0.0, 1.0)

    def hparams(self) -> dict[str, Any]:
        return env_hparams(self.spec.env)

    def not_runnable_reason(self) -> str | None:
        return env_reason(self.spec.env)

    def fit(self, data: FitData, ctx: RunContext) -> ExternalMethod:
        env = self.env()
        reason = env_reason(self.spec.env)
        if reason is not None:
            raise NotRunnable(f"{self.name}: not run: {reason}")
        self.close()
        self.n_labels = int(data.Y_train.shape[1])
        self._client = WorkerClient(env, self.name)
        rep = self._client.fit(data.X_train, data.Y_train, self.worker_params(), ctx.seed)
        self.fit_info_ = {
            "env": env.display, "lock": env.lock.name, "lock_sha256": env.lock_sha256(),
            "versions": rep.get("versions"), "worker_fit_seconds": round(float(rep["fit_seconds"]), 3),
            "worker_fit_cpu_seconds": round(float(rep["fit_cpu_seconds"]), 3),
            "worker_peak_rss_mb": round(int(rep["peak_rss_kb"]) / 1024.0, 1), "params": self.worker_params(),
        }
        return self

    def raw_topk(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """The library's own top labels and raw scores for the rows of ``X`` (worker round trip)."""
        if self._client is None:
            raise RuntimeError(f"{self.name}: predict_proba before fit")
        return self._client.predict(X, self.request_top_k(self.n_labels))

    def predict_proba(self, X: Any) -> np.ndarray:
        idx, raw = self.raw_topk(X)
        S = np.zeros((idx.shape[0], self.n_labels), dtype=np.float64)
        rows, cols = np.nonzero(idx >= 0)
        S[rows, idx[rows, cols]] = self.to_unit(raw[rows, cols])
        return S

    def extra_outputs(self) -> dict[str, Any]:
        return {"external": self.fit_info_} if self.fit_info_ else {}

    def close(self) -> None:
        """Stop the worker (it also stops when this object is collected or the process exits)."""
        if self._client is not None:
            self._client.close()
            self._client = None
