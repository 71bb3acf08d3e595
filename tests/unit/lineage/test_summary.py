"""Which commits and kinds of machine the runs behind the tables come from (src/cdgtmll/lineage/summary.py)."""

import pandas as pd

from cdgtmll.lineage.summary import code_footnote, code_lineage, device_footnote, device_lineage, is_mixed


def _runs(rows):
    df = pd.DataFrame(rows, columns=["metrics_path", "git_commit", "git_dirty", "code_sha256"])
    return pd.concat([df, df])  # all_runs.csv has one row per threshold mode: counted once


def test_one_clean_commit_has_no_footnote():
    lin = code_lineage(_runs([("a/metrics.json", "c1" * 20, False, "x"), ("b/metrics.json", "c1" * 20, False, "x")]))
    assert lin["commits"] == {"c1" * 20: 2} and lin["dirty_runs"] == 0 and lin["runs"] == 2
    assert not is_mixed(lin) and code_footnote(lin) is None


def test_two_commits_and_a_dirty_tree_are_said():
    lin = code_lineage(_runs([("a/metrics.json", "aaaa" * 10, False, "x"), ("b/metrics.json", "bbbb" * 10, True, "y"),
                              ("c/metrics.json", "bbbb" * 10, "True", "y")]))
    assert lin["commits"] == {"aaaa" * 10: 1, "bbbb" * 10: 2} and lin["dirty_runs"] == 2
    assert lin["code_identities"] == 2
    note = code_footnote(lin)
    assert note.startswith("Code lineage: the 3 runs behind these tables come from 2 commits: "
                           "aaaaaaaaaa (1 run), bbbbbbbbbb (2 runs); 2 of them were made from a working tree "
                           "with uncommitted changes to code (e.g. b/metrics.json)")


def test_runs_without_a_recorded_commit_are_counted():
    lin = code_lineage(_runs([("a/metrics.json", None, None, None), ("b/metrics.json", "", False, "")]))
    assert lin["unrecorded_runs"] == 2 and lin["commits"] == {} and not is_mixed(lin)


def _machines(rows):
    df = pd.DataFrame(rows, columns=["metrics_path", "device"])
    return pd.concat([df, df])  # one row per threshold mode: counted once


def test_one_kind_of_machine_has_no_footnote():
    lin = device_lineage(_machines([("a/metrics.json", "AMD EPYC 7763 (25/1/1)"), ("b/metrics.json", "AMD EPYC 7763 (25/1/1)")]))
    assert lin == {"devices": {"AMD EPYC 7763 (25/1/1)": 2}, "unrecorded_runs": 0, "runs": 2}
    assert device_footnote(lin) is None


def test_two_kinds_of_machine_are_said_and_unrecorded_ones_counted():
    lin = device_lineage(_machines([("a/metrics.json", "AMD EPYC 7763 (25/1/1)"), ("b/metrics.json", "Intel Xeon (6/143/8)"),
                                    ("c/metrics.json", "Intel Xeon (6/143/8)"), ("d/metrics.json", None),
                                    ("e/metrics.json", "")]))
    assert lin == {"devices": {"AMD EPYC 7763 (25/1/1)": 1, "Intel Xeon (6/143/8)": 2}, "unrecorded_runs": 2, "runs": 5}
    assert device_footnote(lin) == (
        "Device lineage: the 5 runs behind these tables ran on 2 kinds of machine: AMD EPYC 7763 (25/1/1) (1 run), "
        "Intel Xeon (6/143/8) (2 runs). The same seed gives the same numbers on the same kind of machine only; "
        "`cdgtmll audit TABLE --cell ROW COLUMN` names each run's machine.")


def test_a_table_without_the_device_column_has_every_run_unrecorded():
    lin = device_lineage(pd.DataFrame({"metrics_path": ["a/metrics.json", "b/metrics.json"]}))
    assert lin == {"devices": {}, "unrecorded_runs": 2, "runs": 2} and device_footnote(lin) is None
