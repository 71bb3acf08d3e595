"""The TF-IDF linear backbone (cdgtmll.nn.backbones.tfidf): ``h(x) = x W + b`` with one sparse-dense
matmul, on Yeast rows held as CSR; its state_dict keys, its initialisation (as ``nn.Linear``,
weight drawn before bias) and sparse and dense input giving the same ``h``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from cdgtmll.nn.backbones.tfidf import SparseLinearBackbone
from cdgtmll.nn.sparse import csr_to_torch
from tests.support.mirror import yeast_arrays


def _csr_rows(n):
    X, _ = yeast_arrays(n)
    X = np.where(np.abs(X) > 0.1, X, 0.0).astype(np.float32)  # Yeast's small values dropped: a sparse matrix
    return sp.csr_matrix(X)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_keys_init_and_sparse_equals_dense():
    X = _csr_rows(200)
    D = X.shape[1]
    torch.manual_seed(4)
    bb = SparseLinearBackbone(D, hidden_dim=16)
    assert list(bb.state_dict()) == ["weight", "bias"] and bb.out_dim == 16
    torch.manual_seed(4)
    bound = 1.0 / math.sqrt(D)
    W = torch.empty(D, 16).uniform_(-bound, bound)
    b = torch.empty(16).uniform_(-bound, bound)
    assert torch.equal(bb.weight, W) and torch.equal(bb.bias, b)
    xs = csr_to_torch(X[:32])
    xd = torch.from_numpy(X[:32].toarray())
    h = bb(xs)
    torch.testing.assert_close(h, xd @ W + b, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bb(xd), h, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bb(xs.to_sparse_csr()), h, rtol=1e-5, atol=1e-6)
    h.sum().backward()
    assert bb.weight.grad is not None and bb.weight.grad.layout == torch.strided


def test_relu_no_bias_and_bad_arguments():
    X = _csr_rows(20)
    bb = SparseLinearBackbone(X.shape[1], hidden_dim=4, bias=False, activation="relu")
    assert list(bb.state_dict()) == ["weight"] and (bb(csr_to_torch(X)) >= 0).all()
    with pytest.raises(ValueError, match="activation must be None or 'relu'"):
        SparseLinearBackbone(3, activation="tanh")
    with pytest.raises(ValueError, match="in_dim and hidden_dim must be >= 1"):
        SparseLinearBackbone(0)
