"""Method-comparison study figures of Sec. 5.3: ``ablation`` (:func:`ablation_figure`),
``robustness`` (:func:`robustness_figure`) and ``sweep`` (:func:`sweep_figure`), each
with the pure computation of its rows (:func:`ablation_rows`, :func:`robustness_rows`,
:func:`sweep_rows`). All read the metrics blocks of ``metrics.json``. The subcommands are
documented in :mod:`cdgtmll.figures.studies.build`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cdgtmll.figures.intervals import FRACTION, FRACTION_DIFF, POINTS_DIFF, interval_text, seed_interval
from cdgtmll.figures.studies.runs import (
    AS_WRITTEN,
    METHOD_OUTPUTS,
    RunDir,
    SourceLog,
    _grid,
    _pct,
    common_seeds,
    identical_predictions,
    mean_std,
    metric_value,
    parse_runs,
    predictions_sha256,
    read_metrics,
    reading_order,
    save_figure,
    split_reading,
)
from cdgtmll.figures.style import (
    MIN_SPAN_PP,
    NOTE_PT,
    ONE_COLUMN,
    PARAM_LABELS,
    FigureStyle,
    chars_per_line,
    figure_style,
    footnote,
    honest_ylim,
    legend_below,
    method_handles,
    n_labels,
    seed_bars,
    titles,
    wrap,
)

METRIC_LABELS = {
    "mAP": "mAP", "micro_f1": "Micro-F1", "macro_f1": "Macro-F1", "rare_f1": "Rare-F1",
    "p@1": "P@1", "p@3": "P@3", "p@5": "P@5",
}  # fmt: skip
KIND_PREFIX = {"noise": "N", "occlusion": "O"}

_CORRUPT_RE = re.compile(r"^([A-Z])(\d+(?:\.\d+)?)-s(\d+)$")
_SWEEP_RE = re.compile(r"^(?P<base>.+?)@(?P<param>[A-Za-z_]\w*)=(?P<value>[^@]+)$")


# ---------------------------------------------------------------------- computations


def ablation_rows(values: list[dict[str, Any]], metrics: Sequence[str], full: str,
                  order: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Aggregate per-run metric values into one row per (setting, method, metric).

    ``values``: ``{"setting", "method", "seed", <metric>: value, ...}`` per run, with
    ``"reading"`` when the study ran under several readings (default :data:`AS_WRITTEN`). The gap
    to the full model is ``mean(method) - mean(full)`` (same setting, reading and metric; ``None``
    on the full model's own rows). ``ci_low``, ``ci_high``: the error bar the figure draws
    (:func:`~cdgtmll.figures.intervals.seed_interval`, fractions). Methods are ordered by
    ``order`` then by name.
    """
    rows = []
    readings = reading_order([v.get("reading", AS_WRITTEN) for v in values])
    panels = sorted({(v["setting"], v.get("reading", AS_WRITTEN)) for v in values},
                    key=lambda p: (p[0], readings.index(p[1])))
    for setting, reading in panels:
        vs = [v for v in values if v["setting"] == setting and v.get("reading", AS_WRITTEN) == reading]
        methods = _ordered({v["method"] for v in vs}, order)
        if full not in methods:
            under = "" if reading == AS_WRITTEN else f" under {reading}"
            raise ValueError(f"{setting}: full model '{full}'{under} not among the runs ({methods})")
        stats = {}
        for m in methods:
            seeds = sorted(v["seed"] for v in vs if v["method"] == m)
            for met in metrics:
                xs = [v[met] for v in vs if v["method"] == m]
                stats[m, met] = (*mean_std(xs), seeds, seed_interval(xs, FRACTION))
        for m in methods:
            for met in metrics:
                mu, sd, n, seeds, (lo, hi) = stats[m, met]
                rows.append({
                    "setting": setting, "reading": reading, "method": m, "metric": met, "mean": mu, "std": sd,
                    "n_seeds": n, "ci_low": lo, "ci_high": hi, "error_bars": interval_text(FRACTION),
                    "seeds": ";".join(map(str, seeds)), "full_method": full,
                    "gap_to_full": None if m == full else mu - stats[full, met][0],
                })
    return rows


def _ordered(names: Iterable[str], order: Sequence[str]) -> list[str]:
    names = set(names)
    return [m for m in order if m in names] + sorted(names - set(order))


def corruption_level(variant: str, kind: str) -> float | None:
    """``N0.10-s0`` -> 0.10 for ``noise``, ``O0.10-s0`` -> 0.10 for ``occlusion``; None otherwise."""
    m = _CORRUPT_RE.match(variant)
    if not m or m.group(1) != KIND_PREFIX[kind]:
        return None
    return float(m.group(2))


