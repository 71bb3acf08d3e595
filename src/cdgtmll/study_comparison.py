"""Method-comparison study figures of Sec. 5.3: ``ablation`` (:func:`ablation_figure`),
``robustness`` (:func:`robustness_figure`) and ``sweep`` (:func:`sweep_figure`), each
with the pure computation of its rows (:func:`ablation_rows`, :func:`robustness_rows`,
:func:`sweep_rows`). All read the metrics blocks of ``metrics.json``. The subcommands are
documented in :mod:`cdgtmll.study_figures`, which re-exports every public name of this module.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from cdgtmll.study_runs import (
    METHOD_OUTPUTS,
    RunDir,
    SourceLog,
    _grid,
    _pct,
    mean_std,
    metric_value,
    parse_runs,
    read_metrics,
    save_figure,
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

    ``values``: ``{"setting", "method", "seed", <metric>: value, ...}`` per run. The gap
    to the full model is ``mean(method) - mean(full)`` (same setting and metric; ``None``
    on the full model's own rows). Methods are ordered by ``order`` then by name.
    """
    rows = []
    for setting in sorted({v["setting"] for v in values}):
        vs = [v for v in values if v["setting"] == setting]
        methods = _ordered({v["method"] for v in vs}, order)
        if full not in methods:
            raise ValueError(f"{setting}: full model '{full}' not among the runs ({methods})")
        stats = {}
        for m in methods:
            seeds = sorted(v["seed"] for v in vs if v["method"] == m)
            for met in metrics:
                mu, sd, n = mean_std([v[met] for v in vs if v["method"] == m])
                stats[m, met] = (mu, sd, n, seeds)
        for m in methods:
            for met in metrics:
                mu, sd, n, seeds = stats[m, met]
                rows.append({
                    "setting": setting, "method": m, "metric": met, "mean": mu, "std": sd, "n_seeds": n,
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


def robustness_rows(values: list[dict[str, Any]], clean_variant: str, kind: str) -> list[dict[str, Any]]:
    """Degradation ``clean - corrupted`` per (dataset, method, level), paired by training seed.

    ``values``: ``{"dataset", "variant", "method", "seed", "value"}`` per run (clean and
    corrupted variants of ``kind``). Each corrupted run (any sampling seed) is paired with
    the clean run of the same dataset, method and training seed; a missing partner raises.
    """
    clean = {(v["dataset"], v["method"], v["seed"]): v["value"] for v in values if v["variant"] == clean_variant}
    pairs: dict[tuple[str, str, float], list[tuple[str, float, float]]] = {}
    unpaired = []
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
        tag = f"seed{v['seed']}/s{corruption_sampling_seed(v['variant'])}"
        pairs.setdefault((v["dataset"], v["method"], level), []).append((tag, clean[key], v["value"]))
    if unpaired:
        raise ValueError(f"no clean ('{clean_variant}') run with the same training seed for: {', '.join(unpaired)}")
    rows = []
    for (ds, method, level), ps in sorted(pairs.items()):
        ps = sorted(ps)
        mu, sd, n = mean_std([c - x for _, c, x in ps])
        rows.append({
            "dataset": ds, "method": method, "kind": kind, "level": level,
            "degradation_mean": mu, "degradation_std": sd, "n_pairs": n,
            "clean_mean": mean_std([c for _, c, _ in ps])[0], "corrupted_mean": mean_std([x for _, _, x in ps])[0],
            "pairs": ";".join(t for t, _, _ in ps), "note": "",
        })
    return rows


def parse_sweep_method(method: str) -> tuple[str, str, str] | None:
    """``CD-GTMLL@alpha=0.2`` -> ("CD-GTMLL", "alpha", "0.2"); None without ``@param=``."""
    m = _SWEEP_RE.match(method)
    return (m["base"], m["param"], m["value"]) if m else None


def sweep_rows(values: list[dict[str, Any]], param: str, metrics: Sequence[str]) -> list[dict[str, Any]]:
    """``values``: ``{"setting", "base", "value", "method", "seed", <metric>: ...}`` per run;
    one row per (setting, base, value, metric), sorted by value."""
    rows = []
    keys = sorted({(v["setting"], v["base"], v["value"]) for v in values})
    for setting, base, value in keys:
        vs = [v for v in values if (v["setting"], v["base"], v["value"]) == (setting, base, value)]
        for met in metrics:
            mu, sd, n = mean_std([v[met] for v in vs])
            rows.append({
                "setting": setting, "base_method": base, "param": param, "value": value, "metric": met,
                "mean": mu, "std": sd, "n_seeds": n, "seeds": ";".join(str(v["seed"]) for v in sorted(vs, key=lambda v: v["seed"])),
                "methods": ";".join(sorted({v["method"] for v in vs})),
            })
    return rows


def collect_ablation(runs: list[RunDir], mode: str, metrics: Sequence[str], log: SourceLog) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        m = read_metrics(r, log)
        out.append({"setting": r.setting, "method": r.method, "seed": r.seed,
                    **{k: metric_value(m, mode, k, r.path) for k in metrics}})
    return out


# ------------------------------------------------------------------------ subcommands


def ablation_figure(run_dirs: Sequence[str | Path], out: Path, full: str = "CD-GTMLL", order: Sequence[str] = (),
                    mode: str = "global", metrics: Sequence[str] = ("mAP", "micro_f1", "rare_f1"),
                    title: str = "") -> list[dict[str, Any]]:
    runs = parse_runs(run_dirs)
    missing = [m for m in order if m not in {r.method for r in runs}]
    if missing:
        raise ValueError(f"--order names method(s) without runs: {missing}")
    log = SourceLog()
    rows = ablation_rows(collect_ablation(runs, mode, metrics, log), metrics, full, order)
    settings = sorted({r["setting"] for r in rows})
    fig, axes = _grid(len(settings), w=max(4.8, 1.6 * len(metrics) + 1.5))
    for ax, setting in zip(axes, settings):
        rs = [r for r in rows if r["setting"] == setting]
        methods = list(dict.fromkeys(r["method"] for r in rs))
        width = 0.8 / len(methods)
        for j, m in enumerate(methods):
            xs = np.arange(len(metrics)) + (j - (len(methods) - 1) / 2) * width
            mr = [next(r for r in rs if r["method"] == m and r["metric"] == k) for k in metrics]
            means = [_pct(r["mean"]) for r in mr]
            stds = [_pct(r["std"]) for r in mr]
            n = min(r["n_seeds"] for r in mr)
            ax.bar(xs, means, width, yerr=stds, capsize=3, label=f"{m} (n={n})",
                   edgecolor="black", linewidth=0.5)
            if m != full:
                for x, r, mu, sd in zip(xs, mr, means, stds):
                    if math.isfinite(mu):
                        ax.annotate(_gap_text(r["gap_to_full"]), (x, mu + (sd if math.isfinite(sd) else 0)),
                                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(np.arange(len(metrics)), [METRIC_LABELS.get(k, k) for k in metrics])
        ax.set(ylabel=f"% ({mode} threshold)", title=title or setting)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(3, len(methods)))
    fig.suptitle(f"gap to {full} above bars (pp); mean ± std over seeds", fontsize=8)
    fig.tight_layout()
    save_figure(fig, out, rows, log, mode=mode, full=full)
    return rows


def _gap_text(gap: float) -> str:
    t = f"{100 * gap:+.1f}"
    return "0.0" if t in ("+0.0", "-0.0") else t


def _dataset_kind(dataset: str) -> str | None:
    try:
        from cdgtmll.data.registry import get_spec

        return get_spec(dataset).kind
    except Exception:  # noqa: BLE001 - unknown (e.g. config-defined) datasets
        return None


def robustness_figure(run_dirs: Sequence[str | Path], out: Path, kind: str, clean_variant: str = "clean",
                      mode: str = "global", metric: str = "rare_f1", title: str = "") -> list[dict[str, Any]]:
    runs = parse_runs(run_dirs)
    other = {p for k, p in KIND_PREFIX.items() if k != kind}
    used = []
    for r in runs:
        m = _CORRUPT_RE.match(r.variant)
        if r.variant != clean_variant and m and m.group(1) in other:
            continue  # the other corruption type: not this figure's runs
        used.append(r)
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
    rows = robustness_rows(values, clean_variant, kind)
    for ds, note in notes.items():
        rows.append({"dataset": ds, "method": None, "kind": kind, "level": None, "degradation_mean": None,
                     "degradation_std": None, "n_pairs": 0, "clean_mean": None, "corrupted_mean": None,
                     "pairs": "", "note": note})
    fig, axes = _grid(len(datasets))
    mlabel = METRIC_LABELS.get(metric, metric)
    for ax, ds in zip(axes, datasets):
        if ds in notes:
            ax.text(0.5, 0.5, notes[ds], ha="center", va="center", transform=ax.transAxes, fontsize=9, wrap=True)
            ax.set(title=f"{title or ds}: {notes[ds]}", xticks=[], yticks=[])
            ax.title.set_fontsize(8)
            continue
        rs = [r for r in rows if r["dataset"] == ds]
        levels = sorted({r["level"] for r in rs})
        methods = sorted({r["method"] for r in rs})
        width = 0.8 / len(methods)
        for j, m in enumerate(methods):
            xs = np.arange(len(levels)) + (j - (len(methods) - 1) / 2) * width
            mean = [next((_pct(r["degradation_mean"]) for r in rs if r["method"] == m and r["level"] == lv), np.nan) for lv in levels]
            std = [next((_pct(r["degradation_std"]) for r in rs if r["method"] == m and r["level"] == lv), np.nan) for lv in levels]
            ax.bar(xs, mean, width, yerr=std, capsize=3, label=m, edgecolor="black", linewidth=0.5)
        prefix = "Noise" if kind == "noise" else "Occ"
        ax.set_xticks(np.arange(len(levels)), [f"{prefix}-{lv:g}" for lv in levels])
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set(ylabel=f"{mlabel} drop, clean − corrupted (pp)", title=title or f"{ds}: {kind}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, rows, log, mode=mode, metric=metric, kind=kind, clean_variant=clean_variant,
                notes=notes or None)
    return rows


def _sweep_value(s: str, param: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"sweep value '{s}' of '{param}' is not a number") from None
    return v


def sweep_figure(run_dirs: Sequence[str | Path], out: Path, param: str, metrics: Sequence[str] = ("rare_f1",),
                 mode: str = "global", title: str = "") -> list[dict[str, Any]]:
    runs = parse_runs(run_dirs)
    log = SourceLog()
    values = []
    for r in runs:
        parsed = parse_sweep_method(r.method)
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
            base, value = r.method, hp_value
        m = read_metrics(r, log)
        values.append({"setting": r.setting, "base": base, "value": value, "method": r.method, "seed": r.seed,
                       **{k: metric_value(m, mode, k, r.path) for k in metrics}})
    rows = sweep_rows(values, param, metrics)
    settings = sorted({r["setting"] for r in rows})
    fig, axes = _grid(len(settings) * len(metrics), rows=len(settings))
    for i, setting in enumerate(settings):
        for j, met in enumerate(metrics):
            ax = axes[i * len(metrics) + j]
            rs = [r for r in rows if r["setting"] == setting and r["metric"] == met]
            for base in sorted({r["base_method"] for r in rs}):
                b = [r for r in rs if r["base_method"] == base]
                x = np.array([r["value"] for r in b])
                mu = np.array([_pct(r["mean"]) for r in b])
                sd = np.array([_pct(r["std"]) for r in b])
                ax.errorbar(x, mu, yerr=sd, marker="o", capsize=3, label=base)
                ax.fill_between(x, mu - sd, mu + sd, alpha=0.15)
            if param == "n_players":
                ax.set_xticks(sorted({r["value"] for r in rs}))
            ax.set(xlabel=f"{param}", ylabel=f"{METRIC_LABELS.get(met, met)} (%)",
                   title=title or f"{setting}: {METRIC_LABELS.get(met, met)} vs {param}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, rows, log, mode=mode, param=param)
    return rows
