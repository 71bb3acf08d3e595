"""Check the paper's claims (``paper_claims.csv``) against the reproduced runs.

``python -m cdgtmll.claims.check --runs results/tables/all_runs.csv --out results/claims/claims_check
[--claims PATH] [--pr-csv figures/pr_tail.csv] [--spec-csv PATH] [--mode claims|global|adaptive]``

writes ``<out>.csv`` (one row per claim) and ``<out>.md`` (a status summary, then every claim).

Per claim, the reproduced quantity is computed in percent from the runs of the claim's
(dataset, setting, method, mode); R-variant settings pool training seeds x sampling seeds.

* ``value`` / ``bound``: mean ± sample std (ddof 1) over the n runs and the 95 % t-interval
  ``mean ± t_{0.975, n-1} s / sqrt(n)``.
* ``difference`` / ``range`` / ``beats``: runs of the two methods are paired on
  (training seed, sampling seed); the reproduced value is the mean paired difference
  (method - other) with its t-interval, and ``scipy.stats.ttest_rel`` (two-sided) gives t, p.
  Figure claims read from ``--pr-csv`` only have per-method means/stds, so they use Welch's
  test from summary statistics instead (column ``test`` says which).

Status
------
``consistent`` / ``inconsistent``:

* ``value``, ``difference``: the paper's number lies inside the 95 % t-interval.
* ``range``: the t-interval overlaps the paper's interval.
* ``bound``: the reproduced mean satisfies the bound (``ci_side`` tells whether the whole
  interval does).
* ``beats``: the reproduced mean difference has the claimed sign (``p`` tells whether it is
  significant).

Numeric claims are judged with their sampling error (a number reproduced to within noise is
consistent); directional claims by the side the estimate falls on, with the test reported.

``not checked: ...`` — never counted as passed or failed:

* ``dataset not run``: no run of the claim's dataset (or the figure input is on another dataset);
* ``method not run``: the method, or every listed comparator, has no run there;
* ``too few runs``: fewer than 2 runs (or 2 pairs) — no interval or test is possible;
* ``needs <what>``: an input the claim depends on is missing (a setting not run, a figure
  input not given, a metric not recorded).

The arithmetic lives in pure functions (:func:`to_percent`, :func:`t_interval`,
:func:`describe`, :func:`paired_test`, :func:`welch_from_stats`, :func:`judge`);
:func:`check_claims` maps a claims table and a runs table to the result table.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from cdgtmll.io import atomic_write

CLAIMS_CSV = Path(__file__).with_name("paper_claims.csv")
CLAIM_COLUMNS = ["claim_id", "location", "line", "quote", "kind", "dataset", "setting", "metric", "method",
                 "other_method", "paper_value", "paper_value_hi", "comparator", "mode", "in_comment", "notes"]
KINDS = ("value", "difference", "beats", "bound", "range")
RUN_METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")
CONF = 0.95

CONSISTENT = "consistent"
INCONSISTENT = "inconsistent"
NC_DATASET = "not checked: dataset not run"
NC_METHOD = "not checked: method not run"
NC_FEW = "not checked: too few runs"
STATUS_ORDER = (CONSISTENT, INCONSISTENT, NC_DATASET, NC_METHOD, NC_FEW)


def needs(what: str) -> str:
    return f"not checked: needs {what}"


#: ablation aliases of CD-GTMLL (App. E.2); excluded, like ``@`` sweep variants, from ``*`` comparators
ABLATION_ALIASES = frozenset({"No-Curiosity", "Single-Predictor", "No-Overlap", "No-Disagreement"})
#: names printed differently in the paper
METHOD_ALIASES = {"EUT": "ETU", "CD--GTMLL": "CD-GTMLL"}


# ============================================================== paper source: table extraction

TABLE_DATASETS = {
    "Pascal VOC": "voc2007", "Pascal VOC-R": "voc2007", "COCO": "coco2014", "COCO-R": "coco2014",
    "Yeast": "yeast", "Yeast-R": "yeast", "Mediamill": "mediamill", "Mediamill-R": "mediamill",
    "Eurlex-4K": "eurlex-4k", "Wiki10-31K": "wiki10-31k", "AmazonCat-13K": "amazoncat-13k",
}
TABLE_METRICS = {"mAP": "mAP", "Rare-F1": "rare_f1", "Micro-F1": "micro_f1", "Macro-F1": "macro_f1",
                 "P@1": "p@1", "P@3": "p@3", "P@5": "p@5"}
#: the tables whose cells are claims; Table 2's columns are severities of Rare-F1
TABLE_LABELS = ("tab:main_standard", "tab:main_rare", "tab:xmc")
TABLE_SHORT = {"tab:main_standard": "T1", "tab:main_rare": "T2", "tab:xmc": "T3"}

_COMMENT = re.compile(r"(?<!\\)%.*$")
_WRAP = re.compile(r"\\(textbf|underline|emph|textit)\{([^{}]*)\}")


def _strip_comment(line: str) -> str:
    return _COMMENT.sub("", line)


def clean_method_name(cell: str) -> str:
    """'PE~\\citep{x}' -> 'PE'; '\\textbf{CD--GTMLL}' -> 'CD-GTMLL'; 'EUT' -> 'ETU'."""
    s = re.sub(r"~?\\cite[pt]?\{[^}]*\}", "", cell)
    while _WRAP.search(s):
        s = _WRAP.sub(r"\2", s)
    s = s.replace("--", "-").strip()
    return METHOD_ALIASES.get(s, s)


def _cell_value(cell: str) -> tuple[str, str]:
    """'\\underline{91.9}' -> ('91.9', 'second'); '\\textbf{92.7}' -> ('92.7', 'best')."""
    s = cell.strip()
    mark = ""
    m = re.fullmatch(r"\\(textbf|underline)\{(.*)\}", s)
    if m:
        mark = "best" if m.group(1) == "textbf" else "second"
        s = m.group(2).strip()
    return s, mark


def _rows_with_lines(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Split (line number, text) into LaTeX table rows ending in '\\\\'; each row is a list of
    (line number of the cell's first character, cell text)."""
    rows, cells, buf, buf_line = [], [], "", None
    for no, text in lines:
        pos = 0
        while pos <= len(text):
            amp = text.find("&", pos)
            end = text.find("\\\\", pos)
            cut = min([i for i in (amp, end) if i >= 0], default=-1)
            piece = text[pos:] if cut < 0 else text[pos:cut]
            if piece.strip() and buf_line is None:
                buf_line = no
            buf += piece
            if cut < 0:
                buf += " "
                break
            cells.append((buf_line if buf_line is not None else no, buf.strip()))
            buf, buf_line = "", None
            if cut == end:
                rows.append(cells)
                cells = []
                pos = cut + 2
            else:
                pos = cut + 1
    return rows


