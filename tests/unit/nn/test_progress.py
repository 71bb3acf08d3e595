"""Progress output of a training job (cdgtmll.nn.progress, cdgtmll.train, the trainer): one
line per epoch in the job's log, one line per seed in the log and on the terminal, and
the same numbers with progress on as with it off.

Runs the shipped config (config/config.yaml) at test scale (3 epochs, seeds 0 and 1) on
the first 600 rows of Yeast from the dataset mirror."""

from __future__ import annotations

import csv
import dataclasses
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cdgtmll.config import loader, plan
from cdgtmll.config.run_spec import RunSpec
from cdgtmll.methods import base
from cdgtmll.methods.base import RunContext
from cdgtmll.nn.progress import RunProgress, fmt_seconds
from cdgtmll.nn.trainer import TrainingInterrupted
from cdgtmll.train import main as run_main
from tests.support.mirror import yeast_arrays, yeast_fitdata, yeast_processed_npz
from tests.support.paths import ROOT

torch.set_num_threads(1)

EPOCHS, SEEDS = 3, [0, 1]
NUM = r"[0-9]+\.[0-9]+"
SECONDS = r"(?:[0-9.]+ s|[0-9]+m[0-9]{2}s|[0-9]+h[0-9]{2}m)"
EPOCH_LINE = re.compile(rf"^\[epoch\] yeast/clean/(?P<m>\S+) seed (?P<s>\d+) epoch (?P<e>\d+)/{EPOCHS}: "
                        rf"loss (?P<loss>{NUM}), val mAP (?P<map>{NUM}), {SECONDS}, ETA {SECONDS}$")
SEED_LINE = re.compile(rf"^\[run\] yeast/clean/(?P<m>\S+) seed (?P<s>\d+) \((?P<i>\d) of 2\) done: "
                       rf"(?:(?P<ep>\d+) epochs, )?fit {SECONDS}, val mAP (?P<map>{NUM}); "
                       rf"(?:job ETA {SECONDS}|job done in {SECONDS})$")


@pytest.fixture(scope="module")
def yeast_npz(tmp_path_factory) -> Path:
    return yeast_processed_npz(tmp_path_factory.mktemp("data") / "yeast.npz")


def spec(method: str) -> RunSpec:
    # RF-300 (10 trees): a scikit-learn row that takes the seed, so its job trains every seed (BR-LogReg
    # and kNN-15 are deterministic: one seed, tests/unit/config/test_plan_once.py)
    cfg = loader.load(ROOT / "config/config.yaml", {"training": {"default": {"epochs": EPOCHS}}, "experiments": {"seeds": SEEDS},
                                                    "methods": {"RF-300": {"n_estimators": 10}}})
    return dataclasses.replace(plan.run_spec(cfg, "yeast", "clean", method), device="cpu")


def run(data: Path, method: str, out: Path, *extra: str) -> int:
    return run_main(["--data", str(data), "--clean", str(data), "--spec", spec(method).to_json(),
                     "--outdir", str(out), *extra])


