"""The tables' footnote names the run a row's first stage was read from (PE and ETU read the BCE
run of the same seeds), and says why a row fitted its own (no BCE run on that variant), on real
runs: MULAN Yeast prepared from the mirror and its R-variant (severity 0.40), trained briefly by
:func:`cdgtmll.train.run_seed`, evaluated and collected as the tables collect them."""

from __future__ import annotations

import dataclasses

from cdgtmll.config import loader, plan
from cdgtmll.config.run_spec import RunSpec
from cdgtmll.tables.collect import collect, summarise
from cdgtmll.tables.footnotes import footnotes
from cdgtmll.tables.layout import build_table, configured_columns
from tests.support.paths import ROOT
from tests.support.runs import prepared_yeast, train_and_evaluate

VARIANT = "R0.40-s0"


def test_the_footnote_names_the_shared_run_and_the_rows_that_fit_their_own(tmp_path, mirror):
    from cdgtmll.variants.r_variant import apply_to_dataset

    cfg = loader.load(ROOT / "config" / "config.yaml",
                      {"training": {"default": {"epochs": 2, "hidden_dim": 16}}, "experiments": {"seeds": [0]}})
    cfg.pop("power", None)
    clean, clean_path = prepared_yeast(tmp_path, mirror)
    r_data, _ = apply_to_dataset(clean, 0.40, 0)
    r_path = tmp_path / "data" / "yeast" / f"{VARIANT}.npz"
    r_data.save(r_path)
    runs = tmp_path / "runs" / "yeast"
    paths = []

    def go(variant, data, data_path, method, base):
        spec = plan.run_spec(cfg, "yeast", variant, method)
        if method != "BCE":
            spec = dataclasses.replace(spec, base_run=base)
        rundir = train_and_evaluate(data, data_path, clean_path, runs / variant / method,
                                    RunSpec.from_json(spec.to_json(), "--spec"))
        paths.append(rundir / "seed0" / "metrics.json")
        return spec

    go("clean", clean, clean_path, "BCE", None)
    for m in ("PE", "ETU"):
        spec = plan.run_spec(cfg, "yeast", "clean", m)
        base = plan.base_run(cfg, spec, ("yeast", "clean", "BCE"), [0])
        go("clean", clean, clean_path, m, {**base, "dir": str(runs / "clean" / "BCE")})
    r_pe = plan.run_spec(cfg, "yeast", VARIANT, "PE")
    go(VARIANT, r_data, r_path, "PE", plan.base_run(cfg, r_pe, None, []))

    summary = summarise(collect(paths))
    rows = ["BCE", "PE", "ETU"]
    t1 = build_table(summary, "global", configured_columns(1, [("yeast", "Yeast")], {}), (), rows, number=1)
    t2 = build_table(summary, "global", configured_columns(2, [("yeast", "Yeast")], {"yeast": [0.40]}), (), rows,
                     number=2)
    n1 = [n for n in footnotes(t1, summary, "global", 0.5) if "stage 1" in n]
    n2 = [n for n in footnotes(t2, summary, "global", 0.5) if "stage 1" in n]
    folder = (tmp_path / "runs").as_posix()
    assert n1 == [f"PE, ETU: stage 1 is the BCE run of the same dataset, variant and seeds ({folder}/<dataset>/"
                  "<variant>/BCE), read from its final checkpoint, not trained again (the same model byte for byte; "
                  "per run: provenance.json base_run)."]
    assert n2 == [f"PE: stage 1 fitted in its own run, not read from a BCE run: BCE is not run on yeast/{VARIANT} "
                  "in this configuration."]