def extract_table_cells(tex_path: str | Path) -> list[dict]:
    """Every numeric cell of the paper's Tables 1-3, parsed from the LaTeX source.

    Returns dicts with ``table`` (label), ``line`` (1-based source line of the cell), ``method``
    (cleaned row name), ``group`` / ``column`` (header titles as printed), ``dataset``,
    ``setting``, ``metric``, ``printed`` (the number as printed), ``value`` (float, percent) and
    ``mark`` ('best' / 'second' / '').
    """
    src = Path(tex_path).read_text(encoding="utf-8").splitlines()
    out: list[dict] = []
    i = 0
    while i < len(src):
        if not re.match(r"\s*\\begin\{table\*?\}", src[i]):
            i += 1
            continue
        j = i
        while not re.match(r"\s*\\end\{table\*?\}", src[j]):
            j += 1
        body = [(k + 1, _strip_comment(src[k])) for k in range(i, j + 1)]
        label = next((m.group(1) for _, t in body for m in [re.search(r"\\label\{([^}]*)\}", t)] if m), None)
        i = j + 1
        if label not in TABLE_LABELS:
            continue
        mid = next(k for k, (_, t) in enumerate(body) if "\\midrule" in t)
        bottom = next(k for k, (_, t) in enumerate(body) if "\\bottomrule" in t)
        header = " ".join(t for _, t in body[:mid])
        groups = [(int(n), title.strip()) for n, title in re.findall(r"\\multicolumn\{(\d+)\}\{\w+\}\{([^}]*)\}", header)]
        last_cmid = max(k for k, (_, t) in enumerate(body[:mid]) if "\\cmidrule" in t)
        sub_rows = _rows_with_lines(body[last_cmid + 1:mid])
        subs = [c for _, c in sub_rows[0]][1:]
        columns = []
        for n, title in groups:
            for _ in range(n):
                columns.append((title, subs[len(columns)]))
        for row in _rows_with_lines(body[mid + 1:bottom]):
            method = clean_method_name(row[0][1])
            if len(row) - 1 != len(columns):
                raise ValueError(f"{label}: row '{method}' has {len(row) - 1} cells, header has {len(columns)}")
            for (no, cell), (title, sub) in zip(row[1:], columns):
                printed, mark = _cell_value(cell)
                if label == "tab:main_rare":
                    sev = float(re.fullmatch(r"@(\d+)\\%", sub.strip()).group(1)) / 100
                    setting, metric = f"R@{sev:.2f}", "rare_f1"
                else:
                    setting, metric = "clean", TABLE_METRICS[sub.strip()]
                out.append({"table": label, "line": no, "method": method, "group": title,
                            "column": sub.replace("\\%", "%").strip(), "dataset": TABLE_DATASETS[title],
                            "setting": setting, "metric": metric, "printed": printed,
                            "value": float(printed), "mark": mark})
    return out


