"""Comparing the paper's claims with the reproduced runs: names and settings normalised
(:func:`canonical_method`, :func:`variant_setting`, :func:`canonical_setting`), the runs
table read in percent (:func:`normalise_runs`), the reproduced estimate of each claim from
the runs or from the optional figure inputs (:func:`load_pr`, :func:`load_spec`), judged
by :func:`cdgtmll.claims.verdict.judge`, and the result table (:func:`check_claims`),
including the paper inconsistencies (:func:`mark_paper_inconsistency`). The statuses are
documented in :mod:`cdgtmll.claims.check`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cdgtmll.claims.paper import METHOD_ALIASES
from cdgtmll.claims.report import _f, _group, _s
from cdgtmll.claims.verdict import (
    ABOVE_ANY,
    ABOVE_PANEL,
    CONSISTENT,
    INCONSISTENT,
    NC_DATASET,
    NC_FEW,
    NC_METHOD,
    PAPER_INCONSISTENT,
    ClaimSettings,
    above_bound,
    comparison_verdict,
    describe,
    detectable_effect,
    holm,
    judge,
    needs,
    one_sample_p,
    paired_test,
    t_interval,
    to_percent,
    tost,
    welch_from_stats,
)
from cdgtmll.config.schema import ConfigError
from cdgtmll.variants import naming

RUN_METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")
#: the metrics whose bound depends on a run's scores (the best thresholding of them) and those
#: whose bound depends on the test labels only (a perfect ranking); :mod:`cdgtmll.metrics.oracle`
SCORE_BOUND_METRICS = ("micro_f1", "macro_f1", "rare_f1")
DATA_BOUND_METRICS = ("mAP", "p@1", "p@3", "p@5")
#: ``all_runs.csv`` columns of those bounds, and the Hamming accuracy at the global threshold
BOUND_COLUMNS = tuple(f"oracle_{m}" for m in RUN_METRICS)
HAMMING = "hamming_accuracy"
#: ablation aliases of CD-GTMLL (App. E.2); excluded, like ``@`` sweep variants, from ``*`` comparators
ABLATION_ALIASES = frozenset({"No-Curiosity", "Single-Predictor", "No-Overlap", "No-Disagreement"})


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


#: how claims files written before settings had one spelling named two kinds of setting
#: (``noise@0.30``, ``occlusion@0.30``); read by :func:`canonical_setting` only
_OLD_SETTING_KINDS = {"noise": "N", "occlusion": "O"}


def variant_setting(variant: str) -> tuple[str, int]:
    """(setting, sampling seed) of a variant, the setting as the tables spell it
    (:func:`cdgtmll.variants.naming.variant_setting`): 'clean' -> ('clean', -1); 'R0.40-s1' ->
    ('R@0.40', 1); 'N0.10-s0' -> ('N@0.10', 0); 'O0.30-s2' -> ('O@0.30', 2). Unknown variants
    map to themselves."""
    try:
        parsed = naming.split_variant(str(variant))
    except ConfigError:
        parsed = None
    if parsed is None:
        return str(variant), -1
    return naming.setting_id(parsed[0], parsed[1]), parsed[2]


def canonical_setting(setting: str) -> str:
    """A claim's setting in the one spelling (:mod:`cdgtmll.variants.naming`): values with two
    decimals ('N@0.3' -> 'N@0.30'), ``R@*`` kept, and the older ``noise@`` / ``occlusion@``
    read as ``N@`` / ``O@``."""
    s = str(setting).strip()
    m = re.fullmatch(r"(R|N|noise|O|occlusion)@(\*|\d+(?:\.\d+)?)", s)
    if not m:
        return s
    kind = _OLD_SETTING_KINDS.get(m.group(1), m.group(1))
    return f"{kind}@*" if m.group(2) == "*" else naming.setting_id(kind, float(m.group(2)))


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
    for m in (*RUN_METRICS, *BOUND_COLUMNS, HAMMING):
        out[m] = to_percent(pd.to_numeric(out[m], errors="coerce")) if m in out else np.nan
    return out


# ============================================================== selecting the reproduced values

class NotChecked(Exception):
    def __init__(self, status: str, detail: str = ""):
        super().__init__(status)
        self.status, self.detail = status, detail


def _run_values(runs: pd.DataFrame, dataset: str, setting: str, method: str, mode: str, metric: str) -> pd.Series:
    """Percent values of one method indexed by (setting, training seed, sampling key);
    ``<metric>_drop`` pairs each corrupted run with the clean run of the same training seed."""
    base = metric[:-5] if metric.endswith("_drop") else metric
    sel = runs[(runs["dataset"] == dataset) & (runs["method"] == method) & (runs["mode"] == mode)
               & runs["setting"].map(lambda s: setting_matches(setting, s))]
    vals = sel.set_index(["setting", "seed", "skey"])[base].dropna()
    if metric.endswith("_drop"):
        clean = runs[(runs["dataset"] == dataset) & (runs["method"] == method) & (runs["mode"] == mode)
                     & (runs["setting"] == "clean")].set_index("seed")[base].dropna()
        seeds = vals.index.get_level_values("seed")
        keep = seeds.isin(clean.index)
        vals = pd.Series(clean.loc[seeds[keep]].to_numpy() - vals[keep].to_numpy(), index=vals.index[keep])
    return vals.sort_index()


def nested_units(vals: pd.Series) -> tuple[np.ndarray, str, str]:
    """``(values, test, unit)``: the independent units of a claim's runs (index: setting,
    training seed, sampling key) and the words the interval is described with.

    Where the runs come from two or more sampling seeds (R-variant draws, App. E.3), a unit is
    one draw: the mean over its training seeds; the interval is then over the draws' means (the
    usual analysis of a nested design by its cluster means), not over the runs as if
    independent. Otherwise each run (training seed) is a unit; with one draw the text says that
    the draw's own sampling variation is not in the interval."""
    idx = vals.index
    draws = pd.MultiIndex.from_arrays([idx.get_level_values("setting"), idx.get_level_values("skey")])
    sampled = idx.get_level_values("skey") >= 0
    n_draws = len(set(draws[sampled]))
    seeds = idx.get_level_values("seed").nunique()
    if sampled.any() and n_draws >= 2:
        means = vals.groupby([idx.get_level_values("setting"), idx.get_level_values("skey")]).mean()
        return (means.to_numpy(), f"nested: t-interval over {len(means)} sampling seeds' means, each the mean over "
                f"{seeds} training seed(s)", "sampling seeds")
    if sampled.any():
        return vals.to_numpy(), (f"t-interval over {len(vals)} runs ({seeds} training seed(s)) of one R-variant draw: "
                                 "its sampling variation is not in the interval"), "seeds"
    return vals.to_numpy(), "t-interval over runs", "seeds"


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


