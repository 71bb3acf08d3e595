"""Statistics and verdicts of the claims check: the claim kinds, the status names, the
settings of the check (:class:`ClaimSettings`, the config's ``claims:`` section), the interval
and test arithmetic in pure functions (:func:`to_percent`, :func:`t_interval`,
:func:`describe`, :func:`paired_test`, :func:`welch_from_stats`, :func:`one_sample_p`,
:func:`tost`, :func:`detectable_effect`, :func:`holm`, :func:`comparison_verdict`) and
:func:`judge`, the status of one claim given its reproduced estimate. What each status means is
documented in :mod:`cdgtmll.claims.check` and ``docs/outputs.md`` (Claims).

Sources of the statistics:

* two one-sided tests (TOST) for equivalence within ``±margin``: Schuirmann, "A comparison of
  the two one-sided tests procedure and the power approach for assessing the equivalence of
  average bioavailability", J. Pharmacokinet. Biopharm. 15 (1987); the same computation as
  ``statsmodels.stats.weightstats.ttost_paired`` (``tests/unit/claims/test_claims_stats.py``
  compares with its numbers);
* the detectable effect: the smallest true mean difference a two-sided t-test at level
  ``alpha`` finds with probability ``power``, from the noncentral t distribution
  (``scipy.stats.nct``), as ``statsmodels.stats.power.TTestPower.solve_power``;
* Holm's step-down correction: Holm, "A simple sequentially rejective multiple test
  procedure", Scand. J. Statist. 6 (1979), as ``statsmodels.stats.multitest.multipletests(...,
  method='holm')`` (scipy has no Holm; statsmodels is not a dependency of this package).
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
#: the paper's value lies above what no predictor can exceed on the test split (a data-only
#: bound: mAP / P@k of a perfect ranking, or a metric's exact maximum)
ABOVE_ANY = "above any predictor"
#: the paper's value lies above the best test-oracle F1 of every model run on the dataset and
#: setting (the panel: CSV column ``ceiling_panel``); another model could still reach it
ABOVE_PANEL = "above every model run here"
#: the interval (widened by the implementation tolerance) neither satisfies nor violates the
#: claim: a ``beats`` whose interval contains 0, a bound the interval straddles
UNDECIDED = "undecided"
NC_DATASET = "not checked: dataset not run"
NC_METHOD = "not checked: method not run"
NC_FEW = "not checked: too few runs"
STATUS_ORDER = (CONSISTENT, INCONSISTENT, UNDECIDED, ABOVE_PANEL, ABOVE_ANY, PAPER_INCONSISTENT, NC_DATASET,
                NC_METHOD, NC_FEW)


#: half a unit of the paper's last printed digit (its tables print one decimal, in percent): a
#: printed value ``v`` may stand for any true value >= ``v - BOUND_TOLERANCE``
BOUND_TOLERANCE = 0.05
#: comparators of a claim that states the value is reached (``=``/``≈``) or exceeded (``>``)
_REACHES = ("=", "", "≈", "~", ">", ">=")


@dataclass(frozen=True)
class ClaimSettings:
    """The config's ``claims:`` section (``src/cdgtmll/config/schema.yaml``), in percentage points."""

    #: equivalence margin of the two one-sided tests: ``equivalent within ±margin``
    equivalence_margin: float = 1.0
    #: a value/difference/range/bound claim is ``inconsistent`` only when the paper's number lies
    #: farther than this from the 95 % interval (differences between implementations)
    implementation_tolerance: float = 1.0
    #: level of the tests (TOST, the detectable effect) and of the Holm correction
    alpha: float = 0.05
    #: power at which the detectable effect is computed
    power: float = 0.8

    @classmethod
    def from_config(cls, section: dict | None) -> ClaimSettings:
        """From the config's ``claims:`` mapping (missing keys: the defaults)."""
        section = dict(section or {})
        return cls(**{k: float(section[k]) for k in cls.__dataclass_fields__ if k in section})

    @classmethod
    def add_arguments(cls, ap) -> None:
        """Add ``--equivalence-margin``, ``--implementation-tolerance``, ``--alpha``, ``--power`` to
        an ``argparse`` parser (defaults: the dataclass's)."""
        for k, f in cls.__dataclass_fields__.items():
            ap.add_argument(f"--{k.replace('_', '-')}", type=float, default=f.default,
                            help=f"claims.{k} of the config (default {f.default:g})")

    @classmethod
    def from_args(cls, ns) -> ClaimSettings:
        """From the namespace of a parser given :meth:`add_arguments`."""
        return cls(**{k: float(getattr(ns, k)) for k in cls.__dataclass_fields__})


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
    se = est.std / math.sqrt(est.n) if est.n >= 2 else math.nan
    return {"n": est.n, "mean": est.mean, "std": est.std, "lo": est.lo, "hi": est.hi, "t": t, "p": p,
            "se": se, "dof": est.n - 1 if est.n >= 2 else math.nan}


