"""Which backbone a neural method trains on (cdgtmll.nn.backbones.selection): the training
protocol's ``backbone`` with the training inputs, on Yeast rows (dense and as CSR), and a
method's fitted model on each."""

from __future__ import annotations

from pathlib import Path

import pytest
import scipy.sparse as sp
import torch

from cdgtmll.methods import base
from cdgtmll.methods.base import FitData, RunContext
from cdgtmll.nn.backbones.mlp import MLPBackbone
from cdgtmll.nn.backbones.resnet import FineTuneBackbone
from cdgtmll.nn.backbones.selection import MLP, RESNET50, TFIDF_LINEAR, backbone_kind, build_backbone
from cdgtmll.nn.backbones.tfidf import SparseLinearBackbone
from tests.support.mirror import yeast_arrays


@pytest.mark.parametrize(("sparse", "kind", "want"), [
    (False, None, MLP), (False, "mlp", MLP), (False, "auto", MLP), (False, "tfidf-linear", TFIDF_LINEAR),
    (False, "resnet50", MLP),  # frozen ResNet-50 features: a feature matrix, the MLP on it
    (True, None, TFIDF_LINEAR), (True, "auto", TFIDF_LINEAR), (True, "tfidf-linear", TFIDF_LINEAR),
    (True, "mlp", MLP),  # named explicitly: the MLP, densifying
])
def test_protocol_and_input_choose_the_backbone(sparse, kind, want):
    X, _ = yeast_arrays(40)
    Xa = sp.csr_matrix(X) if sparse else X
    assert backbone_kind(Xa, kind) == want
    bb = build_backbone(want, X, hidden_dim=8)
    assert isinstance(bb, MLPBackbone if want == MLP else SparseLinearBackbone) and bb.out_dim == 8


def test_image_rows_need_resnet50_in_the_protocol():
    X, _ = yeast_arrays(10)
    assert backbone_kind(X, "resnet50", "BCE", images=True) == RESNET50
    with pytest.raises(ValueError, match="BCE: image rows need the training protocol's backbone 'resnet50', got 'mlp'"):
        backbone_kind(X, "mlp", "BCE", images=True)
    bb = build_backbone(RESNET50, None, hidden_dim=8, image_cfg={"pretrained": False, "init_seed": 1})
    assert isinstance(bb, FineTuneBackbone) and bb.out_dim == 2048
    assert bb.info["mode"] == "finetune" and bb.info["weights_sha256"] == "random init" and bb.info["amp"] is None
    with pytest.raises(ValueError, match="unknown backbone 'vit'"):
        build_backbone("vit", X, hidden_dim=8)


@pytest.mark.parametrize(("sparse", "kind", "cls"), [(False, None, MLPBackbone), (True, None, SparseLinearBackbone),
                                                     (True, "mlp", MLPBackbone)])
def test_a_fitted_method_trains_on_the_chosen_backbone(tmp_path, sparse, kind, cls):
    X, Y = yeast_arrays(300)
    Xa = sp.csr_matrix(X) if sparse else X
    m = base.build("BCE", {"epochs": 1, "batch_size": 64, "hidden_dim": 16})
    extra = {"training": {"backbone": kind}} if kind else {}
    m.fit(FitData(Xa[:200], Y[:200], Xa[200:], Y[200:], [str(j) for j in range(14)]),
          RunContext(seed=0, workdir=Path(tmp_path), extra=extra))
    assert isinstance(m.model.backbone, cls) and m.model.backbone.out_dim == 16
    assert m.wants_sparse_input(Xa) == (cls is SparseLinearBackbone)
    assert ("backbone" in m.fingerprint()) == (cls is SparseLinearBackbone)  # MLP fingerprints as before
    assert torch.isfinite(torch.as_tensor(m.predict_proba(Xa[:5]))).all()
