"""The critical-difference diagram (:mod:`cdgtmll.figures.cd_diagram`): it draws, methods in the
order of their average ranks, on the side of their half, bars where Holm separates no pair, and
the same bytes twice."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from cdgtmll.figures import cd_diagram
from cdgtmll.io import sha256_file


@pytest.fixture
def runs_csv(tmp_path):
    """Four methods on 7 datasets: A > B > C everywhere on mAP (each pair p = 2/128, Holm
    separates all), D run on 6 of them; Micro-F1: A and B swap from dataset to dataset."""
    rows = []
    for i in range(7):
        for m, base in (("CD-GTMLL", 0.6), ("BCE", 0.5), ("BR-LogReg", 0.4), ("ASL", 0.45)):
            if m == "ASL" and i == 0:
                continue
            micro = {"CD-GTMLL": 0.5 + (0.01 if i % 2 else -0.01), "BCE": 0.5}.get(m, 0.3)
            for seed in (0, 1):
                rows.append({"dataset": f"d{i}", "variant": "clean", "method": m, "seed": seed, "mode": "global",
                             "mAP": base + 0.01 * i + 0.001 * seed, "micro_f1": micro, "macro_f1": base,
                             "rare_f1": base})
    path = tmp_path / "all_runs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_diagram_draws_order_sides_and_bars(runs_csv, tmp_path):
    out = tmp_path / "fig" / "cd_diagram"
    rows = cd_diagram.cd_figure(runs_csv, out, not_run={("d0", "ASL"): "needs a GPU"})
    for ext in ("pdf", "png", "csv", "sources.json"):
        assert (tmp_path / "fig" / f"cd_diagram.{ext}").stat().st_size > 0
    df = pd.read_csv(f"{out}.csv")
    m = df[(df["metric"] == "mAP") & df["average_rank"].notna()]
    assert m["method"].tolist() == ["CD-GTMLL", "BCE", "BR-LogReg"]  # by average rank, best first
    assert m["average_rank"].tolist() == [1.0, 2.0, 3.0]
    assert m["side"].tolist() == ["left", "left", "right"]
    assert m["bars"].isna().all()  # every pair separated after Holm: no bar
    left = df[(df["metric"] == "mAP") & df["average_rank"].isna()]
    assert left["method"].tolist() == ["ASL"] and "d0: needs a GPU" in left["not_ranked"].iloc[0]
    micro = df[(df["metric"] == "micro_f1") & df["average_rank"].notna()].set_index("method")
    assert micro.loc["CD-GTMLL", "bars"] == micro.loc["BCE", "bars"] == 1  # not separated: one bar
    src = json.loads((tmp_path / "fig" / "cd_diagram.sources.json").read_text())
    assert src["runs_table"]["sha256"] == sha256_file(runs_csv)
    assert len(rows) == len(df)


def test_diagram_bytes_are_deterministic(runs_csv, tmp_path):
    a, b = tmp_path / "a" / "cd", tmp_path / "b" / "cd"
    cd_diagram.cd_figure(runs_csv, a)
    cd_diagram.cd_figure(runs_csv, b)
    for ext in ("pdf", "png", "csv"):
        assert sha256_file(f"{a}.{ext}") == sha256_file(f"{b}.{ext}"), ext


def test_layout_no_crossing_and_one_dataset(runs_csv, tmp_path):
    from cdgtmll.claims.compare import normalise_runs
    from cdgtmll.claims.ranks import rank_metric

    runs = normalise_runs(pd.read_csv(runs_csv))
    r = rank_metric(runs, "mAP", [f"d{i}" for i in range(1, 7)], ["CD-GTMLL", "BCE", "BR-LogReg", "ASL"])
    lay = cd_diagram.layout(r)
    assert lay["side"] == {"CD-GTMLL": "left", "BCE": "left", "ASL": "right", "BR-LogReg": "right"}
    assert lay["row"] == {"CD-GTMLL": 1, "BCE": 2, "BR-LogReg": 1, "ASL": 2}  # the worst on top: no crossing
    # one dataset: a figure that says no ranking is made
    rows = cd_diagram.cd_figure(runs_csv, tmp_path / "one" / "cd", datasets=["d1"])
    assert rows == [] and (tmp_path / "one" / "cd.png").is_file()


def test_ranks_written_with_the_figure_equal_the_ranks_command(runs_csv, tmp_path):
    """Rule figure_ranks ranks the runs once: the diagram's --ranks-out writes the same
    ranks.csv and ranks.md bytes as ``python -m cdgtmll.claims.ranks``."""
    from cdgtmll.claims import ranks

    args = ["--runs", str(runs_csv), "--not-run", "d0|ASL|no data"]
    assert cd_diagram.main([*args, "--out", str(tmp_path / "fig"), "--ranks-out", str(tmp_path / "a")]) == 0
    assert ranks.main([*args, "--out", str(tmp_path / "b")]) == 0
    for ext in ("csv", "md"):
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes()
    assert "no data" in (tmp_path / "a.md").read_text()