def _fitted_once(runs: pd.DataFrame, claim: dict, mode: str) -> set[str]:
    """The methods whose runs at the claim's dataset and setting are a deterministic method's,
    fitted once (``all_runs.csv`` column ``deterministic``: :func:`cdgtmll.tables.collect.run_deterministic`)."""
    if "deterministic" not in runs:
        return set()
    sel = runs[(runs["dataset"] == claim["dataset"]) & (runs["mode"] == mode)
               & runs["setting"].map(lambda s: setting_matches(claim["setting"], s))]
    flag = sel["deterministic"].map(lambda v: str(v).strip().lower() == "true")
    return {m for m, f in flag.groupby(sel["method"]) if bool(f.all())}


def _every_seed(once: pd.Series, index: pd.MultiIndex) -> pd.Series:
    """A deterministic method's values (one run per setting and draw: index setting, seed, skey)
    at every (setting, seed, skey) of ``index`` whose setting and draw it has: the value every
    seed would give, so that the other row's runs are each paired with it."""
    by_draw = {(st, k): v for (st, _, k), v in once.items()}
    keep = [i for i in index if (i[0], i[2]) in by_draw]
    return pd.Series([by_draw[(i[0], i[2])] for i in keep],
                     index=pd.MultiIndex.from_tuples(keep, names=index.names), dtype=float).sort_index()


