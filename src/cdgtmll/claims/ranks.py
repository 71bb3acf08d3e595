"""Methods ranked across datasets: average ranks, the Friedman test and Holm-corrected pairwise
Wilcoxon signed-rank tests, for the claims page and the critical-difference
diagram (:mod:`cdgtmll.figures.cd_diagram`).

``python -m cdgtmll.claims.ranks --runs results/tables/all_runs.csv --out results/claims/ranks
[--datasets D ...] [--methods M ...] [--mode global|adaptive] [--alpha 0.05] [--not-run 'D|M|why' ...]``

writes ``<out>.csv`` and ``<out>.md`` (a section the claims page can include).

What is compared (per metric of the paper's tables, :data:`TABLE_METRICS`: mAP, Micro-F1,
Macro-F1, Rare-F1; :func:`rank_metric`):

* **Blocks** are the datasets, each on its clean setting: a method's value on a dataset is its
  mean over training seeds (the runs table read by :func:`cdgtmll.claims.compare.normalise_runs`,
  in percent, threshold mode ``--mode``). Seeds are not blocks: they are not independent
  problems, and pooling them would count one dataset several times.
* **Complete blocks only.** A method is ranked only if it has the metric on every dataset ranked;
  the others are named with the reason (:attr:`MetricRanking.left_out`), and a dataset where no
  method has the metric is left out first.
* **Average ranks** (Demšar 2006, Sec. 3.2.2): on each dataset the best method gets rank 1,
  ties the average of the ranks they span (``scipy.stats.rankdata``); higher values are better
  unless :func:`cdgtmll.claims.compare.higher_is_better` says otherwise.
* **Friedman test** (Friedman 1937; Demšar 2006, Sec. 3.2.2) with ``scipy.stats.friedmanchisquare``
  (corrected for ties), and the Iman-Davenport F statistic
  ``F_F = (N - 1) chi2 / (N (k - 1) - chi2)`` on (k - 1, (k - 1)(N - 1)) degrees of freedom
  (Iman and Davenport 1980), which Demšar recommends over the conservative chi-square
  (:func:`iman_davenport`). Needs k >= 3 methods.
* **Pairwise comparisons**: the Wilcoxon signed-rank test on the N per-dataset values of each pair
  (zero differences split between the signs, as in Demšar 2006, Sec. 3.1.3; exact by enumerating
  the sign flips for N <= 13), Holm-corrected (Holm 1979, :func:`cdgtmll.claims.verdict.holm`) over the k (k - 1) / 2
  pairs of one metric. Benavoli, Corani and Mangili (2016) show that the mean-ranks post-hoc tests
  (Nemenyi, or z-tests on the average ranks) make the verdict on two methods depend on which other
  methods are in the comparison, and recommend the Wilcoxon signed-rank test with a step-down
  correction instead; we follow them. The diagram's bars join methods that no Holm-corrected test
  separates (:func:`nonsignificant_bars`).

What few datasets can show: with N datasets and no ties the smallest two-sided Wilcoxon p-value
is 2 / 2^N (:func:`min_wilcoxon_p`): 0.25 for N = 3, 0.0625 for N = 5, so below 6 datasets no pair
can differ at alpha = 0.05 however large the differences; the Friedman p-values are asymptotic
(chi-square, F) and rough below about 10 datasets (Demšar 2006, Sec. 3.2.2). The page says so.

References: J. Demšar, "Statistical comparisons of classifiers over multiple data sets", JMLR 7:1-30,
2006. A. Benavoli, G. Corani, F. Mangili, "Should we really use post-hoc tests based on
mean-ranks?", JMLR 17(5):1-10, 2016. M. Friedman, JASA 32:675-701, 1937. R. L. Iman, J. M.
Davenport, Commun. Stat. Theory Methods 9(6):571-595, 1980. S. Holm, "A simple sequentially
rejective multiple test procedure", Scand. J. Stat. 6:65-70, 1979. F. Wilcoxon, Biometrics Bull.
1(6):80-83, 1945.

Holm's correction is :func:`cdgtmll.claims.verdict.holm` (statsmodels' ``multipletests``), the one
the claims' families use.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cdgtmll.claims.compare import ABLATION_ALIASES, higher_is_better, normalise_runs
from cdgtmll.claims.verdict import holm
from cdgtmll.io import atomic_write

#: the metrics of the paper's Tables 1-2 (Table 3's P@k is for the XMC datasets alone)
TABLE_METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1")
METRIC_NAMES = {"mAP": "mAP", "micro_f1": "Micro-F1", "macro_f1": "Macro-F1", "rare_f1": "Rare-F1"}
ALPHA = 0.05
#: the largest number of datasets for which the Wilcoxon p-value enumerates every sign flip
EXACT_MAX_N = 13
CSV_COLUMNS = (
    "kind", "metric", "method", "other", "dataset", "n_datasets", "n_methods", "average_rank", "mean_value",
    "statistic", "p", "p_holm", "significant", "chi2", "chi2_p", "f_f", "f_f_p", "df1", "df2", "reason",
)  # fmt: skip


# ================================================================ the statistics


def iman_davenport(chi2: float, n: int, k: int) -> tuple[float, float]:
    """Iman-Davenport ``F_F = (N - 1) chi2 / (N (k - 1) - chi2)`` and its p-value on (k - 1,
    (k - 1)(N - 1)) degrees of freedom (Demšar 2006, Sec. 3.2.2). ``chi2`` at its maximum
    N (k - 1) (every dataset ranks the methods alike): F_F infinite, p = 0."""
    if not math.isfinite(chi2) or n < 2 or k < 2:
        return math.nan, math.nan
    denom = n * (k - 1) - chi2
    if denom <= 1e-12 * n * (k - 1):
        return math.inf, 0.0
    f = (n - 1) * chi2 / denom
    return float(f), float(stats.f.sf(f, k - 1, (k - 1) * (n - 1)))


def min_wilcoxon_p(n: int) -> float:
    """The smallest two-sided p-value the exact Wilcoxon signed-rank test can give on ``n``
    pairs (all differences of one sign, no ties): 2 / 2^n."""
    return min(1.0, 2.0 / 2.0**n) if n > 0 else 1.0


def ranks_within(values: pd.DataFrame, higher_better: bool = True) -> pd.DataFrame:
    """Rank of each method (column) on each dataset (row): 1 = best, ties averaged
    (``scipy.stats.rankdata``, method ``average``)."""
    a = values.to_numpy(dtype=np.float64)
    r = stats.rankdata(-a if higher_better else a, method="average", axis=1)
    return pd.DataFrame(r, index=values.index, columns=values.columns)


def friedman(values: pd.DataFrame) -> dict[str, float]:
    """Friedman's chi-square (``scipy.stats.friedmanchisquare``, tie-corrected) over the datasets
    (rows) for the methods (columns), and Iman-Davenport's F (:func:`iman_davenport`). NaN
    with fewer than 3 methods or 2 datasets, or when every dataset ties every method."""
    n, k = values.shape
    out = {"chi2": math.nan, "chi2_p": math.nan, "f_f": math.nan, "f_f_p": math.nan,
           "df1": float(k - 1), "df2": float((k - 1) * (n - 1))}
    if k < 3 or n < 2:
        return out
    a = values.to_numpy(dtype=np.float64)
    if all(np.ptp(row) == 0 for row in a):
        return out
    res = stats.friedmanchisquare(*(a[:, j] for j in range(k)))
    out["chi2"], out["chi2_p"] = float(res.statistic), float(res.pvalue)
    out["f_f"], out["f_f_p"] = iman_davenport(out["chi2"], n, k)
    return out


def wilcoxon_p(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test of ``a`` - ``b`` (paired by dataset): zero
    differences split between the signs (``zero_method="zsplit"``, Demšar 2006, Sec. 3.1.3),
    exact for n <= :data:`EXACT_MAX_N` (every sign flip enumerated), else the normal
    approximation. Returns (statistic = min(R+, R-), p); p = 1 when every difference is 0."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if d.size == 0:
        return math.nan, math.nan
    if np.all(d == 0):
        return float(d.size * (d.size + 1) / 4), 1.0
    method: Any = stats.PermutationMethod(n_resamples=2**EXACT_MAX_N) if d.size <= EXACT_MAX_N else "asymptotic"
    res = stats.wilcoxon(d, zero_method="zsplit", method=method)
    return float(res.statistic), float(min(1.0, res.pvalue))


def pairwise(values: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Every pair of methods (columns of ``values``, in their order): Wilcoxon signed-rank
    statistic and p over the datasets (:func:`wilcoxon_p`), Holm-adjusted over all pairs
    (:func:`cdgtmll.claims.verdict.holm`), and whether the adjusted p is <= ``alpha``."""
    rows = []
    for m, o in combinations(values.columns, 2):
        stat, p = wilcoxon_p(values[m].to_numpy(), values[o].to_numpy())
        rows.append({"method": m, "other": o, "statistic": stat, "p": p})
    df = pd.DataFrame(rows, columns=["method", "other", "statistic", "p"])
    df["p_holm"] = holm(df["p"].to_numpy()) if len(df) else []
    df["significant"] = df["p_holm"] <= alpha
    return df


