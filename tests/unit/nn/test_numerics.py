"""The training numerics settings: AdamW's implementation by device
(``optimizer_impl: auto``), TF32 and cuDNN's autotuner, each set on every run, restored after
it, recorded in its provenance (``numerics``) and named in the tables' footnotes when not the
default; on real Yeast through :func:`cdgtmll.train.run_seed` and the tables' own collection."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from cdgtmll.methods.base import RunContext, build
from cdgtmll.nn import trainer
from cdgtmll.nn.trainer import TrainConfig, resolve_optimizer_impl, run_numerics
from tests.support.runs import prepared_yeast, train_and_evaluate, yeast_fit_data
from tests.support.specs import clean_spec

torch.set_num_threads(1)

HP = {"epochs": 2, "batch_size": 256, "hidden_dim": 32}


@pytest.fixture(scope="module")
def yeast(tmp_path_factory, mirror):
    return yeast_fit_data(tmp_path_factory.mktemp("yeast_num"), mirror)


def test_auto_takes_for_loop_on_cpu_and_foreach_on_cuda():
    assert resolve_optimizer_impl("auto", "cpu")[0] == "for_loop"
    assert resolve_optimizer_impl("auto", torch.device("cuda", 0))[0] == "foreach"
    assert resolve_optimizer_impl("fused", "cuda") == ("fused", "configured (optimizer_impl: fused)")
    with pytest.raises(ValueError, match="optimizer_impl"):
        resolve_optimizer_impl("adam8bit", "cpu")
    num = run_numerics(TrainConfig(), "cpu", images=False)
    assert (num["optimizer_impl"], num["allow_tf32"], num["cudnn_benchmark"]) == ("for_loop", False, False)
    assert run_numerics(TrainConfig(), "cuda", images=True)["cudnn_benchmark"] is True
    assert run_numerics(TrainConfig(cudnn_benchmark=False), "cuda", images=True)["cudnn_benchmark"] is False
    for bad in ({"allow_tf32": "yes"}, {"cudnn_benchmark": "fast"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TrainConfig(**bad)


def test_auto_on_cpu_is_the_for_loop_path_bit_for_bit(yeast, tmp_path, monkeypatch):
    """``auto`` builds AdamW with ``foreach=False`` on the CPU, and its predictions are the
    explicit ``for_loop``'s; only the explicit choice enters the hyper-parameters (run spec)."""
    seen = []
    real = torch.optim.AdamW

    def spy(*a, **kw):
        seen.append((kw.get("foreach"), kw.get("fused")))
        return real(*a, **kw)

    monkeypatch.setattr(torch.optim, "AdamW", spy)
    auto = build("BCE", HP).fit(yeast, RunContext(seed=0, workdir=tmp_path / "auto"))
    loop = build("BCE", {**HP, "optimizer_impl": "for_loop"}).fit(yeast, RunContext(seed=0, workdir=tmp_path / "loop"))
    assert seen == [(False, None), (False, None)]
    assert np.array_equal(auto.predict_proba(yeast.X_val), loop.predict_proba(yeast.X_val))
    assert "optimizer_impl" not in auto.hparams() and loop.hparams()["optimizer_impl"] == "for_loop"
    assert auto.numerics["optimizer_impl"] == "for_loop" and auto.numerics["optimizer_impl_requested"] == "auto"
    assert "CPU" in auto.numerics["optimizer_impl_reason"]


def test_flags_are_set_during_training_and_restored(yeast, tmp_path, monkeypatch):
    seen = []
    real = trainer.run_steps

    def spy(*a, **kw):
        seen.append(trainer.backend_flags())
        return real(*a, **kw)

    monkeypatch.setattr(trainer, "run_steps", spy)
    before = trainer.backend_flags()
    trainer.set_backend_flags((True, True, True))  # not what the run asks for
    try:
        m = build("BCE", {**HP, "allow_tf32": False, "cudnn_benchmark": False})
        m.fit(yeast, RunContext(seed=0, workdir=tmp_path / "a"))
        assert seen == [(False, False, False)] * HP["epochs"]
        assert trainer.backend_flags() == (True, True, True)
        seen.clear()
        build("BCE", {**HP, "allow_tf32": True}).fit(yeast, RunContext(seed=0, workdir=tmp_path / "b"))
        assert seen == [(True, True, False)] * HP["epochs"]  # tabular: no autotuner under auto
    finally:
        trainer.set_backend_flags(before)


def test_provenance_and_footnote_name_non_default_settings(tmp_path, mirror):
    from cdgtmll.tables.collect import collect, summarise
    from cdgtmll.tables.footnotes import footnotes
    from cdgtmll.tables.layout import build_table, configured_columns

    clean, clean_path = prepared_yeast(tmp_path, mirror)
    paths = []
    for method, hp in (("BCE", {**HP, "allow_tf32": True, "cudnn_benchmark": False}), ("CD-GTMLL", HP)):
        rundir = tmp_path / "runs" / "yeast" / "clean" / method
        spec = clean_spec("yeast", method, training={"backbone": "mlp"}, hparams=hp)
        train_and_evaluate(clean, clean_path, clean_path, rundir, spec)
        paths.append(rundir / "seed0" / "metrics.json")
    prov = {p.parent.parent.name: json.loads((p.parent / "provenance.json").read_text())["numerics"] for p in paths}
    assert prov["BCE"]["allow_tf32"] is True and prov["BCE"]["cudnn_benchmark_requested"] is False
    assert prov["CD-GTMLL"] == {**prov["CD-GTMLL"], "optimizer_impl": "for_loop", "optimizer_impl_requested": "auto",
                                "allow_tf32": False, "cudnn_benchmark": False, "cudnn_benchmark_requested": "auto",
                                "device": "cpu"}
    summary = summarise(collect(paths))
    table = build_table(summary, "global", configured_columns(1, [("yeast", "Yeast")], {}), (), ["BCE", "CD-GTMLL"],
                        number=1)
    notes = [n for n in footnotes(table, summary, "global", 0.5) if "provenance.json numerics" in n]
    assert notes == ["BCE: trained with allow_tf32: true, cudnn_benchmark: false (not the default; it "
                     "changes results in the last digits). Per run: provenance.json numerics."]
