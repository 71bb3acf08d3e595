r"""Study figures of Sec. 5.3-5.4 (ablation, robustness, sensitivity, multi-player analysis).

Every subcommand takes explicit run directories ``.../<dataset>/<variant>/<method>/seed<k>``
(``--runs``) and an output stem ``--out`` and writes, like :mod:`cdgtmll.figures`,

* ``<out>.pdf`` and ``<out>.png`` (atomic writes),
* ``<out>.csv`` -- the numbers drawn,
* ``<out>.sources.json`` -- ``{"figure": <out name>, "runs": {"<dataset>/<variant>/<method>":
  [{"path", "sha256"}, ...]}, ...}`` listing **every** file read (hashed from the very
  bytes that were parsed), so ``cdgtmll audit <out>.pdf`` can trace and re-verify it.

The suffixes are appended to the stem (``<out>`` + ``.pdf``), never substituted, so a stem
containing a dot (``figs/alpha_0.4``) keeps its full name. Numbers in CSVs are fractions
in [0, 1] as in ``metrics.json`` (figures show percent / percentage points). "mean ± std"
is over the runs listed (std with ``ddof=1``; 0 for a single run), and every CSV row says
how many runs (``n_seeds`` / ``n_pairs``) it averages.

Subcommands
-----------
``ablation --runs DIR... [--full CD-GTMLL] [--order M...] [--mode global|adaptive]
[--metrics mAP micro_f1 rare_f1]``
    Bars of each metric per method (grouped by the method directory name), mean ± std
    over seeds; one panel per ``<dataset>/<variant>``. Above every non-full bar: the
    signed absolute gap ``mean(method) - mean(full)`` (percentage points). CSV: one row
    per (setting, method, metric) with ``mean, std, n_seeds, seeds, gap_to_full``.
``robustness --runs DIR... --kind noise|occlusion [--clean-variant clean] [--metric rare_f1]``
    Absolute degradation ``metric(clean, seed k) - metric(corrupted, seed k)`` per
    corruption level, paired by **training seed** k (a corrupted variant ``N0.10-s1`` run
    with seed k is paired with the clean run with seed k; several sampling seeds give
    several pairs). Level from the variant id: ``N0.10-s0`` -> 0.10 (noise),
    ``O0.10-s0`` -> 0.10 (occlusion). A corrupted run without its clean partner is an
    error. With ``--kind occlusion`` and no ``O*`` runs on a dataset that has no images
    (registry kind not ``image``), the figure and the CSV carry the note
    ``no images: occlusion not applicable to <dataset>`` instead of failing.
``sweep --runs DIR... --param alpha|n_players [--metrics rare_f1 mAP]``
    Metric vs the swept value, parsed from the method name ``<base>@<param>=<value>``
    (e.g. ``CD-GTMLL@alpha=0.2``); a run whose name carries no value (the base method
    itself) takes it from ``method_outputs.json`` ``hparams[<param>]``. When both are
    present they must agree (a mis-wired alias is an error).
``specialization --runs DIR... [--labels all|contested]``
    Per epoch and player, the **specialization share**: each label in scope carries one
    unit of credit, given to the player with the highest per-label validation accuracy
    (``player_val_acc.npz``) among the players covering it; ties (equal accuracy, i.e.
    the same number of correct validation rows) split the credit equally. Share =
    credit / number of labels in scope, so the shares of the N players sum to 1 each
    epoch. ``--labels all`` (default): every label (a label covered by one player
    credits its owner); ``contested``: only labels covered by >= 2 players (the overlap
    labels of the E.1 partition). CSV long form (epoch, player, share_mean, share_std).
``ranks --runs DIR... [--tail-fraction 0.2 --tie-seed 0] [--labels all|contested]``
    At the **final** epoch: the **mean rank** of each player (1 = best accuracy among the
    players covering a label; ties get the average of the tied ranks, e.g. 1.5 for a
    two-way tie) over the rare (tail) and frequent labels it covers. Labels covered by a
    single player are **excluded from ranks** (no competition); a cell without any
    contested label is ``n/a`` (with the default E.1 partition the overlap is on tail
    labels only, so the frequent column is then ``n/a`` -- shown, not hidden). Also the
    specialization shares (as above, final epoch) within rare and within frequent labels.
    Tail = bottom ``floor(q L)`` labels by the clean training counts recorded in the run's
    ``metrics.json`` (``train_counts``), fixed-seed ties: the definition of
    :func:`cdgtmll.labels.tail_labels` used by Rare-F1 and the R-variants. Writes two
    stems: ``<out>_heatmap`` (players x {rare, frequent} mean ranks) and ``<out>_shares``
    (grouped bars), each with its own pdf/png/csv/sources.json. The heatmap CSV also
    counts the contested labels on which all covering players tie
    (``n_all_tied_labels_mean``; common for rare labels, where thresholding at 0.5 often
    predicts every validation row negative for every player).
``potential --runs DIR... [--tol 0]``
    ``Phi`` per epoch from ``train_log.csv`` (each seed a line, plus their mean). ``Phi`` is
    the trainer's sample-weighted mean over the epoch's batches of the batch potential
    (Eq. 9), i.e. a running training estimate, and beta warms up during the first 10% of
    steps, so the potential itself changes then. ``<out>.monotonicity.csv`` records per
    run (and for each group's mean curve, ``seed = mean``) whether Phi rose
    monotonically: ``n_decreases`` and ``decrease_epochs`` (epochs e with
    ``Phi[e] < Phi[e-1] - tol``), the largest drop, and the same count restricted to
    epochs after the beta warm-up (``beta`` at its final value at e-1 and e).

Players are numbered from 1 in figures and CSVs (``player`` = index in
``player_val_acc.npz`` + 1), as in the paper ("Player 1..N").
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from cdgtmll.io import atomic_path, atomic_write, sha256_bytes, write_json

METRIC_LABELS = {
    "mAP": "mAP", "micro_f1": "Micro-F1", "macro_f1": "Macro-F1", "rare_f1": "Rare-F1",
    "p@1": "P@1", "p@3": "P@3", "p@5": "P@5",
}  # fmt: skip
KIND_PREFIX = {"noise": "N", "occlusion": "O"}
PLAYER_ACC_FILE = "player_val_acc.npz"
METRICS_FILE = "metrics.json"
TRAIN_LOG = "train_log.csv"
METHOD_OUTPUTS = "method_outputs.json"
LABEL_GROUPS = ("rare", "frequent")

_SEED_RE = re.compile(r"^seed(\d+)$")
_CORRUPT_RE = re.compile(r"^([A-Z])(\d+(?:\.\d+)?)-s(\d+)$")
_SWEEP_RE = re.compile(r"^(?P<base>.+?)@(?P<param>[A-Za-z_]\w*)=(?P<value>[^@]+)$")


# ------------------------------------------------------------------ runs and sources


@dataclass(frozen=True)
class RunDir:
    """One run directory ``<root>/<dataset>/<variant>/<method>/seed<k>``."""

    path: Path
    dataset: str
    variant: str
    method: str
    seed: int

    @property
    def setting(self) -> str:
        return f"{self.dataset}/{self.variant}"

    @property
    def group(self) -> str:
        return f"{self.dataset}/{self.variant}/{self.method}"


def parse_run_dir(path: str | Path) -> RunDir:
    p = Path(path)
    m = _SEED_RE.match(p.name)
    parts = p.parts
    if not m or len(parts) < 4:
        raise ValueError(f"{path}: not a run directory '.../<dataset>/<variant>/<method>/seed<k>'")
    return RunDir(p, parts[-4], parts[-3], parts[-2], int(m.group(1)))


def parse_runs(paths: Iterable[str | Path]) -> list[RunDir]:
    runs, seen = [], {}
    for p in paths:
        r = parse_run_dir(p)
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


@dataclass
class SourceLog:
    """Every file a figure reads, with the sha256 of the bytes parsed."""

    runs: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def read(self, run: RunDir, name: str) -> bytes:
        path = run.path / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (needed for {run.group} seed {run.seed})")
        data = path.read_bytes()
        entry = {"path": str(path), "sha256": sha256_bytes(data)}
        lst = self.runs.setdefault(run.group, [])
        if entry not in lst:
            lst.append(entry)
        return data

    def to_json(self, figure: str, **extra: Any) -> dict[str, Any]:
        return {"figure": figure, "runs": self.runs, **extra}


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


def mean_std(values: Sequence[float]) -> tuple[float, float, int]:
    """Mean and std (ddof=1; 0 for one value) over the finite values, and their count."""
    a = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if a.size == 0:
        return float("nan"), float("nan"), 0
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0, int(a.size)


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


def best_credit(acc: np.ndarray, pair_label: np.ndarray) -> np.ndarray:
    """Credit per (player, label) pair ``[P]``: 1/|B_l| if the pair's player is among the
    best covering players B_l of its label (highest accuracy; exact ties share), else 0.
    The credits of each label sum to 1."""
    acc = np.asarray(acc, dtype=np.float64)
    lab = np.asarray(pair_label, dtype=np.int64)
    L = int(lab.max()) + 1 if lab.size else 0
    best = np.full(L, -np.inf)
    np.maximum.at(best, lab, acc)
    is_best = acc == best[lab]
    n_best = np.bincount(lab, weights=is_best.astype(np.float64), minlength=L)
    return np.where(is_best, 1.0 / n_best[lab], 0.0)


def specialization_shares(acc: np.ndarray, pair_player: np.ndarray, pair_label: np.ndarray,
                          labels: np.ndarray | None = None, contested_only: bool = False,
                          n_players: int | None = None) -> tuple[np.ndarray, int]:
    """Shares ``[N]`` of one epoch (``acc [P]``) and the number of labels in scope.

    Scope: the covered labels, restricted to ``labels`` when given, and to labels covered
    by >= 2 players when ``contested_only``. Shares sum to 1 (all NaN if the scope is empty).
    """
    player = np.asarray(pair_player, dtype=np.int64)
    lab = np.asarray(pair_label, dtype=np.int64)
    N = int(player.max()) + 1 if n_players is None else int(n_players)
    cov = np.bincount(lab)
    scope = cov > 0
    if contested_only:
        scope &= cov >= 2
    if labels is not None:
        sel = np.zeros_like(scope)
        sel[np.asarray(labels, dtype=np.int64)[np.asarray(labels) < scope.size]] = True
        scope &= sel
    n_scope = int(scope.sum())
    if n_scope == 0:
        return np.full(N, np.nan), 0
    credit = best_credit(acc, lab) * scope[lab]
    return np.bincount(player, weights=credit, minlength=N) / n_scope, n_scope


def pair_ranks(acc: np.ndarray, pair_label: np.ndarray) -> np.ndarray:
    """Rank of each pair among the pairs of its label (1 = highest accuracy; ties get the
    average rank: ``1 + #better + #tied_others / 2``)."""
    acc = np.asarray(acc, dtype=np.float64)
    lab = np.asarray(pair_label, dtype=np.int64)
    ranks = np.empty(acc.shape, dtype=np.float64)
    order = np.argsort(lab, kind="stable")
    bounds = np.flatnonzero(np.diff(lab[order])) + 1
    for idx in np.split(order, bounds):
        a = acc[idx]
        better = (a[None, :] > a[:, None]).sum(1)
        tied = (a[None, :] == a[:, None]).sum(1) - 1
        ranks[idx] = 1.0 + better + 0.5 * tied
    return ranks


def mean_ranks(acc: np.ndarray, pair_player: np.ndarray, pair_label: np.ndarray, labels: np.ndarray,
               n_players: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean rank ``[N]`` of each player over the **contested** labels in ``labels`` that it
    covers (NaN where none), and the number of such labels per player ``[N]``."""
    player = np.asarray(pair_player, dtype=np.int64)
    lab = np.asarray(pair_label, dtype=np.int64)
    N = int(player.max()) + 1 if n_players is None else int(n_players)
    cov = np.bincount(lab)
    in_group = np.isin(lab, np.asarray(labels, dtype=np.int64)) & (cov[lab] >= 2)
    r = pair_ranks(acc, lab)
    n = np.bincount(player[in_group], minlength=N)
    s = np.bincount(player[in_group], weights=r[in_group], minlength=N)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan), n


def n_all_tied(acc: np.ndarray, pair_label: np.ndarray, labels: np.ndarray) -> int:
    """Number of contested labels in ``labels`` on which all covering players have the same
    accuracy (e.g. all predict every validation row negative): ranks are then all tied."""
    acc = np.asarray(acc, dtype=np.float64)
    lab = np.asarray(pair_label, dtype=np.int64)
    L = int(lab.max()) + 1
    hi, lo = np.full(L, -np.inf), np.full(L, np.inf)
    np.maximum.at(hi, lab, acc)
    np.minimum.at(lo, lab, acc)
    cov = np.bincount(lab, minlength=L)
    sel = np.zeros(L, dtype=bool)
    labels = np.asarray(labels, dtype=np.int64)
    sel[labels[labels < L]] = True
    return int(np.sum(sel & (cov >= 2) & (hi == lo)))


def tail_from_counts(counts: Sequence[int], q: float, tie_seed: int = 0) -> np.ndarray:
    """:func:`cdgtmll.labels.tail_labels` from per-label training counts: bottom
    ``floor(q L)`` labels by count, ties by ``default_rng(tie_seed).permutation(L)``."""
    from cdgtmll.labels import tail_labels

    counts = np.asarray(counts, dtype=np.int64)
    # a one-row "matrix" whose column sums are the counts reproduces label_counts exactly
    return tail_labels(counts[None, :], q, tie_seed)


def phi_monotonicity(epochs: Sequence[int], phi: Sequence[float], tol: float = 0.0,
                     beta: Sequence[float] | None = None) -> dict[str, Any]:
    """Where a per-epoch potential decreases: epochs e with ``phi[e] < phi[e-1] - tol``.

    With ``beta``, also the decreases at epochs where beta is at its final value at both
    e-1 and e (after the warm-up, i.e. a fixed objective)."""
    ep = np.asarray(epochs)
    f = np.asarray(phi, dtype=np.float64)
    d = np.diff(f)
    dec = np.flatnonzero(d < -tol) + 1
    out: dict[str, Any] = {
        "n_epochs": int(f.size),
        "monotone": bool(dec.size == 0),
        "n_decreases": int(dec.size),
        "decrease_epochs": [int(e) for e in ep[dec]],
        "largest_drop": float(-d.min()) if d.size and d.min() < 0 else 0.0,
        "phi_first": float(f[0]) if f.size else float("nan"),
        "phi_last": float(f[-1]) if f.size else float("nan"),
    }
    if beta is not None:
        b = np.asarray(beta, dtype=np.float64)
        final = b[-1] if b.size else np.nan
        const = np.isclose(b, final, rtol=0, atol=1e-12)
        after = [i for i in dec if const[i] and const[i - 1]]
        out["n_decreases_after_warmup"] = len(after)
        out["decrease_epochs_after_warmup"] = [int(ep[i]) for i in after]
    return out


# ------------------------------------------------------------------------ collection


def collect_ablation(runs: list[RunDir], mode: str, metrics: Sequence[str], log: SourceLog) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        m = read_metrics(r, log)
        out.append({"setting": r.setting, "method": r.method, "seed": r.seed,
                    **{k: metric_value(m, mode, k, r.path) for k in metrics}})
    return out


def collect_player_acc(runs: list[RunDir], log: SourceLog) -> dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]]:
    by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]] = {}
    for r in sorted(runs, key=lambda r: (r.group, r.seed)):
        by_group.setdefault(r.group, []).append((r, read_player_acc(r, log)))
    for g, lst in by_group.items():
        ns = {int(a["player"].max()) + 1 for _, a in lst}
        if len(ns) != 1:
            raise ValueError(f"{g}: runs with different numbers of players {sorted(ns)}")
    return by_group


def specialization_rows(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
                        contested_only: bool) -> list[dict[str, Any]]:
    rows = []
    for g, lst in by_group.items():
        N = int(lst[0][1]["player"].max()) + 1
        per_epoch: dict[int, list[np.ndarray]] = {}
        n_scope: dict[int, list[int]] = {}
        for _, a in lst:
            for e, acc in zip(a["epoch"], a["accuracy"]):
                sh, n = specialization_shares(acc, a["player"], a["label"], contested_only=contested_only, n_players=N)
                per_epoch.setdefault(int(e), []).append(sh)
                n_scope.setdefault(int(e), []).append(n)
        ds, var, meth = g.split("/", 2)
        for e in sorted(per_epoch):
            S = np.vstack(per_epoch[e])
            for i in range(N):
                mu, sd, n = mean_std(S[:, i].tolist())
                rows.append({"dataset": ds, "variant": var, "method": meth, "epoch": e, "player": i + 1,
                             "share_mean": mu, "share_std": sd, "n_seeds": n,
                             "n_labels": float(np.mean(n_scope[e])),
                             "labels": "contested" if contested_only else "all"})
    return rows


def ranks_rows(by_group: dict[str, list[tuple[RunDir, dict[str, np.ndarray]]]],
               tails: dict[tuple[str, int], np.ndarray], contested_only: bool) -> tuple[list[dict], list[dict]]:
    """Final-epoch mean ranks and shares per (group, player, label group)."""
    rank_rows, share_rows = [], []
    for g, lst in by_group.items():
        N = int(lst[0][1]["player"].max()) + 1
        ds, var, meth = g.split("/", 2)
        per: dict[str, dict[str, list]] = {lg: {"rank": [], "n_rank": [], "share": [], "n_share": [], "tied": []}
                                      for lg in LABEL_GROUPS}
        for r, a in lst:
            acc = a["accuracy"][int(np.argmax(a["epoch"]))]
            tail = tails[(g, r.seed)]
            all_labels = np.unique(a["label"])
            groups = {"rare": np.intersect1d(all_labels, tail), "frequent": np.setdiff1d(all_labels, tail)}
            for lg, labs in groups.items():
                mr, n = mean_ranks(acc, a["player"], a["label"], labs, n_players=N)
                per[lg]["tied"].append(n_all_tied(acc, a["label"], labs))
                sh, ns = specialization_shares(acc, a["player"], a["label"], labels=labs,
                                               contested_only=contested_only, n_players=N)
                per[lg]["rank"].append(mr)
                per[lg]["n_rank"].append(n)
                per[lg]["share"].append(sh)
                per[lg]["n_share"].append(ns)
        for lg in LABEL_GROUPS:
            R, S = np.vstack(per[lg]["rank"]), np.vstack(per[lg]["share"])
            NR = np.vstack(per[lg]["n_rank"])
            for i in range(N):
                mu, sd, n = mean_std(R[:, i].tolist())
                rank_rows.append({"dataset": ds, "variant": var, "method": meth, "player": i + 1, "label_group": lg,
                                  "mean_rank_mean": mu, "mean_rank_std": sd, "n_seeds": n,
                                  "n_contested_labels_mean": float(NR[:, i].mean()),
                                  "n_all_tied_labels_mean": float(np.mean(per[lg]["tied"]))})
                mu, sd, n = mean_std(S[:, i].tolist())
                share_rows.append({"dataset": ds, "variant": var, "method": meth, "player": i + 1, "label_group": lg,
                                   "share_mean": mu, "share_std": sd, "n_seeds": n,
                                   "n_labels_mean": float(np.mean(per[lg]["n_share"])),
                                   "labels": "contested" if contested_only else "all"})
    return rank_rows, share_rows


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
    """Write ``<out>.pdf/.png/.csv/.sources.json`` atomically; returns the paths."""
    plt = _plt()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("pdf", "png"):
        p = _stem(out, ext)
        with atomic_path(p, suffix=f".{ext}") as tmp:
            fig.savefig(tmp, format=ext, dpi=150)
        paths.append(p)
    plt.close(fig)
    _write_rows(_stem(out, "csv"), rows, columns)
    write_json(_stem(out, "sources.json"), log.to_json(out.name, **extra))
    return [*paths, _stem(out, "csv"), _stem(out, "sources.json")]


def _grid(n: int, w: float = 4.8, h: float = 3.8, rows: int = 1):
    plt = _plt()
    cols = max(1, math.ceil(n / rows))
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    return fig, axes.ravel()


def _pct(x: float) -> float:
    return 100.0 * x if x is not None and math.isfinite(x) else float("nan")


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


def specialization_figure(run_dirs: Sequence[str | Path], out: Path, labels: str = "all",
                          title: str = "") -> list[dict[str, Any]]:
    runs = parse_runs(run_dirs)
    log = SourceLog()
    by_group = collect_player_acc(runs, log)
    rows = specialization_rows(by_group, contested_only=labels == "contested")
    fig, axes = _grid(len(by_group), w=5.2)
    for ax, g in zip(axes, by_group):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        n_seeds = len(by_group[g])
        for p in sorted({r["player"] for r in rs}):
            b = [r for r in rs if r["player"] == p]
            e = np.array([r["epoch"] for r in b])
            mu = np.array([_pct(r["share_mean"]) for r in b])
            sd = np.array([_pct(r["share_std"]) for r in b])
            line, = ax.plot(e, mu, label=f"Player {p}")
            ax.fill_between(e, mu - sd, mu + sd, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set(xlabel="epoch", ylabel=f"specialization share (%, {labels} labels)",
               title=title or f"{g} (n={n_seeds} seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, rows, log, labels=labels,
                definition="share = fraction of labels (in scope) on which the player has the best "
                           "per-label validation accuracy among covering players; ties split credit equally")
    return rows


def ranks_figures(run_dirs: Sequence[str | Path], out: Path, tail_fraction: float = 0.2, tie_seed: int = 0,
                  labels: str = "all", title: str = "") -> tuple[list[dict], list[dict]]:
    runs = parse_runs(run_dirs)
    log = SourceLog()
    by_group = collect_player_acc(runs, log)
    tails = {}
    for g, lst in by_group.items():
        for r, a in lst:
            m = read_metrics(r, log)
            if "train_counts" not in m:
                raise ValueError(f"{r.path / METRICS_FILE}: field 'train_counts' missing (needed for the tail)")
            counts = m["train_counts"]
            if len(counts) <= int(a["label"].max()):
                raise ValueError(f"{r.path}: train_counts has {len(counts)} labels, player accuracies index "
                                 f"label {int(a['label'].max())}")
            tails[(g, r.seed)] = tail_from_counts(counts, tail_fraction, tie_seed)
    rank_rows, share_rows = ranks_rows(by_group, tails, contested_only=labels == "contested")
    extra = {"tail_fraction": tail_fraction, "tie_seed": tie_seed,
             "tail_labels": {f"{g} seed{s}": t.tolist() for (g, s), t in tails.items()}}
    groups = list(by_group)

    # heatmap
    fig, axes = _grid(len(groups), w=3.6, h=0.6 * max(int(r["player"]) for r in rank_rows) + 1.6)
    for ax, g in zip(axes, groups):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in rank_rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        N = max(r["player"] for r in rs)
        M = np.full((N, 2), np.nan)
        SD = np.full((N, 2), np.nan)
        for r in rs:
            M[r["player"] - 1, LABEL_GROUPS.index(r["label_group"])] = r["mean_rank_mean"]
            SD[r["player"] - 1, LABEL_GROUPS.index(r["label_group"])] = r["mean_rank_std"]
        im = ax.imshow(np.ma.masked_invalid(M), cmap="viridis_r", vmin=1, vmax=max(2.0, np.nanmax(M) if np.isfinite(M).any() else 2.0),
                       aspect="auto")
        for i in range(N):
            for j in range(2):
                txt = "n/a" if not np.isfinite(M[i, j]) else f"{M[i, j]:.2f}\n±{SD[i, j]:.2f}"
                ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                        color="black" if not np.isfinite(M[i, j]) else "white")
        ax.set_xticks([0, 1], list(LABEL_GROUPS))
        ax.set_yticks(range(N), [f"Player {i + 1}" for i in range(N)])
        tied = {lg: next(r["n_all_tied_labels_mean"] for r in rs if r["label_group"] == lg) for lg in LABEL_GROUPS}
        ax.set_title(title or f"{g}\nmean rank (1 = best; contested labels)", fontsize=8)
        ax.set_xlabel("all players tied on: " + ", ".join(f"{tied[lg]:g} {lg}" for lg in LABEL_GROUPS)
                      + " label(s) (seed mean)", fontsize=7)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    save_figure(fig, Path(f"{out}_heatmap"), rank_rows, log, **extra,
                definition="rank among the players covering a label (1 = best validation accuracy at the "
                           "final epoch, ties = average rank); labels covered by one player excluded")

    # shares
    fig, axes = _grid(len(groups), w=4.4)
    for ax, g in zip(axes, groups):
        ds, var, meth = g.split("/", 2)
        rs = [r for r in share_rows if (r["dataset"], r["variant"], r["method"]) == (ds, var, meth)]
        N = max(r["player"] for r in rs)
        for j, lg in enumerate(LABEL_GROUPS):
            b = sorted((r for r in rs if r["label_group"] == lg), key=lambda r: r["player"])
            xs = np.arange(N) + (j - 0.5) * 0.4
            nl = b[0]["n_labels_mean"] if b else 0
            ax.bar(xs, [_pct(r["share_mean"]) for r in b], 0.4, yerr=[_pct(r["share_std"]) for r in b], capsize=3,
                   label=f"{lg} ({nl:g} labels)", edgecolor="black", linewidth=0.5)
        ax.set_xticks(range(N), [f"Player {i + 1}" for i in range(N)])
        ax.set(ylabel=f"specialization share (%, {labels} labels)", title=title or g)
        ax.title.set_fontsize(8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, Path(f"{out}_shares"), share_rows, log, **extra, labels=labels)
    return rank_rows, share_rows


def potential_figure(run_dirs: Sequence[str | Path], out: Path, tol: float = 0.0,
                     title: str = "") -> tuple[list[dict], list[dict]]:
    runs = parse_runs(run_dirs)
    log = SourceLog()
    curves: dict[str, list[tuple[RunDir, np.ndarray, np.ndarray, np.ndarray | None]]] = {}
    for r in sorted(runs, key=lambda r: (r.group, r.seed)):
        rows_ = read_train_log(r, log)
        if not rows_ or "Phi" not in rows_[0] or "epoch" not in rows_[0]:
            raise ValueError(f"{r.path / TRAIN_LOG}: needs columns 'epoch' and 'Phi' "
                             f"(has {list(rows_[0]) if rows_ else 'no rows'})")
        ep = np.array([int(x["epoch"]) for x in rows_])
        phi = np.array([float(x["Phi"]) for x in rows_])
        beta = np.array([float(x["beta"]) for x in rows_]) if "beta" in rows_[0] else None
        curves.setdefault(r.group, []).append((r, ep, phi, beta))
    rows, summary = [], []
    for g, lst in curves.items():
        ds, var, meth = g.split("/", 2)
        for r, ep, phi, beta in lst:
            mono = phi_monotonicity(ep, phi, tol, beta)
            dec = set(mono["decrease_epochs"])
            for i, (e, f) in enumerate(zip(ep, phi)):
                rows.append({"dataset": ds, "variant": var, "method": meth, "seed": r.seed, "epoch": int(e),
                             "Phi": float(f), "dPhi": float(f - phi[i - 1]) if i else None,
                             "decreased": int(e) in dec})
            summary.append(_summary_row(ds, var, meth, str(r.seed), mono, tol))
        common = sorted(set.intersection(*(set(ep.tolist()) for _, ep, _, _ in lst)))
        mean = np.array([np.mean([phi[list(ep).index(e)] for _, ep, phi, _ in lst]) for e in common])
        r0, ep0, _, beta0 = lst[0]  # beta depends on the schedule only: the same for every seed
        beta_mean = None if beta0 is None else [beta0[list(ep0).index(e)] for e in common]
        summary.append(_summary_row(ds, var, meth, "mean", phi_monotonicity(common, mean, tol, beta_mean), tol))
    fig, axes = _grid(len(curves), w=5.2)
    for ax, (g, lst) in zip(axes, curves.items()):
        n_mono = 0
        for r, ep, phi, beta in lst:
            mono = phi_monotonicity(ep, phi, tol)
            n_mono += mono["monotone"]
            line, = ax.plot(ep, phi, linewidth=0.8, alpha=0.6,
                            label=f"seed {r.seed}: {mono['n_decreases']} decrease(s)")
            dec = np.isin(ep, mono["decrease_epochs"])
            ax.plot(ep[dec], phi[dec], "x", color=line.get_color(), markersize=4)
        common = sorted(set.intersection(*(set(ep.tolist()) for _, ep, _, _ in lst)))
        mean = [np.mean([phi[list(ep).index(e)] for _, ep, phi, _ in lst]) for e in common]
        ax.plot(common, mean, color="black", linewidth=1.6, label="mean")
        ax.set(xlabel="epoch", ylabel="Φ (training estimate, per epoch)",
               title=title or f"{g}: monotone in {n_mono}/{len(lst)} runs")
        ax.title.set_fontsize(8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out, rows, log, tol=tol)
    _write_rows(_stem(out, "monotonicity.csv"), summary)
    return rows, summary


def _summary_row(ds: str, var: str, meth: str, seed: str, mono: dict[str, Any], tol: float) -> dict[str, Any]:
    return {
        "dataset": ds, "variant": var, "method": meth, "seed": seed, "n_epochs": mono["n_epochs"],
        "monotone": mono["monotone"], "n_decreases": mono["n_decreases"],
        "decrease_epochs": ";".join(map(str, mono["decrease_epochs"])),
        "largest_drop": mono["largest_drop"], "tol": tol,
        "n_decreases_after_warmup": mono.get("n_decreases_after_warmup"),
        "decrease_epochs_after_warmup": ";".join(map(str, mono.get("decrease_epochs_after_warmup", []))),
        "phi_first": mono["phi_first"], "phi_last": mono["phi_last"],
    }


# ------------------------------------------------------------------------------ CLI


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdgtmll.study_figures", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="fig", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runs", nargs="+", required=True, help=".../<dataset>/<variant>/<method>/seed<k> dirs")
        p.add_argument("--out", required=True, type=Path, help="output stem (no extension)")
        p.add_argument("--title", default="")

    p = sub.add_parser("ablation", help="bars of metrics per ablated method, gap to the full model")
    common(p)
    p.add_argument("--full", default="CD-GTMLL")
    p.add_argument("--order", nargs="*", default=[])
    p.add_argument("--mode", default="global", help="global | adaptive | global@<tau>")
    p.add_argument("--metrics", nargs="+", default=["mAP", "micro_f1", "rare_f1"])

    p = sub.add_parser("robustness", help="metric drop clean - corrupted per corruption level")
    common(p)
    p.add_argument("--kind", required=True, choices=sorted(KIND_PREFIX))
    p.add_argument("--clean-variant", default="clean")
    p.add_argument("--mode", default="global")
    p.add_argument("--metric", default="rare_f1")

    p = sub.add_parser("sweep", help="metric vs a swept hyper-parameter (method X@param=value)")
    common(p)
    p.add_argument("--param", required=True)
    p.add_argument("--metrics", nargs="+", default=["rare_f1"])
    p.add_argument("--mode", default="global")

    p = sub.add_parser("specialization", help="per-epoch specialization share per player")
    common(p)
    p.add_argument("--labels", choices=("all", "contested"), default="all")

    p = sub.add_parser("ranks", help="final-epoch mean ranks and shares, rare vs frequent")
    common(p)
    p.add_argument("--tail-fraction", type=float, default=0.2)
    p.add_argument("--tie-seed", type=int, default=0)
    p.add_argument("--labels", choices=("all", "contested"), default="all")

    p = sub.add_parser("potential", help="Phi per epoch and its monotonicity")
    common(p)
    p.add_argument("--tol", type=float, default=0.0)

    a = ap.parse_args(argv)
    try:
        if a.fig == "ablation":
            ablation_figure(a.runs, a.out, a.full, a.order, a.mode, a.metrics, a.title)
        elif a.fig == "robustness":
            robustness_figure(a.runs, a.out, a.kind, a.clean_variant, a.mode, a.metric, a.title)
        elif a.fig == "sweep":
            sweep_figure(a.runs, a.out, a.param, a.metrics, a.mode, a.title)
        elif a.fig == "specialization":
            specialization_figure(a.runs, a.out, a.labels, a.title)
        elif a.fig == "ranks":
            ranks_figures(a.runs, a.out, a.tail_fraction, a.tie_seed, a.labels, a.title)
        elif a.fig == "potential":
            _, summary = potential_figure(a.runs, a.out, a.tol, a.title)
            for s in summary:
                print(f"[potential] {s['dataset']}/{s['variant']}/{s['method']} seed {s['seed']}: "
                      f"{'monotone' if s['monotone'] else str(s['n_decreases']) + ' decrease(s) at epochs ' + s['decrease_epochs']}")
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
