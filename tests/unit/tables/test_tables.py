"""Table aggregation: mean ± sample std over runs, best/second marks, not-run cells, sources."""

import csv
import json

import numpy as np
import pandas as pd
import pytest

from cdgtmll.tables import build, collect, layout
from tests.support.specs import clean_spec

METRICS = collect.METRICS


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
    build.main(["--metrics", *map(str, paths), "--methods", "BR-LogReg", "CD-GTMLL", "BCE", "XR-Transformer",
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
    """PE's mAP/P@k equal BCE's by construction (footnoted; ETU's only with
    utility 'precision'); the plug-in rows' F1 rule per column; the number of labels without
    test positives that Macro-/Rare-F1 left out, per dataset."""
    from cdgtmll.metrics import definitions, thresholds

    # what evaluate.py writes (cdgtmll.metrics.thresholds.RULE_*, f1_exclusion; checked at the end)
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
    build.main(["--metrics", *map(str, paths), "--methods", "BCE", "PE", "ETU", "ETU-p", "--out", str(out)])
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
    assert (micro, macro) == (thresholds.RULE_PLUGIN_MICRO, thresholds.RULE_PLUGIN_MACRO)
    assert rules["global@0.5"]["micro_f1"] == thresholds.rule_global(0.5) and rules["adaptive"]["rare_f1"] == thresholds.RULE_ADAPTIVE
    rec = definitions.f1_exclusion(np.array([3, 0, 5, 0, 2, 9, 1, 0, 4, 6]), np.array([1, 3, 6, 9]))
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
    build.main(["--metrics", *map(str, paths), "--methods", "CD-GTMLL", "CDG-rarity", "--out", str(out)])
    md = (out / "table1_standard.md").read_text()
    assert "CD-GTMLL: payoff R is the uniform logistic utility (w_l = 1)" in md
    assert "rarity-weighted logistic utility of Theorem 1(3) (payoff_weights: rarity)" in md
    assert "unclipped fused probabilities" in md
    long = list(csv.DictReader(open(out / "all_runs.csv")))
    assert {r["deviation"].split(" (payoff_weights: ")[1][:7] for r in long} == {"uniform", "rarity)"}



@pytest.mark.slow
def test_training_records_the_footnote_and_tables_read_it_without_importing_torch(tmp_path):
    """The training job records its method's footnote (``table_note`` in provenance.json, from
    the class and the run's hyper-parameters); the tables print that record and import no method
    module for it, so writing a table never loads torch (it cost ~3.5 s CPU per tables job)."""
    import subprocess
    import sys

    from cdgtmll import train
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.methods.cdgtmll.model import CDGTMLL

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    Y = (rng.random((120, 5)) < np.linspace(0.1, 0.5, 5)).astype(np.uint8)
    splits = {"train": np.arange(0, 80), "val": np.arange(80, 100), "test": np.arange(100, 120)}
    data = ProcessedData("yeast", X, Y, [f"Class{k}" for k in range(5)], splits, {})
    path = tmp_path / "processed.npz"
    data.save(path)
    hp = {"payoff_weights": "rarity", "payoff_scale": "sum"}
    spec = clean_spec("yeast", "CD-GTMLL", training={"backbone": "mlp", "epochs": 1, "hidden_dim": 8}, hparams=hp)
    seed_dir = tmp_path / "runs" / "yeast" / "clean" / "CD-GTMLL" / "seed0"
    train.run_seed(data, tail_labels(Y[:80]), spec, 0, seed_dir, {"data": path})
    note = json.loads((seed_dir / "provenance.json").read_text())["table_note"]
    assert note == CDGTMLL.table_note(hp) and "sum over labels (payoff_scale: sum" in note

    # the table prints what the run recorded, without asking the class (the record is changed here
    # to tell the two apart), and torch stays unimported in the tables' process
    prov = json.loads((seed_dir / "provenance.json").read_text())
    prov["table_note"] = "CD-GTMLL: the note this run was trained under."
    (seed_dir / "provenance.json").write_text(json.dumps(prov))
    (seed_dir / "metrics.json").write_text(json.dumps(_metrics_rec({m: 0.5 for m in METRICS})))
    out = tmp_path / "tables"
    code = ("import sys; from cdgtmll.tables import build; "
            f"rc = build.main(['--metrics', {str(seed_dir / 'metrics.json')!r}, '--methods', 'CD-GTMLL', '--out', {str(out)!r}]); "
            "print(rc, sorted(m for m in ('torch', 'sklearn', 'cdgtmll.methods.cdgtmll.model') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[-2] == "0 []", res.stdout[-500:]
    md = (out / "table1_standard.md").read_text()
    assert "CD-GTMLL: the note this run was trained under." in md and "payoff R is" not in md


# ------------------------------------------------------------------ Table 3, configured datasets, HTML

T3_ROWS = ["BCE", "PE", "SRB", "XR-Transformer", "MatchXML", "ETU", "CD-GTMLL"]
EXTRA_ROWS = ["BR-LogReg", "Focal", "XR-Linear", "napkinXC-PLT", "LibMultiLabel-1vsRest"]


def _p_at_k_runs(root, datasets, methods, seeds=(0, 1, 2)):
    """metrics.json per (dataset, method, seed): P@k = base(method) + 0.001 * seed, other metrics 0.5;
    base rises along ``methods`` so the last is best, the second-to-last second."""
    paths, base = [], {}
    for i, m in enumerate(methods):
        base[m] = 0.40 + 0.02 * i
        for ds in datasets:
            for seed in seeds:
                vals = {k: 0.5 for k in METRICS}
                vals.update({k: base[m] + 0.001 * seed - 0.1 * j for j, k in enumerate(("p@1", "p@3", "p@5"))})
                paths.append(_write_run(root, ds, "clean", m, seed, vals))
    return paths, base


def test_table3_has_the_papers_layout_and_sets_apart_rows_not_in_it(tmp_path):
    """table3_xmc: the paper's columns (Eurlex-4K, Wiki10-31K, AmazonCat-13K x P@1/3/5) and rows in
    the paper's order (ETU printed EUT), two decimals; rows the paper does not have (reference
    rows and further XMC peers) come after a rule, marked in every format; marks are per column."""
    methods = ["BR-LogReg", "napkinXC-PLT", "LibMultiLabel-1vsRest", "Focal", "XR-Linear"] + T3_ROWS[::-1]
    order = ["napkinXC-PLT", "BCE", "PE", "SRB", "XR-Transformer", "MatchXML", "ETU", "CD-GTMLL"]  # rising
    paths, base = _p_at_k_runs(tmp_path / "runs", ["eurlex-4k", "wiki10-31k"], order)
    out = tmp_path / "tables"
    build.main(["--metrics", *map(str, paths), "--methods", *methods, "--out", str(out),
                 "--not-run", "amazoncat-13k|XR-Linear|needs libpecos"])
    rows = list(csv.DictReader(open(out / "table3_xmc.csv")))
    assert [r["method"] for r in rows] == T3_ROWS + ["BR-LogReg", "napkinXC-PLT", "LibMultiLabel-1vsRest", "Focal",
                                                     "XR-Linear"]
    assert [r["in paper"] for r in rows] == ["yes"] * 7 + ["no"] * 5
    heads = [k[:-5] for k in rows[0] if k.endswith(" mean")]
    assert heads == [f"{d} P@{k}" for d in ("Eurlex-4K", "Wiki10-31K", "AmazonCat-13K") for k in (1, 3, 5)]
    by = {r["method"]: r for r in rows}
    want = 100 * np.mean([base["CD-GTMLL"] - 0.1 + 0.001 * s for s in (0, 1, 2)])  # P@3: base - 0.1
    assert float(by["CD-GTMLL"]["Wiki10-31K P@3 mean"]) == pytest.approx(want, abs=1e-4)
    assert by["CD-GTMLL"]["Wiki10-31K P@3 n"] == "3" and by["BCE"]["AmazonCat-13K P@1 n"] == "0"
    assert by["XR-Linear"]["AmazonCat-13K P@5 note"] == "not run: needs libpecos"

    md = (out / "table3_xmc.md").read_text()
    lines = md.splitlines()
    sep = lines.index("| *‡ not in the paper* |" + " |" * 9)
    assert [l.split("|")[1].strip() for l in lines[4:sep]] == T3_ROWS
    assert lines[sep + 1].startswith("| BR-LogReg |") and lines[sep + 5].startswith("| XR-Linear |")
    cd = next(l for l in lines if l.startswith("| CD-GTMLL |"))
    cells = [c.strip() for c in cd.strip("|").split("|")][1:]
    assert cells[0] == f"**{100 * (base['CD-GTMLL'] + 0.001):.2f} ± 0.10**"  # two decimals, as the paper
    assert cells[6:] == ["n.r."] * 3
    assert next(l for l in lines if l.startswith("| ETU |")).count("<u>") == 6  # second in every run column
    assert "‡ Rows under the rule are not rows of the paper's Table 3: BR-LogReg, napkinXC-PLT, " \
           "LibMultiLabel-1vsRest, Focal, XR-Linear." in md
    assert 'ETU is printed "EUT" in the paper\'s Table 3.' in md
    assert "n.r. = not run in this configuration: AmazonCat-13K." in md
    assert "threshold-free: the same in both threshold modes" in md
    tex = (out / "table3_xmc.tex").read_text()
    assert r"\multicolumn{3}{c}{Eurlex-4K} & \multicolumn{3}{c}{Wiki10-31K} & \multicolumn{3}{c}{AmazonCat-13K}" in tex
    assert "\\midrule\n\\midrule\n" not in tex and r"\multicolumn{10}{l}{\emph{‡ not in the paper}}\\" in tex
    assert tex.index(r"\emph{‡ not in the paper}") < tex.index("BR-LogReg &")

    src = json.loads((out / "table3_xmc.sources.json").read_text())
    assert len(src["cells"]["CD-GTMLL | Eurlex-4K P@1"]) == 3
    assert "XR-Linear | AmazonCat-13K P@1" not in src["cells"]


def _html_cells(path):
    """{(row, column index): (text, classes)} of the body of a table page written by build.py."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cur, self.cell = [], None, None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "tr":
                self.cur = []
            elif tag in ("td", "th") and self.cur is not None:
                self.cell = [tag, a.get("class", ""), ""]

        def handle_data(self, data):
            if self.cell is not None:
                self.cell[2] += data

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.cur.append(tuple(self.cell))
                self.cell = None
            elif tag == "tr" and self.cur is not None:
                self.rows.append(self.cur)
                self.cur = None

    p = P()
    p.feed(path.read_text(encoding="utf-8"))
    out = {}
    for row in p.rows:
        heads = [c for c in row if c[0] == "th"]
        data = [c for c in row if c[0] == "td"]
        if data:
            method = heads[-1][2].strip()
            for j, (_, cls, text) in enumerate(data):
                out[(method, j)] = (text.strip(), set(cls.split()))
    return out, p.rows


def test_html_pages_keep_marks_blocks_and_footnotes(runs):
    """Each table is also one self-contained HTML page: the Markdown's cells with bold best and
    underlined second as CSS classes, the rows not in the paper under a labelled block, the
    footnotes, the profile stamp; byte-identical when written twice."""
    tmp, paths, _ = runs
    out, again = tmp / "tables", tmp / "again"
    args = ["--metrics", *map(str, paths), "--methods", "BR-LogReg", "CD-GTMLL", "BCE", "XR-Transformer",
            "--not-run", "yeast|XR-Transformer|needs pretrained encoder", "--profile", "quick",
            "--profile-file", "config/quick.yaml"]
    build.main([*args, "--out", str(out)])
    build.main([*args, "--out", str(again)])
    for stem in layout.table_stems():
        for suffix in ("", "_adaptive"):
            page = out / f"{stem}{suffix}.html"
            assert page.read_bytes() == (again / page.name).read_bytes(), page.name
    cells, rows = _html_cells(out / "table1_standard.html")
    md = (out / "table1_standard.md").read_text()
    for line in md.splitlines():
        if line.startswith("| ") and not line.startswith(("| Method", "| *")):
            parts = [c.strip() for c in line.strip("|").split("|")]
            for j, c in enumerate(parts[1:]):
                text, cls = cells[(parts[0], j)]
                plain = c.replace("**", "").replace("<u>", "").replace("</u>", "")
                assert text == plain, (parts[0], j)
                assert ("best" in cls) == c.startswith("**") and ("second" in cls) == c.startswith("<u>")
    assert "best" in cells[("CD-GTMLL", 5)][1] and "second" in cells[("BCE", 5)][1]  # Yeast Rare-F1
    assert "notrun" in cells[("XR-Transformer", 4)][1]
    block = [r for r in rows if any(c[2].strip() == "‡ not in the paper" for c in r)]
    assert len(block) == 1 and block[0][1][2].strip() == "BR-LogReg"  # the block label spans its first row
    page = (out / "table1_standard.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "://" not in page
    assert "Profile quick (config/quick.yaml); 27 runs" in page
    assert "† XR-Transformer: not run: needs pretrained encoder" in page
    assert "td.best { font-weight: 700; }" in page and "td.second { text-decoration: underline; }" in page
    full = (out / "metrics_full.html").read_text()
    assert full.count("<tr>") == 1 + len(list(csv.DictReader(open(out / "metrics_full.csv"))))
    profile = json.loads((out / "profile.json").read_text())
    lineage = profile.pop("code_lineage")
    assert profile == {
        "profile": "quick", "configfiles": ["config/quick.yaml"], "datasets": ["yeast"],
        "methods": ["BR-LogReg", "CD-GTMLL", "BCE", "XR-Transformer"], "runs": 27,
        "mixed_code": False, "code_footnote": None,
        # fixture runs without provenance: no machine recorded, so nothing to footnote
        "device_lineage": {"devices": {}, "runs": 27, "unrecorded_runs": 27}, "device_footnote": None}
    assert lineage["runs"] == 27 and lineage["unrecorded_runs"] == 27  # fixture runs without provenance


def test_configured_dataset_tables_have_every_configured_dataset_as_columns(tmp_path):
    """table{1,2,3}_configured: the configured datasets (a MULAN set and a custom one besides
    Yeast) as columns in Table 1/2/3's layouts; a dataset outside the paper's Table 1 shows mAP
    and Rare-F1 (footnoted); R-variant columns at the configured severities, a dataset without
    any gets one n.r. column; P@1/3/5 for every dataset; cells trace to their runs."""
    rng = np.random.default_rng(1)
    paths = []
    for ds in ("yeast", "bibtex", "mydata"):
        variants = ("clean", "R0.40-s0", "R0.50-s0") if ds == "yeast" else ("clean",)
        for variant in variants:
            for method in ("BCE", "CD-GTMLL", "Focal"):
                for seed in (0, 1):
                    paths.append(_write_run(tmp_path / "runs", ds, variant, method, seed,
                                            {m: 0.3 + 0.4 * rng.random() for m in METRICS}))
    out = tmp_path / "tables"
    build.main(["--metrics", *map(str, paths), "--methods", "BCE", "CD-GTMLL", "Focal", "--out", str(out),
                 "--datasets", "yeast=Yeast", "bibtex=Bibtex", "mydata=My data", "delicious=Delicious",
                 "--severities", "yeast=0.4,0.5", "--severities", "bibtex=", "--severities", "mydata=",
                 "--severities", "delicious="])
    t1 = list(csv.DictReader(open(out / "table1_configured.csv")))
    heads = [k[:-5] for k in t1[0] if k.endswith(" mean")]
    assert heads == ["Yeast Micro-F1", "Yeast Rare-F1", "Bibtex mAP", "Bibtex Rare-F1", "My data mAP",
                     "My data Rare-F1", "Delicious mAP", "Delicious Rare-F1"]
    long = pd.read_csv(out / "all_runs.csv")
    sel = long[(long["dataset"] == "mydata") & (long["method"] == "Focal") & (long["mode"] == "global")
               & (long["variant"] == "clean")]
    by = {r["method"]: r for r in t1}
    assert float(by["Focal"]["My data mAP mean"]) == pytest.approx(100 * sel["mAP"].mean(), abs=1e-3)
    assert by["Focal"]["My data mAP n"] == "2" and by["Focal"]["Delicious mAP n"] == "0"
    assert [r["in paper"] for r in t1] == ["yes", "yes", "no"]
    md = (out / "table1_configured.md").read_text()
    assert "Bibtex, My data, Delicious: not in the paper's Table 1, shown with mAP and Rare-F1" in md
    assert "n.r. = not run in this configuration: Delicious." in md
    t2 = list(csv.DictReader(open(out / "table2_configured.csv")))
    assert [k[:-5] for k in t2[0] if k.endswith(" mean")] == [
        "Yeast-R @40%", "Yeast-R @50%", "Bibtex-R no R-variant", "My data-R no R-variant", "Delicious-R no R-variant"]
    assert t2[0]["Yeast-R @50% n"] == "2" and t2[0]["Bibtex-R no R-variant n"] == "0"
    assert "n.r. in Bibtex-R, My data-R, Delicious-R: no R-variant configured" in (out / "table2_configured.md").read_text()
    t3 = list(csv.DictReader(open(out / "table3_configured.csv")))
    assert [k[:-5] for k in t3[0] if k.endswith(" mean")] == [
        f"{d} P@{k}" for d in ("Yeast", "Bibtex", "My data", "Delicious") for k in (1, 3, 5)]
    src = json.loads((out / "table3_configured_adaptive.sources.json").read_text())
    assert {e["path"] for e in src["cells"]["BCE | My data P@5"]} == {
        str(tmp_path / "runs/mydata/clean/BCE" / f"seed{s}" / "metrics.json") for s in (0, 1)}
    # without --datasets / --severities: the datasets and severities that were run (titles: the
    # registry's display name, else the dataset's name)
    build.main(["--metrics", *map(str, paths), "--methods", "BCE", "--out", str(tmp_path / "t2")])
    t2d = list(csv.DictReader(open(tmp_path / "t2" / "table2_configured.csv")))
    assert [k[:-5] for k in t2d[0] if k.endswith(" mean")] == [
        "Bibtex-R no R-variant", "mydata-R no R-variant", "Yeast-R @40%", "Yeast-R @50%"]


def test_audit_follows_the_new_tables(tmp_path, monkeypatch):
    """`cdgtmll audit` traces a cell of the new tables (any of their files) to its metrics files."""
    from cdgtmll.lineage import audit

    monkeypatch.chdir(tmp_path)
    paths, _ = _p_at_k_runs(tmp_path / "runs", ["eurlex-4k"], ["BCE", "CD-GTMLL"], seeds=(0, 1))
    out = tmp_path / "tables"
    build.main(["--metrics", *map(str, paths), "--methods", "BCE", "CD-GTMLL", "--out", str(out)])
    def own_problems(rep):  # fixture metrics record no inputs nor code (predictions, provenance): not checked here
        return [p for p in rep.problems if "field 'inputs." not in p and not p.startswith("UNRECORDED CODE")]

    rep = audit.audit(out / "table3_xmc.html", ("CD-GTMLL", "Eurlex-4K P@3"))
    assert rep.checked == 2 and not own_problems(rep)
    assert "cell     CD-GTMLL | Eurlex-4K P@3: 2 run(s)" in "\n".join(rep.lines)
    rep = audit.audit(out / "table3_configured_adaptive.md", ("BCE", "Eurlex-4K P@1"))
    assert rep.checked == 2 and not own_problems(rep)
    target = tmp_path / "runs/eurlex-4k/clean/BCE/seed1/metrics.json"
    target.write_text(target.read_text().replace("0.4", "0.9", 1))
    bad = audit.audit(out / "table3_xmc.csv", ("BCE", "Eurlex-4K P@1"))
    assert any("MODIFIED metrics" in p and str(target) in p for p in bad.problems)


def test_parts_split_the_files_and_together_equal_all(runs):
    """``--part tables`` (rule tables) writes the tables, their sources and profile.json;
    ``--part summary`` (rule metrics_summary) the long table, metrics_full and the metric rows;
    given the same runs, the two together write exactly the files of ``--part all``, byte for byte."""
    tmp, paths, _ = runs
    common = ["--metrics", *map(str, paths), "--methods", "BR-LogReg", "CD-GTMLL", "BCE", "--profile", "quick"]

    def files(root):
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    def run(name, *part):
        root = tmp / name
        build.main([*common, *part, "--out", str(root / "tables"), "--summary-json", str(root / "metrics.json"),
                    "--summary-dir", str(root / "metrics")])
        return files(root)

    whole, tables, summary = run("all"), run("t", "--part", "tables"), run("s", "--part", "summary")
    assert set(tables) | set(summary) == set(whole) and not set(tables) & set(summary)
    assert {**tables, **summary} == whole
    assert "tables/profile.json" in tables and "tables/table1_standard.sources.json" in tables
    assert not [f for f in tables if "all_runs" in f or "metrics_full" in f or not f.startswith("tables/")]
    assert {"tables/all_runs.csv", "tables/metrics_full.csv", "metrics.json"} <= set(summary)
    assert any(f.startswith("metrics/yeast/") for f in summary)
    assert not [f for f in summary if f.startswith("tables/table")]