def nonsignificant_bars(order: Sequence[str], significant: set[frozenset[str]]) -> list[list[str]]:
    """The bars of a critical-difference diagram: maximal runs of consecutive methods in
    ``order`` (by average rank) of which no two differ significantly (``significant``: the
    pairs that do). A run contained in another is dropped; single methods get no bar."""
    runs = []
    for i in range(len(order)):
        j = i
        while j + 1 < len(order) and all(frozenset((order[t], order[j + 1])) not in significant
                                         for t in range(i, j + 1)):
            j += 1
        if j > i and not any(a <= i and j <= b for a, b in runs):
            runs.append((i, j))
    return [list(order[a:b + 1]) for a, b in runs]


# ================================================================ from the runs table


@dataclass
class MetricRanking:
    """One metric's ranking: the seed means (datasets x methods, percent), the ranks, the
    average ranks (ascending: best first), Friedman, the pairs and the diagram's bars."""

    metric: str
    values: pd.DataFrame
    ranks: pd.DataFrame
    average_ranks: pd.Series
    friedman: dict[str, float]
    pairs: pd.DataFrame
    bars: list[list[str]]
    n_seeds: dict[str, int]
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (method or dataset, why)
    all_tied: list[str] = field(default_factory=list)  # datasets where every method has the same value

    @property
    def datasets(self) -> list[str]:
        return list(self.values.index)

    @property
    def methods(self) -> list[str]:
        return list(self.average_ranks.index)


