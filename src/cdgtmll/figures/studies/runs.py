"""Data plumbing of the study figures (:mod:`cdgtmll.figures.studies.build`): run directories
``.../<dataset>/<variant>/<method>/seed<k>`` (:class:`RunDir`, :func:`parse_runs`), the
:class:`SourceLog` that records and hashes every file a figure reads, the readers of the
run files (``metrics.json``, ``player_val_acc.npz``, ``train_log.csv``), the metric
lookup per threshold mode, mean ± std and the error bar over seeds
(:func:`seed_interval`), and the writer of ``<out>.pdf/.png/.csv/.sources.json``
(:func:`save_figure`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cdgtmll.io import atomic_path, atomic_write, sha256_bytes, write_json

PLAYER_ACC_FILE = "player_val_acc.npz"
METRICS_FILE = "metrics.json"
TRAIN_LOG = "train_log.csv"
METHOD_OUTPUTS = "method_outputs.json"

_SEED_RE = re.compile(r"^seed(\d+)$")


# ------------------------------------------------------------------ runs and sources


@dataclass(frozen=True)
class RunDir:
    """One run directory ``<root>/<dataset>/<variant>/<method>/seed<k>``. ``path`` is where its
    files are; for a setting that shares another setting's run (``--alias``), the shared run's
    seed folder, and ``alias_of`` names that run (``<dataset>/<variant>/<method>``), while
    dataset, variant and method are the setting's own."""

    path: Path
    dataset: str
    variant: str
    method: str
    seed: int
    alias_of: str = ""

    @property
    def setting(self) -> str:
        return f"{self.dataset}/{self.variant}"

    @property
    def group(self) -> str:
        return f"{self.dataset}/{self.variant}/{self.method}"


def parse_run_dir(path: str | Path | RunDir, aliases: dict[str, str] | None = None) -> RunDir:
    """The :class:`RunDir` of a seed folder. ``aliases`` maps a setting's run folder
    (``.../<dataset>/<variant>/<setting>``) to the run folder that holds its result (the
    same dataset and variant): the seed folder is read from there, under the setting's name."""
    if isinstance(path, RunDir):
        return path
    p = Path(path)
    m = _SEED_RE.match(p.name)
    parts = p.parts
    if not m or len(parts) < 4:
        raise ValueError(f"{path}: not a run directory '.../<dataset>/<variant>/<method>/seed<k>'")
    run = RunDir(p, parts[-4], parts[-3], parts[-2], int(m.group(1)))
    target = {str(Path(k)): v for k, v in (aliases or {}).items()}.get(str(p.parent))
    if target is None:
        return run
    t = Path(target)
    if len(t.parts) < 3 or t.parts[-3:-1] != parts[-4:-2]:
        raise ValueError(f"--alias {p.parent} {target}: expected a run folder "
                         f"'.../{run.dataset}/{run.variant}/<method>' (the same dataset and variant)")
    return RunDir(t / p.name, run.dataset, run.variant, run.method, run.seed, alias_of="/".join(t.parts[-3:]))


def parse_runs(paths: Iterable[str | Path | RunDir], aliases: dict[str, str] | None = None) -> list[RunDir]:
    runs, seen = [], {}
    for p in paths:
        r = parse_run_dir(p, aliases)
        key = (r.group, r.seed)
        if key in seen:
            if Path(seen[key]).resolve() == r.path.resolve():
                continue  # listed twice
            raise ValueError(f"two run directories for {r.group} seed {r.seed}: {seen[key]} and {r.path}")
        seen[key] = r.path
        runs.append(r)
    if not runs:
        raise ValueError("no run directories given")
    return runs


#: how the figures and CSVs name the default reading of a study (``studies.<study>.under``):
#: CD-GTMLL as App. E.1 writes it
AS_WRITTEN = "as written (E.1)"


