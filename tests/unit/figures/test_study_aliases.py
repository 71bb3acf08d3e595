"""A study setting that shares another setting's run (``--alias``, the same run spec trained once):
the figures and the tables read the shared run's files under the setting's name, and say so."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cdgtmll.figures.studies import build as build_mod
from cdgtmll.io import write_json
from cdgtmll.lineage.audit import audit
from cdgtmll.tables.collect import collect
from tests.support.study_runs import run, write_metrics

ALPHA = {"No-Curiosity": (0.0, [0.30, 0.32]), "CD-GTMLL@alpha=0.2": (0.2, [0.40, 0.42]),
         "CD-GTMLL": (0.4, [0.50, 0.54])}


def shared_runs(root: Path) -> None:
    """The run folders the pipeline makes for the alpha sweep: alpha 0.0 and 0.4 are No-Curiosity's
    and CD-GTMLL's runs; only alpha 0.2 has a folder of its own."""
    for method, (alpha, values) in ALPHA.items():
        for k, v in enumerate(values):
            d = write_metrics(run(root, "yeast", "clean", method, k), {"rare_f1": v, "mAP": 0.8})
            write_json(d / "method_outputs.json", {"hparams": {"alpha": alpha}})


def test_sweep_figure_names_the_settings_of_shared_runs(tmp_path: Path):
    root = tmp_path / "runs"
    shared_runs(root)
    settings = [f"CD-GTMLL@alpha={a}" for a in ("0.0", "0.2", "0.4")]
    out = tmp_path / "fig" / "sensitivity_alpha"
    rc = build_mod.main(["sweep", "--param", "alpha", "--metrics", "rare_f1",
                         "--runs", *(str(run(root, "yeast", "clean", s, k)) for s in settings for k in (0, 1)),
                         "--alias", str(root / "yeast/clean/CD-GTMLL@alpha=0.0"), str(root / "yeast/clean/No-Curiosity"),
                         "--alias", str(root / "yeast/clean/CD-GTMLL@alpha=0.4"), str(root / "yeast/clean/CD-GTMLL"),
                         "--out", str(out)])
    assert rc == 0
    assert not (root / "yeast/clean/CD-GTMLL@alpha=0.4").exists()  # nothing copied or linked
    df = pd.read_csv(f"{out}.csv").set_index("value")
    assert df.index.tolist() == [0.0, 0.2, 0.4]
    assert df.loc[0.0, "mean"] == pytest.approx(0.31) and df.loc[0.4, "mean"] == pytest.approx(0.52)
    assert df["n_seeds"].eq(2).all()
    src = json.loads(Path(f"{out}.sources.json").read_text())
    assert src["aliases"] == {"yeast/clean/CD-GTMLL@alpha=0.0": "yeast/clean/No-Curiosity",
                              "yeast/clean/CD-GTMLL@alpha=0.4": "yeast/clean/CD-GTMLL"}
    # listed under the setting's name, read from the shared run's folder
    assert sorted(src["runs"]) == [f"yeast/clean/{s}" for s in settings]
    paths = {Path(e["path"]).parent.parent.name for e in src["runs"]["yeast/clean/CD-GTMLL@alpha=0.4"]}
    assert paths == {"CD-GTMLL"}
    # `cdgtmll audit` says which run a setting was read from
    said = {ln.split(":")[0].split()[-1]: ln for ln in audit(Path(f"{out}.pdf")).lines if ln.strip().startswith("method")}
    assert said["yeast/clean/CD-GTMLL@alpha=0.4"].endswith("read from the run of yeast/clean/CD-GTMLL (the same run spec, trained once)")
    assert "read from" not in said["yeast/clean/CD-GTMLL@alpha=0.2"]


def test_alias_to_another_variant_is_an_error(tmp_path: Path, capsys):
    root = tmp_path / "runs"
    shared_runs(root)
    rc = build_mod.main(["sweep", "--param", "alpha", "--runs", str(run(root, "yeast", "R0.50-s0", "CD-GTMLL@alpha=0.4", 0)),
                         "--alias", str(root / "yeast/R0.50-s0/CD-GTMLL@alpha=0.4"), str(root / "yeast/clean/CD-GTMLL"),
                         "--out", str(tmp_path / "x")])
    assert rc == 2 and "the same dataset and variant" in capsys.readouterr().err


def test_all_runs_has_rows_for_a_shared_setting(tmp_path: Path):
    root = tmp_path / "runs"
    shared_runs(root)
    paths = sorted(root.glob("yeast/clean/*/seed*/metrics.json"))
    df = collect(paths, {str(root / "yeast/clean/CD-GTMLL@alpha=0.4"): str(root / "yeast/clean/CD-GTMLL")})
    alias = df[df.method == "CD-GTMLL@alpha=0.4"]
    assert sorted(alias["seed"].unique()) == [0, 1] and set(alias["alias_of"]) == {"yeast/clean/CD-GTMLL"}
    own = df[df.method == "CD-GTMLL"]
    assert set(own["alias_of"]) == {""}
    for col in ("rare_f1", "metrics_path", "metrics_sha256"):
        assert alias.sort_values(["seed", "mode"])[col].tolist() == own.sort_values(["seed", "mode"])[col].tolist()
    assert df["metrics_path"].nunique() == len(paths)  # no metrics file counted twice
    with pytest.raises(ValueError, match="no --metrics file under"):
        collect(paths, {str(root / "yeast/clean/X@alpha=1"): str(root / "yeast/clean/Missing")})