def table_claims(tex_path: str | Path) -> pd.DataFrame:
    """The table-cell rows of ``paper_claims.csv``, generated from the LaTeX source."""
    recs = []
    for c in extract_table_cells(tex_path):
        short = TABLE_SHORT[c["table"]]
        col = c["setting"] if c["table"] == "tab:main_rare" else c["metric"]
        recs.append({
            "claim_id": f"{short}:{c['dataset']}:{col}:{c['method']}",
            "location": f"{c['table']}: row {c['method']}, column {c['group']} / {c['column']}",
            "line": c["line"], "quote": c["printed"], "kind": "value", "dataset": c["dataset"],
            "setting": c["setting"], "metric": c["metric"], "method": c["method"], "other_method": "",
            "paper_value": c["value"], "paper_value_hi": np.nan, "comparator": "=", "mode": "global",
            "in_comment": False,
            "notes": "; ".join(filter(None, [
                "printed as 'EUT' in the paper" if c["method"] == "ETU" else "",
                {"best": "bold (best) in the paper", "second": "underlined (second) in the paper"}.get(c["mark"], ""),
            ])),
        })
    return pd.DataFrame(recs, columns=CLAIM_COLUMNS)


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


# ============================================================== names, settings, metrics

def canonical_method(name: str) -> str:
    """Method name with ``@k=v`` values normalised numerically ('alpha=0.30' == 'alpha=0.3')."""
    name = str(name).strip()
    name = METHOD_ALIASES.get(name, name)
    if "@" not in name:
        return name
    base, params = name.split("@", 1)
    parts = []
    for kv in params.split(","):
        k, _, v = kv.partition("=")
        try:
            v = f"{float(v):g}"
        except ValueError:
            v = v.strip()
        parts.append(f"{k.strip()}={v}")
    return f"{METHOD_ALIASES.get(base, base)}@{','.join(parts)}"


_VARIANT = re.compile(r"([RNO])(\d+(?:\.\d+)?)-s(\d+)")
_SETTING_KIND = {"R": "R", "N": "noise", "O": "occlusion"}


def variant_setting(variant: str) -> tuple[str, int]:
    """'clean' -> ('clean', -1); 'R0.40-s1' -> ('R@0.40', 1); 'N0.10-s0' -> ('noise@0.10', 0);
    'O0.30-s2' -> ('occlusion@0.30', 2). Unknown variants map to themselves."""
    m = _VARIANT.fullmatch(str(variant))
    if not m:
        return str(variant), -1
    return f"{_SETTING_KIND[m.group(1)]}@{float(m.group(2)):.2f}", int(m.group(3))


def canonical_setting(setting: str) -> str:
    s = str(setting).strip()
    m = re.fullmatch(r"(R|N|noise|O|occlusion)@(\*|\d+(?:\.\d+)?)", s)
    if not m:
        return s
    kind = {"N": "noise", "O": "occlusion"}.get(m.group(1), m.group(1))
    return f"{kind}@{m.group(2) if m.group(2) == '*' else f'{float(m.group(2)):.2f}'}"


def setting_matches(claim_setting: str, run_setting: str) -> bool:
    if claim_setting.endswith("@*"):
        return run_setting.startswith(claim_setting[:-1])
    return claim_setting == run_setting


def higher_is_better(metric: str) -> bool:
    return not metric.endswith("_drop")


def normalise_runs(df: pd.DataFrame) -> pd.DataFrame:
    """all_runs.csv -> long table with setting, sampling key, canonical method and metrics in %."""
    missing = {"dataset", "variant", "method", "seed", "mode"} - set(df.columns)
    if missing:
        raise ValueError(f"runs table lacks columns {sorted(missing)}")
    out = df.copy()
    parsed = out["variant"].map(variant_setting)
    out["setting"] = parsed.map(lambda x: x[0])
    out["skey"] = parsed.map(lambda x: x[1]).astype(int)
    out["seed"] = out["seed"].astype(int)
    out["method"] = out["method"].map(canonical_method)
    for m in RUN_METRICS:
        out[m] = to_percent(pd.to_numeric(out[m], errors="coerce")) if m in out else np.nan
    return out


# ============================================================== selecting the reproduced values

class NotChecked(Exception):
    def __init__(self, status: str, detail: str = ""):
        super().__init__(status)
        self.status, self.detail = status, detail


def _run_values(runs: pd.DataFrame, dataset: str, setting: str, method: str, mode: str, metric: str) -> pd.Series:
    """Percent values of one method indexed by (seed, sampling key); ``<metric>_drop`` pairs each
    corrupted run with the clean run of the same training seed."""
    base = metric[:-5] if metric.endswith("_drop") else metric
    sel = runs[(runs["dataset"] == dataset) & (runs["method"] == method) & (runs["mode"] == mode)
               & runs["setting"].map(lambda s: setting_matches(setting, s))]
    vals = sel.set_index(["seed", "skey"])[base].dropna()
    if metric.endswith("_drop"):
        clean = runs[(runs["dataset"] == dataset) & (runs["method"] == method) & (runs["mode"] == mode)
                     & (runs["setting"] == "clean")].set_index("seed")[base].dropna()
        seeds = vals.index.get_level_values(0)
        keep = seeds.isin(clean.index)
        vals = pd.Series(clean.loc[seeds[keep]].to_numpy() - vals[keep].to_numpy(), index=vals.index[keep])
    return vals.sort_index()


