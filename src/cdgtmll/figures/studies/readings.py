r"""The ``readings`` study: CD-GTMLL under each reading of the paper it leaves open, one change at
a time, against the default (docs/methods.md, "Choices the paper leaves open").

``python -m cdgtmll.figures.studies.build readings --runs <seed dirs> --method CD-GTMLL
--reference BCE --out figures/readings``

Runs: the default ``<method>``, each reading ``<method>@<key>=<value>`` and the reference row
(BCE: the paper reports CD-GTMLL above it on every metric of Table 1), all on one dataset and
variant, with the same training seeds. Per reading and metric (Micro-F1, Macro-F1, Rare-F1, mAP;
App. E.4, the global threshold mode):

* ``mean`` ± ``std`` (sample, ddof 1) over the seeds, in percent;
* ``delta`` = mean over seeds of (reading - default), paired by training seed, with the 95 %
  t-interval ``delta ± t_{0.975, n-1} s_d / sqrt(n)`` (``s_d`` the sample std of the paired
  differences; no interval with fewer than 2 pairs);
* ``vs_reference`` = the same paired difference against the reference row, and ``paper_direction``
  = ``yes`` when it is positive (the direction the paper reports: CD-GTMLL above BCE), ``no`` when
  negative, ``equal`` when 0, with ``(significant)`` when its interval excludes 0;
* ``identical``: the reading's predictions are byte-identical to the default's for every seed
  (sha256 of ``predictions.npz`` recorded in each ``metrics.json``): the reading changes nothing
  on these runs.

Writes ``<out>.csv`` (one row per reading and metric), ``<out>.md`` (one table per metric) and
``<out>.sources.json`` (every metrics.json read, with its sha256, for ``cdgtmll audit``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from cdgtmll.figures.studies.runs import (
    SourceLog,
    _write_rows,
    metric_value,
    parse_runs,
    predictions_sha256,
    read_metrics,
)
from cdgtmll.io import atomic_write, write_json

METRICS = ("micro_f1", "macro_f1", "rare_f1", "mAP")
TITLES = {"micro_f1": "Micro-F1", "macro_f1": "Macro-F1", "rare_f1": "Rare-F1", "mAP": "mAP"}


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


def reading_name(method: str, base: str) -> str:
    """``default`` for the base method, else the ``key=value`` after its ``@``."""
    return "default" if method == base else method.split("@", 1)[1] if method.startswith(f"{base}@") else method


def readings_rows(values: dict[tuple[str, int], dict[str, float]], base: str, reference: str | None,
                  metrics: Sequence[str] = METRICS, shas: dict[tuple[str, int], str | None] | None = None,
                  ) -> list[dict[str, Any]]:
    """One row per (reading, metric) from ``values[(method, seed)][metric]`` (fractions);
    ``shas[(method, seed)]``: the predictions' sha256, for ``identical``."""
    shas = shas or {}
    methods = list(dict.fromkeys(m for m, _ in values))
    readings = [m for m in methods if m == base or m.startswith(f"{base}@")]
    rows = []
    for m in readings:
        seeds = sorted(s for mm, s in values if mm == m)
        identical = m != base and bool(seeds) and all(
            shas.get((m, s)) is not None and shas.get((m, s)) == shas.get((base, s)) for s in seeds)
        for k in metrics:
            v = [values[(m, s)][k] for s in seeds]
            base_d = [values[(m, s)][k] - values[(base, s)][k] for s in seeds if (base, s) in values]
            ref_d = ([values[(m, s)][k] - values[(reference, s)][k] for s in seeds if (reference, s) in values]
                     if reference else [])
            d, lo, hi = paired_interval(base_d)
            r, rlo, rhi = paired_interval(ref_d)
            sig = not (math.isnan(rlo) or rlo <= 0 <= rhi)
            direction = "" if math.isnan(r) else ("yes" if r > 0 else "no" if r < 0 else "equal") + (
                " (significant)" if sig else "")
            arr = np.asarray(v, dtype=np.float64)
            rows.append({
                "reading": reading_name(m, base), "method": m, "metric": k, "n": len(v),
                "mean": 100 * float(arr.mean()) if len(v) else math.nan,
                "std": 100 * float(arr.std(ddof=1)) if len(v) > 1 else math.nan,
                "delta": 100 * d, "delta_low": 100 * lo, "delta_high": 100 * hi,
                "vs_reference": 100 * r, "vs_reference_low": 100 * rlo, "vs_reference_high": 100 * rhi,
                "paper_direction": direction, "identical": identical,
            })
    return rows


