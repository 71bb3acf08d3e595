"""Bold and underline only for a value no other row shows: the rule of
:func:`cdgtmll.tables.layout.rank_marks` checked against what the cells print
(:func:`cdgtmll.tables.render.fmt`, the reader's view), not against rank_marks' own rounding."""

import math

import numpy as np
import pandas as pd

from cdgtmll.tables.collect import METRICS
from cdgtmll.tables.layout import build_table, configured_columns, rank_marks
from cdgtmll.tables.render import cell_text, fmt


def _read(mean: float | None, digits: int) -> float | None:
    """The value a reader reads in a cell: its printed mean, as a number (``-0.0`` reads 0)."""
    if mean is None or math.isnan(mean):
        return None
    return float(fmt(mean, 0.0, 1, digits))


def _expected(values: list[float | None], digits: int) -> list[str]:
    """The rule, on the printed values: the top value bold if one row shows it, the next
    underlined if the top is one row's and one row shows it; a single value is no one's best."""
    read = [_read(v, digits) for v in values]
    distinct = sorted({r for r in read if r is not None}, reverse=True)
    if len(distinct) < 2 or read.count(distinct[0]) > 1:
        return [""] * len(values)
    second = distinct[1] if read.count(distinct[1]) == 1 else None
    return ["best" if r == distinct[0] else "second" if r is not None and r == second else "" for r in read]


def test_zero_and_minus_zero_print_the_same_value_and_are_a_tie():
    # a mean of -0.0 (or -1e-9) prints "-0.0": the same value as "0.0" to whoever reads it
    assert rank_marks([0.5, 0.0, -0.0]) == ["best", "", ""]
    assert rank_marks([0.5, 1e-9, -1e-9]) == ["best", "", ""]
    assert rank_marks([0.5, -0.0001, 0.0002], digits=1) == ["best", "", ""]


def test_a_column_with_one_value_has_no_marks():
    assert rank_marks([0.3]) == [""]
    assert rank_marks([None, 0.3, float("nan")]) == ["", "", ""]


def test_marks_follow_the_printed_values_over_many_columns():
    """Columns drawn so that ties at the printed precision, tied tops, tied seconds, zeros,
    negative zeros and missing cells all occur; every mark must match the rule on the printed text."""
    rng = np.random.default_rng(41)
    grid = np.array([0.0, -0.0, 1e-9, -1e-9, 0.00049, 0.0004, 0.1, 0.10004, 0.2, 0.3, 0.30049, 0.5])
    seen = {"tied top": 0, "tied second": 0, "marked": 0}
    for _ in range(3000):
        n = int(rng.integers(1, 7))
        values = [None if rng.random() < 0.1 else float(rng.choice(grid)) for _ in range(n)]
        for digits in (1, 2):
            got = rank_marks(values, digits)
            assert got == _expected(values, digits), (values, digits, got)
            read = [_read(v, digits) for v in values]
            for r, mark in zip(read, got):  # a marked value is shown by no other row
                assert not mark or read.count(r) == 1, (values, digits, got)
            top = sorted({r for r in read if r is not None}, reverse=True)
            seen["tied top"] += len(top) > 1 and read.count(top[0]) > 1
            seen["tied second"] += len(top) > 2 and read.count(top[0]) == 1 and read.count(top[1]) > 1
            seen["marked"] += "second" in got
    assert min(seen.values()) > 50, seen  # every case occurred often


def _summary(values: dict[str, float]) -> pd.DataFrame:
    rows = []
    for method, v in values.items():
        row = {"mode": "global", "dataset": "yeast", "setting": "clean", "method": method, "n": 3,
               "sources": [f"{method}.json"]}
        for m in METRICS:
            row[f"{m}_mean"] = v if m == "rare_f1" else 0.5
            row[f"{m}_std"] = 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def test_rendered_table_underlines_no_zero_that_another_row_also_shows():
    """A unique best, and two rows that both read 0.0 (one mean -1e-9, which prints "-0.0"):
    the best bold, neither 0.0 underlined, in Markdown and LaTeX."""
    summary = _summary({"BCE": 0.125, "CD-GTMLL": 0.0, "BR-LogReg": -1e-9})
    cols = configured_columns(1, [("yeast", "Yeast")], {})
    rows = ["BCE", "CD-GTMLL", "BR-LogReg"]
    table = build_table(summary, "global", cols, (), rows)
    j = [c[3] for c in cols].index("rare_f1")
    md = {r: cell_text(table["cells"][(r, j)], "md") for r in rows}
    tex = {r: cell_text(table["cells"][(r, j)], "tex") for r in rows}
    assert md["BCE"].startswith("**") and r"\textbf" in tex["BCE"]
    for r in ("CD-GTMLL", "BR-LogReg"):
        assert "<u>" not in md[r] and "**" not in md[r], md
        assert r"\underline" not in tex[r] and r"\textbf" not in tex[r], tex