def _check_runs_available(runs: pd.DataFrame, claim: dict, mode: str, metric: str) -> None:
    ds, setting = claim["dataset"], claim["setting"]
    if ds not in set(runs["dataset"]):
        raise NotChecked(NC_DATASET)
    at_ds = runs[runs["dataset"] == ds]
    if not at_ds["setting"].map(lambda s: setting_matches(setting, s)).any():
        raise NotChecked(needs(f"{setting} runs on {ds}"))
    if metric.endswith("_drop") and not (at_ds["setting"] == "clean").any():
        raise NotChecked(needs(f"clean runs on {ds} (for the drop)"))
    if not (at_ds["mode"] == mode).any():
        raise NotChecked(needs(f"'{mode}'-mode rows"))
    base = metric[:-5] if metric.endswith("_drop") else metric
    if base not in RUN_METRICS:
        raise NotChecked(needs(f"metric '{metric}' (not in all_runs.csv)"))
    if at_ds[base].isna().all():
        raise NotChecked(needs(f"{base} values (all missing in all_runs.csv)"))


def _methods_at(runs: pd.DataFrame, claim: dict, mode: str) -> set[str]:
    sel = runs[(runs["dataset"] == claim["dataset"]) & (runs["mode"] == mode)
               & runs["setting"].map(lambda s: setting_matches(claim["setting"], s))]
    return set(sel["method"])


def _candidates(other: str, method: str, available: set[str]) -> tuple[list[str], list[str]]:
    """(listed/implied comparators that were run, listed ones not run)."""
    if other.strip() == "*":
        run = sorted(m for m in available
                     if m != method and "@" not in m and m not in ABLATION_ALIASES and m.split("@")[0] != method)
        return run, []
    listed = [canonical_method(o) for o in other.split("|") if o.strip()]
    return [m for m in listed if m in available], [m for m in listed if m not in available]


def _strongest(values: dict[str, pd.Series], hib: bool) -> str:
    means = {m: float(v.mean()) for m, v in values.items() if len(v)}
    if not means:
        return next(iter(values))
    return max(means, key=means.get) if hib else min(means, key=means.get)


def _estimate_from_runs(runs: pd.DataFrame, claim: dict, mode: str) -> dict:
    metric, method = claim["metric"], canonical_method(claim["method"])
    _check_runs_available(runs, claim, mode, metric)
    available = _methods_at(runs, claim, mode)
    if method not in available:
        raise NotChecked(NC_METHOD, f"{method} has no {mode}-mode run on {claim['dataset']} {claim['setting']}")
    a = _run_values(runs, claim["dataset"], claim["setting"], method, mode, metric)
    res = {"method_mean": float(a.mean()) if len(a) else math.nan, "method_n": int(len(a))}
    if claim["kind"] in ("value", "bound"):
        est = describe(a.to_numpy())
        res.update({"n": est.n, "mean": est.mean, "std": est.std, "lo": est.lo, "hi": est.hi,
                    "test": "t-interval over runs"})
        return res
    run, not_run = _candidates(claim["other_method"], method, available)
    if not run:
        raise NotChecked(NC_METHOD, f"no comparator run ({claim['other_method']})")
    others = {m: _run_values(runs, claim["dataset"], claim["setting"], m, mode, metric) for m in run}
    other = _strongest(others, higher_is_better(metric)) if len(run) > 1 else run[0]
    b = others[other]
    both = a.index.intersection(b.index)
    pt = paired_test(a.loc[both].to_numpy(), b.loc[both].to_numpy())
    detail = []
    if len(run) > 1 or claim["other_method"].strip() == "*":
        detail.append(f"strongest of {len(run)} comparator(s) run: {other}")
    if not_run:
        detail.append(f"checked against {len(run)} of {len(run) + len(not_run)} listed comparators; "
                      f"not run: {', '.join(not_run)}")
    res.update(pt)
    res.update({"coverage": f"{len(run)}/{len(run) + len(not_run)}" if claim["other_method"].strip() != "*"
                else f"{len(run)} run", "compared_with": other, "other_mean": float(b.mean()) if len(b) else math.nan,
                "other_n": int(len(b)), "n_pairs": pt["n"], "test": "paired t-test (ttest_rel) on (seed, sampling seed)",
                "detail": "; ".join(detail)})
    return res


# ---- figure inputs

@dataclass
class FigureInput:
    data: pd.DataFrame
    datasets: set[str]
    settings: set[str]
    path: str


def load_pr(path: str | Path, dataset: str | None = None) -> FigureInput:
    """``figures/pr_tail.csv`` (method, recall, precision_mean, precision_std, n_runs); the
    dataset/setting come from ``--pr-dataset`` or the ``.sources.json`` sidecar's run paths."""
    path = Path(path)
    df = pd.read_csv(path)
    df["method"] = df["method"].map(canonical_method)
    datasets, settings = set(), set()
    side = path.with_suffix(".sources.json")
    if side.exists():
        runs = json.loads(side.read_text(encoding="utf-8")).get("runs", {})
        for entries in runs.values():
            for e in entries:
                parts = Path(e["path"] if isinstance(e, dict) else e).parts
                if len(parts) >= 5:
                    datasets.add(parts[-5])
                    settings.add(variant_setting(parts[-4])[0])
    if dataset:
        datasets = {dataset}
    return FigureInput(df, datasets, settings, str(path))


