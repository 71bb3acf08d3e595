"""ETU, LSFA and MLC-NC against numbers from their official code (``tests/fixtures/official``,
written by :mod:`tests.support.official_refs`, which ports the official functions verbatim)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cdgtmll.methods.data_side.lsfa import FeatureCVAE
from cdgtmll.methods.mlcnc import alignment_loss
from cdgtmll.methods.xmc.baselines import ETUMethod, etu_topk, label_priors, utility_weights
from tests.support.official_refs import FIXTURES


def _load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


# --------------------------------------------------------------------------- ETU (xCOLUMNs)


def test_etu_priors_weights_and_topk_equal_xcolumns():
    ref = _load("etu")
    counts, n = np.asarray(ref["Y_train_counts"]), ref["n_train"]
    assert ETUMethod().priors == "xcolumns"  # the default
    priors = label_priors(counts, n)
    np.testing.assert_allclose(priors, ref["priors"], rtol=1e-12)
    w = utility_weights("macro-recall", priors)
    np.testing.assert_allclose(w, ref["weights"], rtol=1e-12)
    assert np.all(np.isfinite(w)) and w.max() == pytest.approx(1e6)  # labels with no training positive
    eta = np.asarray(ref["y_proba"])
    ours = np.zeros_like(eta)
    np.put_along_axis(ours, etu_topk(eta, w, ref["k"]), 1.0, axis=1)
    np.testing.assert_array_equal(ours, ref["y_pred"])  # same top-k sets (official order unspecified)


def test_etu_laplace_option_differs_from_xcolumns():
    ref = _load("etu")
    counts, n = np.asarray(ref["Y_train_counts"]), ref["n_train"]
    lap = label_priors(counts, n, smoothing=1.0, kind="laplace")
    np.testing.assert_allclose(lap, (counts + 1.0) / (n + 2.0))
    assert ETUMethod(priors="laplace").hparams()["priors"] == "laplace"
    with pytest.raises(ValueError, match="priors"):
        ETUMethod(priors="uniform")


# --------------------------------------------------------------------------- LSFA (FeatsVAE)

_KEYS = {"linear.0": "encoder.0", "linear_mu.0": "mu.0", "linear_logvar.0": "logvar.0", "bn1": "bn"}


def _ours_from_official(ref: dict) -> FeatureCVAE:
    model = FeatureCVAE(ref["feat_dim"], hidden_dim=ref["hidden_dim"], relu_output=True)
    state = {}
    for key, value in ref["state_dict"].items():
        prefix, _, leaf = key.rpartition(".")
        state[f"{_KEYS.get(prefix, prefix)}.{leaf}"] = torch.tensor(value)
    model.load_state_dict(state)  # strict: the same parameters and buffers, name for name
    return model


def test_lsfa_generator_equals_official_featsvae():
    ref = _load("lsfa")
    model = _ours_from_official(ref)
    x, p = torch.tensor(ref["x"]), torch.tensor(ref["p"])
    seeds = ref["seeds"]
    model.train()
    recon, mu, logvar = model(x, p, torch.Generator().manual_seed(seeds["train_forward"]))
    for name, ours in (("mu", mu), ("logvar", logvar), ("recon", recon)):
        np.testing.assert_allclose(ours.detach().numpy(), ref["train"][name], rtol=1e-6, atol=1e-7, err_msg=name)
    assert (np.asarray(ref["train"]["mu"]) == 0).any() and (np.asarray(ref["train"]["logvar"]) == 0).any()  # ReLUs act
    model.eval()
    with torch.no_grad():  # BatchNorm running statistics after one training batch
        recon, mu, logvar = model(x, p, torch.Generator().manual_seed(seeds["eval_forward"]))
        gen = model.decode(torch.tensor(ref["Z"]), p)  # official generate(): relu(bn1(generator([Z, p])))
    np.testing.assert_allclose(recon.numpy(), ref["eval"]["recon"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gen.numpy(), ref["generated"], rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- MLC-NC (FeatureLabelLoss)


@pytest.mark.parametrize("case", ["generic", "exact_cosines"])
def test_mlcnc_alignment_equals_official_feature_label_loss(case):
    ref = _load("mlcnc")[case]
    f, m, y = (torch.tensor(ref[k]) for k in ("features", "embeddings", "labels"))
    assert alignment_loss(f, m, y).item() == pytest.approx(ref["loss"], rel=1e-6)
