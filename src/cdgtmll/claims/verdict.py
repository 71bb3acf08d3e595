"""Statistics and verdicts of the claims check: the claim kinds, the status names, the
interval and test arithmetic in pure functions (:func:`to_percent`, :func:`t_interval`,
:func:`describe`, :func:`paired_test`, :func:`welch_from_stats`) and :func:`judge`, the
status of one claim given its reproduced estimate. What each status means is documented in
:mod:`cdgtmll.claims.check`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

KINDS = ("value", "difference", "beats", "bound", "range")
CONF = 0.95

CONSISTENT = "consistent"
INCONSISTENT = "inconsistent"
PAPER_INCONSISTENT = "paper inconsistency"
UNATTAINABLE = "unattainable under E.4"
NC_DATASET = "not checked: dataset not run"
NC_METHOD = "not checked: method not run"
NC_FEW = "not checked: too few runs"
STATUS_ORDER = (CONSISTENT, INCONSISTENT, UNATTAINABLE, PAPER_INCONSISTENT, NC_DATASET, NC_METHOD, NC_FEW)


#: half a unit of the paper's last printed digit (its tables print one decimal, in percent): a
#: printed value ``v`` may stand for any true value >= ``v - BOUND_TOLERANCE``
BOUND_TOLERANCE = 0.05
#: comparators of a claim that states the value is reached (``=``/``≈``) or exceeded (``>``)
_REACHES = ("=", "", "≈", "~", ">", ">=")


def needs(what: str) -> str:
    return f"not checked: needs {what}"


# ============================================================== pure arithmetic

def to_percent(values) -> np.ndarray:
    """Fractions in [0, 1] (the unit of ``all_runs.csv``) -> percent; NaN stays NaN."""
    a = np.asarray(values, dtype=float)
    finite = a[np.isfinite(a)]
    if finite.size and (finite.min() < -1e-9 or finite.max() > 1 + 1e-9):
        raise ValueError(f"expected metric fractions in [0, 1], got values in [{finite.min()}, {finite.max()}]")
    return 100.0 * a


def t_interval(mean: float, std: float, n: int, conf: float = CONF) -> tuple[float, float, float]:
    """(low, high, half-width) of the two-sided t-interval for a mean; NaN for n < 2."""
    if n < 2 or not np.isfinite(std):
        return math.nan, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + conf / 2, n - 1)) * std / math.sqrt(n)
    return mean - half, mean + half, half


@dataclass(frozen=True)
class Estimate:
    n: int
    mean: float
    std: float
    lo: float
    hi: float


def describe(values) -> Estimate:
    """Mean, sample std (ddof 1) and 95 % t-interval of the finite values."""
    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    n = int(a.size)
    mean = float(a.mean()) if n else math.nan
    std = float(a.std(ddof=1)) if n > 1 else math.nan
    lo, hi, _ = t_interval(mean, std, n)
    return Estimate(n, mean, std, lo, hi)


def paired_test(a, b) -> dict:
    """Paired two-sided t-test of a - b (aligned arrays): n, mean/std/interval of the differences,
    t and p from ``scipy.stats.ttest_rel``."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    est = describe(a - b)
    t = p = math.nan
    if est.n >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ttest_rel(a, b)
        t, p = float(res.statistic), float(res.pvalue)
    return {"n": est.n, "mean": est.mean, "std": est.std, "lo": est.lo, "hi": est.hi, "t": t, "p": p}


def welch_from_stats(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> dict:
    """Welch's test of mean1 - mean2 from summary statistics, with its t-interval."""
    diff = m1 - m2
    if n1 < 2 or n2 < 2:
        return {"n": min(n1, n2), "mean": diff, "std": math.nan, "lo": math.nan, "hi": math.nan,
                "t": math.nan, "p": math.nan}
    v1, v2 = s1 ** 2 / n1, s2 ** 2 / n2
    se = math.sqrt(v1 + v2)
    if se == 0:
        return {"n": min(n1, n2), "mean": diff, "std": 0.0, "lo": diff, "hi": diff,
                "t": math.nan if diff == 0 else math.copysign(math.inf, diff), "p": 1.0 if diff == 0 else 0.0}
    dof = (v1 + v2) ** 2 / (v1 ** 2 / (n1 - 1) + v2 ** 2 / (n2 - 1))
    half = float(stats.t.ppf(0.5 + CONF / 2, dof)) * se
    res = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False)
    return {"n": min(n1, n2), "mean": diff, "std": math.nan, "lo": diff - half, "hi": diff + half,
            "t": float(res.statistic), "p": float(res.pvalue)}