def load_spec(path: str | Path) -> FigureInput:
    """Player-specialisation shares (fractions), either per seed -- columns ``dataset, epoch,
    player, share`` and optional ``seed`` -- or as summarised by ``cdgtmll.study_figures
    specialization`` -- ``dataset, variant, method, epoch, player, share_mean, share_std,
    n_seeds[, labels]``. Optional ``variant`` / ``method`` / ``labels`` columns are filtered on."""
    df = pd.read_csv(path)
    per_seed = "share" in df.columns
    need = {"dataset", "epoch", "player"} | ({"share"} if per_seed else {"share_mean", "share_std", "n_seeds"})
    missing = need - set(df.columns)
    if missing:
        raise ValueError(f"{path}: specialisation csv lacks columns {sorted(missing)}")
    if per_seed:
        if "seed" not in df:
            df["seed"] = 0
        df["share"] = to_percent(df["share"])
    else:
        df["share_mean"] = to_percent(df["share_mean"])
        df["share_std"] = 100.0 * pd.to_numeric(df["share_std"], errors="coerce")
    return FigureInput(df, set(df["dataset"]), set(), str(path))


def _figure_guard(fig: FigureInput | None, claim: dict, what: str) -> None:
    if fig is None:
        raise NotChecked(needs(what))
    if fig.datasets and claim["dataset"] not in fig.datasets:
        raise NotChecked(NC_DATASET, f"{Path(fig.path).name} is on {', '.join(sorted(fig.datasets))}")
    if fig.settings and not any(setting_matches(claim["setting"], s) for s in fig.settings):
        raise NotChecked(needs(f"{claim['setting']} figure data ({Path(fig.path).name} is on "
                               f"{', '.join(sorted(fig.settings))})"))


def _estimate_pr(pr: FigureInput | None, claim: dict) -> dict:
    _figure_guard(pr, claim, "Fig. pr_tail data (--pr-csv figures/pr_tail.csv)")
    df = pr.data
    method = canonical_method(claim["method"])
    methods = set(df["method"])
    if method not in methods:
        raise NotChecked(NC_METHOD, f"{method} not in {Path(pr.path).name}")
    metric = claim["metric"]
    if metric == "pr_precision@all_recalls":
        run, not_run = _candidates(claim["other_method"], method, methods)
        if not run:
            raise NotChecked(NC_METHOD, f"no comparator in {Path(pr.path).name}")
        me = df[df["method"] == method].set_index("recall")["precision_mean"] * 100
        worst, where, who = 0.0, None, None
        for o in run:
            ot = df[df["method"] == o].set_index("recall")["precision_mean"] * 100
            gap = (ot - me).dropna()
            if len(gap) and gap.max() > worst:
                worst, where, who = float(gap.max()), float(gap.idxmax()), o
        n = int(df[df["method"] == method]["n_runs"].min())
        dominated = int(sum(((df[df["method"] == o].set_index("recall")["precision_mean"] * 100 - me) > 0).sum()
                            for o in run))
        # "never dominated": no comparator above the method's mean curve at any recall point
        return {"n": n, "mean": -worst if worst else 0.0, "std": math.nan, "lo": math.nan, "hi": math.nan,
                "method_n": n, "compared_with": ", ".join(run), "test": "mean curves compared on the recall grid",
                "detail": (f"above at {dominated} (comparator, recall) point(s); largest gap {worst:.2f} pp "
                           f"({who} at recall {where:.2f})") if who else "never above at any recall point",
                "higher_is_better": True, "strict_nonneg": True}
    m = re.fullmatch(r"pr_precision@recall=([\d.]+)", metric)
    if not m:
        raise NotChecked(needs(f"a reader for metric '{metric}'"))
    r = float(m.group(1))

    def at(name):
        row = df[(df["method"] == name) & (np.isclose(df["recall"], r))]
        if row.empty:
            raise NotChecked(needs(f"recall {r:.2f} on the PR grid of {Path(pr.path).name}"))
        row = row.iloc[0]
        return 100 * float(row["precision_mean"]), 100 * float(row["precision_std"]), int(row["n_runs"])

    m1, s1, n1 = at(method)
    res = {"method_mean": m1, "method_n": n1}
    if claim["kind"] in ("value", "bound"):
        lo, hi, _ = t_interval(m1, s1, n1)
        res.update({"n": n1, "mean": m1, "std": s1, "lo": lo, "hi": hi, "test": "t-interval over runs (from figure csv)"})
        return res
    run, not_run = _candidates(claim["other_method"], method, methods)
    if not run:
        raise NotChecked(NC_METHOD, f"{claim['other_method']} not in {Path(pr.path).name}")
    vals = {o: at(o) for o in run}
    other = max(vals, key=lambda o: vals[o][0]) if len(run) > 1 else run[0]
    m2, s2, n2 = vals[other]
    w = welch_from_stats(m1, s1, n1, m2, s2, n2)
    res.update(w)
    res.update({"compared_with": other, "other_mean": m2, "other_n": n2, "n_pairs": math.nan,
                "coverage": f"{len(run)}/{len(run) + len(not_run)}" if claim["other_method"].strip() != "*"
                else f"{len(run)} run",
                "test": "Welch t-test from figure summary stats (per-run curves not in the csv)"})
    return res