def _estimate_from_runs(runs: pd.DataFrame, claim: dict, mode: str) -> dict:
    metric, method = claim["metric"], canonical_method(claim["method"])
    _check_runs_available(runs, claim, mode, metric)
    available = _methods_at(runs, claim, mode)
    if method not in available:
        raise NotChecked(NC_METHOD, f"{method} has no {mode}-mode run on {claim['dataset']} {claim['setting']}")
    a = _run_values(runs, claim["dataset"], claim["setting"], method, mode, metric)
    res = {"method_mean": float(a.mean()) if len(a) else math.nan, "method_n": int(len(a))}
    once = _fitted_once(runs, claim, mode)
    if claim["kind"] in ("value", "bound"):
        units, how, _ = nested_units(a)
        est = describe(units)
        res.update({"n": est.n, "mean": est.mean, "std": est.std, "lo": est.lo, "hi": est.hi, "test": how})
        if method in once:
            res["detail"] = (f"{method} is deterministic (its fit does not use the seed): fitted once, one run per "
                             "setting and draw" + ("; no interval and no test on a single run" if est.n < 2 else ""))
        return res
    run, not_run = _candidates(claim["other_method"], method, available)
    if not run:
        raise NotChecked(NC_METHOD, f"no comparator run ({claim['other_method']})")
    others = {m: _run_values(runs, claim["dataset"], claim["setting"], m, mode, metric) for m in run}
    other = _strongest(others, higher_is_better(metric)) if len(run) > 1 else run[0]
    b = others[other]
    detail = []
    if (method in once) != (other in once):  # one side fitted once: its one value is every seed's
        det, rest = (method, other) if method in once else (other, method)
        if det == method:
            a = _every_seed(a, b.index)
        else:
            b = _every_seed(b, a.index)
        detail.append(f"{det} is deterministic (its fit does not use the seed; fitted once): its one run's value "
                      f"is what every seed of {rest} would be paired with, so the test is over {rest}'s runs")
    elif method in once:
        detail.append(f"{method} and {other} are both deterministic (fitted once): one run each per setting and draw"
                      "; no test on a single run")
    both = a.index.intersection(b.index)
    ua, how, unit = nested_units(a.loc[both])
    ub, _, _ = nested_units(b.loc[both])
    pt = paired_test(ua, ub)
    if len(run) > 1 or claim["other_method"].strip() == "*":
        detail.append(f"strongest of {len(run)} comparator(s) run: {other}")
    if not_run:
        detail.append(f"checked against {len(run)} of {len(run) + len(not_run)} listed comparators; "
                      f"not run: {', '.join(not_run)}")
    if len(both) < max(len(a), len(b)):  # rows with different seeds (power.seeds): the means are the paired runs'
        detail.append(f"means over the {len(both)} runs both rows have ({method}: {len(a)}, {other}: {len(b)})")
    res.update(pt)
    res.update({"method_mean": float(a.loc[both].mean()) if len(both) else math.nan, "method_n": int(len(both))})
    res.update({"coverage": f"{len(run)}/{len(run) + len(not_run)}" if claim["other_method"].strip() != "*"
                else f"{len(run)} run", "compared_with": other,
                "other_mean": float(b.loc[both].mean()) if len(both) else math.nan,
                "other_n": int(len(both)), "n_pairs": pt["n"], "unit": unit,
                "test": f"paired t-test (ttest_rel) on (seed, sampling seed); {how}",
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
    """``figures/pr_tail.csv`` (method, recall, precision_mean, precision_std, n_runs[,
    no_curve]); the dataset/setting come from ``--pr-dataset`` or the ``.sources.json``
    sidecar's run paths. A method's ``n_runs`` 0 row records why it has no curve: it is no
    curve, so the method is not in the figure data (a claim on it is not checked)."""
    path = Path(path)
    df = pd.read_csv(path)
    df = df[df["n_runs"] > 0].reset_index(drop=True)
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
    player, share`` and optional ``seed`` -- or as summarised by ``cdgtmll.figures.studies.build
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
                "unit": "runs", "test": "Welch t-test from figure summary stats (per-run curves not in the csv)"})
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
                  "compared_with", "coverage", "mode", "comparator", "paper_value", "paper_value_hi", "ceiling",
                  "ceiling_panel", "ceiling_basis", "n", "reproduced_mean",
                  "reproduced_std", "ci_low", "ci_high", "diff_vs_paper", "paper_in_ci", "within_tolerance",
                  "tolerance", "direction_match", "ci_side", "method_mean", "method_n", "other_mean", "other_n",
                  "n_pairs", "t", "p", "p_holm", "family", "equivalence", "p_tost", "margin", "detectable", "test",
                  "in_comment", "location", "line", "quote", "notes"]


