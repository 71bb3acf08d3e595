"""The tabular MLP backbone (cdgtmll.nn.backbones.mlp, App. E.2 "backbone MLP (2 layers, ReLU,
d' = 512)") on Yeast rows: its exact layout, the checkpoint's state_dict keys, the order its
parameters are drawn from the seeded global RNG, and the train-set standardisation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from cdgtmll.nn.backbones.mlp import MLPBackbone
from tests.support.mirror import yeast_arrays

#: checkpoints hold these keys, in this order (a rename would orphan every saved model)
STATE_KEYS = ["standardize.mean", "standardize.inv_std", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"]


def test_layout_keys_and_init_order_on_yeast():
    X, _ = yeast_arrays(300)
    torch.manual_seed(11)
    bb = MLPBackbone.from_data(X)
    assert list(bb.state_dict()) == STATE_KEYS and bb.out_dim == 512
    assert [type(m) for m in bb.mlp] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU]
    # the same draws as nn.Linear(103, 512) then nn.Linear(512, 512) from the same seed
    torch.manual_seed(11)
    ref = [nn.Linear(X.shape[1], 512), nn.Linear(512, 512)]
    for got, want in zip((bb.mlp[0], bb.mlp[2]), ref):
        assert torch.equal(got.weight, want.weight) and torch.equal(got.bias, want.bias)
    x = torch.from_numpy(X[:5])
    z = (x - torch.from_numpy(X.astype(np.float64).mean(0)).float()) / torch.from_numpy(X.astype(np.float64).std(0)).float()
    h = torch.relu(ref[1](torch.relu(ref[0](z))))
    torch.testing.assert_close(bb(x), h, rtol=1e-5, atol=1e-5)


def test_constant_columns_are_centred_not_scaled_and_layers_checked():
    X, _ = yeast_arrays(50)
    X = X.copy()
    X[:, 0] = 3.0
    bb = MLPBackbone.from_data(X, hidden_dim=8, n_layers=1)
    assert list(bb.state_dict()) == ["standardize.mean", "standardize.inv_std", "mlp.0.weight", "mlp.0.bias"]
    assert bb.standardize.inv_std[0].item() == 1.0 and bb.standardize(torch.from_numpy(X[:3]))[:, 0].abs().max() == 0
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        MLPBackbone.from_data(X, n_layers=0)