def _estimate_spec(spec: FigureInput | None, claim: dict) -> dict:
    """Share of one player over an epoch or epoch range. Per-seed input: the share is averaged
    over the epochs per seed, then mean/std/interval over seeds. Summarised input: mean of
    ``share_mean`` over the epochs and, as std, the mean of ``share_std`` (an upper bound of the
    std of an average), with n = ``n_seeds``."""
    _figure_guard(spec, claim, "player-specialisation data (Fig. spec_ratio; --spec-csv)")
    m = re.fullmatch(r"spec_share@player=(\d+),epoch=(\d+)(?:-(\d+))?", claim["metric"])
    if not m:
        raise NotChecked(needs(f"a reader for metric '{claim['metric']}'"))
    player, e0 = int(m.group(1)), int(m.group(2))
    e1 = int(m.group(3)) if m.group(3) else e0
    name = Path(spec.path).name
    df = spec.data[spec.data["dataset"] == claim["dataset"]]
    if "variant" in df:
        df = df[df["variant"].map(lambda v: setting_matches(claim["setting"], variant_setting(v)[0]))]
        if df.empty:
            raise NotChecked(needs(f"{claim['setting']} rows in {name}"))
    if "method" in df:
        df = df[df["method"].map(canonical_method) == canonical_method(claim["method"])]
        if df.empty:
            raise NotChecked(NC_METHOD, f"{claim['method']} not in {name}")
    if "labels" in df and (df["labels"] == "all").any():
        df = df[df["labels"] == "all"]
    sel = df[(df["player"] == player) & (df["epoch"] >= e0) & (df["epoch"] <= e1)]
    if sel.empty:
        raise NotChecked(needs(f"player {player} at epoch(s) {e0}-{e1} in {name}"))
    if "share" in sel:
        est = describe(sel.groupby("seed")["share"].mean().to_numpy())
        mean, std, n, lo, hi = est.mean, est.std, est.n, est.lo, est.hi
        test = "t-interval over seeds (epoch-averaged share)"
    else:
        if "variant" in sel and sel["variant"].nunique() > 1:
            raise NotChecked(needs(f"one variant per dataset in {name} (has {sel['variant'].nunique()})"))
        mean, std, n = float(sel["share_mean"].mean()), float(sel["share_std"].mean()), int(sel["n_seeds"].min())
        lo, hi, _ = t_interval(mean, std, n)
        test = "t-interval from summarised shares (std: mean of per-epoch stds)"
    return {"n": n, "mean": mean, "std": std, "lo": lo, "hi": hi, "method_mean": mean, "method_n": n, "test": test}


# ============================================================== checking

RESULT_COLUMNS = ["claim_id", "status", "detail", "kind", "dataset", "setting", "metric", "method", "other_method",
                  "compared_with", "coverage", "mode", "comparator", "paper_value", "paper_value_hi", "n", "reproduced_mean",
                  "reproduced_std", "ci_low", "ci_high", "diff_vs_paper", "paper_in_ci", "direction_match",
                  "ci_side", "method_mean", "method_n", "other_mean", "other_n", "n_pairs", "t", "p", "test",
                  "in_comment", "location", "line", "quote", "notes"]


def read_claims(path: str | Path = CLAIMS_CSV) -> pd.DataFrame:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = set(CLAIM_COLUMNS) - set(df.columns)
    if missing:
        raise ValueError(f"{path}: claims table lacks columns {sorted(missing)}")
    for c in ("paper_value", "paper_value_hi"):
        df[c] = pd.to_numeric(df[c].replace("", np.nan))
    df["line"] = pd.to_numeric(df["line"].replace("", np.nan)).astype("Int64")
    df["in_comment"] = df["in_comment"].str.lower().isin(("true", "1", "yes"))
    bad = set(df["kind"]) - set(KINDS)
    if bad:
        raise ValueError(f"{path}: unknown claim kinds {sorted(bad)}")
    if df["claim_id"].duplicated().any():
        raise ValueError(f"{path}: duplicate claim ids {sorted(df.loc[df['claim_id'].duplicated(), 'claim_id'])}")
    return df