def check_claim(claim: dict, runs: pd.DataFrame, pr: FigureInput | None = None,
                spec: FigureInput | None = None, mode: str | None = None,
                settings: ClaimSettings | None = None) -> dict:
    """One result row for one claim (dict with the claims-table columns); ``settings``: the
    config's ``claims:`` section (default :class:`~cdgtmll.claims.verdict.ClaimSettings`)."""
    settings = settings or ClaimSettings()
    claim = dict(claim)
    claim["setting"] = canonical_setting(claim["setting"])
    mode = mode or claim.get("mode") or "global"
    row = {k: claim.get(k) for k in RESULT_COLUMNS if k in claim}
    row.update({"mode": mode, "detail": "", "compared_with": "", "coverage": "", "test": "", "equivalence": "",
                "family": _group(str(claim["claim_id"])), "tolerance": settings.implementation_tolerance})
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
                   "paper_in_ci": None, "within_tolerance": None, "direction_match": bool(est["mean"] >= 0),
                   "ci_side": None}
    else:
        verdict = judge(claim["kind"], claim.get("comparator", ""), claim.get("paper_value"),
                        claim.get("paper_value_hi"), est, hib, tolerance=settings.implementation_tolerance)
    pv = claim.get("paper_value")
    if claim["kind"] == "value" and not strict and est.get("p") is None:  # the test of mean == the paper's value
        est["p"] = one_sample_p(est["mean"], est.get("std"), est["n"], pv)
        est["t"] = math.nan
    if claim["kind"] in ("difference", "range", "beats") and not strict and "se" in est:
        p_eq = tost(est["mean"], est["se"], est["dof"], settings.equivalence_margin)
        x = detectable_effect(est["se"], est["dof"], settings.alpha, settings.power)
        row.update({"p_tost": p_eq, "margin": settings.equivalence_margin, "detectable": x,
                    "equivalence": comparison_verdict(est["mean"], est["lo"], est["hi"], p_eq, x, est["n"], settings,
                                                      hib, est.get("unit", "seeds"))})
    row.update({
        "status": verdict["status"], "detail": est.get("detail", ""), "compared_with": est.get("compared_with", ""),
        "coverage": est.get("coverage", ""),
        "n": est["n"], "reproduced_mean": est["mean"], "reproduced_std": est.get("std"),
        "ci_low": est.get("lo"), "ci_high": est.get("hi"),
        "diff_vs_paper": est["mean"] - pv if pv is not None and np.isfinite(pv) and not strict else math.nan,
        "paper_in_ci": verdict["paper_in_ci"], "within_tolerance": verdict["within_tolerance"],
        "direction_match": verdict["direction_match"],
        "ci_side": verdict["ci_side"], "method_mean": est.get("method_mean"), "method_n": est.get("method_n"),
        "other_mean": est.get("other_mean"), "other_n": est.get("other_n"), "n_pairs": est.get("n_pairs"),
        "t": est.get("t"), "p": est.get("p"), "test": est.get("test", ""),
    })
    return row


def check_claims(claims: pd.DataFrame, runs: pd.DataFrame, pr: FigureInput | None = None,
                 spec: FigureInput | None = None, mode: str | None = None,
                 settings: ClaimSettings | None = None) -> pd.DataFrame:
    """Result table (RESULT_COLUMNS) for every claim; ``runs`` is all_runs.csv as read by pandas;
    ``settings``: the config's ``claims:`` section. ``p_holm``: Holm's correction of the raw ``p``
    within each family (``family``: the claims of one table, of the experiments text)."""
    nr = normalise_runs(runs)
    records = claims.to_dict("records")
    rows = [check_claim(c, nr, pr, spec, mode, settings) for c in records]
    for claim, row in zip(records, rows):
        mark_ceiling(claim, row, nr)
        mark_paper_inconsistency(claim, row, records, nr)
    out = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    for _, idx in out.groupby("family", sort=False).groups.items():
        out.loc[idx, "p_holm"] = holm(pd.to_numeric(out.loc[idx, "p"], errors="coerce").to_numpy())
    return out


# ============================================================== what the metrics can reach

#: the most any predictor reaches on any metric here (percent): its exact maximum
METRIC_MAXIMUM = 100.0


