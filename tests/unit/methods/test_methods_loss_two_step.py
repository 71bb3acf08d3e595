"""Loss-based rows (ASL, DBL, Focal, CB, LDAM, LogitAdj) and the two-step plug-in
rows (PE, SRB): construction from config-style hyper-parameters, short real training
runs on a Yeast slice, the two-step threshold rule, and the SRB surrogates."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from cdgtmll.methods.base import FitData, RunContext, available, build
from cdgtmll.methods.two_step import (
    EXP_LINEAR_ABOVE,
    SURROGATES,
    ExponentialProperLoss,
    SquaredProperLoss,
)
from cdgtmll.metrics import evaluation, thresholds
from tests.support.mirror import yeast_fitdata
from tests.support.specs import clean_spec

torch.set_num_threads(1)


# small and fast: 2 epochs, a narrow backbone
TRAIN = {"epochs": 2, "batch_size": 64, "hidden_dim": 32}

# row -> (config-style loss hparams, {criterion attribute: expected value}, author in the description)
LOSS_ROWS = {
    "ASL": ({"gamma_neg": 4.0}, {"gamma_neg": 4.0, "gamma_pos": 0.0, "clip": 0.05}, "Ridnik"),
    "DBL": ({"smooth_mu": 0.2, "lam": 2.0}, {"smooth_mu": 0.2, "lam": 2.0, "smooth_a": 0.1}, "Wu"),
    "Focal": ({"gamma": 2.0}, {"gamma": 2.0, "alpha": 0.25}, "Lin"),
    "CB": ({"beta": 0.99}, {"beta": 0.99}, "Cui"),
    "LDAM": ({"s": 30.0}, {"s": 30.0}, "Cao"),
    "LogitAdj": ({"tau": 1.0}, {"tau": 1.0}, "Menon"),
}

DEFAULTS = {
    "ASL": {"gamma_neg": 4.0, "gamma_pos": 0.0, "clip": 0.05},
    "DBL": {"smooth_mu": 0.3, "lam": 5.0},
    "Focal": {"gamma": 2.0, "alpha": 0.25},
    "CB": {"beta": 0.999},
    "LDAM": {"max_margin": 0.5, "s": 30.0},
    "LogitAdj": {"tau": 1.0},
}


@pytest.fixture(scope="module")
def yeast() -> FitData:
    return yeast_fitdata(300, 150)


def _fit(name: str, hp: dict, data: FitData, workdir: Path, seed: int = 0):
    m = build(name, {**TRAIN, **hp})
    m.fit(data, RunContext(seed=seed, workdir=workdir, device="cpu"))
    return m


def _check_proba(S: np.ndarray, n: int, L: int) -> None:
    assert S.shape == (n, L)
    assert S.dtype == np.float64
    assert np.all(np.isfinite(S)) and S.min() >= 0.0 and S.max() <= 1.0


# ---------------------------------------------------------------------------- registry


def test_all_rows_registered():
    assert {"ASL", "DBL", "Focal", "CB", "LDAM", "LogitAdj", "PE", "SRB", "BCE"} <= set(available())


@pytest.mark.parametrize("name", sorted(LOSS_ROWS))
def test_loss_row_defaults_and_description(name):
    m = build(name, {})
    hp = m.hparams()
    for k, v in DEFAULTS[name].items():
        assert hp[k] == v, (name, k)
    assert LOSS_ROWS[name][2] in m.description


@pytest.mark.parametrize("name", sorted(LOSS_ROWS) + ["PE", "SRB"])
def test_unknown_hparam_is_named(name):
    with pytest.raises(ValueError, match="bogus_knob"):
        build(name, {**TRAIN, "bogus_knob": 1})


def test_two_step_hparam_validation():
    with pytest.raises(ValueError, match="target"):
        build("PE", {"target": "weighted"})
    with pytest.raises(ValueError, match="surrogate"):
        build("SRB", {"surrogate": "hinge"})
    with pytest.raises(ValueError, match="surrogate"):  # PE's surrogate is fixed (logistic)
        build("PE", {"surrogate": "squared"})
    srb = build("SRB", {})
    assert (srb.surrogate, srb.target) == ("squared", "macro")
    assert build("PE", {}).target == "macro"


# ---------------------------------------------------------------------------- loss rows


@pytest.mark.parametrize("name", sorted(LOSS_ROWS))
def test_loss_row_trains_on_yeast(name, yeast, tmp_path):
    hp, expect, _ = LOSS_ROWS[name]
    m = _fit(name, hp, yeast, tmp_path)
    for attr, v in expect.items():  # the config-style kwargs reached the loss
        assert getattr(m.model.criterion, attr) == pytest.approx(v), (name, attr)
    assert len(m.train_log) == 2 and all(np.isfinite(r["loss"]) for r in m.train_log)
    _check_proba(m.predict_proba(yeast.X_val), 150, 14)
    assert m.decision_thresholds() is None


# ---------------------------------------------------------------------------- surrogates

Z = torch.tensor([[0.5, -2.0], [1.0, 0.0]], dtype=torch.float64)
Yb = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)


def _value_grad(loss: torch.nn.Module):
    z = Z.clone().requires_grad_(True)
    v = loss(z, Yb)
    v.backward()
    return float(v.detach()), z.grad.numpy()


def test_squared_surrogate_value_and_gradient():
    # elements (1 - y'z)^2: (1-.5)^2=.25, (1-2)^2=1 | (1+1)^2=4, (1-0)^2=1 -> rows 1.25, 5 -> mean 3.125
    v, g = _value_grad(SquaredProperLoss())
    assert v == pytest.approx(3.125, abs=1e-12)
    # d/dz = -2 y'(1 - y'z), divided by the batch size 2
    np.testing.assert_allclose(g, [[-0.5, -1.0], [2.0, -1.0]], atol=1e-12)


def test_exponential_surrogate_value_and_gradient():
    # elements exp(-y'z): e^-.5, e^-2 | e^1, e^0 ; mean over 2 rows of the row sums
    e_m05, e_m2, e_1 = 0.6065306597126334, 0.1353352832366127, 2.718281828459045
    v, g = _value_grad(ExponentialProperLoss())
    assert v == pytest.approx((e_m05 + e_m2 + e_1 + 1.0) / 2, abs=1e-12)
    # d/dz = -y' exp(-y'z) / 2
    np.testing.assert_allclose(g, [[-e_m05 / 2, e_m2 / 2], [e_1 / 2, -0.5]], atol=1e-12)


def test_exponential_overflow_guard():
    c = EXP_LINEAR_ABOVE
    z = torch.tensor([[1000.0, c]], dtype=torch.float64, requires_grad=True)
    y = torch.zeros_like(z)  # negatives: exponent u = z
    v = ExponentialProperLoss()(z, y)
    v.backward()
    assert float(v.detach()) == pytest.approx(math.exp(c) * (1 + 1000 - c) + math.exp(c), rel=1e-12)
    np.testing.assert_allclose(z.grad.numpy(), [[math.exp(c), math.exp(c)]], rtol=1e-12)
    # float32 training dtype stays finite too
    z32 = torch.tensor([[1e4, -1e4]], dtype=torch.float32)
    assert torch.isfinite(ExponentialProperLoss()(z32, torch.tensor([[0.0, 1.0]])))


@pytest.mark.parametrize("surrogate", sorted(SURROGATES))
@pytest.mark.parametrize("eta", [0.05, 0.3, 0.8])
def test_link_recovers_conditional_probability(surrogate, eta):
    """Proper composite: the link maps the minimiser of the conditional risk
    eta*l(+1,z) + (1-eta)*l(-1,z) to eta."""
    loss = SURROGATES[surrogate]

    def risk(z: float) -> float:
        zt = torch.tensor([[z]], dtype=torch.float64)
        return float(loss.elementwise(zt, torch.tensor([[eta]], dtype=torch.float64)))

    z_star = minimize_scalar(risk, bounds=(-10, 10), method="bounded", options={"xatol": 1e-10}).x
    p = float(loss.link(torch.tensor([[z_star]], dtype=torch.float64)))
    assert p == pytest.approx(eta, abs=1e-6)
    # closed forms: z* = 2 eta - 1 (squared), 0.5 log(eta / (1 - eta)) (exponential)
    closed = 2 * eta - 1 if surrogate == "squared" else 0.5 * math.log(eta / (1 - eta))
    assert z_star == pytest.approx(closed, abs=1e-6)


def test_squared_link_clips():
    p = SquaredProperLoss.link(torch.tensor([[-3.0, -1.0, 0.0, 0.5, 1.0, 4.0]]))
    np.testing.assert_allclose(p.numpy(), [[0.0, 0.0, 0.5, 0.75, 1.0, 1.0]])


# ---------------------------------------------------------------------------- two-step rows


def test_pe_macro_thresholds_are_tuned_on_validation(yeast, tmp_path):
    pe = _fit("PE", {}, yeast, tmp_path)
    S_val = pe.predict_proba(yeast.X_val)
    _check_proba(S_val, 150, 14)
    tau = pe.decision_thresholds()
    assert tau.shape == (14,)
    np.testing.assert_array_equal(tau, thresholds.tune_thresholds(yeast.Y_val, S_val))
    assert len(np.unique(tau)) > 1  # per-label
    out = pe.extra_outputs()
    json.dumps(out)
    assert out["two_step"]["target"] == "macro" and out["two_step"]["link"] == "sigmoid(z)"
    np.testing.assert_array_equal(out["two_step"]["thresholds"], tau)
    # both plug-in rules are tuned whatever the target: per label (macro) and shared (micro)
    np.testing.assert_array_equal(out["two_step"]["per_label_thresholds"], tau)
    assert out["two_step"]["shared_threshold"] == thresholds.tune_global_threshold(yeast.Y_val, S_val)
    assert out["two_step"]["metric_rules"] == {"micro_f1": "micro", "macro_f1": "macro", "rare_f1": "macro"}
    # tuned per-label F1 on validation is at least F1 at 0.5
    assert out["two_step"]["val_macroF1_tuned"] >= out["two_step"]["val_macroF1_at_0.5"]
    assert out["two_step"]["val_microF1_tuned"] >= out["two_step"]["val_microF1_at_0.5"]

    # step 1 of PE is the BCE row: identical probabilities on the same seed
    bce = _fit("BCE", {}, yeast, tmp_path / "bce")
    np.testing.assert_array_equal(S_val, bce.predict_proba(yeast.X_val))


def test_pe_micro_has_one_shared_threshold(yeast, tmp_path):
    pe = _fit("PE", {"target": "micro"}, yeast, tmp_path)
    S_val = pe.predict_proba(yeast.X_val)
    tau = pe.decision_thresholds()
    assert tau.shape == (14,) and np.all(tau == tau[0])
    assert tau[0] == thresholds.tune_global_threshold(yeast.Y_val, S_val)
    out = pe.extra_outputs()["two_step"]
    assert out["target"] == "micro" and out["shared_threshold"] == tau[0]
    np.testing.assert_array_equal(out["per_label_thresholds"], thresholds.tune_thresholds(yeast.Y_val, S_val))
    assert out["val_microF1_tuned"] >= out["val_microF1_at_0.5"]


@pytest.mark.parametrize("name", ["PE", "SRB"])
def test_plugin_rows_score_each_f1_column_with_its_own_rule(name, tmp_path):
    """Koyejo et al.'s plug-in rule is one shared threshold for micro-F1 and one
    threshold per label for macro-F1. A run through run.py + evaluate.py scores the row's
    Micro-F1 at the validation-tuned shared threshold and Macro-/Rare-F1 at the per-label
    thresholds (default target 'macro'), and records the rule of each column."""
    from cdgtmll import train as run
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run as evaluate
    from tests.support.mirror import yeast_arrays

    X, Y = yeast_arrays(900)
    splits = {"train": np.arange(0, 500), "val": np.arange(500, 700), "test": np.arange(700, 900)}
    data = ProcessedData("yeast-slice", X, Y, [f"Class{k + 1}" for k in range(14)], splits, {})
    spec = clean_spec("yeast-slice", name, training={"backbone": "mlp", **TRAIN})
    tail = tail_labels(Y[splits["train"]])
    pred = run.run_seed(data, tail, spec, 0, tmp_path / "seed0", {})
    res = evaluate.evaluate_run(data, pred, tail, 0.5)
    with np.load(pred) as z:
        S_val, S_test = z["val"], z["test"]
    Y_val, Y_test = Y[splits["val"]], Y[splits["test"]]
    shared = thresholds.tune_global_threshold(Y_val, S_val)
    per_label = thresholds.tune_thresholds(Y_val, S_val)
    at_shared = evaluation.evaluate(Y_test, S_test, tail, shared)
    at_per_label = evaluation.evaluate(Y_test, S_test, tail, per_label)
    block = res["method"]
    assert block["micro_f1"] == at_shared["micro_f1"]
    assert block["macro_f1"] == at_per_label["macro_f1"]
    assert block["rare_f1"] == at_per_label["rare_f1"]
    assert at_shared["micro_f1"] != at_per_label["micro_f1"]  # the two rules are different decisions here
    assert block["decision_rules"] == {"micro_f1": thresholds.RULE_PLUGIN_MICRO, "macro_f1": thresholds.RULE_PLUGIN_MACRO,
                                       "rare_f1": thresholds.RULE_PLUGIN_MACRO}
    assert res["method_thresholds_by_rule"]["micro"] == shared
    np.testing.assert_array_equal(res["method_thresholds_by_rule"]["macro"], per_label)
    np.testing.assert_array_equal(res["method_thresholds"], per_label)  # target 'macro': the saved decision
    # both rules travel with the predictions (the declared output), not in a side file
    with np.load(pred) as z:
        assert float(z["method_thresholds_micro"][0]) == shared and np.all(z["method_thresholds_micro"] == shared)
        np.testing.assert_array_equal(z["method_thresholds_macro"], per_label)
    (tmp_path / "seed0" / "method_outputs.json").unlink()  # diagnostics only: evaluation does not read it
    again = evaluate.evaluate_run(data, pred, tail, 0.5)
    assert again["method"] == block


@pytest.mark.parametrize("surrogate", ["squared", "exponential"])
def test_srb_trains_and_differs_from_pe(surrogate, yeast, tmp_path):
    srb = _fit("SRB", {"surrogate": surrogate}, yeast, tmp_path / "srb")
    S = srb.predict_proba(yeast.X_val)
    _check_proba(S, 150, 14)
    np.testing.assert_array_equal(srb.decision_thresholds(), thresholds.tune_thresholds(yeast.Y_val, S))
    out = srb.extra_outputs()["two_step"]
    assert out["surrogate"] == surrogate and out["link"] == type(srb)._LINK_NAMES[surrogate]
    # the probabilities are the link of the head's logits
    with torch.no_grad():
        z = srb.model(torch.from_numpy(yeast.X_val))
    np.testing.assert_allclose(S, SURROGATES[surrogate].link(z).numpy(), atol=1e-7)

    pe = _fit("PE", {}, yeast, tmp_path / "pe")
    S_pe = pe.predict_proba(yeast.X_val)
    assert np.abs(S - S_pe).max() > 1e-3


def test_same_seed_identical_output(yeast, tmp_path):
    a = _fit("SRB", {"surrogate": "exponential"}, yeast, tmp_path / "a", seed=3)
    b = _fit("SRB", {"surrogate": "exponential"}, yeast, tmp_path / "b", seed=3)
    c = _fit("SRB", {"surrogate": "exponential"}, yeast, tmp_path / "c", seed=4)
    Sa, Sb, Sc = (m.predict_proba(yeast.X_val) for m in (a, b, c))
    np.testing.assert_array_equal(Sa, Sb)
    np.testing.assert_array_equal(a.decision_thresholds(), b.decision_thresholds())
    assert not np.array_equal(Sa, Sc)
