"""Tables say when a column cannot separate methods: no bold or underline on
a tie at the printed precision, and a footnote per dataset and metric with the ceiling over the
panel of runs, the tail's size and its labels' training and test positive counts, flagging a
column whose ceiling is below ``--min-ceiling`` points or whose Rare-F1 averages fewer than
``--min-tail-labels`` tail labels (such a column gets no marks)."""

import json

import numpy as np
import pandas as pd

from cdgtmll.data.processed import ProcessedData
from cdgtmll.tables import build, footnotes, layout
from cdgtmll.tables.collect import METRICS

# ------------------------------------------------------------------ ties at the printed precision

def test_a_column_where_every_row_shows_the_same_value_has_no_marks():
    assert layout.rank_marks([0.0, 0.0, 0.0]) == ["", "", ""]
    # equal once printed with one decimal (12.34 and 12.31 both read 12.3)
    assert layout.rank_marks([0.1234, 0.1231, 0.12349]) == ["", "", ""]


def test_two_rows_tied_at_the_top_get_neither_bold_nor_underline():
    # the two tied rows hold first and second place: the next value is third, not second
    assert layout.rank_marks([0.50, 0.50, 0.40, 0.30]) == ["", "", "", ""]


def test_a_tied_second_place_is_not_underlined_but_a_unique_best_stays_bold():
    assert layout.rank_marks([0.60, 0.50, 0.50, 0.40]) == ["best", "", "", ""]
    # tied at the printed precision only (0.5004 and 0.4996 both read 50.0)
    assert layout.rank_marks([0.60, 0.5004, 0.4996, 0.40]) == ["best", "", "", ""]


def test_separated_values_are_marked_and_missing_ones_ignored():
    assert layout.rank_marks([0.40, None, 0.60, float("nan"), 0.50]) == ["", "", "best", "", "second"]
    # two decimals (Table 3): 12.34 and 12.31 differ
    assert layout.rank_marks([0.1234, 0.1231], digits=2) == ["best", "second"]


def _summary(values: dict[str, float], metric: str = "rare_f1", dataset: str = "yeast") -> pd.DataFrame:
    rows = []
    for method, v in values.items():
        row = {"mode": "global", "dataset": dataset, "setting": "clean", "method": method, "n": 3,
               "sources": [f"{method}.json"]}
        for m in METRICS:
            row[f"{m}_mean"] = v if m == metric else 0.5
            row[f"{m}_std"] = 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def test_build_table_does_not_crown_a_column_of_zeros():
    summary = _summary({"BCE": 0.0, "CD-GTMLL": 0.0, "BR-LogReg": 0.0})
    cols = layout.configured_columns(1, [("yeast", "Yeast")], {})
    t = layout.build_table(summary, "global", cols, layout.PAPER_ROWS_T1, ["BCE", "CD-GTMLL", "BR-LogReg"])
    j = [c[3] for c in cols].index("rare_f1")
    assert {t["cells"][(r, j)]["mark"] for r in t["rows"]} == {""}


# ------------------------------------------------------------------ ceilings, tails and flags

def _runs(oracle: dict[str, list[float]], dataset: str = "yeast", tail_of: int = 2, left_out: int = 0,
          setting: str = "clean") -> pd.DataFrame:
    """A long table (as ``collect`` writes it) with the given per-run ``oracle_rare_f1`` per method."""
    rows = []
    for method, vals in oracle.items():
        for seed, v in enumerate(vals):
            for mode in ("global", "adaptive"):
                rows.append({"dataset": dataset, "setting": setting, "method": method, "seed": seed, "mode": mode,
                             "metrics_path": f"runs/{dataset}/{setting}/{method}/seed{seed}/metrics.json",
                             "oracle_rare_f1": v, "oracle_micro_f1": 0.66, "oracle_mAP": 1.0,
                             "rare_f1_of": tail_of, "rare_f1_left_out": left_out})
    return pd.DataFrame(rows)


def _tail():
    """Yeast's tail as the issue measured it: 2 labels."""
    return (layout.TailLabel("Class9", 88, 26), layout.TailLabel("Class14", 19, 5))


