"""``select_epoch``: ``best_val`` predicts with the weights of the epoch with the best
validation mAP (ties: the earliest), the written predictions are that epoch's, the rule and
the epoch are in provenance.json and the tables' footnotes, and an interrupted and resumed
``best_val`` run is bit-identical to an uninterrupted one (CPU).

The data are made to overfit: 120 training rows with 35 % of their label cells flipped and
a high learning rate, so validation mAP peaks after a few epochs and falls afterwards."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch

from cdgtmll.methods.base import FitData, HparamError, RunContext, build, check_hparams
from cdgtmll.nn.checkpoint import CHECKPOINT, TRAIN_LOG, read_log
from cdgtmll.nn.trainer import TrainConfig, TrainingInterrupted, epoch_selection
from tests.support.specs import clean_spec

torch.set_num_threads(1)

EPOCHS = 10
HP = {"epochs": EPOCHS, "hidden_dim": 64, "batch_size": 32, "lr_backbone": 2e-2}
TIMING = ("epoch_time", "val_time")


def overfitting_data(n: int = 300, n_train: int = 120, d: int = 16, n_labels: int = 6):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, d)).astype(np.float32)
    Y = (rng.random((n, n_labels)) < 1 / (1 + np.exp(-(X @ rng.normal(size=(d, n_labels)))))).astype(np.uint8)
    flip = np.zeros_like(Y, dtype=bool)
    flip[:n_train] = rng.random((n_train, n_labels)) < 0.35
    Y[flip] = 1 - Y[flip]
    return X, Y


X, Y = overfitting_data()
DATA = FitData(X[:120], Y[:120], X[120:210], Y[120:210], [f"Class{k + 1}" for k in range(Y.shape[1])])


def strip(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def stopped_model_predictions(tmp_path, name: str, epoch: int, X_eval) -> np.ndarray:
    """Predictions of the weights a run holds when stopped right after ``epoch``."""
    m = build(name, {**HP, "select_epoch": "last"})
    with pytest.raises(TrainingInterrupted):
        m.fit(DATA, RunContext(seed=0, workdir=tmp_path, extra={"_stop_after_epoch": epoch}))
    state = torch.load(tmp_path / CHECKPOINT, weights_only=False)
    assert state["epoch"] == epoch and state["best"] is None  # 'last' keeps no second copy
    probe = build(name, {**HP, "select_epoch": "last", "epochs": 1})
    probe.fit(DATA, RunContext(seed=0, workdir=tmp_path / "probe"))  # a model of the same shape
    probe.model.load_state_dict(state["model"])
    return probe.predict_proba(X_eval)


def test_epoch_selection_rule():
    rows = [{"epoch": 1, "val_mAP": 0.5}, {"epoch": 2, "val_mAP": 0.7}, {"epoch": 3, "val_mAP": float("nan")},
            {"epoch": 4, "val_mAP": 0.7}, {"epoch": 5, "val_mAP": 0.6}]
    best = epoch_selection(rows, "best_val")
    assert best == {"rule": "best_val", "metric": "val_mAP", "epoch": 2, "val_mAP": 0.7, "epochs_trained": 5,
                    "last_val_mAP": 0.6}  # ties: the earliest; NaN never wins
    assert epoch_selection(rows, "last")["epoch"] == 5
    # log rows read back from train_log.csv are strings
    assert epoch_selection([{k: str(v) for k, v in r.items()} for r in rows], "best_val")["epoch"] == 2
    none = epoch_selection([{"epoch": 1, "val_mAP": float("nan")}, {"epoch": 2, "val_mAP": float("nan")}], "best_val")
    assert none["epoch"] == 2 and none["val_mAP"] is None and "no finite validation" in none["fallback"]
    with pytest.raises(ValueError, match="select_epoch"):
        epoch_selection(rows, "best")
    with pytest.raises(ValueError, match="select_epoch"):
        TrainConfig(select_epoch="first")


def test_hparam_space_accepts_the_key():
    for name in ("BCE", "CD-GTMLL", "ASL", "PE"):
        check_hparams(name, {"select_epoch": "best_val"})
        check_hparams(name, {"select_epoch": "last"})
        with pytest.raises(HparamError, match="one of 'last', 'best_val'"):
            check_hparams(name, {"select_epoch": "best"})
    assert build("BCE", {"select_epoch": "last"}).hparams()["select_epoch"] == "last"


@pytest.mark.parametrize("name", ["BCE", "CD-GTMLL"])
def test_best_val_predicts_with_the_best_epochs_weights(tmp_path, name):
    best = build(name, {**HP, "select_epoch": "best_val"}).fit(DATA, RunContext(seed=0, workdir=tmp_path / "best"))
    last = build(name, {**HP, "select_epoch": "last"}).fit(DATA, RunContext(seed=0, workdir=tmp_path / "last"))
    assert strip(best.train_log) == strip(last.train_log)  # same training: only the kept weights differ
    scores = [r["val_mAP"] for r in best.train_log]
    k = int(np.argmax(scores)) + 1  # np.argmax: the first maximum
    assert 1 < k < EPOCHS, f"the data should make validation mAP peak early, got epoch {k}: {scores}"
    assert best.epoch_selection == {"rule": "best_val", "metric": "val_mAP", "epoch": k, "val_mAP": scores[k - 1],
                                    "epochs_trained": EPOCHS, "last_val_mAP": scores[-1]}
    assert last.epoch_selection["epoch"] == EPOCHS and last.epoch_selection["rule"] == "last"

    P_best = best.predict_proba(DATA.X_val)
    assert np.array_equal(P_best, stopped_model_predictions(tmp_path / "stop", name, k, DATA.X_val))
    assert not np.array_equal(P_best, last.predict_proba(DATA.X_val))
    from cdgtmll.nn.val_metrics import validation_metrics

    assert validation_metrics(DATA.Y_val, P_best)["val_mAP"] == pytest.approx(scores[k - 1], abs=1e-6)
    state = torch.load(tmp_path / "best" / CHECKPOINT, weights_only=False)
    assert state["best"]["epoch"] == k and state["epoch"] == EPOCHS


def test_best_val_resume_is_bit_identical(tmp_path):
    hp = {**HP, "select_epoch": "best_val"}
    full = build("BCE", hp).fit(DATA, RunContext(seed=0, workdir=tmp_path / "full"))
    k = full.epoch_selection["epoch"]
    P_full = full.predict_proba(DATA.X_val)
    # stopped before the best epoch (the best changes after the resume) and after it (the
    # best weights must come back from the checkpoint)
    for stop in (k - 1, k + 2):
        wd = tmp_path / f"stop{stop}"
        with pytest.raises(TrainingInterrupted):
            build("BCE", hp).fit(DATA, RunContext(seed=0, workdir=wd, extra={"_stop_after_epoch": stop}))
        best_so_far = epoch_selection(full.train_log[:stop], "best_val")["epoch"]
        assert torch.load(wd / CHECKPOINT, weights_only=False)["best"]["epoch"] == best_so_far
        assert (best_so_far != k) == (stop < k)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the checkpoint must match (no "ignoring" warning)
            resumed = build("BCE", hp).fit(DATA, RunContext(seed=0, workdir=wd))
        assert np.array_equal(resumed.predict_proba(DATA.X_val), P_full), f"stopped after {stop}"
        assert resumed.epoch_selection == full.epoch_selection
        assert strip(read_log(wd / TRAIN_LOG)) == strip(read_log(tmp_path / "full" / TRAIN_LOG))
        # a finished run resumes to "nothing to do" and still returns the best epoch's weights
        again = build("BCE", hp).fit(DATA, RunContext(seed=0, workdir=wd))
        assert np.array_equal(again.predict_proba(DATA.X_val), P_full)


def test_best_val_without_validation_keeps_the_last_epoch(tmp_path):
    data = FitData(DATA.X_train, DATA.Y_train, None, None, DATA.label_names)
    hp = {**HP, "epochs": 2}
    with pytest.warns(UserWarning, match="no finite validation val_mAP"):
        m = build("BCE", {**hp, "select_epoch": "best_val"}).fit(data, RunContext(seed=0, workdir=tmp_path / "a"))
    ref = build("BCE", {**hp, "select_epoch": "last"}).fit(data, RunContext(seed=0, workdir=tmp_path / "b"))
    assert m.epoch_selection["epoch"] == 2 and "fallback" in m.epoch_selection
    assert np.array_equal(m.predict_proba(DATA.X_val), ref.predict_proba(DATA.X_val))


def test_run_seed_writes_the_best_epoch_and_tables_say_so(tmp_path):
    """The pipeline's job: predictions.npz holds the best epoch's scores, provenance.json the
    record; all_runs.csv and the footnotes name the rule."""
    from cdgtmll import train
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.tables.collect import collect, summarise
    from cdgtmll.tables.footnotes import epoch_rule_notes

    splits = {"train": np.arange(0, 120), "val": np.arange(120, 210), "test": np.arange(210, 300)}
    data = ProcessedData("yeast", X, Y, DATA.label_names, splits, {})
    tail = tail_labels(data.part("train")[1])
    metrics = []
    for rule in ("best_val", "last"):
        spec = clean_spec("yeast", "BCE", training={"backbone": "mlp"}, hparams={**HP, "select_epoch": rule})
        seed_dir = tmp_path / "runs" / "yeast" / "clean" / f"BCE-{rule}" / "seed0"
        pred = train.run_seed(data, tail, spec, 0, seed_dir, {})
        prov = json.loads((seed_dir / "provenance.json").read_text())
        sel = prov["epoch_selection"]
        log = read_log(seed_dir / TRAIN_LOG)
        assert sel["rule"] == rule and sel == epoch_selection(log, rule)
        if rule == "best_val":
            k = sel["epoch"]
            assert 1 < k < EPOCHS
            with np.load(pred) as z:
                P_val, P_test = z["val"], z["test"]
            stop = tmp_path / "stop"
            assert np.array_equal(P_val, stopped_model_predictions(stop, "BCE", k, data.part("val")[0]))
            assert np.array_equal(P_test, stopped_model_predictions(tmp_path / "stop2", "BCE", k, data.part("test")[0]))
        else:
            assert sel["epoch"] == EPOCHS
        (seed_dir / "metrics.json").write_text(json.dumps(
            {"global@0.5": {"mAP": 0.5, "micro_f1": 0.5, "macro_f1": 0.5, "rare_f1": 0.0}, "adaptive": {}}))
        metrics.append(seed_dir / "metrics.json")
    df = collect(metrics)
    by = {m: r for m, r in zip(df["method"], df.itertuples())}
    assert by["BCE-best_val"].select_epoch == "best_val" and by["BCE-last"].select_epoch == "last"
    assert by["BCE-last"].selected_epoch == EPOCHS and by["BCE-last"].epochs_trained == EPOCHS
    summary = summarise(df)
    notes = epoch_rule_notes(summary[summary["mode"] == "global"])
    k = int(by["BCE-best_val"].selected_epoch)
    assert len(notes) == 2
    assert notes[0].startswith("BCE-best_val: each run's predictions come from the weights of its epoch with the "
                               "highest validation mAP") and f"kept epochs: BCE-best_val {k} of {EPOCHS}" in notes[0]
    assert notes[1].startswith("BCE-last: each run's predictions come from the weights after its last training epoch")
    assert not math.isnan(float(k))