def seed_means(runs: pd.DataFrame, metric: str, datasets: Sequence[str], methods: Sequence[str],
               mode: str = "global", not_run: dict[tuple[str, str], str] | None = None
               ) -> tuple[pd.DataFrame, dict[str, int], list[tuple[str, str]]]:
    """(datasets x methods mean over training seeds on the clean setting, runs behind each
    method (the fewest over its datasets), what was left out and why) for complete blocks."""
    sel = runs[(runs["setting"] == "clean") & (runs["mode"] == mode) & runs["dataset"].isin(datasets)
               & runs["method"].isin(methods)]
    sel = sel[np.isfinite(sel[metric].to_numpy(dtype=np.float64))]
    g = sel.groupby(["dataset", "method"])[metric]
    means, counts = g.mean().unstack("method"), g.size().unstack("method")
    left: list[tuple[str, str]] = []
    have = [d for d in datasets if d in means.index and means.loc[d].notna().any()]
    for d in datasets:
        if d not in have:
            left.append((d, f"dataset: no {METRIC_NAMES.get(metric, metric)} of any method"))
    means = means.reindex(index=have, columns=list(methods))
    keep = []
    for m in methods:
        missing = [d for d in have if pd.isna(means.loc[d, m])]
        if not missing:
            keep.append(m)
            continue
        why = [f"{d}: {(not_run or {})[(d, m)]}" if (not_run or {}).get((d, m)) else d for d in missing]
        left.append((m, f"no run on {', '.join(why)}"))
    n = {m: int(counts.reindex(index=have)[m].min()) for m in keep}
    return means[keep], n, left


def rank_metric(runs: pd.DataFrame, metric: str, datasets: Sequence[str], methods: Sequence[str],
                mode: str = "global", alpha: float = ALPHA,
                not_run: dict[tuple[str, str], str] | None = None) -> MetricRanking:
    """Average ranks, Friedman and the Holm-corrected Wilcoxon pairs of one metric (module doc)."""
    values, n_seeds, left = seed_means(runs, metric, datasets, methods, mode, not_run)
    ranks = ranks_within(values, higher_is_better(metric))
    avg = ranks.mean(axis=0).sort_values(kind="stable") if len(values) else pd.Series(dtype=float)
    values, ranks = values[list(avg.index)], ranks[list(avg.index)]
    pairs = pairwise(values, alpha) if len(values) >= 2 else pairwise(values.iloc[:0], alpha)
    sig = {frozenset((r.method, r.other)) for r in pairs.itertuples() if r.significant}
    tied = [d for d in values.index if values.shape[1] > 1 and np.ptp(values.loc[d].to_numpy()) == 0]
    return MetricRanking(metric, values, ranks, avg, friedman(values), pairs,
                         nonsignificant_bars(list(avg.index), sig), n_seeds, left, tied)


