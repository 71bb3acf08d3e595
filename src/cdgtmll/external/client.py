"""The pipeline side of an external method: one worker process per fitted model.

:class:`WorkerClient` starts ``<env python> -E -s <name>_worker.py`` (the library's own
environment, :mod:`cdgtmll.external.envs`), sends it the requests of
:mod:`cdgtmll.external.worker_protocol` and reads the replies. Arrays travel as ``.npz``
files in a private temporary directory (removed on :meth:`close`), which is also the
worker's working directory (a napkinXC model directory lives there). The worker's stderr
(and whatever the library prints) goes to this process's stderr, i.e. the job's log. The
worker stays up between ``fit`` and the ``predict`` calls, so that the model is trained
once and scored on row chunks without reloading.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from cdgtmll.external.envs import ExternalEnv


class WorkerError(RuntimeError):
    """The worker reported an exception, or died."""


def to_csr(A: Any) -> sp.csr_matrix:
    """A dense or sparse matrix as CSR (dtype kept; float16/bool/uint8 kept as is)."""
    return A.tocsr() if sp.issparse(A) else sp.csr_matrix(np.asarray(A))


def _shutdown(proc: subprocess.Popen, tmp: str) -> None:
    try:
        if proc.poll() is None:
            try:
                proc.stdin.write(json.dumps({"cmd": "exit"}) + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class WorkerClient:
    """A running worker of ``env`` (module docstring). ``label`` names the method in errors."""

    def __init__(self, env: ExternalEnv, label: str) -> None:
        self.env, self.label = env, label
        self.tmp = tempfile.mkdtemp(prefix=f"cdgtmll-{env.name}-")
        child_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        try:
            self.proc = subprocess.Popen(
                [str(env.python), "-E", "-s", str(env.worker)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=None, text=True, cwd=self.tmp, env=child_env, bufsize=1,
            )
        except OSError as e:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise WorkerError(f"{label}: cannot start the worker {env.worker.name} with {env.python}: {e}") from e
        self._finalizer = weakref.finalize(self, _shutdown, self.proc, self.tmp)
        self._n = 0

    def _path(self, stem: str) -> str:
        self._n += 1
        return str(Path(self.tmp) / f"{self._n:06d}-{stem}.npz")

    def request(self, **req: Any) -> dict:
        if self.proc.poll() is not None:
            raise WorkerError(f"{self.label}: the worker {self.env.worker.name} has exited "
                              f"(code {self.proc.returncode})")
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (OSError, ValueError) as e:
            line = ""
            err: Exception | None = e
        else:
            err = None
        if not line:
            code = self.proc.wait()
            raise WorkerError(f"{self.label}: the worker {self.env.worker.name} ({self.env.display}) died during "
                              f"'{req.get('cmd')}' (exit code {code}{'; ' + str(err) if err else ''}); "
                              "its output is in this job's log") from err
        rep = json.loads(line)
        if not rep.get("ok"):
            raise WorkerError(f"{self.label}: {self.env.display} worker failed in '{req.get('cmd')}': "
                              f"{rep.get('error')}\n{rep.get('traceback', '')}")
        return rep

    def fit(self, X: Any, Y: Any, params: dict, seed: int) -> dict:
        """Train in the worker; returns its reply (fit_seconds, fit_cpu_seconds, peak_rss_kb, versions)."""
        x, y = self._path("x-train"), self._path("y-train")
        sp.save_npz(x, to_csr(X), compressed=False)
        sp.save_npz(y, to_csr(Y), compressed=False)
        try:
            return self.request(cmd="fit", x=x, y=y, params=params, seed=int(seed), workdir=self.tmp)
        finally:
            for f in (x, y):
                Path(f).unlink(missing_ok=True)

    def predict(self, X: Any, top_k: int) -> tuple[np.ndarray, np.ndarray]:
        """The library's top-``top_k`` labels (int32, -1 = none) and raw scores per row."""
        x, out = self._path("x"), self._path("scores")
        sp.save_npz(x, to_csr(X), compressed=False)
        try:
            self.request(cmd="predict", x=x, out=out, top_k=int(top_k))
            with np.load(out) as z:
                return z["idx"], z["score"]
        finally:
            for f in (x, out):
                Path(f).unlink(missing_ok=True)

    def close(self) -> None:
        self._finalizer()