def split_reading(method: str, readings: Sequence[str] = ()) -> tuple[str, str]:
    """(setting, reading) of a study method: the reading among ``readings`` (``--under``:
    ``player_backbones=separate``) that ends its name after ``@`` or ``,``
    (:func:`cdgtmll.config.plan.with_reading`: ``CD-GTMLL@n_players=3,player_backbones=separate``
    -> ``('CD-GTMLL@n_players=3', 'player_backbones=separate')``), else ``(method, AS_WRITTEN)``."""
    for r in sorted(readings, key=len, reverse=True):
        for sep in ("@", ","):
            if r and method.endswith(sep + r) and len(method) > len(r) + 1:
                return method[: -len(r) - 1], r
    return method, AS_WRITTEN


def reading_order(readings: Sequence[str] = ()) -> list[str]:
    """The readings of a figure in panel order: the default first, then as listed."""
    return [AS_WRITTEN, *dict.fromkeys(r for r in readings if r != AS_WRITTEN)]


@dataclass
class SourceLog:
    """Every file a figure reads, with the sha256 of the bytes parsed, under the name of the
    setting it was read for; ``aliases``: the settings read from another setting's run."""

    runs: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def read(self, run: RunDir, name: str) -> bytes:
        path = run.path / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (needed for {run.group} seed {run.seed})")
        data = path.read_bytes()
        entry = {"path": str(path), "sha256": sha256_bytes(data)}
        lst = self.runs.setdefault(run.group, [])
        if entry not in lst:
            lst.append(entry)
        if run.alias_of:
            self.aliases[run.group] = run.alias_of
        return data

    def to_json(self, figure: str, **extra: Any) -> dict[str, Any]:
        return {"figure": figure, "runs": self.runs, **({"aliases": self.aliases} if self.aliases else {}), **extra}


def read_metrics(run: RunDir, log: SourceLog) -> dict[str, Any]:
    return json.loads(log.read(run, METRICS_FILE).decode("utf-8"))


def read_player_acc(run: RunDir, log: SourceLog) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(log.read(run, PLAYER_ACC_FILE)), allow_pickle=False) as z:
        missing = {"epoch", "player", "label", "accuracy"} - set(z.files)
        if missing:
            raise ValueError(f"{run.path / PLAYER_ACC_FILE}: missing array(s) {sorted(missing)}")
        out = {k: np.asarray(z[k]) for k in ("epoch", "player", "label", "accuracy")}
    E, P = out["accuracy"].shape
    if out["epoch"].shape != (E,) or out["player"].shape != (P,) or out["label"].shape != (P,):
        raise ValueError(f"{run.path / PLAYER_ACC_FILE}: inconsistent shapes "
                         f"{ {k: v.shape for k, v in out.items()} }")
    return out


def read_train_log(run: RunDir, log: SourceLog) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(log.read(run, TRAIN_LOG).decode("utf-8"))))


def metric_block(metrics: dict[str, Any], mode: str) -> dict[str, Any]:
    """The metrics block of a threshold mode: ``adaptive``, ``global`` (the single
    ``global@<tau>`` block) or an explicit key such as ``global@0.5``."""
    if mode in metrics and isinstance(metrics[mode], dict):
        return metrics[mode]
    if mode == "global":
        keys = sorted(k for k in metrics if k.startswith("global@"))
        if len(keys) == 1:
            return metrics[keys[0]]
        raise ValueError(f"threshold mode 'global': expected one 'global@<tau>' block, found {keys}; "
                         "pass the key explicitly (e.g. --mode global@0.5)")
    raise ValueError(f"no metrics block '{mode}' (blocks: {sorted(k for k, v in metrics.items() if isinstance(v, dict))})")


def metric_value(metrics: dict[str, Any], mode: str, metric: str, where: Any = "") -> float:
    block = metric_block(metrics, mode)
    if metric not in block:
        raise ValueError(f"{where}: metric '{metric}' not in block '{mode}' (has {sorted(block)})")
    v = block[metric]
    return float("nan") if v is None else float(v)


def predictions_sha256(metrics: dict[str, Any]) -> str | None:
    """sha256 of the predictions a ``metrics.json`` was computed from (recorded by evaluate)."""
    return ((metrics.get("inputs") or {}).get("predictions") or {}).get("sha256")


