"""Readings of the metric beside the claims check's verdict: which readings of App. E.4 would
bring the paper's value inside the reproduced interval, and the tail behind a Rare-F1 claim.

The verdict of every claim stays App. E.4's (:mod:`cdgtmll.claims.compare`); this module adds
evidence beside it, two columns of ``claims_check.csv``:

``readings_that_fit``
    For a ``value`` claim (``=``, ``≈``) on Micro-F1, Macro-F1 or Rare-F1: the readings of
    :mod:`cdgtmll.metrics.readings` (``all_runs.csv`` columns ``reading:<metric>:<reading>``)
    whose 95 % t-interval over the claim's runs (:func:`cdgtmll.claims.verdict.describe`, the
    same interval rule as the verdict: ``mean ± t_{0.975, n-1} s / sqrt(n)``, in percent) holds
    the paper's value, joined by ``; `` in the order of
    :data:`cdgtmll.metrics.readings.READINGS` (e.g. ``flattened weighted F1; Hamming accuracy``);
    ``none`` when no reading fits; ``not recorded`` when the runs have no readings (evaluated
    before they existed); empty for other claims, and for claims not checked against runs.
    The claim's runs are those of :mod:`cdgtmll.claims.compare`: its dataset, setting
    (``R@*`` matches every severity), canonical method and threshold mode. Where they come from
    two or more R-variant draws (sampling seeds), the interval is over the draws' means, each
    the mean over its training seeds (the nested rule: :func:`units`); otherwise over the
    runs. No multiplicity correction: with 7
    readings a fit can be chance; the column says which readings are compatible, not which one
    the paper used.
``tail_detail``
    For a Rare-F1 claim checked against runs: the E.4 tail of the claim's method's runs, each
    tail label's F1 (mean over the runs, in percent) with its test-positive count and its
    training-positive count (the clean training split), then the Rare-F1 bootstrap interval over
    test rows, pooled over the runs as the mean of the runs' percentile interval endpoints
    (every run of a dataset resamples the same test rows: same seed, same M; the mean of the
    endpoints is exactly the interval of the mean when the runs' resample values are in the same
    order, an approximation otherwise), with B and the seed. Empty for other claims.

:func:`add_reading_columns` adds both columns to the result table of
:func:`cdgtmll.claims.compare.check_claims`; :func:`cdgtmll.claims.check.main` calls it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from cdgtmll.claims.compare import canonical_method, canonical_setting, nested_units, normalise_runs, setting_matches
from cdgtmll.claims.verdict import describe, to_percent
from cdgtmll.metrics.readings import F1_COLUMNS, READINGS, reading_column

NOT_RECORDED = "not recorded"
NONE_FIT = "none"
#: comparators of a single-value claim (the paper prints the value itself)
_VALUE_COMPARATORS = ("=", "", "≈", "~")
#: statuses whose claim has no runs to read
_NOT_RUN = ("not checked: dataset not run", "not checked: method not run")


def _blank(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()


def claim_runs(runs: pd.DataFrame, claim: dict) -> pd.DataFrame:
    """The rows of the normalised runs table (:func:`cdgtmll.claims.compare.normalise_runs`) behind
    a claim: its dataset, setting (pooled as the verdict pools them), canonical method and the
    result row's threshold ``mode`` (``global`` when none)."""
    setting = canonical_setting(claim["setting"])
    mode = _blank(claim.get("mode")) or "global"
    return runs[(runs["dataset"] == claim["dataset"]) & (runs["method"] == canonical_method(claim["method"]))
                & (runs["mode"] == mode) & runs["setting"].map(lambda s: setting_matches(setting, s))]


def units(sel: pd.DataFrame, col: str) -> np.ndarray:
    """The independent units of column ``col`` over the runs ``sel`` (normalised: ``setting``,
    ``seed``, ``skey``), in percent, as the verdict takes them
    (:func:`cdgtmll.claims.compare.nested_units`): with runs of two or more R-variant draws, the
    mean of each draw over its training seeds; otherwise each run."""
    idx = pd.MultiIndex.from_arrays([sel["setting"].to_numpy(), sel["seed"].to_numpy(), sel["skey"].to_numpy()],
                                    names=["setting", "seed", "skey"])
    vals = pd.Series(to_percent(pd.to_numeric(sel[col], errors="coerce")), index=idx)
    return nested_units(vals[np.isfinite(vals.to_numpy())])[0]