def train_log(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return [{k: v for k, v in r.items() if k not in ("epoch_time", "val_time")} for r in csv.DictReader(fh)]


def test_epoch_and_seed_lines_and_identical_metrics(yeast_npz, tmp_path, capsys):
    for m in ("BCE", "RF-300"):
        assert run(yeast_npz, m, tmp_path / "on" / m, "--progress") == 0
    out, err = capsys.readouterr()
    epochs = [EPOCH_LINE.match(line) for line in err.splitlines() if line.startswith("[epoch]")]
    assert all(epochs), err
    # one line per epoch of every seed of the neural method, in order; none for scikit-learn
    assert [(e["m"], int(e["s"]), int(e["e"])) for e in epochs] == [("BCE", s, k) for s in SEEDS
                                                                       for k in range(1, EPOCHS + 1)]
    for s in SEEDS:  # the values are train_log.csv's, as written
        log = list(csv.DictReader(open(tmp_path / "on/BCE" / f"seed{s}" / "train_log.csv")))
        mine = [e for e in epochs if int(e["s"]) == s]
        assert [f"{float(r['loss']):.5f}" for r in log] == [e["loss"] for e in mine]
        assert [f"{float(r['val_mAP']):.4f}" for r in log] == [e["map"] for e in mine]
    # stdout (the terminal under the train rule) gets the per-seed lines and nothing else
    seeds = [SEED_LINE.match(line) for line in out.splitlines()]
    assert all(seeds) and len(seeds) == 4, out
    assert [(m["m"], int(m["s"]), m["ep"]) for m in seeds] == [("BCE", 0, "3"), ("BCE", 1, "3"),
                                                               ("RF-300", 0, None), ("RF-300", 1, None)]
    assert "job ETA" in out.splitlines()[0] and "job done in" in out.splitlines()[1]
    assert [line for line in err.splitlines() if line.startswith("[run]")] == out.splitlines()  # and the log too
    # val mAP of the seed line = Eq. (E.8) on the stored validation predictions
    from cdgtmll.metrics.definitions import mean_average_precision

    Yv = yeast_arrays(600)[1][400:500]
    for m in seeds:
        with np.load(tmp_path / "on" / m["m"] / f"seed{m['s']}" / "predictions.npz") as z:
            assert m["map"] == f"{mean_average_precision(Yv, z['val']):.4f}"

    # progress changes no number: same predictions and training log without it
    for m in ("BCE", "RF-300"):
        assert run(yeast_npz, m, tmp_path / "off" / m) == 0
        for s in SEEDS:
            on, off = (tmp_path / d / m / f"seed{s}" for d in ("on", "off"))
            with np.load(on / "predictions.npz") as a, np.load(off / "predictions.npz") as b:
                assert sorted(a.files) == sorted(b.files)
                for k in a.files:
                    assert np.array_equal(a[k], b[k]), (m, s, k)
            if m == "BCE":
                assert train_log(on / "train_log.csv") == train_log(off / "train_log.csv")
    out, err = capsys.readouterr()
    assert "[epoch]" not in err and len(out.splitlines()) == 4  # seed lines without --progress too


def test_resumed_run_says_so(tmp_path):
    data = yeast_fitdata(300, 100)
    rep = RunProgress("toy/clean/BCE", [0])
    lines: list[str] = []
    rep._write = lambda line, terminal=False: lines.append(line)  # noqa: SLF001 - capture
    ctx = RunContext(seed=0, workdir=tmp_path, device="cpu", progress=rep, extra={"_stop_after_epoch": 2})
    rep.seed_started(0)
    with pytest.raises(TrainingInterrupted):
        base.get("BCE")(epochs=4, hidden_dim=32, batch_size=64).fit(data, ctx)
    assert [line.split(":")[0] for line in lines] == ["[epoch] toy/clean/BCE seed 0 epoch 1/4",
                                                      "[epoch] toy/clean/BCE seed 0 epoch 2/4"]
    lines.clear()
    rep.seed_started(0)
    base.get("BCE")(epochs=4, hidden_dim=32, batch_size=64).fit(data, RunContext(seed=0, workdir=tmp_path, device="cpu",
                                                                             progress=rep))
    assert lines[0] == "[epoch] toy/clean/BCE seed 0: resuming after epoch 2/4 (checkpoint)"
    assert [line.split(":")[0] for line in lines[1:]] == ["[epoch] toy/clean/BCE seed 0 epoch 3/4",
                                                          "[epoch] toy/clean/BCE seed 0 epoch 4/4"]
    assert rep.epochs_summary() == "epochs 3-4 (resumed)"


def test_failed_seed_names_the_error_on_the_terminal(yeast_npz, tmp_path, capsys):
    good = spec("BCE")
    bad = dataclasses.replace(good, hparams={**good.hparams, "no_such_hparam": 1})
    with pytest.raises(Exception) as ei:
        run_main(["--data", str(yeast_npz), "--clean", str(yeast_npz), "--spec", bad.to_json(),
                  "--outdir", str(tmp_path / "x")])
    out = capsys.readouterr().out
    assert out.startswith(f"[run] yeast/clean/BCE seed 0 (1 of 2) FAILED: {type(ei.value).__name__}: ")
    assert "no_such_hparam" in out and len(out.splitlines()) == 1


def test_train_rule_streams(yeast_npz, tmp_path, monkeypatch):
    """The train rule's redirection (stderr -> the job's log, stdout left to Snakemake's
    terminal): the terminal gets the per-seed lines only, the log every line; with stdout
    and stderr on one file (a terminal, ``> log 2>&1``) each line appears once."""
    with open(tmp_path / "terminal", "w") as term, open(tmp_path / "job.log", "w") as log:
        monkeypatch.setattr(sys, "stdout", term)
        monkeypatch.setattr(sys, "stderr", log)
        assert run(yeast_npz, "RF-300", tmp_path / "a", "--progress") == 0
    out = (tmp_path / "terminal").read_text().splitlines()
    assert len(out) == 2 and all(SEED_LINE.match(line) for line in out), out
    assert [line for line in (tmp_path / "job.log").read_text().splitlines() if line.startswith("[run]")] == out
    with open(tmp_path / "both.log", "w") as both:
        monkeypatch.setattr(sys, "stdout", both)
        monkeypatch.setattr(sys, "stderr", both)
        assert run(yeast_npz, "RF-300", tmp_path / "b", "--progress") == 0
    once = (tmp_path / "both.log").read_text().splitlines()
    assert len(once) == 2 and all(SEED_LINE.match(line) for line in once), once


def test_fmt_seconds():
    assert [fmt_seconds(s) for s in (0.123, 4.56, 14.2, 95.4, 245, 3725, float("nan"))] == [
        "0.12 s", "4.6 s", "14.2 s", "95.4 s", "4m05s", "1h02m", "?"]
