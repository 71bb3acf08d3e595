r"""The ``readings`` study: CD-GTMLL under each reading of the paper it leaves open, one change at
a time, against the default (docs/methods.md, "Choices the paper leaves open").

``python -m cdgtmll.figures.studies.readings --runs <seed dirs> [--alias SETTING RUN ...]
--method CD-GTMLL --reference BCE --alpha 0.05 --power 0.8 --margin 1.0
--out results/tables/readings``
(rule ``study_readings``; the table's only command line).

Runs: the default ``<method>``, each reading ``<method>@<key>=<value>[,<key>=<value>]`` and the
reference row (BCE: the paper reports CD-GTMLL above it on every metric of Table 1), all on one
dataset and variant; each with all the seeds of its run (config ``power`` gives these runs more
seeds than the others). Per reading and metric (Micro-F1, Macro-F1, Rare-F1 and mAP in the
table's threshold mode, App. E.4, and Rare-F1 at the validation-tuned per-label thresholds too:
at 0.5 Rare-F1 can be 0 for every row):

* ``mean`` ± ``std`` (sample, ddof 1) over the seeds, in percent;
* ``delta`` = mean over seeds of (reading - default), paired by training seed, with the 95 %
  t-interval ``delta ± t_{0.975, n-1} s_d / sqrt(n)`` (``s_d`` the sample std of the paired
  differences; no interval with fewer than 2 pairs);
* ``detectable``: the smallest true paired difference the two-sided paired t-test at level
  ``alpha`` detects with probability ``power`` on these ``n`` pairs
  (:func:`cdgtmll.claims.verdict.detectable_effect` with ``se = s_d / sqrt(n)``, ``n - 1``
  degrees of freedom), and ``seeds_needed``: the fewest pairs with which the same test would
  detect ``margin`` points (``claims.equivalence_margin``) at this ``s_d`` (:func:`seeds_needed`);
* ``vs_reference`` = the same paired difference against the reference row, and ``paper_direction``
  = ``yes`` when it is positive (the direction the paper reports: CD-GTMLL above BCE), ``no`` when
  negative, ``equal`` when 0, with ``(significant)`` when its interval excludes 0;
* ``identical``: the reading's predictions are byte-identical to the default's for every seed
  (sha256 of ``predictions.npz`` recorded in each ``metrics.json``): the reading changes nothing
  on these runs;
* ``engagement`` (readings that change ``clip_scope``): a clip that never acts cannot make two
  clipping readings differ. From each seed's ``train_log.csv`` (columns ``grad_norm_max`` and
  ``clipped_steps``, :mod:`cdgtmll.nn.trainer`) of the default and the reading: ``not engaged``
  when no step of either was clipped (the table then says so instead of a Δ, with the largest
  pre-clip norm and the number of steps, from ``grad_norms.npy`` where it is there), ``engaged``
  otherwise, ``not recorded`` when a log lacks the columns (runs older than them).

The header of each metric's table says how many seeds the readings have, the effect they detect
and the seeds that would detect ``margin`` points, at the median spread of the readings' paired
differences.

Writes ``<out>.csv`` (one row per reading and metric), ``<out>.md`` (one table per metric) and
``<out>.sources.json`` (every metrics.json, train_log.csv, grad_norms.npy and provenance.json
read, with its sha256, for ``cdgtmll audit``).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from cdgtmll.claims.verdict import detectable_effect
from cdgtmll.config.plan import split_method
from cdgtmll.figures.studies.runs import (
    SourceLog,
    _write_rows,
    metric_block,
    metric_value,
    parse_runs,
    predictions_sha256,
    read_metrics,
    read_train_log,
)
from cdgtmll.io import atomic_write, write_json

#: the table's metrics: ``rare_f1_tuned`` is Rare-F1 in the ``adaptive`` block (per-label
#: thresholds tuned on the validation split), the others are read in the table's mode
METRICS = ("micro_f1", "macro_f1", "rare_f1", "rare_f1_tuned", "mAP")
TITLES = {"micro_f1": "Micro-F1", "macro_f1": "Macro-F1", "rare_f1": "Rare-F1", "mAP": "mAP",
          "rare_f1_tuned": "Rare-F1 at validation-tuned thresholds"}
#: metric key -> (metric in the block, block; None: the table's mode)
LOOKUP = {"rare_f1_tuned": ("rare_f1", "adaptive")}
#: readings named for people where their ``key=value`` text does not say what they are
READABLE = ((({"n_players": 1, "alpha": 0.0}), "Single-Predictor, no curiosity (n_players=1, alpha=0)"),)
GRAD_NORMS = "grad_norms.npy"
PROVENANCE = "provenance.json"
ALPHA, POWER, MARGIN = 0.05, 0.8, 1.0


def paired_interval(diffs: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) of the 95 % t-interval of paired differences (NaN bounds for n < 2)."""
    d = np.asarray([x for x in diffs if not math.isnan(x)], dtype=np.float64)
    if d.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(d.mean())
    if d.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))
    return mean, mean - half, mean + half


