"""The tables say how many runs each row has when rows differ (config ``power`` trains more seeds
for the compared rows): which rows have how many, not only the range."""

from cdgtmll.tables.footnotes import _runs_per_cell


def _table(n_by_row: dict[str, list[int]]) -> dict:
    cells = {(row, f"col{i}"): {"mean": 50.0, "std": 1.0, "n": n} for row, ns in n_by_row.items()
             for i, n in enumerate(ns)}
    return {"rows": list(n_by_row), "cells": cells}


def test_rows_with_more_seeds_are_named():
    t = _table({"BCE": [10, 10, 10], "ASL": [3, 3, 3], "CD-GTMLL": [10, 10, 10], "MLC-NC": [3, 3, 3], "DBL": [3, 3, 3]})
    assert _runs_per_cell(t) == " Runs per cell (n): 10 for BCE, CD-GTMLL; 3 for every other row."


def test_one_count_and_a_range_shared_by_every_row_read_as_before():
    assert _runs_per_cell(_table({"BCE": [3, 3], "ASL": [3, 3]})) == " Runs per cell (n): 3."
    assert _runs_per_cell(_table({"BCE": [3, 9], "ASL": [3, 9]})) == " Runs per cell (n): 3 to 9."


def test_a_row_whose_cells_differ_gets_its_range():
    t = _table({"BCE": [10, 30], "ASL": [3, 9], "DBL": [3, 9]})
    assert _runs_per_cell(t) == " Runs per cell (n): 10 to 30 for BCE; 3 to 9 for every other row."
