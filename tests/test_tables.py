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


def _metrics_rec(values: dict, rules: dict | None = None, exclusion: dict | None = None, own: dict | None = None):
    block = {m: float(values[m]) for m in METRICS}
    rec = {"global@0.5": dict(block), "adaptive": dict(block)}
    if own is not None:
        rec["method"] = {**block, **own}
    if rules is not None:
        for k in ("global@0.5", "adaptive", "method"):
            if k in rec:
                rec[k]["decision_rules"] = rules[k]
    if exclusion is not None:
        rec["f1_no_positive_labels"] = exclusion
    return rec


def test_footnotes_equal_by_construction_rules_and_left_out_labels(tmp_path):
    """Issue 11: PE's mAP/P@k equal BCE's by construction (footnoted; ETU's only with
    utility 'precision'); the plug-in rows' F1 rule per column; the number of labels without
    test positives that Macro-/Rare-F1 left out, per dataset."""
    from cdgtmll import metrics as M

    # what evaluate.py writes (cdgtmll.metrics.RULE_*, f1_exclusion; checked at the end)
    micro = "plug-in micro: one threshold shared by all labels, tuned on validation for micro-F1"
    macro = "plug-in macro: per-label thresholds tuned on validation for per-label F1"
    plugin = {"micro_f1": micro, "macro_f1": macro, "rare_f1": macro}
    same = lambda r: {c: r for c in ("micro_f1", "macro_f1", "rare_f1")}  # noqa: E731
    rules = {"global@0.5": same("global@0.5: one fixed threshold for all labels"),
             "adaptive": same("adaptive: per-label thresholds tuned on validation for per-label F1"), "method": plugin}

    def excl(left, of, left_tail, of_tail):
        return {"rule": "exclude", "left_out": {"macro_f1": left, "rare_f1": left_tail},
                "of": {"macro_f1": of, "rare_f1": of_tail}, "labels_without_positives": {"all": left, "tail": left_tail}}

    exclusion = {"voc2007": excl(3, 10, 2, 4), "yeast": excl(0, 14, 0, 2)}
    paths = []
    for ds in ("voc2007", "yeast"):
        for method, utility in (("BCE", None), ("PE", None), ("ETU", "macro-recall"), ("ETU-p", "precision")):
            for seed in (0, 1):
                d = tmp_path / "runs" / ds / "clean" / method / f"seed{seed}"
                d.mkdir(parents=True)
                own = {"micro_f1": 0.4} if method == "PE" else None
                (d / "metrics.json").write_text(json.dumps(_metrics_rec(
                    {m: 0.5 + 0.01 * seed for m in METRICS}, rules if own else {k: rules[k] for k in rules
                                                                                if k != "method"},
                    exclusion[ds], own)))
                reg = "ETU" if method.startswith("ETU") else method
                hp = {"utility": utility} if utility else {}
                (d / "provenance.json").write_text(json.dumps({"config": {"registered_method": reg, "hparams": hp}}))
                paths.append(d / "metrics.json")
    out = tmp_path / "tables"
    tables.main(["--metrics", *map(str, paths), "--methods", "BCE", "PE", "ETU", "ETU-p", "--out", str(out)])
    md = (out / "table1_standard.md").read_text()
    tex = (out / "table1_standard.tex").read_text()
    # Table 1 shows mAP for VOC: PE's equals BCE's by construction; ETU (macro-recall) not; P@k not in the table
    assert "PE: mAP equals BCE's by construction" in md and "PE: mAP equals BCE's by construction" in tex
    long = {(r["dataset"], r["method"], r["mode"]): r for r in csv.DictReader(open(out / "all_runs.csv"))}
    assert long[("voc2007", "PE", "global")]["equal_by_construction"] == "BCE:mAP,p@1,p@3,p@5"
    assert long[("voc2007", "ETU", "global")]["equal_by_construction"] == ""
    assert long[("voc2007", "ETU-p", "global")]["equal_by_construction"] == "BCE:p@1,p@3,p@5"
    assert long[("voc2007", "PE", "global")]["micro_f1_rule"] == micro
    assert long[("voc2007", "PE", "global")]["rare_f1_rule"] == macro
    assert long[("voc2007", "BCE", "adaptive")]["rare_f1_left_out"] == "2"
    assert "ETU: mAP" not in md and "ETU-p: mAP" not in md
    # the plug-in row's rule per F1 column (global mode, own thresholds)
    assert "PE: F1 columns at the method's own plug-in rule for each metric" in md
    assert "Micro-F1 at one threshold shared by all labels" in md
    # left-out labels, per dataset and metric shown in the table
    assert "left out: Pascal VOC: Rare-F1 2 of 4 tail labels; Yeast: Rare-F1 0 of 2 tail labels." in md
    assert "(evaluation.f1_no_positive_labels: exclude)" in md
    t2 = (out / "table2_rare.md").read_text()
    assert "equals BCE's by construction" not in t2  # Rare-F1 only: nothing equal by construction
    full = (out / "metrics_full.md").read_text()
    assert "PE: mAP, P@1, P@3, P@5 equal BCE's by construction" in full
    assert "ETU-p: P@1, P@3, P@5 equal BCE's by construction (ETU with utility 'precision' ranks each row" in full
    assert "ETU: " not in full.split("| yeast |")[-1].replace("ETU-p: ", "")
    assert "voc2007: labels with no test positive left out (as in mAP): Macro-F1 3 of 10 labels, Rare-F1 2 of 4" in full
    # the strings above are the ones evaluation records
    assert (micro, macro) == (M.RULE_PLUGIN_MICRO, M.RULE_PLUGIN_MACRO)
    assert rules["global@0.5"]["micro_f1"] == M.rule_global(0.5) and rules["adaptive"]["rare_f1"] == M.RULE_ADAPTIVE
    rec = M.f1_exclusion(np.array([3, 0, 5, 0, 2, 9, 1, 0, 4, 6]), np.array([1, 3, 6, 9]))
    assert {k: rec[k] for k in exclusion["voc2007"]} == exclusion["voc2007"]


def test_method_deviation_footnote_from_the_runs_hparams(tmp_path):
    """A row's own footnote on how it differs from its paper (Method.table_note) is written
    with the hyper-parameters its runs used (provenance resolved_hparams): CD-GTMLL's payoff."""
    paths = []
    for method, payoff in (("CD-GTMLL", "uniform"), ("CDG-rarity", "rarity")):
        for seed in (0, 1):
            d = tmp_path / "runs" / "yeast" / "clean" / method / f"seed{seed}"
            d.mkdir(parents=True)
            (d / "metrics.json").write_text(json.dumps(_metrics_rec({m: 0.5 for m in METRICS})))
            (d / "provenance.json").write_text(json.dumps({"config": {
                "registered_method": "CD-GTMLL", "hparams": {}, "resolved_hparams": {"payoff_weights": payoff}}}))
            paths.append(d / "metrics.json")
    out = tmp_path / "tables"
    tables.main(["--metrics", *map(str, paths), "--methods", "CD-GTMLL", "CDG-rarity", "--out", str(out)])
    md = (out / "table1_standard.md").read_text()
    assert "CD-GTMLL: payoff R is the uniform logistic utility (w_l = 1)" in md
    assert "rarity-weighted logistic utility of Theorem 1(3) (payoff_weights: rarity)" in md
    assert "unclipped fused probabilities" in md
    long = list(csv.DictReader(open(out / "all_runs.csv")))
    assert {r["deviation"].split(" (payoff_weights: ")[1][:7] for r in long} == {"uniform", "rarity)"}