def check_claim(claim: dict, runs: pd.DataFrame, pr: FigureInput | None = None,
                spec: FigureInput | None = None, mode: str | None = None) -> dict:
    """One result row for one claim (dict with the claims-table columns)."""
    claim = dict(claim)
    claim["setting"] = canonical_setting(claim["setting"])
    mode = mode or claim.get("mode") or "global"
    row = {k: claim.get(k) for k in RESULT_COLUMNS if k in claim}
    row.update({"mode": mode, "detail": "", "compared_with": "", "coverage": "", "test": ""})
    metric = claim["metric"]
    try:
        if metric.startswith("pr_precision@"):
            est = _estimate_pr(pr, claim)
        elif metric.startswith("spec_share@"):
            est = _estimate_spec(spec, claim)
        else:
            est = _estimate_from_runs(runs, claim, mode)
    except NotChecked as nc:
        row.update({"status": nc.status, "detail": nc.detail})
        return row
    hib = est.pop("higher_is_better", higher_is_better(metric))
    strict = est.pop("strict_nonneg", False)
    if strict:  # "never dominated": consistent iff no comparator is ever above (mean = -largest gap)
        verdict = {"status": NC_FEW if est["n"] < 2 else (CONSISTENT if est["mean"] >= 0 else INCONSISTENT),
                   "paper_in_ci": None, "direction_match": bool(est["mean"] >= 0), "ci_side": None}
    else:
        verdict = judge(claim["kind"], claim.get("comparator", ""), claim.get("paper_value"),
                        claim.get("paper_value_hi"), est, hib)
    pv = claim.get("paper_value")
    row.update({
        "status": verdict["status"], "detail": est.get("detail", ""), "compared_with": est.get("compared_with", ""),
        "coverage": est.get("coverage", ""),
        "n": est["n"], "reproduced_mean": est["mean"], "reproduced_std": est.get("std"),
        "ci_low": est.get("lo"), "ci_high": est.get("hi"),
        "diff_vs_paper": est["mean"] - pv if pv is not None and np.isfinite(pv) and not strict else math.nan,
        "paper_in_ci": verdict["paper_in_ci"], "direction_match": verdict["direction_match"],
        "ci_side": verdict["ci_side"], "method_mean": est.get("method_mean"), "method_n": est.get("method_n"),
        "other_mean": est.get("other_mean"), "other_n": est.get("other_n"), "n_pairs": est.get("n_pairs"),
        "t": est.get("t"), "p": est.get("p"), "test": est.get("test", ""),
    })
    return row


def check_claims(claims: pd.DataFrame, runs: pd.DataFrame, pr: FigureInput | None = None,
                 spec: FigureInput | None = None, mode: str | None = None) -> pd.DataFrame:
    """Result table (RESULT_COLUMNS) for every claim; ``runs`` is all_runs.csv as read by pandas."""
    nr = normalise_runs(runs)
    rows = [check_claim(c, nr, pr, spec, mode) for c in claims.to_dict("records")]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


# ============================================================== report

def _missing(x) -> bool:
    if x is None or x is pd.NA:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def _s(x) -> str:
    return "" if _missing(x) else str(x)


def _f(x, nd: int = 2) -> str:
    if _missing(x):
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    try:
        return f"{float(x):.{nd}f}"
    except (TypeError, ValueError):
        return str(x)


def _group(claim_id: str) -> str:
    return {"T1": "Table 1 (tab:main_standard)", "T2": "Table 2 (tab:main_rare)",
            "T3": "Table 3 (tab:xmc)"}.get(claim_id.split(":")[0], "Experiments text (Sec. 5.2-5.4)")


def _paper_text(r: dict) -> str:
    k, pv, hi, cmp = r["kind"], r["paper_value"], r["paper_value_hi"], r["comparator"]
    if k == "beats":
        return "better"
    if k == "range":
        return f"{_f(pv, 2)} to {_f(hi, 2)}"
    if k == "bound":
        return f"{cmp} {_f(pv, 2)}"
    return ("≈ " if cmp in ("≈", "~") else "") + _f(pv, 2)


def _claim_text(r: dict) -> str:
    what = f"{r['method']}"
    if r["kind"] in ("difference", "range", "beats"):
        other = r["other_method"]
        other = "all others" if other == "*" else (f"best of {len(other.split('|'))}" if "|" in other else other)
        what += f" − {other}"
    return f"{what}, {r['metric']}, {r['dataset']} {r['setting']}"