def default_methods(runs: pd.DataFrame) -> list[str]:
    """The methods of the runs table that are methods, not settings of a study: no ``@`` sweep
    point and no ablation alias (as the claims' ``*`` comparators,
    :data:`cdgtmll.claims.compare.ABLATION_ALIASES`)."""
    return sorted(m for m in set(runs["method"]) if "@" not in m and m not in ABLATION_ALIASES)


def rank_all(runs: pd.DataFrame, datasets: Sequence[str] | None = None, methods: Sequence[str] | None = None,
             metrics: Sequence[str] = TABLE_METRICS, mode: str = "global", alpha: float = ALPHA,
             not_run: dict[tuple[str, str], str] | None = None) -> list[MetricRanking]:
    """:func:`rank_metric` for each metric; ``runs``: the normalised runs table
    (:func:`cdgtmll.claims.compare.normalise_runs`). Datasets and methods default to those
    of the runs' clean setting (methods: :func:`default_methods`). Empty with fewer than 2
    datasets: no ranking is made."""
    datasets = list(datasets) if datasets else sorted(set(runs.loc[runs["setting"] == "clean", "dataset"]))
    methods = list(methods) if methods else default_methods(runs)
    if len(datasets) < 2:
        return []
    return [rank_metric(runs, m, datasets, methods, mode, alpha, not_run) for m in metrics if m in runs]


def read_runs(path: str | Path) -> pd.DataFrame:
    """``all_runs.csv`` read as the claims check reads it (:func:`cdgtmll.claims.compare.normalise_runs`)."""
    return normalise_runs(pd.read_csv(path))


# ================================================================ outputs


def csv_rows(rankings: Sequence[MetricRanking]) -> list[dict[str, Any]]:
    """One row per ranked method (``kind`` rank), Friedman test (friedman), pair (pair) and
    method or dataset left out (left_out); numbers in percent as in the claims CSV."""
    rows: list[dict[str, Any]] = []
    for r in rankings:
        n, k = r.values.shape
        base = {"metric": r.metric, "n_datasets": n, "n_methods": k}
        for m, rank in r.average_ranks.items():
            rows.append({**base, "kind": "rank", "method": m, "average_rank": float(rank),
                         "mean_value": float(r.values[m].mean()), "dataset": ";".join(r.datasets)})
        rows.append({**base, "kind": "friedman", **r.friedman,
                     "reason": "" if k >= 3 else "fewer than 3 methods: no Friedman test"})
        for p in r.pairs.itertuples():
            rows.append({**base, "kind": "pair", "method": p.method, "other": p.other, "statistic": p.statistic,
                         "p": p.p, "p_holm": p.p_holm, "significant": bool(p.significant)})
        for name, why in r.left_out:
            key = "dataset" if why.startswith("dataset:") else "method"
            rows.append({**base, "kind": "left_out", key: name, "reason": why})
    return rows


def _p(x: float) -> str:
    """``= 0.031``, ``< 0.001`` or ``= –`` (not a number), to follow "p"."""
    if not math.isfinite(x):
        return "= –"
    return "< 0.001" if x < 0.001 else f"= {x:.3f}"