def welch_from_stats(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> dict:
    """Welch's test of mean1 - mean2 from summary statistics, with its t-interval."""
    diff = m1 - m2
    if n1 < 2 or n2 < 2:
        return {"n": min(n1, n2), "mean": diff, "std": math.nan, "lo": math.nan, "hi": math.nan,
                "t": math.nan, "p": math.nan, "se": math.nan, "dof": math.nan}
    v1, v2 = s1 ** 2 / n1, s2 ** 2 / n2
    se = math.sqrt(v1 + v2)
    if se == 0:
        return {"n": min(n1, n2), "mean": diff, "std": 0.0, "lo": diff, "hi": diff,
                "t": math.nan if diff == 0 else math.copysign(math.inf, diff), "p": 1.0 if diff == 0 else 0.0,
                "se": 0.0, "dof": math.nan}
    dof = (v1 + v2) ** 2 / (v1 ** 2 / (n1 - 1) + v2 ** 2 / (n2 - 1))
    half = float(stats.t.ppf(0.5 + CONF / 2, dof)) * se
    res = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False)
    return {"n": min(n1, n2), "mean": diff, "std": math.nan, "lo": diff - half, "hi": diff + half,
            "t": float(res.statistic), "p": float(res.pvalue), "se": se, "dof": dof}


def one_sample_p(mean: float, std: float, n: int, value: float) -> float:
    """Two-sided p of the one-sample t-test of ``mean == value`` from summary statistics (the
    p of ``scipy.stats.ttest_1samp`` on the same data); NaN for n < 2 or a missing number; with
    ``std == 0``, 1 when ``mean == value`` else 0."""
    try:
        mean, std, value = float(mean), float(std), float(value)
    except (TypeError, ValueError):
        return math.nan
    if n < 2 or not (math.isfinite(mean) and math.isfinite(std) and math.isfinite(value)):
        return math.nan
    if std == 0:
        return 1.0 if mean == value else 0.0
    t = (mean - value) / (std / math.sqrt(n))
    return float(2 * stats.t.sf(abs(t), n - 1))


def tost(mean: float, se: float, dof: float, margin: float) -> float:
    """p of the two one-sided tests of equivalence ``-margin < mu < margin`` (Schuirmann 1987)
    for a mean (or mean difference) with standard error ``se`` and ``dof`` degrees of freedom:
    the larger of the p of ``H0: mu <= -margin`` (``t = (mean + margin) / se``, upper tail) and
    of ``H0: mu >= margin`` (``t = (mean - margin) / se``, lower tail). Equivalence is shown at
    level ``alpha`` when ``p < alpha``. NaN when a number is missing; ``se == 0``: 0 inside the
    margins, 1 outside."""
    if not all(math.isfinite(x) for x in (mean, se, margin)) or se < 0:
        return math.nan
    if se == 0:
        return 0.0 if -margin < mean < margin else 1.0
    if not math.isfinite(dof) or dof <= 0:
        return math.nan
    p_low = float(stats.t.sf((mean + margin) / se, dof))
    p_upp = float(stats.t.cdf((mean - margin) / se, dof))
    return max(p_low, p_upp)