def above_bound(kind: str, comparator: str, paper_value: float, bound: float,
                tol: float = BOUND_TOLERANCE) -> bool:
    """True when a claim states a value no run can reach: a ``value`` claim (``=``, ``≈``) or a
    ``bound`` claim ``> v`` / ``>= v`` whose printed value, less the rounding ``tol``, lies above
    ``bound`` (percent; the most the metric can reach, :mod:`cdgtmll.metrics.oracle`). False
    for other kinds (differences, ``<`` bounds) and when either number is missing."""
    cmp = "" if comparator is None or (isinstance(comparator, float) and math.isnan(comparator)) else str(comparator)
    if kind not in ("value", "bound") or cmp.strip() not in _REACHES:
        return False
    try:
        pv, b = float(paper_value), float(bound)
    except (TypeError, ValueError):
        return False
    if not (math.isfinite(pv) and math.isfinite(b)):
        return False
    return pv - tol > b


def _ci_side(lo: float, hi: float, ok) -> str:
    a, b = ok(lo), ok(hi)
    return "whole interval satisfies" if a and b else ("whole interval violates" if not (a or b) else "interval straddles")


def judge(kind: str, comparator: str, paper_value: float, paper_hi: float, est: dict,
          higher_is_better: bool = True) -> dict:
    """Status of one claim given its reproduced estimate.

    ``est`` has ``n, mean, lo, hi`` (the reproduced quantity: the metric for value/bound, the
    paired difference method - other for difference/range/beats). Returns ``status`` plus
    ``paper_in_ci``, ``direction_match``, ``ci_side`` (None where not applicable).
    """
    out = {"status": None, "paper_in_ci": None, "direction_match": None, "ci_side": None}
    if est["n"] < 2 or not np.isfinite(est["mean"]):
        out["status"] = NC_FEW
        return out
    mean, lo, hi = est["mean"], est["lo"], est["hi"]
    if kind in ("value", "difference"):
        if comparator in ("<", ">", "<=", ">="):
            kind = "bound"
        else:
            out["paper_in_ci"] = bool(lo <= paper_value <= hi)
            if kind == "difference" and paper_value != 0:
                out["direction_match"] = bool(np.sign(mean) == np.sign(paper_value))
            out["status"] = CONSISTENT if out["paper_in_ci"] else INCONSISTENT
            return out
    if kind == "range":
        low, high = sorted((paper_value, paper_hi))
        out["paper_in_ci"] = bool(lo <= high and hi >= low)
        out["direction_match"] = bool(np.sign(mean) == np.sign(low)) if low != 0 else None
        out["status"] = CONSISTENT if out["paper_in_ci"] else INCONSISTENT
        return out
    if kind == "bound":
        ops = {"<": lambda x: x < paper_value, "<=": lambda x: x <= paper_value,
               ">": lambda x: x > paper_value, ">=": lambda x: x >= paper_value}
        if comparator not in ops:
            raise ValueError(f"bound claim needs comparator < or >, got {comparator!r}")
        ok = ops[comparator]
        out["direction_match"] = bool(ok(mean))
        out["ci_side"] = _ci_side(lo, hi, ok) if np.isfinite(lo) else None
        out["status"] = CONSISTENT if out["direction_match"] else INCONSISTENT
        return out
    if kind == "beats":
        out["direction_match"] = bool(mean > 0) if higher_is_better else bool(mean < 0)
        better = (lambda x: x > 0) if higher_is_better else (lambda x: x < 0)
        out["ci_side"] = _ci_side(lo, hi, better) if np.isfinite(lo) else None
        out["status"] = CONSISTENT if out["direction_match"] else INCONSISTENT
        return out
    raise ValueError(f"unknown claim kind {kind!r}")
