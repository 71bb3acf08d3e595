r"""Sparse input for the trainer (XMC): CSR rows as torch batches, chunked prediction and the
validation columns for a CSR ``Y``. The TF-IDF linear backbone that consumes these batches is
:class:`cdgtmll.nn.backbones.tfidf.SparseLinearBackbone`; which methods get it,
:mod:`cdgtmll.nn.backbones.selection`.

:class:`SparseRows` stands in for the trainer's on-device tensors when X (or Y) is a
CSR matrix: ``rows[idx]`` with a torch/numpy index vector or a slice returns the batch
as a torch sparse COO tensor (X) or a dense float32 tensor (Y, optionally passed
through the task's ``train_targets`` per batch). The matrix stays in host memory as
CSR; only batch rows are converted, so memory is O(nnz + B x D_batch) instead of
O(n x D). :func:`validation_metrics_sparse` computes the trainer's per-epoch
validation columns for a CSR ``Y_val`` in row chunks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from cdgtmll.metrics.definitions import topk_rows
from cdgtmll.nn.val_metrics import validation_metrics

#: above this many validation cells (n_val x L) the trainer's val_mAP is not computed (NaN)
DENSE_VAL_MAX_CELLS = 50_000_000
VAL_CHUNK = 4096


def as_csr32(M: Any) -> sp.csr_matrix:
    """Canonical CSR float32 (sorted indices, no duplicates)."""
    M = sp.csr_matrix(M, dtype=np.float32)
    if not M.has_canonical_format:
        M = M.copy()
        M.sum_duplicates()
    return M


def csr_to_torch(M: sp.csr_matrix, device: torch.device | str = "cpu") -> torch.Tensor:
    """A canonical CSR block as a coalesced torch sparse COO float32 tensor on ``device``."""
    M = as_csr32(M)
    rows = np.repeat(np.arange(M.shape[0], dtype=np.int64), np.diff(M.indptr))
    ind = torch.from_numpy(np.vstack([rows, M.indices.astype(np.int64)]))
    t = torch.sparse_coo_tensor(ind, torch.from_numpy(M.data), size=M.shape, is_coalesced=True,
                                check_invariants=False)
    return t.to(device)


class SparseRows:
    """Row access to a CSR matrix for the trainer (see the module docstring).

    ``dense=False``: ``rows[i]`` -> sparse COO tensor (features). ``dense=True``: dense
    float32 tensor, passed through ``transform`` (e.g. the task's ``train_targets``);
    ``rows[i, cols]`` then also selects columns (after ``transform``)."""

    def __init__(self, M: Any, device: torch.device | str = "cpu", dense: bool = False,
                 transform: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.M = as_csr32(M)
        self.device = torch.device(device)
        self.dense = dense
        self.transform = transform

    @property
    def shape(self) -> tuple[int, int]:
        return self.M.shape

    def __len__(self) -> int:
        return self.M.shape[0]

    def _block(self, key: Any) -> sp.csr_matrix:
        if isinstance(key, slice):
            return self.M[key]
        if isinstance(key, torch.Tensor):
            key = key.detach().cpu().numpy()
        return self.M[np.asarray(key, dtype=np.int64)]

    def __getitem__(self, key: Any) -> torch.Tensor:
        cols = None
        if isinstance(key, tuple):
            key, cols = key
        block = self._block(key)
        if not self.dense:
            if cols is not None:
                raise TypeError("column selection is only supported for dense=True rows")
            return csr_to_torch(block, self.device)
        t = torch.from_numpy(block.toarray()).to(self.device)
        if self.transform is not None:
            t = self.transform(t)
        return t if cols is None else t[:, cols]


def rows_on(M: Any, device: torch.device, dense: bool = False) -> Any:
    """``SparseRows`` for a CSR matrix, a device tensor for a dense array."""
    if sp.issparse(M):
        return SparseRows(M, device, dense=dense)
    return torch.from_numpy(np.ascontiguousarray(M)).to(device)


def matrix_digest(M: Any) -> list[Any] | None:
    """Shape, dtype and sha256 of a dense array or (canonical) CSR matrix."""
    if M is None:
        return None
    if sp.issparse(M):
        M = as_csr32(M)
        h = hashlib.sha256()
        for a in (M.data, M.indices.astype(np.int64), M.indptr.astype(np.int64)):
            h.update(np.ascontiguousarray(a).tobytes())
        return [list(M.shape), "csr-" + str(M.dtype), h.hexdigest()]
    a = np.ascontiguousarray(M)
    return [list(a.shape), str(a.dtype), hashlib.sha256(a.tobytes()).hexdigest()]


@torch.no_grad()
def predict_sparse_chunks(fn: Callable[[torch.Tensor], torch.Tensor], X: Any, device: torch.device,
                          chunk: int = VAL_CHUNK):
    """Yield ``(a, b, scores[a:b] as float32 numpy)`` of ``fn`` over row chunks of ``X``
    (CSR -> sparse tensors, dense -> dense tensors)."""
    n = X.shape[0]
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        xb = csr_to_torch(X[a:b], device) if sp.issparse(X) else torch.from_numpy(
            np.ascontiguousarray(X[a:b], dtype=np.float32)).to(device)
        yield a, b, fn(xb).float().cpu().numpy()


def validation_metrics_sparse(fn: Callable[[torch.Tensor], torch.Tensor], X_val: Any, Y_val: sp.csr_matrix,
                              device: torch.device, max_dense_cells: int = DENSE_VAL_MAX_CELLS) -> dict[str, float]:
    """The trainer's validation columns for a CSR ``Y_val``: ``val_mAP`` (as the dense
    path; NaN when ``n_val x L > max_dense_cells``), ``val_microF1`` (``S > 0.5``) and
    ``val_p@1``/``val_p@3``/``val_p@5`` (ties: lower label index), in row chunks."""
    Y = sp.csr_matrix(Y_val)
    n, L = Y.shape
    keep_dense = n * L <= max_dense_cells
    parts: list[np.ndarray] = []
    tp = npred = 0.0
    hits = {1: 0, 3: 0, 5: 0}
    for a, b, s in predict_sparse_chunks(fn, X_val, device):
        y = Y[a:b].toarray() > 0
        pred = s > 0.5
        tp += float(np.logical_and(pred, y).sum())
        npred += float(pred.sum())
        kmax = min(5, L)
        rel = np.take_along_axis(y, topk_rows(s, kmax), axis=1).cumsum(axis=1)
        for k in hits:
            hits[k] += int(rel[:, min(k, kmax) - 1].sum())
        if keep_dense:
            parts.append(s)
    npos = float(Y.count_nonzero())
    out = {"val_mAP": float("nan"), "val_microF1": 2.0 * tp / (npred + npos) if npred + npos > 0 else 0.0}
    if keep_dense and parts:
        out["val_mAP"] = validation_metrics(Y.toarray(), np.concatenate(parts))["val_mAP"]
    out.update({f"val_p@{k}": (hits[k] / (n * k) if n else float("nan")) for k in hits})
    return out