def render_markdown(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
                    extra: list[str]) -> str:
    counts = res["status"].value_counts()
    order = [s for s in STATUS_ORDER if s in counts] + sorted(s for s in counts.index if s not in STATUS_ORDER)
    md = ["# Paper claims vs. reproduced runs", "",
          f"- runs: `{runs_path}` ({n_runs} rows; datasets run: {', '.join(datasets) or 'none'})",
          f"- claims: `{claims_path}` ({len(res)} claims, {int(res['in_comment'].sum())} only inside LaTeX comments)",
          *[f"- {e}" for e in extra],
          "- values in %; reproduced = mean ± sample std over n runs (differences: over paired runs, "
          "method − comparator); CI = 95 % t-interval of that mean.",
          "- `consistent`: value/difference inside the CI, range overlapping it, bound met by the mean, "
          "`beats` in the claimed direction. Claims marked `not checked` are neither passed nor failed.", "",
          "## Summary", "", "| status | claims |", "|---|---:|"]
    md += [f"| {s} | {int(counts[s])} |" for s in order]
    checked = res["status"].isin((CONSISTENT, INCONSISTENT))
    partial = checked & res["coverage"].map(lambda c: "/" in _s(c) and c.split("/")[0] != c.split("/")[1])
    md += [f"| **total** | {len(res)} |", ""]
    if partial.any():
        md += [f"{int(partial.sum())} checked claim(s) compare with only part of their listed comparators "
               "(column `coverage`; e.g. 'best in Table 1' checked against the baselines that were run).", ""]
    md += ["| kind | " + " | ".join(order) + " |",
           "|---|" + "---:|" * len(order)]
    for k in KINDS:
        sub = res[res["kind"] == k]
        if len(sub):
            vc = sub["status"].value_counts()
            md.append(f"| {k} | " + " | ".join(str(int(vc.get(s, 0))) for s in order) + " |")
    recs = res.to_dict("records")
    for grp in dict.fromkeys(_group(r["claim_id"]) for r in recs):
        md += ["", f"## {grp}", "",
               "| claim | what | paper | reproduced (n) | 95% CI | Δ vs paper | test | status |",
               "|---|---|---:|---:|---|---:|---|---|"]
        for r in recs:
            if _group(r["claim_id"]) != grp:
                continue
            cid = r["claim_id"] + (" (in LaTeX comment)" if r["in_comment"] else "")
            rep = ""
            if not _missing(r["reproduced_mean"]):
                rep = _f(r["reproduced_mean"])
                if not _missing(r["reproduced_std"]):
                    rep += f" ± {_f(r['reproduced_std'])}"
                rep += f" ({int(r['n'])})"
            ci = f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]" if not _missing(r["ci_low"]) else ""
            test = ""
            if not _missing(r["t"]):
                test = f"t={_f(r['t'])}, p={_f(r['p'], 3)}"
                if not _missing(r["n_pairs"]):
                    test += f", {int(r['n_pairs'])} pairs"
            if _s(r["compared_with"]):
                test = (test + "; " if test else "") + f"vs {r['compared_with']}"
                cov = _s(r["coverage"])
                if "/" in cov and cov.split("/")[0] != cov.split("/")[1]:
                    test += f" ({cov} listed run)"
            status = r["status"] + (f" — {r['detail']}" if _s(r["detail"]) else "")
            md.append(f"| {cid} | {_claim_text(r)} | {_paper_text(r)} | {rep} | {ci} | "
                      f"{_f(r['diff_vs_paper'])} | {test} | {status} |")
    return "\n".join(md) + "\n"


def _csv_text(res: pd.DataFrame) -> str:
    out = res.copy()
    for c in ("reproduced_mean", "reproduced_std", "ci_low", "ci_high", "diff_vs_paper", "method_mean",
              "other_mean", "t"):
        out[c] = pd.to_numeric(out[c], errors="coerce").round(4)
    out["p"] = pd.to_numeric(out["p"], errors="coerce").map(lambda v: "" if not np.isfinite(v) else f"{v:.4g}")
    return out.to_csv(index=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=Path, help="results/tables/all_runs.csv")
    ap.add_argument("--out", type=Path, help="output stem: writes <out>.csv and <out>.md")
    ap.add_argument("--claims", type=Path, default=CLAIMS_CSV, help="claims table (default: the packaged one)")
    ap.add_argument("--pr-csv", type=Path, help="figures/pr_tail.csv (Fig. pr_tail claims)")
    ap.add_argument("--pr-dataset", help="dataset of --pr-csv when it has no .sources.json sidecar")
    ap.add_argument("--spec-csv", type=Path, help="player-specialisation shares (dataset, epoch, player, share[, seed])")
    ap.add_argument("--mode", choices=("claims", "global", "adaptive"), default="claims",
                    help="threshold mode: each claim's own (default) or one for all")
    ap.add_argument("--extract-tables", type=Path, metavar="TEX",
                    help="dev: print the table-cell claim rows parsed from the paper source and exit")
    args = ap.parse_args(argv)
    if args.extract_tables:
        sys.stdout.write(table_claims(args.extract_tables).to_csv(index=False))
        return 0
    if args.runs is None or args.out is None:
        ap.error("--runs and --out are required")
    claims = read_claims(args.claims)
    runs = pd.read_csv(args.runs)
    pr = load_pr(args.pr_csv, args.pr_dataset) if args.pr_csv else None
    spec = load_spec(args.spec_csv) if args.spec_csv else None
    mode = None if args.mode == "claims" else args.mode
    res = check_claims(claims, runs, pr, spec, mode)
    stem = args.out.with_suffix("") if args.out.suffix in (".csv", ".md") else args.out
    extra = [f"threshold mode: {'per claim (default global)' if mode is None else mode}"]
    if pr is not None:
        extra.append(f"PR figure: `{pr.path}` ({', '.join(sorted(pr.datasets)) or 'dataset unknown'})")
    if spec is not None:
        extra.append(f"specialisation data: `{spec.path}`")
    atomic_write(stem.parent / f"{stem.name}.csv", _csv_text(res))
    atomic_write(stem.parent / f"{stem.name}.md",
                 render_markdown(res, str(args.runs), str(args.claims), len(runs),
                                 sorted(set(runs["dataset"])) if "dataset" in runs else [], extra))
    counts = res["status"].value_counts().to_dict()
    print(json.dumps({"claims": len(res), "status": counts, "out": [f"{stem}.csv", f"{stem}.md"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