def corruption_sampling_seed(variant: str) -> int | None:
    m = _CORRUPT_RE.match(variant)
    return int(m.group(3)) if m else None


def robustness_pairs(values: list[dict[str, Any]], clean_variant: str, kind: str) -> list[dict[str, Any]]:
    """One row per (clean run, corrupted run) pair: ``{"dataset", "method", "level", "pair",
    "clean", "corrupted", "degradation"}`` with ``degradation = clean - corrupted``.

    ``values``: ``{"dataset", "variant", "method", "seed", "value"}`` per run (clean and
    corrupted variants of ``kind``). Each corrupted run (any sampling seed) is paired with
    the clean run of the same dataset, method and training seed; a missing partner raises.
    """
    clean = {(v["dataset"], v["method"], v["seed"]): v["value"] for v in values if v["variant"] == clean_variant}
    pairs, unpaired = [], []
    for v in values:
        if v["variant"] == clean_variant:
            continue
        level = corruption_level(v["variant"], kind)
        if level is None:
            raise ValueError(f"variant '{v['variant']}' is neither '{clean_variant}' nor a {kind} variant")
        key = (v["dataset"], v["method"], v["seed"])
        if key not in clean:
            unpaired.append(f"{v['dataset']}/{v['variant']}/{v['method']} seed{v['seed']}")
            continue
        pairs.append({"dataset": v["dataset"], "method": v["method"], "level": level,
                      "pair": f"seed{v['seed']}/s{corruption_sampling_seed(v['variant'])}",
                      "clean": clean[key], "corrupted": v["value"], "degradation": clean[key] - v["value"]})
    if unpaired:
        raise ValueError(f"no clean ('{clean_variant}') run with the same training seed for: {', '.join(unpaired)}")
    return sorted(pairs, key=lambda p: (p["dataset"], p["method"], p["level"], p["pair"]))


def robustness_rows(values: list[dict[str, Any]], clean_variant: str, kind: str) -> list[dict[str, Any]]:
    """Degradation ``clean - corrupted`` per (dataset, method, level), paired by training seed
    (:func:`robustness_pairs`): mean ± std over the pairs, and the error bar the figure draws
    (``ci_low``, ``ci_high``: :func:`~cdgtmll.figures.intervals.seed_interval` cut to [-1, 1])."""
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for p in robustness_pairs(values, clean_variant, kind):
        groups.setdefault((p["dataset"], p["method"], p["level"]), []).append(p)
    rows = []
    for (ds, method, level), ps in sorted(groups.items()):
        mu, sd, n = mean_std([p["degradation"] for p in ps])
        lo, hi = seed_interval([p["degradation"] for p in ps], FRACTION_DIFF)
        rows.append({
            "dataset": ds, "method": method, "kind": kind, "level": level,
            "degradation_mean": mu, "degradation_std": sd, "n_pairs": n,
            "degradation_ci_low": lo, "degradation_ci_high": hi, "error_bars": interval_text(FRACTION_DIFF),
            "clean_mean": mean_std([p["clean"] for p in ps])[0],
            "corrupted_mean": mean_std([p["corrupted"] for p in ps])[0],
            "pairs": ";".join(p["pair"] for p in ps), "note": "",
        })
    return rows


def parse_sweep_method(method: str) -> tuple[str, str, str] | None:
    """``CD-GTMLL@alpha=0.2`` -> ("CD-GTMLL", "alpha", "0.2"); None without ``@param=``."""
    m = _SWEEP_RE.match(method)
    return (m["base"], m["param"], m["value"]) if m else None


def sweep_rows(values: list[dict[str, Any]], param: str, metrics: Sequence[str]) -> list[dict[str, Any]]:
    """``values``: ``{"setting", "base", "value", "method", "seed", <metric>: ...}`` per run, with
    ``"reading"`` when the sweep ran under several readings (default :data:`AS_WRITTEN`); one row
    per (setting, reading, base, value, metric), sorted by value within a reading (default first)."""
    rows = []
    order = reading_order([v.get("reading", AS_WRITTEN) for v in values])
    keys = sorted({(v["setting"], v.get("reading", AS_WRITTEN), v["base"], v["value"]) for v in values},
                  key=lambda k: (k[0], order.index(k[1]), k[2], k[3]))
    for setting, reading, base, value in keys:
        vs = [v for v in values
              if (v["setting"], v.get("reading", AS_WRITTEN), v["base"], v["value"]) == (setting, reading, base, value)]
        for met in metrics:
            mu, sd, n = mean_std([v[met] for v in vs])
            lo, hi = seed_interval([v[met] for v in vs], FRACTION)
            rows.append({
                "setting": setting, "reading": reading, "base_method": base, "param": param, "value": value,
                "metric": met,
                "mean": mu, "std": sd, "n_seeds": n, "ci_low": lo, "ci_high": hi,
                "error_bars": interval_text(FRACTION), "seeds": ";".join(str(v["seed"]) for v in sorted(vs, key=lambda v: v["seed"])),
                "methods": ";".join(sorted({v["method"] for v in vs})),
            })
    return rows