def markdown(rankings: Sequence[MetricRanking], datasets: Sequence[str], alpha: float = ALPHA,
             mode: str = "global") -> str:
    """The claims page's section: per metric the average ranks, Friedman / Iman-Davenport, the
    pairs Holm keeps apart, what was left out; and what this number of datasets can detect."""
    out = ["## Across datasets: average ranks", ""]
    if not rankings:
        out += [f"No ranking is made: it needs at least 2 datasets, and this profile ran "
                f"{len(datasets)} ({', '.join(datasets) or 'none'}).", ""]
        return "\n".join(out)
    n_all = max(len(r.datasets) for r in rankings)
    out += [
        f"Methods ranked on each dataset's clean setting (rank 1 = best, ties averaged) by their mean over "
        f"training seeds ({mode} threshold mode), then averaged over the datasets; Friedman test with the "
        f"Iman-Davenport F (Demšar, JMLR 7:1-30, 2006), and every pair of methods compared by the Wilcoxon "
        f"signed-rank test over the datasets, Holm-corrected within each metric (as Benavoli et al., "
        f"JMLR 17, 2016 recommend over mean-rank post-hoc tests); alpha = {alpha:g}. Only methods with a "
        f"value on every dataset are ranked. Figure: `figures/cd_diagram.pdf`.",
        "",
        f"**What {n_all} datasets can detect.** The smallest two-sided Wilcoxon p-value on {n_all} datasets is "
        f"{min_wilcoxon_p(n_all):.3g} (one method ahead on every dataset); "
        + (f"so no pair of methods can differ at alpha = {alpha:g} here, however large the differences, and "
           f"a bar joining methods says nothing about their being equal."
           if min_wilcoxon_p(n_all) > alpha else
           "after Holm over k(k-1)/2 pairs a pair needs about that p times the number of pairs.")
        + " The Friedman p-values are asymptotic and rough below about 10 datasets.",
        "",
    ]
    for r in rankings:
        name = METRIC_NAMES.get(r.metric, r.metric)
        n, k = r.values.shape
        out += [f"### {name}", ""]
        if k < 2 or n < 2:
            out += [f"Not ranked: {k} method(s) with a value on {n} dataset(s).", ""]
        else:
            out += ["| method | average rank | mean over datasets (%) |", "|---|---|---|"]
            out += [f"| {m} | {rk:.2f} | {r.values[m].mean():.2f} |" for m, rk in r.average_ranks.items()]
            out.append("")
            fr = r.friedman
            if k < 3:
                out.append("Friedman test: needs 3 or more methods.")
            elif not math.isfinite(fr["chi2"]):
                out.append("Friedman test: every method ties on every dataset; nothing to test.")
            else:
                out.append(f"Friedman chi2 = {fr['chi2']:.2f} (df {fr['df1']:g}), p {_p(fr['chi2_p'])}; "
                           f"Iman-Davenport F = {fr['f_f']:.2f} (df {fr['df1']:g}, {fr['df2']:g}), "
                           f"p {_p(fr['f_f_p'])} on {n} datasets.")
            sig = r.pairs[r.pairs["significant"]]
            if len(sig):
                out.append("Pairs that differ after Holm: " + "; ".join(
                    f"{p.method} vs {p.other} (p {_p(p.p)}, Holm p {_p(p.p_holm)})" for p in sig.itertuples()) + ".")
            else:
                best = r.pairs["p"].min() if len(r.pairs) else math.nan
                out.append(f"No pair differs after Holm (smallest raw p {_p(best)}).")
            if r.all_tied:
                out.append(f"Every method has the same value on {', '.join(r.all_tied)} (a tie that ranks no one).")
            out.append("")
        if r.left_out:
            out += ["Left out: " + "; ".join(f"{m} ({why})" for m, why in r.left_out) + ".", ""]
    return "\n".join(out)


def write(rankings: Sequence[MetricRanking], out: str | Path, datasets: Sequence[str], alpha: float = ALPHA,
          mode: str = "global") -> list[Path]:
    """``<out>.csv`` and ``<out>.md``, each written atomically."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    csv, md = Path(f"{out}.csv"), Path(f"{out}.md")
    df = pd.DataFrame(csv_rows(rankings), columns=list(CSV_COLUMNS))
    atomic_write(csv, df.to_csv(index=False, float_format="%.10g"))
    atomic_write(md, markdown(rankings, datasets, alpha, mode) + "\n")
    return [csv, md]


def parse_not_run(items: Sequence[str]) -> dict[tuple[str, str], str]:
    """``--not-run 'dataset|method|why'`` (as the tables rule passes them) -> {(d, m): why}."""
    out = {}
    for item in items:
        d, m, why = (item.split("|", 2) + ["", ""])[:3]
        out[(d, m)] = why
    return out


def add_ranking_args(ap: argparse.ArgumentParser) -> None:
    """The arguments that say what is ranked (this module's command line and the diagram's,
    :mod:`cdgtmll.figures.cd_diagram`): ``--runs``, ``--datasets``, ``--methods``, ``--mode``,
    ``--alpha``, ``--not-run``."""
    ap.add_argument("--runs", required=True, help="results/tables/all_runs.csv")
    ap.add_argument("--datasets", nargs="*", default=[], help="the profile's datasets (default: those run)")
    ap.add_argument("--methods", nargs="*", default=[], help="the methods to rank (default: every method run)")
    ap.add_argument("--mode", choices=("global", "adaptive"), default="global")
    ap.add_argument("--alpha", type=float, default=ALPHA)
    ap.add_argument("--not-run", action="append", default=[], metavar="D|M|WHY",
                    help="a (dataset, method) that could not run, and why (named among the left out)")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_ranking_args(ap)
    ap.add_argument("--out", required=True, help="output stem: <out>.csv, <out>.md")
    args = ap.parse_args(argv)
    runs = read_runs(args.runs)
    datasets = args.datasets or sorted(set(runs.loc[runs["setting"] == "clean", "dataset"]))
    rankings = rank_all(runs, datasets, args.methods or None, mode=args.mode, alpha=args.alpha,
                        not_run=parse_not_run(args.not_run))
    for p in write(rankings, args.out, datasets, args.alpha, args.mode):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