def ceiling(runs: pd.DataFrame, claim: dict) -> tuple[float, str, str, str]:
    """``(ceiling in %, panel, basis, status above it)`` of the claim's metric on its dataset and
    setting (``nan, '', '', ''`` where there is none), from the ``oracle_*`` columns of the
    normalised runs (:mod:`cdgtmll.metrics.oracle`; the same in both threshold modes):

    * Micro-/Macro-/Rare-F1: the best test-oracle F1 over a *panel*: every model run on the
      dataset and setting (the profile's methods, the scikit-learn reference rows BR-LogReg,
      kNN-15 and RF-300 among them where configured), each run's scores thresholded at the
      thresholds best on the test set itself; the maximum over their runs. A value above it is
      :data:`~cdgtmll.claims.verdict.ABOVE_PANEL`: no model run here reaches it, another could.
    * mAP, P@k: a perfect ranking of the test labels (data only), which no predictor exceeds:
      :data:`~cdgtmll.claims.verdict.ABOVE_ANY`.
    * any metric: its exact maximum, 100 (:data:`METRIC_MAXIMUM`), no predictor exceeds; a
      paper value above it is :data:`~cdgtmll.claims.verdict.ABOVE_ANY` even where no run
      recorded a bound (runs written before the oracle, or none of the dataset and setting).
    """
    metric = str(claim.get("metric", ""))
    col = f"oracle_{metric}"
    if metric not in (*SCORE_BOUND_METRICS, *DATA_BOUND_METRICS) or col not in runs:  # runs older than the oracle
        return math.nan, "", "", ""
    setting = canonical_setting(claim["setting"])
    sel = runs[(runs["dataset"] == claim["dataset"]) & runs["setting"].map(lambda s: setting_matches(setting, s))]
    sel = sel.assign(**{col: pd.to_numeric(sel[col], errors="coerce")}).dropna(subset=[col])
    sel = sel.drop_duplicates(["method", "setting", "seed", "skey"])
    if sel.empty:  # no run of the dataset and setting recorded the bound (runs older than the oracle)
        return math.nan, "", "", ""
    if metric in DATA_BOUND_METRICS:
        return (float(sel[col].max()), "any predictor", "perfect ranking of the test labels (data only)", ABOVE_ANY)
    best = sel.groupby("method")[col].max().sort_values(ascending=False)
    panel = ", ".join(sorted(best.index))
    basis = (f"best test-oracle thresholding (per-label thresholds chosen on the test set) over {len(sel)} run(s) "
             f"of {len(best)} model(s) run here; best: {best.index[0]} {_f(best.iloc[0])}")
    return float(best.iloc[0]), panel, basis, ABOVE_PANEL


def mark_ceiling(claim: dict, row: dict, runs: pd.DataFrame) -> None:
    """Record the claim's :func:`ceiling` in ``row`` (``ceiling``, ``ceiling_panel``,
    ``ceiling_basis``; ``value`` and ``bound`` claims only) and set the status to
    :data:`~cdgtmll.claims.verdict.ABOVE_ANY` or :data:`~cdgtmll.claims.verdict.ABOVE_PANEL`
    when the paper's value lies above it (:func:`cdgtmll.claims.verdict.above_bound`) -- unless
    the claim is ``consistent`` (the paper's value inside the interval of the reproduced mean).
    The status it replaces stays in ``detail``."""
    row["ceiling"], row["ceiling_panel"], row["ceiling_basis"] = math.nan, "", ""
    if claim.get("kind") not in ("value", "bound"):  # a difference is not bounded by the metric's ceiling
        return
    value, panel, basis, status = ceiling(runs, claim)
    if not math.isfinite(value) and above_bound(claim.get("kind"), claim.get("comparator", ""),
                                                claim.get("paper_value"), METRIC_MAXIMUM):
        value, panel, basis, status = METRIC_MAXIMUM, "any predictor", "the metric's exact maximum", ABOVE_ANY
    row["ceiling"], row["ceiling_panel"], row["ceiling_basis"] = value, panel, basis
    if row.get("status") == CONSISTENT or not above_bound(claim.get("kind"), claim.get("comparator", ""),
                                                         claim.get("paper_value"), value):
        return
    was = _s(row.get("status")) + (f" ({row['detail']})" if _s(row.get("detail")) else "")
    row["status"] = status
    who = "no predictor" if status == ABOVE_ANY else f"none of {panel}"
    row["detail"] = (f"the paper's {_f(claim.get('paper_value'))} lies above {_f(value)}, the most {claim['metric']} "
                     f"reaches here for {who} ({basis}); reproduction check alone: {was}")