def _power(nc: float, dof: float, alpha: float) -> float:
    """Power of the two-sided t-test at level ``alpha`` for noncentrality ``nc``. scipy's
    noncentral t returns NaN for some (dof, nc) (dof 1, nc 8: 2 pairs); there the same
    probability is integrated directly: ``T = (Z + nc) / sqrt(V / dof)``, ``V ~ chi2(dof)``, so
    ``P(|T| > c) = E_V[Phi(nc - c s) + Phi(-nc - c s)]``, ``s = sqrt(V / dof)``."""
    crit = float(stats.t.ppf(1 - alpha / 2, dof))
    p = float(stats.nct.sf(crit, dof, nc) + stats.nct.cdf(-crit, dof, nc))
    if math.isfinite(p):
        return p
    from scipy.integrate import quad

    def f(v: float) -> float:
        s = math.sqrt(v / dof)
        return float((stats.norm.cdf(nc - crit * s) + stats.norm.cdf(-nc - crit * s)) * stats.chi2.pdf(v, dof))

    return float(quad(f, 0.0, math.inf, limit=200)[0])


def detectable_effect(se: float, dof: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true mean difference (same unit as ``se``) that the two-sided t-test at
    level ``alpha`` detects with probability ``power``, when the estimate has standard error
    ``se`` and ``dof`` degrees of freedom: ``nc * se``, ``nc`` the noncentrality at which the
    noncentral t gives that power (``scipy.stats.nct``; for a paired test of n pairs with std
    ``s``, ``se = s / sqrt(n)``, ``dof = n - 1``, as ``statsmodels`` ``TTestPower().solve_power(
    nobs=n, alpha=alpha, power=power) * s``). NaN when a number is missing; 0 when ``se == 0``."""
    from scipy.optimize import brentq

    if not (math.isfinite(se) and math.isfinite(dof)) or dof <= 0 or se < 0:
        return math.nan
    if se == 0:
        return 0.0
    hi = 1.0
    while _power(hi, dof, alpha) < power:
        hi *= 2
        if hi > 1e6:
            return math.nan
    nc = brentq(lambda x: _power(x, dof, alpha) - power, 0.0, hi, xtol=1e-10)
    return float(nc * se)


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979), by
    ``statsmodels.stats.multitest.multipletests(p, method='holm')``: ``p_(i) = max_{j <= i}
    min(1, (m - j + 1) p_(j))`` over the m finite p sorted ascending; NaN stays NaN and is not
    counted in m (statsmodels would propagate it)."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def comparison_verdict(mean: float, lo: float, hi: float, p_tost: float, detectable: float, n: int,
                       settings: ClaimSettings, higher_is_better: bool = True, unit: str = "seeds") -> str:
    """The verdict of a paired comparison (method - other): ``better`` / ``worse`` when the 95 %
    interval excludes 0 on that side, else ``equivalent within ±margin`` when the two one-sided
    tests show it (``p_tost < alpha``), else ``undecided (n <unit> detect >= x points)`` with
    the detectable effect ``x`` (:func:`detectable_effect`). Empty when there is no interval."""
    if n < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    if lo > 0 or hi < 0:
        return "better" if (lo > 0) == higher_is_better else "worse"
    if math.isfinite(p_tost) and p_tost < settings.alpha:
        return f"equivalent within ±{settings.equivalence_margin:g}"
    x = f"{detectable:.1f}" if math.isfinite(detectable) else "?"
    return f"undecided ({n} {unit} detect >= {x} points)"


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
          higher_is_better: bool = True, tolerance: float = 0.0) -> dict:
    """Status of one claim given its reproduced estimate.

    ``est`` has ``n, mean, lo, hi`` (the reproduced quantity: the metric for value/bound, the
    paired difference method - other for difference/range/beats). ``tolerance``: the
    implementation tolerance (:attr:`ClaimSettings.implementation_tolerance`), added on both sides
    of the interval before a value, difference, range or bound claim is called ``inconsistent``
    (not for ``beats``: a direction between two methods run here, not a level an implementation
    shifts). Returns ``status`` plus ``paper_in_ci`` (the strict interval), ``within_tolerance``
    (outside the interval, inside the widened one), ``direction_match``, ``ci_side`` (None where
    not applicable).

    * value, difference (``=``): consistent when the paper's number lies in ``[lo - tol, hi + tol]``;
    * range: consistent when ``[lo - tol, hi + tol]`` overlaps the paper's range;
    * bound: consistent when the mean satisfies it, inconsistent when the whole widened interval
      violates it, otherwise ``undecided``;
    * beats: consistent when the whole interval lies on the claimed side of 0, inconsistent when
      the whole interval lies on the other side (0 included), otherwise ``undecided``.
    """
    out = {"status": None, "paper_in_ci": None, "within_tolerance": None, "direction_match": None, "ci_side": None}
    tol = float(tolerance or 0.0)
    if est["n"] < 2 or not np.isfinite(est["mean"]):
        out["status"] = NC_FEW
        return out
    mean, lo, hi = est["mean"], est["lo"], est["hi"]
    if kind in ("value", "difference"):
        if comparator in ("<", ">", "<=", ">="):
            kind = "bound"
        else:
            out["paper_in_ci"] = bool(lo <= paper_value <= hi)
            widened = bool(lo - tol <= paper_value <= hi + tol)
            out["within_tolerance"] = widened and not out["paper_in_ci"]
            if kind == "difference" and paper_value != 0:
                out["direction_match"] = bool(np.sign(mean) == np.sign(paper_value))
            out["status"] = CONSISTENT if widened else INCONSISTENT
            return out
    if kind == "range":
        low, high = sorted((paper_value, paper_hi))
        out["paper_in_ci"] = bool(lo <= high and hi >= low)
        widened = bool(lo - tol <= high and hi + tol >= low)
        out["within_tolerance"] = widened and not out["paper_in_ci"]
        out["direction_match"] = bool(np.sign(mean) == np.sign(low)) if low != 0 else None
        out["status"] = CONSISTENT if widened else INCONSISTENT
        return out
    if kind == "bound":
        ops = {"<": lambda x: x < paper_value, "<=": lambda x: x <= paper_value,
               ">": lambda x: x > paper_value, ">=": lambda x: x >= paper_value}
        if comparator not in ops:
            raise ValueError(f"bound claim needs comparator < or >, got {comparator!r}")
        ok = ops[comparator]
        out["direction_match"] = bool(ok(mean))
        out["ci_side"] = _ci_side(lo, hi, ok) if np.isfinite(lo) else None
        if out["direction_match"]:
            out["status"] = CONSISTENT
        elif not np.isfinite(lo) or _ci_side(lo - tol, hi + tol, ok) == "whole interval violates":
            out["status"] = INCONSISTENT
            out["within_tolerance"] = False
        else:
            out["status"] = UNDECIDED
            out["within_tolerance"] = _ci_side(lo, hi, ok) == "whole interval violates"
        return out
    if kind == "beats":
        out["direction_match"] = bool(mean > 0) if higher_is_better else bool(mean < 0)
        better = (lambda x: x > 0) if higher_is_better else (lambda x: x < 0)
        if not np.isfinite(lo):
            out["status"] = UNDECIDED
            return out
        out["ci_side"] = _ci_side(lo, hi, better)
        out["status"] = {"whole interval satisfies": CONSISTENT, "whole interval violates": INCONSISTENT}.get(
            out["ci_side"], UNDECIDED)
        return out
    raise ValueError(f"unknown claim kind {kind!r}")