def collect_ablation(runs: list[RunDir], mode: str, metrics: Sequence[str], log: SourceLog,
                     readings: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Per run: setting, method (less its reading), reading (:func:`split_reading` over
    ``readings``), seed, the predictions' sha256 and the metrics."""
    out = []
    for r in runs:
        m = read_metrics(r, log)
        method, reading = split_reading(r.method, readings)
        out.append({"setting": r.setting, "method": method, "reading": reading, "seed": r.seed,
                    "pred_sha256": predictions_sha256(m),
                    **{k: metric_value(m, mode, k, r.path) for k in metrics}})
    return out


# ------------------------------------------------------------------------ subcommands


def ablation_figure(run_dirs: Sequence[str | Path], out: Path, full: str = "CD-GTMLL", order: Sequence[str] = (),
                    mode: str = "global", metrics: Sequence[str] = ("mAP", "micro_f1", "rare_f1"),
                    title: str = "", style: FigureStyle | None = None,
                    readings: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Bars per method and metric, one panel per setting; with ``readings`` (the study's
    ``under``: runs named ``<method>@<reading>``), one row of panels per setting and one column
    per reading (the default, :data:`AS_WRITTEN`, first), the gaps to ``full`` within a reading."""
    runs = parse_runs(run_dirs)
    log = SourceLog()
    values = common_seeds(collect_ablation(runs, mode, metrics, log, readings), "method", ("setting", "reading"))
    missing = [m for m in order if m not in {v["method"] for v in values}]
    if missing:
        raise ValueError(f"--order names method(s) without runs: {missing}")
    style = style or FigureStyle()
    style.add_methods(v["method"] for v in values)
    rows = ablation_rows(values, metrics, full, order)
    panels = list(dict.fromkeys((r["setting"], r["reading"]) for r in rows))  # setting, then reading order
    settings = list(dict.fromkeys(s for s, _ in panels))
    shown = [r for r in reading_order([r for _, r in panels]) if any(p[1] == r for p in panels)]
    several = len(shown) > 1
    with figure_style():
        n_methods = max(len({r["method"] for r in rows if (r["setting"], r["reading"]) == p}) for p in panels)
        pw = max(ONE_COLUMN, 0.24 * n_methods * len(metrics) + 0.9)
        if several:  # a row per setting, a column per reading (a setting without a reading: empty cell)
            fig, grid = _grid(len(settings) * len(shown), w=pw, h=2.5, rows=len(settings))
            axes = [grid[i * len(shown) + j] for i in range(len(settings)) for j in range(len(shown))]
            cells = [(s, r) for s in settings for r in shown]
        else:
            fig, axes = _grid(len(panels), w=pw, h=2.5)
            cells = panels
        for ax, cell in zip(axes, cells):
            if cell not in panels:
                ax.set_visible(False)
                continue
            _ablation_panel(fig, ax, cell, rows, values, metrics, full, style)
        if several:  # the readings side by side on one y scale per setting
            for s in settings:
                row = [ax for ax, c in zip(axes, cells) if c[0] == s and c in panels]
                lo, hi = min(ax.get_ylim()[0] for ax in row), max(ax.get_ylim()[1] for ax in row)
                for ax in row:
                    ax.set_ylim(lo, hi)
        all_methods = list(dict.fromkeys(r["method"] for r in rows))  # --order, then by name
        ns = {m: min(r["n_seeds"] for r in rows if r["method"] == m) for m in all_methods}
        legend_below(fig, *method_handles(all_methods, style, n_labels(all_methods, ns)), ncol=min(3, len(all_methods)))
        same = identical_predictions(values, "method", ("setting", "reading"))
        _mark_identical(rows, same, "method", ("setting", "reading"))
        if several:
            panel_titles = [(f"{style.setting(*s.split('/', 1))}: " if len(settings) > 1 else "") + _reading_title(r)
                            for s, r in cells]
            lead = f"{style.setting(*settings[0].split('/', 1))}: " if len(settings) == 1 else ""
            note = (f"{lead}{full} and its ablations under each reading; mean over {_seeds_text(rows)} "
                    f"(dots: runs); {interval_text()}; above the bars: difference to {full} under the same reading (pp); "
                    f"{_mode_text(mode, runs[0], log)}"
                    f"{_identical_text(same, ' = '.join, lambda k: _within_text(k, style))}")
        else:
            panel_titles = [style.setting(*s.split("/", 1)) for s, _ in cells]
            note = (f"mean over {_seeds_text(rows)} (dots: runs); {interval_text()}; above the bars: difference "
                    f"to {full} (pp); "
                    f"{_mode_text(mode, runs[0], log)}{_identical_text(same, ' = '.join)}")
        titles(fig, axes, panel_titles, note, title, pw)
        save_figure(fig, out, rows, log, mode=mode, full=full, identical_predictions=_identical_json(same),
                    error_bars=interval_text(),
                    **({"readings": shown} if several else {}))
    return rows


def _reading_title(reading: str) -> str:
    """A panel title for a reading: ``as written (E.1)``, ``under player_backbones=separate``."""
    return reading if reading == AS_WRITTEN else f"under {reading}"


def _within_text(key: tuple, style: FigureStyle) -> str:
    """``('yeast/clean', 'player_backbones=separate'[, 'CD-GTMLL'])`` -> ``Yeast, player_backbones=separate``."""
    setting, *rest = key
    return ", ".join([style.setting(*setting.split("/", 1)), *map(str, rest)])


def _ablation_panel(fig: Any, ax: Any, panel: tuple[str, str], rows: list[dict[str, Any]],
                    values: list[dict[str, Any]], metrics: Sequence[str], full: str, style: FigureStyle) -> None:
    """One (setting, reading)'s bars: each metric per method, the gap to ``full`` above the bars."""
    setting, reading = panel
    rs = [r for r in rows if (r["setting"], r["reading"]) == panel]
    vs = [v for v in values if (v["setting"], v.get("reading", AS_WRITTEN)) == panel]
    methods = list(dict.fromkeys(r["method"] for r in rs))
    long = [{"method": v["method"], "metric": METRIC_LABELS.get(k, k), "value": _pct(v[k])} for v in vs for k in metrics]
    xlabels = [METRIC_LABELS.get(k, k) for k in metrics]
    bars = seed_bars(ax, long, "metric", xlabels, methods, style)
    for m, container in zip(methods, bars):
        if m == full:
            continue
        for bar, k in zip(container, metrics):
            r = next(r for r in rs if r["method"] == m and r["metric"] == k)
            tops = [_pct(r["ci_high"]), _pct(r["mean"]), *(_pct(v[k]) for v in vs if v["method"] == m)]
            top = max((t for t in tops if math.isfinite(t)), default=float("nan"))
            if math.isfinite(top):
                ax.annotate(_gap_text(r["gap_to_full"]), (bar.get_x() + bar.get_width() / 2, top),
                            xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                            fontsize=NOTE_PT, rotation=90)
    ax.set(xlabel="", ylabel="score (%)")
    tops = [_pct(r["mean"]) for r in rs] + [_pct(r["ci_high"]) for r in rs]
    tops += [x["value"] for x in long]
    finite = [t for t in tops if math.isfinite(t)]
    if finite:
        # room above the highest bar for a rotated gap label ("−12.3" at NOTE_PT plus its
        # offset: about 5 * NOTE_PT points), in the axis' printed height, not a fraction
        # of the data (a fraction clipped labels of bars near the top)
        lo, hi = min(0.0, min(finite)), max(finite)
        h_pt = ax.get_window_extent().height * 72 / fig.dpi
        need = 5 * NOTE_PT
        top = (hi * h_pt - need * lo) / (h_pt - need) if h_pt > 2 * need else hi * 1.3
        ax.set_ylim(lo, max(top, hi * 1.05, lo + MIN_SPAN_PP))  # never a zoom onto a sliver
    ax.grid(axis="x", visible=False)


def _mode_text(mode: str, run: RunDir | None = None, log: SourceLog | None = None) -> str:
    """How the scores were thresholded, for the figure note: ``global`` reads the single
    ``global@<tau>`` block of ``run``'s metrics to name tau."""
    if mode == "global" and run is not None and log is not None:
        keys = [k for k in read_metrics(run, log) if k.startswith("global@")]
        mode = keys[0] if len(keys) == 1 else mode
    if mode == "adaptive":
        return "per-label thresholds tuned on validation"
    if mode.startswith("global@"):
        return f"threshold {mode.split('@', 1)[1]} on every label"
    return "global threshold" if mode == "global" else mode


def _seeds_text(rows: list[dict[str, Any]], key: str = "n_seeds", what: str = "training seeds") -> str:
    ns = sorted({int(r[key]) for r in rows if r.get(key)})
    if not ns:
        return what
    return f"{ns[0]} {what}" if len(ns) == 1 else f"{ns[0]}-{ns[-1]} {what} (n per bar in the legend)"


def _gap_text(gap: float) -> str:
    t = f"{100 * gap:+.1f}"
    return "0.0" if t in ("+0.0", "-0.0") else t.replace("-", "\u2212")  # a real minus sign


def _dataset_kind(dataset: str) -> str | None:
    try:
        from cdgtmll.data.registry import get_spec

        return get_spec(dataset).kind
    except Exception:  # noqa: BLE001 - unknown (e.g. config-defined) datasets
        return None


def robustness_figure(run_dirs: Sequence[str | Path], out: Path, kind: str, clean_variant: str = "clean",
                      mode: str = "global", metric: str = "rare_f1", title: str = "",
                      style: FigureStyle | None = None) -> list[dict[str, Any]]:
    runs = parse_runs(run_dirs)
    style = style or FigureStyle()
    other = {p for k, p in KIND_PREFIX.items() if k != kind}
    used = []
    for r in runs:
        m = _CORRUPT_RE.match(r.variant)
        if r.variant != clean_variant and m and m.group(1) in other:
            continue  # the other corruption type: not this figure's runs
        used.append(r)
    style.add_methods(r.method for r in used)
    datasets = sorted({r.dataset for r in used})
    corrupted = {r.dataset for r in used if r.variant != clean_variant}
    log = SourceLog()
    notes = {}
    for ds in datasets:
        if ds in corrupted:
            continue
        if kind == "occlusion":
            dkind = _dataset_kind(ds)
            if dkind == "image":
                raise ValueError(f"{ds}: image dataset but no occlusion (O*) runs were given")
            notes[ds] = (f"no images: occlusion not applicable to {ds}" if dkind is not None
                         else f"no occlusion runs: occlusion not applicable to {ds} (dataset kind unknown)")
        else:
            raise ValueError(f"{ds}: no {kind} runs (variants N<rate>-s<seed>) were given")
    values = []
    for r in used:
        if r.dataset in notes:
            continue
        values.append({"dataset": r.dataset, "variant": r.variant, "method": r.method, "seed": r.seed,
                       "value": metric_value(read_metrics(r, log), mode, metric, r.path)})
    pairs = robustness_pairs(values, clean_variant, kind)
    rows = robustness_rows(values, clean_variant, kind)
    for ds, note in notes.items():
        rows.append({"dataset": ds, "method": None, "kind": kind, "level": None, "degradation_mean": None,
                     "degradation_std": None, "n_pairs": 0, "clean_mean": None, "corrupted_mean": None,
                     "pairs": "", "note": note})
    mlabel = METRIC_LABELS.get(metric, metric)
    what = {"noise": "label noise", "occlusion": "occlusion"}[kind]
    with figure_style():
        if len(notes) == len(datasets):  # nothing to draw: a short figure that says why
            pw = ONE_COLUMN
            fig, axes = _grid(len(datasets), w=pw, h=0.8)
        else:
            n_bars = max(len({(r["method"], r["level"]) for r in rows if r["dataset"] == ds}) for ds in datasets)
            pw = max(ONE_COLUMN, 0.24 * n_bars + 0.9)
            fig, axes = _grid(len(datasets), w=pw, h=2.5)
        for ax, ds in zip(axes, datasets):
            name = style.dataset(ds)
            if ds in notes:
                why = ("it has no images" if notes[ds].startswith("no images") else
                       "no occlusion runs were made (dataset kind unknown)")
                ax.text(0.5, 0.5, wrap(f"Occlusion does not apply to {name}: {why}.", chars_per_line(pw, 9)),
                        ha="center", va="center", transform=ax.transAxes, fontsize=9)
                ax.set_axis_off()
                continue
            rs = [r for r in rows if r["dataset"] == ds]
            levels = sorted({r["level"] for r in rs})
            methods = sorted({r["method"] for r in rs}, key=style.index)
            xlab = [f"{100 * lv:g}%" for lv in levels]
            long = [{"level": f"{100 * p['level']:g}%", "method": p["method"], "value": _pct(p["degradation"])}
                    for p in pairs if p["dataset"] == ds]
            seed_bars(ax, long, "level", xlab, methods, style, POINTS_DIFF)
            ax.axhline(0, color="0.15", linewidth=0.7, zorder=2.5)
            honest_ylim(ax, floor=-100.0)
            ax.set(xlabel={"noise": "noise rate ρ (training positives flipped to 0)",
                           "occlusion": "occluded share γ of each training image"}[kind],
                   ylabel=f"{mlabel} drop (pp)")
            ax.grid(axis="x", visible=False)
        drawn = [r for r in rows if r["method"] is not None]
        note = ""
        if drawn:
            all_methods = sorted({r["method"] for r in drawn}, key=style.index)
            ns = {m: min(r["n_pairs"] for r in drawn if r["method"] == m) for m in all_methods}
            legend_below(fig, *method_handles(all_methods, style, n_labels(all_methods, ns)),
                         ncol=min(4, len(all_methods)))
            note = (f"drop = {mlabel} clean − {'noisy' if kind == 'noise' else 'occluded'}, same training seed; "
                    f"mean over {_seeds_text(drawn, 'n_pairs', 'pairs')} (dots: pairs); {interval_text(POINTS_DIFF)}; "
                    f"{_mode_text(mode, next(r for r in used if r.dataset not in notes), log)}")
        titles(fig, axes, [f"{style.dataset(ds)}: {what}" for ds in datasets], note, title, pw)
        save_figure(fig, out, rows, log, mode=mode, metric=metric, kind=kind, clean_variant=clean_variant,
                    error_bars=interval_text(POINTS_DIFF),
                    notes=notes or None)
    return rows


def _sweep_value(s: str, param: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"sweep value '{s}' of '{param}' is not a number") from None
    return v


#: the caption of the as-written N sweep when its N >= 2 runs are byte-identical for every seed
FLAT_BY_CONSTRUCTION = ("flat by construction under E.1 as written: N ≥ 2 is one optimisation problem "
                        "(docs/methods.md)")


def sweep_figure(run_dirs: Sequence[str | Path], out: Path, param: str, metrics: Sequence[str] = ("rare_f1",),
                 mode: str = "global", title: str = "", style: FigureStyle | None = None,
                 readings: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Metric vs the swept value: a row of panels (one per metric) per setting; with
    ``readings`` (the study's ``under``: runs named ``<base>@<param>=<v>,<reading>``), a column
    per (metric, reading), the default (:data:`AS_WRITTEN`) first, on one y scale per metric.
    The as-written ``n_players`` panel whose N >= 2 runs gave byte-identical predictions for every
    seed says it is flat by construction (:data:`FLAT_BY_CONSTRUCTION`; CSV ``flat_by_construction``)."""
    runs = parse_runs(run_dirs)
    log = SourceLog()
    values = []
    for r in runs:
        name, reading = split_reading(r.method, readings)
        parsed = parse_sweep_method(name)
        hp_value = None
        if (r.path / METHOD_OUTPUTS).is_file():
            hp = json.loads(log.read(r, METHOD_OUTPUTS).decode("utf-8")).get("hparams", {})
            if param in hp and hp[param] is not None:
                hp_value = float(hp[param])
        if parsed is not None:
            base, p, s = parsed
            if p != param:
                raise ValueError(f"{r.path}: method '{r.method}' sweeps '{p}', not '{param}'")
            value = _sweep_value(s, param)
            if hp_value is not None and not math.isclose(value, hp_value, rel_tol=1e-9, abs_tol=1e-12):
                raise ValueError(f"{r.path}: method name says {param}={value} but {METHOD_OUTPUTS} "
                                 f"records {param}={hp_value}")
        else:
            if hp_value is None:
                raise ValueError(f"{r.path}: method '{r.method}' has no '@{param}=<value>' and no "
                                 f"{METHOD_OUTPUTS} hparams['{param}']")
            base, value = name, hp_value
        m = read_metrics(r, log)
        values.append({"setting": r.setting, "reading": reading, "base": base, "value": value, "method": r.method,
                       "seed": r.seed, "pred_sha256": predictions_sha256(m),
                       **{k: metric_value(m, mode, k, r.path) for k in metrics}})
    values = common_seeds(values, "value", ("setting", "reading", "base"))
    rows = sweep_rows(values, param, metrics)
    style = style or FigureStyle()
    style.add_methods(v["base"] for v in values)
    settings = sorted({r["setting"] for r in rows})
    shown = [x for x in reading_order([v["reading"] for v in values]) if any(v["reading"] == x for v in values)]
    several = len(shown) > 1
    plabel = PARAM_LABELS.get(param, param)
    symbol = plabel.split()[-1]  # "α", "N"; an unnamed parameter: its name
    same = identical_predictions(values, "value", ("setting", "reading", "base"))
    flat_by_construction = _flat_by_construction(values, same, param)
    # a row per (setting, metric) and a column per reading; one reading: a row per setting, a column per metric
    cells = ([(s, met, x) for s in settings for met in metrics for x in shown] if several else
             [(s, met, shown[0]) for s in settings for met in metrics])
    n_rows = len(settings) * (len(metrics) if several else 1)
    with figure_style():
        pw = ONE_COLUMN
        fig, axes = _grid(len(cells), w=pw, h=2.4 if not several else 2.2, rows=n_rows)
        panel_titles, flat = [], []
        for ax, (setting, met, reading) in zip(axes, cells):
            ds, variant = setting.split("/", 1)
            vs = [v for v in values if v["setting"] == setting and v["reading"] == reading]
            if not vs:
                ax.set_visible(False)
                panel_titles.append("")
                continue
            bases = sorted({v["base"] for v in vs}, key=style.index)
            same_value = sweep_panel(ax, vs, met, bases, style, symbol)
            if same_value is not None:
                flat.append({"setting": setting, "reading": reading, "metric": met, "value": same_value})
            xs = sorted({v["value"] for v in vs})
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.set(xlabel=plabel, ylabel=f"{METRIC_LABELS.get(met, met)} (%)")
            if several:
                panel_titles.append((f"{style.setting(ds, variant)}: " if len(settings) > 1 else "")
                                    + _reading_title(reading))
                if (setting, reading) in flat_by_construction and met == metrics[-1]:
                    footnote(ax, wrap(FLAT_BY_CONSTRUCTION, chars_per_line(pw, NOTE_PT)))
            else:
                panel_titles.append(style.setting(ds, variant))
                if (setting, reading) in flat_by_construction:
                    footnote(ax, wrap(FLAT_BY_CONSTRUCTION, chars_per_line(pw, NOTE_PT)))
        if several:  # the readings of a (setting, metric) on one y scale
            for setting in settings:
                for met in metrics:
                    row = [ax for ax, c in zip(axes, cells) if c[:2] == (setting, met) and ax.get_visible()]
                    lo, hi = min(ax.get_ylim()[0] for ax in row), max(ax.get_ylim()[1] for ax in row)
                    for ax in row:
                        ax.set_ylim(lo, hi)
        bases = sorted({v["base"] for v in values}, key=style.index)
        if len(bases) > 1:
            legend_below(fig, *method_handles(bases, style, kind="line"), ncol=min(4, len(bases)))
        _mark_identical(rows, same, "value", ("setting", "reading", "base_method"))
        for r in rows:
            r["all_values_identical"] = any((f["setting"], f["reading"], f["metric"]) == (r["setting"], r["reading"],
                                                                                      r["metric"]) for f in flat)
            r["flat_by_construction"] = ((r["setting"], r["reading"]) in flat_by_construction
                                         and r["value"] >= 2)
        swept = f"{', '.join(bases)}, varying the {plabel}"
        fmt = lambda g: f"{symbol} = " + ", ".join(f"{v:g}" for v in g)  # noqa: E731
        note = (f"mean over {_seeds_text(rows)} at each {symbol} (dots: runs); {interval_text()}; "
                f"{_mode_text(mode, runs[0], log)}"
                f"; y axes span\u00a0≥\u00a0{MIN_SPAN_PP:g}\u00a0pp"  # kept on one line
                + _identical_text(same, fmt, (lambda k: _within_text(k[:2], style)) if several else None))
        if several:
            lead = f"{style.setting(*settings[0].split('/', 1))} — " if len(settings) == 1 else ""
            titles(fig, axes, panel_titles, f"{lead}{swept}, under each reading: {note}", title, pw)
        elif len(settings) == 1:  # one title for the row of metric panels
            titles(fig, axes, [f"{panel_titles[0]} — {swept}"], note, title, pw)
        else:  # a title per panel (its setting); what is swept leads the note
            titles(fig, axes, panel_titles, f"{swept}: {note}", title, pw)
        save_figure(fig, out, rows, log, mode=mode, param=param, identical_predictions=_identical_json(same),
                    error_bars=interval_text(),
                    all_values_identical=flat,
                    **({"readings": shown, "flat_by_construction": [
                        {"setting": s, "reading": x, "note": FLAT_BY_CONSTRUCTION} for s, x in flat_by_construction]}
                       if several or flat_by_construction else {}))
    return rows


def _flat_by_construction(values: list[dict[str, Any]], same: dict[tuple, list[list[Any]]],
                          param: str) -> list[tuple[str, str]]:
    """(setting, reading) of the as-written ``n_players`` sweeps whose runs at N >= 2 (two or more
    values) are one group of byte-identical predictions for every seed: flat by construction
    (docs/methods.md, "What the number of players N changes (measured)")."""
    if param != "n_players":
        return []
    out = []
    for setting in sorted({v["setting"] for v in values}):
        vs = [v for v in values if v["setting"] == setting and v["reading"] == AS_WRITTEN]
        for base in sorted({v["base"] for v in vs}):
            many = sorted({v["value"] for v in vs if v["base"] == base and v["value"] >= 2})
            groups = same.get((setting, AS_WRITTEN, base), [])
            if len(many) >= 2 and any(set(many) <= set(g) for g in groups) and (setting, AS_WRITTEN) not in out:
                out.append((setting, AS_WRITTEN))
    return out


def _identical_text(same: dict[tuple, list[list[Any]]], fmt_group: Any, fmt_where: Any = None) -> str:
    """Subtitle clause naming the runs with byte-identical predictions (empty when none);
    ``fmt_where`` names the group's setting (default: its key joined by '/')."""
    where = len(same) > 1 or fmt_where is not None  # several settings, sweep bases or readings: say which
    fmt_where = fmt_where or (lambda k: "/".join(map(str, k)))
    groups = [(f"{fmt_where(k)}: " if where else "") + fmt_group(g) for k, gs in same.items() for g in gs]
    if not groups:
        return ""
    return "; byte-identical predictions for every seed: " + "; ".join(groups)


def _mark_identical(rows: list[dict[str, Any]], same: dict[tuple, list[list[Any]]], key: str,
                    within: Sequence[str]) -> None:
    """CSV column ``same_predictions_as``: the other members of a row's identical group."""
    for r in rows:
        group = next((g for g in same.get(tuple(r[w] for w in within), []) if r[key] in g), [])
        r["same_predictions_as"] = ";".join(f"{m:g}" if isinstance(m, float) else str(m)
                                            for m in group if m != r[key])


def _identical_json(same: dict[tuple, list[list[Any]]]) -> list[dict[str, Any]]:
    return [{"within": list(k), "identical": g} for k, gs in same.items() for g in gs]


def sweep_panel(ax: Any, values: list[dict[str, Any]], metric: str, bases: Sequence[str], style: FigureStyle,
                symbol: str = "value") -> float | None:
    """The mean with its error bar (seaborn ``lineplot``, ``err_style="bars"``: the 95%
    t-interval of the mean cut to [0, 100], :func:`~cdgtmll.figures.intervals.seed_interval`) at the swept
    values only, joined by a thin line, with each run as a dot. The y axis spans at least
    :data:`~cdgtmll.figures.style.MIN_SPAN_PP` points (:func:`~cdgtmll.figures.style.honest_ylim`:
    no zoom that makes a flat line look like a trend); when every run has the same value, the
    panel says so ("identical at every <symbol>: v%") and the value is returned (else None)."""
    import numpy as np
    import pandas as pd
    import seaborn as sns

    df = pd.DataFrame([{"base": v["base"], "value": v["value"], "y": _pct(v[metric])} for v in values])
    k = len(bases)
    span = (df["value"].max() - df["value"].min()) or 1.0
    for b_i, base in enumerate(bases):
        st = style.method(base)
        d = df[df["base"] == base].copy()
        d["value"] += (b_i - (k - 1) / 2) * 0.012 * span  # side by side when several methods
        sns.lineplot(data=d, x="value", y="y", estimator="mean", errorbar=seed_interval, err_style="bars",
                     color=st.color, marker=st.marker, linestyle=st.linestyle, linewidth=1.0, markersize=5.5,
                     err_kws={"capsize": 3, "linewidth": 1.0}, ax=ax, label=base, legend=False, zorder=st.zorder)
        ax.scatter(d["value"], d["y"], s=7, color="0.15", alpha=0.6, linewidths=0, zorder=st.zorder + 0.5)
    honest_ylim(ax)
    ys = df["y"].to_numpy(dtype=float)
    if ys.size and np.isfinite(ys).all() and np.ptp(ys) == 0:
        ax.text(0.5, 0.96, f"identical at every {symbol}: {ys[0]:.2f}%", transform=ax.transAxes, ha="center",
                va="top", fontsize=NOTE_PT, color="0.25")
        return float(ys[0])
    return None