def test_ceiling_is_the_best_oracle_value_over_every_run_of_the_panel():
    checks = layout.column_checks(_runs({"BCE": [0.15, 0.153], "CD-GTMLL": [0.151], "kNN-15": [0.171, 0.10]}),
                                  {"yeast": _tail()})
    c = checks[("yeast", "clean", "rare_f1")]
    assert c.ceiling == 0.171 and c.panel == ("BCE", "CD-GTMLL", "kNN-15") and c.runs == 5
    assert c.tail == _tail() and c.in_metric == 2
    # 2 tail labels < 3: flagged; the ceiling (17.1) is above 10 points
    assert len(c.reasons) == 1 and "2 tail labels enter Rare-F1, fewer than 3 (tables.min_tail_labels)" in c.reasons[0]
    assert checks[("yeast", "clean", "micro_f1")].reasons == ()


def test_a_low_ceiling_is_flagged_at_the_configured_level():
    runs = _runs({"BCE": [0.02, 0.045], "CD-GTMLL": [0.005]}, tail_of=9, left_out=0)
    tail = tuple(layout.TailLabel(f"L{i}", 0 if i < 7 else 3, 1) for i in range(9))
    c = layout.column_checks(runs, {"yeast": tail})[("yeast", "clean", "rare_f1")]
    assert c.reasons == ("its ceiling over the panel is 4.5 < 10 points (tables.min_ceiling)",)
    assert layout.column_checks(runs, {"yeast": tail}, min_ceiling=4)[("yeast", "clean", "rare_f1")].reasons == ()
    # tail labels without test positives do not enter Rare-F1 (rule exclude): 9 - 7 = 2 < 3
    c = layout.column_checks(_runs({"BCE": [0.3]}, tail_of=9, left_out=7), {"yeast": tail})[("yeast", "clean", "rare_f1")]
    assert c.in_metric == 2 and len(c.reasons) == 1
    c = layout.column_checks(_runs({"BCE": [0.3]}, tail_of=9, left_out=7), {"yeast": tail},
                             min_tail_labels=2)[("yeast", "clean", "rare_f1")]
    assert c.reasons == ()


def test_footnote_gives_ceilings_tail_counts_and_why_a_column_cannot_separate_methods():
    summary = _summary({"BCE": 0.153, "CD-GTMLL": 0.151, "kNN-15": 0.103})
    checks = layout.column_checks(_runs({"BCE": [0.153], "CD-GTMLL": [0.151], "kNN-15": [0.171]}), {"yeast": _tail()})
    cols = layout.paper_columns(1)
    t = layout.build_table(summary, "global", cols, layout.PAPER_ROWS_T1, ["BCE", "CD-GTMLL", "kNN-15"],
                           number=1, checks=checks)
    j = cols.index(("yeast", "Yeast", "clean", "rare_f1", "Rare-F1"))
    # separated values, but the column cannot separate methods: no marks
    assert {t["cells"][(r, j)]["mark"] for r in t["rows"]} == {""}
    notes = footnotes.footnotes(t, summary, "global", 0.5)
    text = "\n".join(notes)
    assert ("Yeast: ceiling over the panel (the best test-oracle value of any run here: 3 runs of BCE, CD-GTMLL, "
            "kNN-15; thresholds chosen on the test set, so a bound for these scores, not a result): Micro-F1 66.0, "
            "Rare-F1 17.1.") in text
    assert "Rare-F1 tail" in text and "2 labels: Class9 (88 / 26 training / test positives), Class14 (19 / 5)" in text
    assert ("Yeast Rare-F1 cannot separate methods: 2 tail labels enter Rare-F1, fewer than 3 "
            "(tables.min_tail_labels). No best or second is marked in it") in text
    assert "Yeast Micro-F1 cannot" not in text
    assert "only where no other row shows the same value" in text


def _processed(path, Y_train, Y_test, names):
    Y = np.vstack([Y_train, Y_test, Y_test[:1]]).astype(np.uint8)
    n_tr, n_te = len(Y_train), len(Y_test)
    ProcessedData("toy", np.zeros((len(Y), 2), np.float32), Y, names,
                  {"train": np.arange(n_tr), "test": np.arange(n_tr, n_tr + n_te),
                   "val": np.array([n_tr + n_te])}, {}).save(path)