def _f(x: float, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def readings_markdown(rows: list[dict[str, Any]], dataset: str, variant: str, reference: str | None,
                      mode: str, heading: str = "#") -> str:
    seeds = max((r["n"] for r in rows), default=0)
    out = [f"{heading} CD-GTMLL under each reading of the paper ({dataset}, {variant})", "",
           f"{seeds} training seeds; {mode} threshold mode; values in percent. Δ: reading − default, paired "
           "by seed, with the 95 % t-interval. "
           + (f"vs {reference}: reading − {reference}, paired by seed; 'paper direction' says whether it is "
              f"positive, as the paper reports CD-GTMLL above {reference}." if reference else ""), ""]
    for k in dict.fromkeys(r["metric"] for r in rows):
        out += [f"{heading}# {TITLES.get(k, k)}", "",
                "| reading | mean ± std | Δ vs default [95% CI] | vs " + (reference or "–") + " [95% CI] | paper direction |",
                "|---|---|---|---|---|"]
        for r in (r for r in rows if r["metric"] == k):
            delta = "0 (the default)" if r["reading"] == "default" else (
                "0: identical predictions" if r["identical"] else
                f"{_f(r['delta'])} [{_f(r['delta_low'])}, {_f(r['delta_high'])}]")
            out.append(f"| {r['reading']} | {_f(r['mean'])} ± {_f(r['std'])} | {delta} | "
                       f"{_f(r['vs_reference'])} [{_f(r['vs_reference_low'])}, {_f(r['vs_reference_high'])}] | "
                       f"{r['paper_direction'] or '–'} |")
        out.append("")
    return "\n".join(out)


def readings_table(run_dirs: Sequence[str | Path], out: Path, method: str = "CD-GTMLL", reference: str | None = "BCE",
                   mode: str = "global", metrics: Sequence[str] = METRICS) -> list[Path]:
    """One table per (dataset, variant) among the runs (a study may name several datasets):
    rows of every setting in one CSV (columns ``dataset``, ``variant`` first), one section per
    setting in the markdown."""
    runs = parse_runs(run_dirs)
    settings = sorted({(r.dataset, r.variant) for r in runs})
    log = SourceLog()
    rows: list[dict[str, Any]] = []
    sections = []
    for dataset, variant in settings:
        values, shas = {}, {}
        for r in (r for r in runs if (r.dataset, r.variant) == (dataset, variant)):
            m = read_metrics(r, log)
            values[(r.method, r.seed)] = {k: metric_value(m, mode, k, r.path) for k in metrics}
            shas[(r.method, r.seed)] = predictions_sha256(m)
        if not any(m == method for m, _ in values):
            raise ValueError(f"no run of the default reading '{method}' among the runs of {dataset}/{variant}")
        part = readings_rows(values, method, reference, metrics, shas)
        rows += [{"dataset": dataset, "variant": variant, **r} for r in part]
        sections.append(readings_markdown(part, dataset, variant, reference, mode,
                                          heading="#" if len(settings) == 1 else "##"))
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_rows(out.with_suffix(".csv"), rows)
    md = sections[0] if len(sections) == 1 else "\n".join(["# CD-GTMLL under each reading of the paper", "", *sections])
    atomic_write(out.with_suffix(".md"), md + "\n")
    write_json(out.with_suffix(".sources.json"), log.to_json(out.name, method=method, reference=reference, mode=mode))
    return [out.with_suffix(s) for s in (".csv", ".md", ".sources.json")]
