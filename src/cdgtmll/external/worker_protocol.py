"""The worker side of an external method: a request loop run by each ``<lib>_worker.py``.

Runs inside the library's own virtual environment (``.venv/xmc/<name>``, mk/xmc-envs.mk) with
that environment's Python, started by :class:`cdgtmll.external.client.WorkerClient`.
Imports only the standard library and numpy/scipy (and, through the adapter, the library);
never ``cdgtmll`` (not installed there).

Protocol: one JSON object per line on stdin, one JSON reply per line on the protocol
stream (the process's original stdout; fd 1 is pointed at stderr at start-up so that
whatever the library prints, from Python or C, ends up in the job's log and cannot corrupt
the replies). Arrays travel as files in a directory the client owns:

* ``{"cmd": "fit", "x": X.npz, "y": Y.npz, "params": {...}, "seed": int, "workdir": dir}``
  (``X``, ``Y``: ``scipy.sparse.save_npz`` CSR) -> ``{"ok": true, "fit_seconds": float,
  "fit_cpu_seconds": float, "peak_rss_kb": int, "versions": {...}}``; ``fit_seconds`` is the
  wall time and ``fit_cpu_seconds`` the CPU time (user + system, all threads of this process:
  ``time.process_time()``) of the library's training call; ``peak_rss_kb`` is
  :func:`peak_rss_kb` right after training: the peak resident memory of this process while it
  loaded the data and trained.
* ``{"cmd": "predict", "x": X.npz, "out": S.npz, "top_k": int}`` -> ``{"ok": true}``; ``S.npz``
  holds ``idx`` (int32 ``[n, k]``) and ``score`` (float64 ``[n, k]``): per row the library's
  own top-``k`` labels and its raw scores, best first (ties: lower label index first);
  ``idx = -1`` pads rows where the library returned fewer than ``k`` labels.
* ``{"cmd": "exit"}`` (or end of input) -> the process exits 0.

Any exception -> ``{"ok": false, "error": "<type>: <message>", "traceback": "..."}``; the
process stays up for the next request. ``python <lib>_worker.py --check`` imports the
library's modules and prints its and numpy/scipy's versions as JSON (the environment's
smoke test, run by mk/build-env.sh after the install).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np
import scipy
import scipy.sparse as sp


def versions(*dists: str) -> dict[str, str | None]:
    """Installed versions of ``dists`` plus python/numpy/scipy."""
    out: dict[str, str | None] = {"python": platform.python_version(), "numpy": np.__version__,
                                  "scipy": scipy.__version__}
    for d in dists:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = None
    return out


def peak_rss_kb() -> int:
    """Peak resident memory of this process so far, in KiB: ``VmHWM`` of
    ``/proc/self/status`` (the high-water mark of this process's own address space;
    ``ru_maxrss`` would also count the parent's memory at fork, which exec keeps), else
    ``getrusage(RUSAGE_SELF).ru_maxrss``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def topk_rows(idx_lists: list, score_lists: list, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad per-row (labels, scores) lists into ``[n, k]`` arrays ordered by score descending,
    ties by lower label index; missing entries are ``idx=-1``, ``score=0``."""
    n = len(idx_lists)
    idx = np.full((n, k), -1, dtype=np.int32)
    score = np.zeros((n, k), dtype=np.float64)
    for i, (li, si) in enumerate(zip(idx_lists, score_lists)):
        li = np.asarray(li, dtype=np.int64)
        si = np.asarray(si, dtype=np.float64)
        order = np.lexsort((li, -si))[:k]
        idx[i, : order.size] = li[order]
        score[i, : order.size] = si[order]
    return idx, score


def topk_dense(S: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` of a dense score matrix, best first, ties by lower label index."""
    S = np.asarray(S, dtype=np.float64)
    k = min(int(k), S.shape[1])
    order = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return order.astype(np.int32), np.take_along_axis(S, order, axis=1)


def serve(fit: Callable[..., Any], predict: Callable[..., tuple[np.ndarray, np.ndarray]],
          dists: tuple[str, ...], probe: Callable[[], None], argv: list[str] | None = None) -> int:
    """Run the request loop (module docstring). ``fit(X, Y, params, seed, workdir)`` returns
    the model; ``predict(model, X, top_k)`` returns ``(idx, score)``; ``probe()`` imports
    the library modules that ``fit`` and ``predict`` use (``--check``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        probe()
        print(json.dumps(versions(*dists), sort_keys=True), flush=True)
        return 0
    if argv:
        print(f"usage: {sys.argv[0]} [--check]  (requests on stdin, see worker_protocol.py)", file=sys.stderr)
        return 2
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    model = None

    def reply(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "exit":
                reply({"ok": True})
                return 0
            if cmd == "fit":
                X = sp.load_npz(req["x"]).tocsr()
                Y = sp.load_npz(req["y"]).tocsr()
                t0, c0 = time.perf_counter(), time.process_time()
                model = fit(X, Y, dict(req.get("params") or {}), int(req["seed"]), req["workdir"])
                reply({"ok": True, "fit_seconds": time.perf_counter() - t0,
                       "fit_cpu_seconds": time.process_time() - c0, "peak_rss_kb": peak_rss_kb(),
                       "versions": versions(*dists)})
            elif cmd == "predict":
                if model is None:
                    raise RuntimeError("predict before fit")
                X = sp.load_npz(req["x"]).tocsr()
                idx, score = predict(model, X, int(req["top_k"]))
                tmp = req["out"] + ".tmp.npz"
                np.savez(tmp, idx=np.asarray(idx, dtype=np.int32), score=np.asarray(score, dtype=np.float64))
                os.replace(tmp, req["out"])
                reply({"ok": True})
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception as e:  # reported to the client, which raises it in the pipeline
            reply({"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
    return 0