def test_build_writes_the_footnote_from_what_the_runs_record(tmp_path):
    """End to end: tail and training counts from metrics.json, test counts from the processed
    file the runs name; a column at 0.0 for every method is flagged and not bold."""
    rng = np.random.default_rng(0)
    L = 10
    Y_train = (rng.random((60, L)) < np.linspace(0.02, 0.6, L)).astype(int)
    Y_test = (rng.random((30, L)) < np.linspace(0.05, 0.6, L)).astype(int)
    data = tmp_path / "processed.npz"
    _processed(data, Y_train, Y_test, [f"lab{i}" for i in range(L)])
    tail = [0, 1]
    paths = []
    for method, oracle in (("BCE", 0.03), ("CD-GTMLL", 0.04)):
        for seed in (0, 1):
            d = tmp_path / "runs" / "toy" / "clean" / method / f"seed{seed}"
            d.mkdir(parents=True)
            block = {m: (0.0 if m == "rare_f1" else 0.4 + 0.1 * seed) for m in METRICS}
            rec = {"global@0.5": block, "adaptive": block,
                   "oracle": {"rare_f1": oracle, "micro_f1": 0.7, "mAP": 1.0},
                   "tail_labels": tail, "tail_label_names": [f"lab{t}" for t in tail],
                   "train_counts": [int(c) for c in Y_train.sum(0)],
                   "inputs": {"clean_data": {"path": str(data)}}}
            (d / "metrics.json").write_text(json.dumps(rec))
            paths.append(d / "metrics.json")
    out = tmp_path / "tables"
    build.main(["--metrics", *map(str, paths), "--methods", "BCE", "CD-GTMLL", "--out", str(out),
                "--part", "tables", "--datasets", "toy=Toy", "--min-ceiling", "10", "--min-tail-labels", "2"])
    md = (out / "table1_configured.md").read_text()
    row = {ln.split("|")[1].strip(): ln for ln in md.splitlines() if ln.startswith("| ")}
    assert "**" not in row["BCE"] + row["CD-GTMLL"] and "<u>" not in row["BCE"] + row["CD-GTMLL"]
    tr, te = Y_train.sum(0), Y_test.sum(0)
    assert (f"2 labels: lab0 ({tr[0]} / {te[0]} training / test positives), lab1 ({tr[1]} / {te[1]})") in md
    assert "Toy: ceiling over the panel" in md and "Rare-F1 4.0" in md
    assert "Toy Rare-F1 cannot separate methods: its ceiling over the panel is 4.0 < 10 points" in md
    assert "fewer than 2" not in md  # 2 tail labels: not fewer than --min-tail-labels 2
    # a processed file that no longer matches the recorded training counts gives no test counts
    _processed(data, 1 - Y_train, Y_test, [f"lab{i}" for i in range(L)])
    build.main(["--metrics", *map(str, paths), "--methods", "BCE", "CD-GTMLL", "--out", str(out),
                "--part", "tables", "--datasets", "toy=Toy"])
    md = (out / "table1_configured.md").read_text()
    assert f"lab0 ({tr[0]} training positives)" in md and "test positives: not recorded by these runs" in md
    # what a run records (the readings block's tail labels) comes first, the processed file is not read
    for p in paths:
        rec = json.loads(p.read_text())
        rec["train_counts"] = [int(c) for c in Y_train.sum(0)]
        rec["readings"] = {"blocks": {"adaptive": {"tail_labels": [
            {"label": 0, "n_pos_test": 7, "n_pos_train": int(tr[0])}, {"label": 1, "n_pos_test": 9, "n_pos_train": int(tr[1])}]}}}
        p.write_text(json.dumps(rec))
    build.main(["--metrics", *map(str, paths), "--methods", "BCE", "CD-GTMLL", "--out", str(out),
                "--part", "tables", "--datasets", "toy=Toy"])
    md = (out / "table1_configured.md").read_text()
    assert f"2 labels: lab0 ({tr[0]} / 7 training / test positives), lab1 ({tr[1]} / 9)" in md