def common_seeds(values: Sequence[dict[str, Any]], key: str,
                 within: Sequence[str] = ("setting",)) -> list[dict[str, Any]]:
    """``values`` (rows with ``seed``) kept to the seeds that every ``key`` value (a swept value,
    a method) of the same ``within`` group has. Rows may train different seeds (config ``power``:
    CD-GTMLL's folder holds 10 seeds, a sweep point 3); a point of a curve or a bar beside another
    is then a mean over the same seeds, and a difference between them is not one of seed sets."""
    have: dict[tuple, dict[Any, set[int]]] = {}
    for v in values:
        have.setdefault(tuple(v.get(w) for w in within), {}).setdefault(v[key], set()).add(int(v["seed"]))
    keep = {g: set.intersection(*by.values()) for g, by in have.items()}
    return [v for v in values if int(v["seed"]) in keep[tuple(v.get(w) for w in within)]]


def identical_predictions(values: Sequence[dict[str, Any]], key: str,
                          within: Sequence[str] = ("setting",)) -> dict[tuple, list[list[Any]]]:
    """Runs that cannot differ: ``{within values: [[key values], ...]}``, one list per group of two or more
    ``key`` values (e.g. sweep values, methods) whose predictions are byte-identical for every
    seed (``values`` rows carry ``seed`` and ``pred_sha256``; same seed set required). A swept
    setting or an ablation that changes no prediction measures nothing, and a figure says so."""
    runs: dict[tuple, dict[int, str | None]] = {}
    for v in values:
        runs.setdefault((*(v[w] for w in within), v[key]), {})[int(v["seed"])] = v.get("pred_sha256")
    same: dict[tuple, list[Any]] = {}
    for k, seeds in runs.items():
        if seeds and None not in seeds.values():
            same.setdefault((*k[:-1], tuple(sorted(seeds.items()))), []).append(k[-1])
    out: dict[tuple, list[list[Any]]] = {}
    for k, members in same.items():
        if len(members) > 1:
            out.setdefault(k[:-1], []).append(sorted(members, key=str))
    return {k: sorted(groups, key=lambda g: str(g[0])) for k, groups in out.items()}


def mean_std(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean and std (ddof=1; 0 for one value) over the finite values, and their count."""
    a = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if a.size == 0:
        return float("nan"), float("nan"), 0
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0, int(a.size)


# --------------------------------------------------------------------------- output


def _stem(out: Path, ext: str) -> Path:
    return Path(f"{out}.{ext}")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _write_rows(path: Path, rows: list[dict[str, Any]], columns: Sequence[str] | None = None) -> None:
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(columns) if columns else None)
    atomic_write(path, df.to_csv(index=False))


def save_figure(fig: Any, out: Path, rows: list[dict[str, Any]], log: SourceLog,
                columns: Sequence[str] | None = None, **extra: Any) -> list[Path]:
    """Write ``<out>.pdf/.png/.csv/.sources.json`` atomically (PNG at
    :data:`cdgtmll.figures.style.DPI`); returns the paths."""
    from cdgtmll.figures.style import save_kw, save_metadata

    plt = _plt()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("pdf", "png"):
        p = _stem(out, ext)
        with atomic_path(p, suffix=f".{ext}") as tmp:
            fig.savefig(tmp, format=ext, metadata=save_metadata(ext), **save_kw())
        paths.append(p)
    plt.close(fig)
    _write_rows(_stem(out, "csv"), rows, columns)
    write_json(_stem(out, "sources.json"), log.to_json(out.name, **extra))
    return [*paths, _stem(out, "csv"), _stem(out, "sources.json")]


def _grid(n: int, w: float = 3.4, h: float = 2.6, rows: int | None = None, max_cols: int = 3):
    """``n`` panels of ``w`` x ``h`` inches (3.4 in = one column of a two-column paper), in
    ``rows`` rows, by default as many as needed for at most ``max_cols`` panels a row."""
    plt = _plt()
    rows = rows or max(1, math.ceil(n / max_cols))
    cols = max(1, math.ceil(n / rows))
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False, layout="constrained")
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def _pct(x: float) -> float:
    return 100.0 * x if x is not None and math.isfinite(x) else float("nan")
