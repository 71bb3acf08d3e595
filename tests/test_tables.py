"""Table aggregation: mean ± sample std over runs, best/second marks, not-run cells, sources."""

import csv
import json

import numpy as np
import pytest

from cdgtmll import tables

METRICS = tables.METRICS


def _write_run(root, dataset, variant, method, seed, values, own=None):
    d = root / dataset / variant / method / f"seed{seed}"
    d.mkdir(parents=True)
    block = {m: float(values[m]) for m in METRICS}
    rec = {"global@0.5": block, "adaptive": {m: v * 0.9 for m, v in block.items()}}
    if own is not None:
        rec["method"] = {m: v * 0.5 for m, v in block.items()}
    (d / "metrics.json").write_text(json.dumps(rec))
    return d / "metrics.json"


@pytest.fixture()
def runs(tmp_path):
    rng = np.random.default_rng(0)
    paths, truth = [], {}
    for method, base in (("BCE", 0.5), ("CD-GTMLL", 0.7), ("BR-LogReg", 0.6)):
        for variant in ("clean", "R0.50-s0", "R0.50-s1"):
            for seed in (0, 1, 2):
                vals = {m: base + 0.05 * rng.random() for m in METRICS}
                truth.setdefault((method, variant == "clean"), []).append(vals)
                paths.append(_write_run(tmp_path / "runs", "yeast", variant, method, seed, vals,
                                        own=True if method == "BR-LogReg" else None))
    return tmp_path, paths, truth


def test_tables_aggregate_and_mark(runs):
    tmp, paths, truth = runs
    out = tmp / "tables"
    tables.main(["--metrics", *map(str, paths), "--methods", "BR-LogReg", "CD-GTMLL", "BCE", "XR-Transformer",
                 "--out", str(out), "--summary-json", str(tmp / "m.json"),
                 "--not-run", "yeast|XR-Transformer|needs pretrained encoder"])
    rows = {r["method"]: r for r in csv.DictReader(open(out / "table1_standard_adaptive.csv"))}
    # paper order first (BCE, CD-GTMLL), extra rows after
    assert list(rows) == ["BCE", "CD-GTMLL", "BR-LogReg", "XR-Transformer"]
    for method in ("BCE", "CD-GTMLL"):
        v = np.array([0.9 * t["rare_f1"] for t in truth[(method, True)]])
        assert float(rows[method]["Yeast Rare-F1 mean"]) == pytest.approx(100 * v.mean(), abs=1e-3)
        assert float(rows[method]["Yeast Rare-F1 std"]) == pytest.approx(100 * v.std(ddof=1), abs=1e-3)
        assert rows[method]["Yeast Rare-F1 n"] == "3"
    assert rows["XR-Transformer"]["Yeast Rare-F1 note"] == "not run: needs pretrained encoder"
    md = (out / "table1_standard_adaptive.md").read_text()
    line = {l.split("|")[1].strip(): l for l in md.splitlines() if l.startswith("| ")}
    assert "**" in line["CD-GTMLL"] and "<u>" in line["BR-LogReg"] and "**" not in line["BCE"]
    assert "n.r." in line["BCE"] and "not run†" in line["XR-Transformer"]
    assert "† XR-Transformer: not run: needs pretrained encoder" in md
    # R-variant cells pool training seeds x sampling seeds
    t2 = {r["method"]: r for r in csv.DictReader(open(out / "table2_rare.csv"))}
    assert t2["BCE"]["Yeast-R @50% n"] == "6"
    v = np.array([t["rare_f1"] for t in truth[("BCE", False)]])
    assert float(t2["BCE"]["Yeast-R @50% mean"]) == pytest.approx(100 * v.mean(), abs=1e-3)
    # own-threshold rows use the method block in global mode, with a footnote
    g = {r["method"]: r for r in csv.DictReader(open(out / "table1_standard.csv"))}
    v = np.array([0.5 * t["micro_f1"] for t in truth[("BR-LogReg", True)]])
    assert float(g["BR-LogReg"]["Yeast Micro-F1 mean"]) == pytest.approx(100 * v.mean(), abs=1e-3)
    assert "own thresholds" in (out / "table1_standard.md").read_text()
    src = json.loads((out / "table1_standard.sources.json").read_text())
    assert len(src["cells"]["CD-GTMLL | Yeast Rare-F1"]) == 3
    assert all(len(e["sha256"]) == 64 for e in src["cells"]["CD-GTMLL | Yeast Rare-F1"])
    tex = (out / "table2_rare.tex").read_text()
    assert r"\textbf" in tex and r"\underline" in tex and "%" not in tex.replace(r"\%", "")