def detectable(se: float, dof: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """:func:`cdgtmll.claims.verdict.detectable_effect`, NaN where its root finder fails (scipy's
    noncentral t gives NaN far in the tail at 1 degree of freedom: 2 pairs)."""
    try:
        return detectable_effect(se, dof, alpha, power)
    except (ValueError, ZeroDivisionError):
        return math.nan


def seeds_needed(sd: float, margin: float = MARGIN, alpha: float = ALPHA, power: float = POWER,
                 most: int = 100_000) -> float:
    """The fewest pairs n >= 2 with which the two-sided paired t-test at level ``alpha`` detects a
    true difference of ``margin`` with probability ``power`` when the paired differences have
    standard deviation ``sd``: the smallest n with ``detectable_effect(sd / sqrt(n), n - 1, alpha,
    power) <= margin`` (started from ``statsmodels`` ``TTestPower().solve_power``, the same
    noncentral t). NaN when ``sd`` is not finite or more than ``most`` pairs would be needed."""
    if not (math.isfinite(sd) and sd >= 0 and margin > 0):
        return math.nan
    if sd == 0:
        return 2

    def detects(n: int) -> bool:
        return detectable(sd / math.sqrt(n), n - 1, alpha, power) <= margin  # NaN: not

    from statsmodels.stats.power import TTestPower

    try:
        with warnings.catch_warnings():  # a start value only: its convergence is checked below
            warnings.simplefilter("ignore")
            guess = float(TTestPower().solve_power(effect_size=margin / sd, alpha=alpha, power=power,
                                                    alternative="two-sided"))
        n = max(2, min(most, math.ceil(guess)))
    except (ValueError, RuntimeError, OverflowError):
        n = 2
    if not math.isfinite(n):
        n = 2
    if detects(n):
        while n > 2 and detects(n - 1):
            n -= 1
        return n
    while n < most:
        n += 1
        if detects(n):
            return n
    return math.nan


def power_summary(diffs_pct: Sequence[float], alpha: float = ALPHA, power: float = POWER,
                  margin: float = MARGIN) -> dict[str, float]:
    """``sd_diff``, ``detectable`` and ``seeds_needed`` of paired differences (percent)."""
    d = np.asarray([x for x in diffs_pct if math.isfinite(x)], dtype=np.float64)
    if d.size < 2:
        return {"sd_diff": math.nan, "detectable": math.nan, "seeds_needed": math.nan}
    sd = float(d.std(ddof=1))
    return {"sd_diff": sd, "detectable": detectable(sd / math.sqrt(d.size), d.size - 1, alpha, power),
            "seeds_needed": seeds_needed(sd, margin, alpha, power)}


def reading_name(method: str, base: str) -> str:
    """``default`` for the base method, else the ``key=value`` after its ``@`` (several keys:
    ``key=value, key2=value2``), or the name of :data:`READABLE` for a reading listed there."""
    if method == base:
        return "default"
    if not method.startswith(f"{base}@"):
        return method
    text = method.split("@", 1)[1]
    try:
        over = split_method(method)[1]
    except ValueError:
        return text
    for keys, name in READABLE:
        if over == keys:
            return name
    return text.replace(",", ", ")


def reading_keys(method: str) -> set[str]:
    """The hyper-parameters a reading ``<method>@<key>=<value>[,...]`` changes."""
    try:
        return set(split_method(method)[1])
    except ValueError:
        return set()


def readings_rows(values: dict[tuple[str, int], dict[str, float]], base: str, reference: str | None,
                  metrics: Sequence[str] = METRICS, shas: dict[tuple[str, int], str | None] | None = None,
                  alpha: float = ALPHA, power: float = POWER, margin: float = MARGIN,
                  engagement: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per (reading, metric) from ``values[(method, seed)][metric]`` (fractions);
    ``shas[(method, seed)]``: the predictions' sha256, for ``identical``; ``engagement[method]``:
    :func:`clip_engagement` of the readings it applies to."""
    shas = shas or {}
    engagement = engagement or {}
    methods = list(dict.fromkeys(m for m, _ in values))
    readings = [m for m in methods if m == base or m.startswith(f"{base}@")]
    rows = []
    for m in readings:
        seeds = sorted(s for mm, s in values if mm == m)
        identical = m != base and bool(seeds) and all(
            shas.get((m, s)) is not None and shas.get((m, s)) == shas.get((base, s)) for s in seeds)
        eng = engagement.get(m, {})
        for k in metrics:
            if any(k not in values[(m, s)] for s in seeds):
                continue
            v = [values[(m, s)][k] for s in seeds]
            base_d = [values[(m, s)][k] - values[(base, s)][k] for s in seeds
                      if (base, s) in values and k in values[(base, s)]]
            ref_d = ([values[(m, s)][k] - values[(reference, s)][k] for s in seeds
                      if (reference, s) in values and k in values[(reference, s)]] if reference else [])
            d, lo, hi = paired_interval(base_d)
            r, rlo, rhi = paired_interval(ref_d)
            sig = not (math.isnan(rlo) or rlo <= 0 <= rhi)
            direction = "" if math.isnan(r) else ("yes" if r > 0 else "no" if r < 0 else "equal") + (
                " (significant)" if sig else "")
            arr = np.asarray(v, dtype=np.float64)
            pw = (power_summary([100 * x for x in base_d], alpha, power, margin) if m != base else
                  {"sd_diff": math.nan, "detectable": math.nan, "seeds_needed": math.nan})
            rows.append({
                "reading": reading_name(m, base), "method": m, "metric": k, "n": len(v),
                "n_pairs": len([x for x in base_d if not math.isnan(x)]) if m != base else len(v),
                "mean": 100 * float(arr.mean()) if len(v) else math.nan,
                "std": 100 * float(arr.std(ddof=1)) if len(v) > 1 else math.nan,
                "delta": 100 * d, "delta_low": 100 * lo, "delta_high": 100 * hi, **pw,
                "vs_reference": 100 * r, "vs_reference_low": 100 * rlo, "vs_reference_high": 100 * rhi,
                "paper_direction": direction, "identical": identical,
                "engagement": eng.get("status", ""), "engagement_note": eng.get("note", ""),
            })
    return rows


# ------------------------------------------------------------------ is the clip engaged?

def _fmt_norm(x: float) -> str:
    return f"{x:.3g}"


def clip_engagement(runs: Sequence[Any], log: SourceLog) -> dict[str, Any]:
    """Whether gradient clipping acted in any of ``runs`` (:class:`RunDir` seed folders: every
    seed of the default and of the clipping reading), from each seed's ``train_log.csv``
    (``grad_norm_max``, ``clipped_steps``), ``grad_norms.npy`` (the steps, where there) and
    ``provenance.json`` (the run spec's ``grad_clip``). ``status``: ``engaged``, ``not engaged``
    (no step of any seed clipped) or ``not recorded`` (a log or its columns missing), and a
    ``note`` for the table."""
    clipped, norms_max, steps, epochs, clip = 0, [], 0, 0, None
    steps_known = True
    for r in runs:
        try:
            rows = read_train_log(r, log)
        except FileNotFoundError:
            return {"status": "not recorded", "note": "engagement not recorded (no train_log.csv)"}
        if not rows or not {"grad_norm_max", "clipped_steps"} <= set(rows[0]):
            return {"status": "not recorded", "note": "engagement not recorded"}
        epochs += len(rows)
        for row in rows:
            clipped += int(float(row["clipped_steps"] or 0))
            x = float(row["grad_norm_max"] or "nan")
            if math.isfinite(x):
                norms_max.append(x)
        if (r.path / GRAD_NORMS).is_file():
            a = np.asarray(np.load(io.BytesIO(log.read(r, GRAD_NORMS)), allow_pickle=False), dtype=np.float64)
            steps += int(np.isfinite(a).sum())
        else:
            steps_known = False
        if (r.path / PROVENANCE).is_file():  # the run spec's grad_clip (the reading's, read last, wins)
            spec = json.loads(log.read(r, PROVENANCE).decode("utf-8")).get("config") or {}
            clip = ({**(spec.get("resolved_hparams") or {}), **(spec.get("hparams") or {})}.get("grad_clip")
                    or (spec.get("training") or {}).get("grad_clip") or clip)
    largest = max(norms_max) if norms_max else math.nan
    over = f"{steps} steps" if steps_known else f"{epochs} epochs"
    if clipped:
        return {"status": "engaged", "note": f"the clip acted on {clipped} steps; largest gradient norm "
                                             f"{_fmt_norm(largest)}", "clipped_steps": clipped}
    norm = f" (norm {clip:g})" if isinstance(clip, int | float) else ""
    return {"status": "not engaged", "clipped_steps": 0, "largest_norm": largest,
            "note": f"not engaged: the clip{norm} never acted; largest gradient norm {_fmt_norm(largest)} over {over}"}


# ------------------------------------------------------------------ the table

def _f(x: float, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _n(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else str(int(x))


def _points(x: float) -> str:
    return "– points" if not math.isfinite(x) else f"{x:.1f} point" + ("" if x == 1 else "s")


def power_header(rows: list[dict[str, Any]], alpha: float = ALPHA, power: float = POWER,
                 margin: float = MARGIN) -> str:
    """"n seeds; detects X points; Y seeds would detect <margin> point at this spread" of one
    metric's rows, at the median spread of the readings' paired differences (identical and
    not-engaged readings, which measure nothing, left out)."""
    live = [r for r in rows if r["reading"] != "default" and not r["identical"]
            and r.get("engagement") != "not engaged" and math.isfinite(r["sd_diff"])]
    ns = sorted({r["n_pairs"] for r in rows if r["reading"] != "default"} or {r["n"] for r in rows})
    seeds = f"{ns[0]} seeds" if len(ns) == 1 else f"{ns[0]}-{ns[-1]} seeds"
    if not live:
        return f"{seeds}; no reading with a measured spread of its paired differences."
    sd = float(np.median([r["sd_diff"] for r in live]))
    n = max(r["n_pairs"] for r in live)
    det = detectable(sd / math.sqrt(n), n - 1, alpha, power)
    need = seeds_needed(sd, margin, alpha, power)
    return (f"{seeds}; detects {_points(det)}; {_n(need)} seeds would detect {_points(margin)} at this spread "
            f"(paired t-test, α = {alpha:g}, power {power:g}; median s_d of the readings' paired differences "
            f"{sd:.2f} points).")


def readings_markdown(rows: list[dict[str, Any]], dataset: str, variant: str, reference: str | None,
                      mode: str, heading: str = "#", alpha: float = ALPHA, power: float = POWER,
                      margin: float = MARGIN, modes: dict[str, str] | None = None) -> str:
    modes = modes or {}
    seeds = sorted({r["n"] for r in rows})
    seeds_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}" if seeds else "0"
    out = [f"{heading} CD-GTMLL under each reading of the paper ({dataset}, {variant})", "",
           f"{seeds_text} training seeds per row; {mode} threshold mode (Rare-F1 also at validation-tuned "
           "thresholds); values in percent. Δ: reading − default, paired by seed, with the 95 % t-interval. "
           f"detects: the smallest true Δ the paired t-test (α = {alpha:g}) detects with power {power:g} on "
           f"these seeds; seeds for ±{margin:.1f}: the seeds it would need to detect {_points(margin)} at the "
           "measured spread of the paired differences. "
           + (f"vs {reference}: reading − {reference}, paired by seed; 'paper direction' says whether it is "
              f"positive, as the paper reports CD-GTMLL above {reference}." if reference else ""), ""]
    for k in dict.fromkeys(r["metric"] for r in rows):
        part = [r for r in rows if r["metric"] == k]
        where = modes.get(k, "")
        out += [f"{heading}# {TITLES.get(k, k)}" + (f" ({where})" if where else ""), "",
                power_header(part, alpha, power, margin), "",
                f"| reading | n | mean ± std | Δ vs default [95% CI] | detects | seeds for ±{margin:.1f} | vs "
                + (reference or "–") + " [95% CI] | paper direction |",
                "|---|---|---|---|---|---|---|---|"]
        for r in part:
            moot = r["identical"] or r.get("engagement") == "not engaged"  # measures nothing
            if r["reading"] == "default":
                delta = "0 (the default)"
            elif r.get("engagement") == "not engaged":
                delta = r["engagement_note"] + ("; identical predictions" if r["identical"] else "")
            else:
                delta = ("0: identical predictions" if r["identical"] else
                         f"{_f(r['delta'])} [{_f(r['delta_low'])}, {_f(r['delta_high'])}]")
                if r.get("engagement") == "not recorded":
                    delta += f"; {r['engagement_note']}"
            out.append(f"| {r['reading']} | {r['n']} | {_f(r['mean'])} ± {_f(r['std'])} | {delta} | "
                       f"{'–' if moot else _f(r['detectable'])} | {'–' if moot else _n(r['seeds_needed'])} | "
                       f"{_f(r['vs_reference'])} [{_f(r['vs_reference_low'])}, {_f(r['vs_reference_high'])}] | "
                       f"{r['paper_direction'] or '–'} |")
        out.append("")
    return "\n".join(out)


def _metric_modes(metrics: Sequence[str], mode: str) -> dict[str, tuple[str, str]]:
    """metric key -> (metric in the block, block) for the table's ``mode``; ``rare_f1_tuned`` is
    left out when the mode is itself ``adaptive``."""
    out = {}
    for k in metrics:
        metric, block = LOOKUP.get(k, (k, None))
        block = block or mode
        if k in LOOKUP and block == mode:
            continue
        out[k] = (metric, block)
    return out


def readings_table(run_dirs: Sequence[str | Path], out: Path, method: str = "CD-GTMLL", reference: str | None = "BCE",
                   mode: str = "global", metrics: Sequence[str] = METRICS, alpha: float = ALPHA,
                   power: float = POWER, margin: float = MARGIN) -> list[Path]:
    """One table per (dataset, variant) among the runs (a study may name several datasets):
    rows of every setting in one CSV (columns ``dataset``, ``variant`` first), one section per
    setting in the markdown. A metric whose block some run lacks (``rare_f1_tuned`` of runs
    evaluated without the ``adaptive`` block) is left out."""
    runs = parse_runs(run_dirs)
    settings = sorted({(r.dataset, r.variant) for r in runs})
    log = SourceLog()
    rows: list[dict[str, Any]] = []
    sections = []
    lookup = _metric_modes(metrics, mode)
    for dataset, variant in settings:
        here = [r for r in runs if (r.dataset, r.variant) == (dataset, variant)]
        values, shas, blocks = {}, {}, {}
        for r in here:
            m = read_metrics(r, log)
            row = {}
            for k, (metric, block) in lookup.items():
                try:
                    b = metric_block(m, block)
                except ValueError:
                    if k in LOOKUP:
                        continue
                    raise
                blocks.setdefault(k, next((key for key, val in m.items() if val is b), block))
                row[k] = metric_value(m, block, metric, r.path)
            values[(r.method, r.seed)] = row
            shas[(r.method, r.seed)] = predictions_sha256(m)
        if not any(m == method for m, _ in values):
            raise ValueError(f"no run of the default reading '{method}' among the runs of {dataset}/{variant}")
        engagement = {}
        base_runs = [r for r in here if r.method == method]
        for mth in dict.fromkeys(r.method for r in here):
            if mth != method and mth.startswith(f"{method}@") and "clip_scope" in reading_keys(mth):
                engagement[mth] = clip_engagement([*base_runs, *(r for r in here if r.method == mth)], log)
        part = readings_rows(values, method, reference, list(lookup), shas, alpha, power, margin, engagement)
        rows += [{"dataset": dataset, "variant": variant, **r} for r in part]
        modes = {k: ("validation-tuned per-label thresholds" if b == "adaptive" else f"threshold mode {b}")
                 for k, b in blocks.items()}
        sections.append(readings_markdown(part, dataset, variant, reference, mode,
                                          heading="#" if len(settings) == 1 else "##", alpha=alpha, power=power,
                                          margin=margin, modes=modes))
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_rows(out.with_suffix(".csv"), rows)
    md = sections[0] if len(sections) == 1 else "\n".join(["# CD-GTMLL under each reading of the paper", "", *sections])
    atomic_write(out.with_suffix(".md"), md + "\n")
    write_json(out.with_suffix(".sources.json"), log.to_json(out.name, method=method, reference=reference, mode=mode,
                                                             alpha=alpha, power=power, margin=margin))
    return [out.with_suffix(s) for s in (".csv", ".md", ".sources.json")]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdgtmll.figures.studies.readings", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", required=True, help=".../<dataset>/<variant>/<method>/seed<k> dirs")
    ap.add_argument("--out", required=True, type=Path, help="output stem (no extension)")
    ap.add_argument("--method", default="CD-GTMLL", help="the default reading; the others are <method>@<key>=<value>")
    ap.add_argument("--reference", default="BCE", help="the row whose comparison gives the paper's direction")
    ap.add_argument("--mode", default="global")
    ap.add_argument("--alpha", type=float, default=ALPHA, help="level of the paired t-test (claims.alpha)")
    ap.add_argument("--power", type=float, default=POWER, help="power of the detectable effect (claims.power)")
    ap.add_argument("--margin", type=float, default=MARGIN,
                    help="points the seeds needed are for (claims.equivalence_margin)")
    ap.add_argument("--alias", nargs=2, action="append", default=[], metavar=("SETTING_DIR", "RUN_DIR"),
                    help="a setting whose run is another's: its seed folders are read from RUN_DIR")
    a = ap.parse_args(argv)
    try:
        runs = parse_runs(a.runs, dict(a.alias))
        readings_table(runs, a.out, a.method, a.reference or None, a.mode, alpha=a.alpha, power=a.power,
                       margin=a.margin)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