def hamming_comparison(res: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """A measured comparison, no statement of what the paper computed: for each single-value
    Micro-F1 claim whose method has runs on its dataset and setting, the paper's value, our
    Micro-F1 (mean over the runs, in the claim's threshold mode) and our Hamming accuracy
    (``1 - (FP + FN) / (M L)`` at the global threshold, mean over the same runs), in percent.
    ``runs`` is ``all_runs.csv`` as read by pandas; empty when it has no ``hamming_accuracy``."""
    cols = ["claim_id", "dataset", "setting", "method", "mode", "paper_value", "micro_f1", "hamming_accuracy", "n"]
    if HAMMING not in runs or res.empty:
        return pd.DataFrame(columns=cols)
    nr = normalise_runs(runs)
    out = []
    for r in res.to_dict("records"):
        if r["metric"] != "micro_f1" or r["kind"] != "value":
            continue
        method, setting = canonical_method(r["method"]), canonical_setting(r["setting"])
        sel = nr[(nr["dataset"] == r["dataset"]) & (nr["method"] == method) & (nr["mode"] == r["mode"])
                 & nr["setting"].map(lambda s, c=setting: setting_matches(c, s))]
        sel = sel[sel["micro_f1"].notna() & sel[HAMMING].notna()]
        if sel.empty:
            continue
        out.append({"claim_id": r["claim_id"], "dataset": r["dataset"], "setting": setting, "method": method,
                    "mode": r["mode"], "paper_value": r["paper_value"], "micro_f1": float(sel["micro_f1"].mean()),
                    "hamming_accuracy": float(sel[HAMMING].mean()), "n": int(len(sel))})
    return pd.DataFrame(out, columns=cols)


def construction(runs: pd.DataFrame, dataset: str, method: str) -> tuple[str, tuple[str, ...]] | None:
    """``(reference method, metrics)`` equal by construction for ``method`` on ``dataset``:
    from the runs' ``equal_by_construction`` column where the method was run there, else from
    :func:`cdgtmll.tables.collect.equal_by_construction` with default hyper-parameters."""
    from cdgtmll.tables.collect import equal_by_construction

    if "equal_by_construction" in runs.columns:
        sel = runs.loc[(runs["dataset"] == dataset) & (runs["method"] == method), "equal_by_construction"]
        if len(sel):
            vals = sorted({str(v) for v in sel if isinstance(v, str) and v})
            if not vals:
                return None
            ref, _, mets = vals[0].partition(":")
            common = set(mets.split(","))
            for v in vals[1:]:  # runs that disagree: only what all of them share
                common &= set(v.partition(":")[2].split(",")) if v.partition(":")[0] == ref else set()
            return (ref, tuple(m for m in RUN_METRICS if m in common)) if common else None
    eq = equal_by_construction(method.split("@")[0])
    return (eq[0], eq[1]) if eq else None


def mark_paper_inconsistency(claim: dict, row: dict, claims: list[dict], runs: pd.DataFrame) -> None:
    """Set ``row`` to :data:`PAPER_INCONSISTENT` when the paper prints the claim's value
    different from the value it prints for the same cell of the row it equals by
    construction (docstring of :mod:`cdgtmll.claims.check`). Only single-value claims of one
    table cell."""
    if claim.get("kind") != "value" or claim.get("comparator", "=") not in ("=", "", "≈", "~"):
        return
    method, metric = canonical_method(claim["method"]), claim["metric"]
    eq = construction(runs, claim["dataset"], method)
    if eq is None or metric not in eq[1]:
        return
    ref = eq[0]
    group = str(claim["claim_id"]).split(":")[0]
    match = [c for c in claims if c is not claim and c.get("kind") == "value"
             and str(c["claim_id"]).split(":")[0] == group and canonical_method(c["method"]) == ref
             and c["dataset"] == claim["dataset"] and canonical_setting(c["setting"]) == canonical_setting(claim["setting"])
             and c["metric"] == metric and bool(c.get("in_comment")) == bool(claim.get("in_comment"))]
    pv = claim.get("paper_value")
    if len(match) != 1 or pv is None or not np.isfinite(pv):
        return
    rv = match[0].get("paper_value")
    if rv is None or not np.isfinite(rv) or math.isclose(pv, rv, abs_tol=1e-9):
        return
    was = row["status"] + (f" ({row['detail']})" if _s(row.get("detail")) else "")
    row["status"] = PAPER_INCONSISTENT
    row["detail"] = (f"if the paper's {method} row re-used its {ref} row's scores, as this project's {method} does "
                     f"(cdgtmll.tables.collect.equal_by_construction), its {metric} would equal {ref}'s; the paper "
                     f"prints {_f(pv)} for {method} and {_f(rv)} for {ref} ({match[0]['claim_id']}). Neither the paper "
                     f"nor {method}'s own source states that identity; reproduction check alone: {was}")
    row["compared_with"] = ref