def fitting_readings(sel: pd.DataFrame, metric: str, paper_value: float) -> list[str] | None:
    """The labels of the readings of ``metric`` whose 95 % t-interval over the runs ``sel``
    (normalised; :func:`units`) holds ``paper_value`` (percent); None when no reading was recorded
    for two or more units."""
    fits, recorded = [], False
    for r in READINGS:
        col = reading_column(metric, r.key)
        if metric not in r.metrics or col not in sel:
            continue
        est = describe(units(sel, col))
        if est.n < 2 or not np.isfinite(est.lo):
            continue
        recorded = True
        if est.lo <= paper_value <= est.hi:
            fits.append(r.label)
    return fits if recorded else None


def readings_that_fit(claim: dict, runs: pd.DataFrame) -> str:
    """The ``readings_that_fit`` cell of one result row (module docstring); ``runs`` normalised."""
    metric = _blank(claim.get("metric"))
    if (claim.get("kind") != "value" or metric not in F1_COLUMNS
            or _blank(claim.get("comparator")) not in _VALUE_COMPARATORS):
        return ""
    status = _blank(claim.get("status"))
    if status in _NOT_RUN or status.startswith("not checked: needs"):
        return ""
    try:
        pv = float(claim.get("paper_value"))
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(pv):
        return ""
    fits = fitting_readings(claim_runs(runs, claim), metric, pv)
    if fits is None:
        return NOT_RECORDED
    return "; ".join(fits) if fits else NONE_FIT


def _pct(v: float) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.1f}"


def tail_detail(claim: dict, runs: pd.DataFrame) -> str:
    """The ``tail_detail`` cell of one result row (module docstring); ``runs`` normalised."""
    if _blank(claim.get("metric")) != "rare_f1":
        return ""
    status = _blank(claim.get("status"))
    if status in _NOT_RUN or status.startswith("not checked: needs"):
        return ""
    sel = claim_runs(runs, claim)
    if "tail_labels_f1" not in sel:
        return NOT_RECORDED
    per_label: dict[tuple[int, str], list] = {}
    n_runs = 0
    for text in sel["tail_labels_f1"]:
        if not _blank(text):
            continue
        n_runs += 1
        for rec in json.loads(text):
            per_label.setdefault((int(rec["label"]), str(rec["name"])), []).append(rec)
    if not n_runs:
        return NOT_RECORDED
    parts = []
    for (_, name), recs in sorted(per_label.items()):
        f1 = float(np.mean([r["f1"] for r in recs]))
        tests = sorted({int(r["n_pos_test"]) for r in recs})
        trains = sorted({int(r["n_pos_train"]) for r in recs})
        parts.append(f"{name} F1 {_pct(f1)} (test positives {'/'.join(map(str, tests))}, "
                     f"training positives {'/'.join(map(str, trains))})")
    method = canonical_method(claim["method"])
    text = (f"E.4 tail of {len(per_label)} label(s), F1 mean over {n_runs} run(s) of {method}: "
            + "; ".join(parts))
    lo = pd.to_numeric(sel.get("rare_f1_bootstrap_lo"), errors="coerce")
    hi = pd.to_numeric(sel.get("rare_f1_bootstrap_hi"), errors="coerce")
    ok = lo.notna() & hi.notna()
    if ok.any():
        Bs = sorted({int(b) for b in pd.to_numeric(sel.loc[ok, "rare_f1_bootstrap_B"], errors="coerce").dropna()})
        seeds = sorted({int(b) for b in pd.to_numeric(sel.loc[ok, "rare_f1_bootstrap_seed"], errors="coerce").dropna()})
        text += (f". Rare-F1 bootstrap 95 % interval over test rows: [{_pct(float(lo[ok].mean()))}, "
                 f"{_pct(float(hi[ok].mean()))}] (mean of {int(ok.sum())} run(s)' percentile intervals; "
                 f"B = {'/'.join(map(str, Bs))}, seed {'/'.join(map(str, seeds))})")
    return text


def add_reading_columns(res: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``res`` (the result table of :func:`cdgtmll.claims.compare.check_claims`) with the columns
    ``readings_that_fit`` and ``tail_detail``; ``runs`` is ``all_runs.csv`` as read by pandas."""
    out = res.copy()
    if out.empty:
        out["readings_that_fit"] = pd.Series(dtype=str)
        out["tail_detail"] = pd.Series(dtype=str)
        return out
    nr = normalise_runs(runs)
    rows = out.to_dict("records")
    out["readings_that_fit"] = [readings_that_fit(r, nr) for r in rows]
    out["tail_detail"] = [tail_detail(r, nr) for r in rows]
    return out
