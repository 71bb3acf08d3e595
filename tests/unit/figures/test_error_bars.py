"""Error bars over seeds stay in the range of what they are bars of: the
95% t-interval of the mean cut to [0, 100] % for a metric or a share, [-100, 100] pp for a
drop (:func:`cdgtmll.figures.intervals.seed_interval`). Checked in what the figures draw
(the matplotlib artists of the saved figure) and in the CSV they write, on run folders in the
pipeline's exact layout with README's Enron Rare-F1 (three seeds: 0, 0 and 9 %: mean 3,
std 5.2, so mean ± std reached -2.2 and the t-interval -9.9)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from scipy import stats

from cdgtmll.figures.intervals import seed_interval
from cdgtmll.figures.studies import comparison, players
from cdgtmll.io import write_json
from tests.support.study_runs import TOY_LABEL, TOY_PLAYER, run, write_metrics, write_player_acc

ENRON_RARE = [0.0, 0.0, 0.09]


@pytest.fixture
def saved(monkeypatch):
    """Every matplotlib figure saved during the test."""
    out: list[Figure] = []
    orig = Figure.savefig

    def spy(self, fname, *a, **kw):
        out.append(self)
        return orig(self, fname, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    return out


def _t_interval(xs: list[float]) -> tuple[float, float]:
    """The plain 95% t-interval of the mean (scipy's), uncut."""
    a = np.asarray(xs, dtype=float)
    return stats.t.interval(0.95, a.size - 1, loc=a.mean(), scale=a.std(ddof=1) / math.sqrt(a.size))


def test_seed_interval_is_the_t_interval_cut_to_the_range():
    lo, hi = _t_interval([100 * x for x in ENRON_RARE])
    assert lo < 0  # the plain interval leaves the range: the case the cut is for
    assert seed_interval([100 * x for x in ENRON_RARE]) == pytest.approx((0.0, hi))
    assert seed_interval(ENRON_RARE, (0.0, 1.0)) == pytest.approx((0.0, hi / 100))
    inside = [40.0, 44.0, 41.0]
    assert seed_interval(inside) == pytest.approx(_t_interval(inside))  # nothing to cut: unchanged
    assert seed_interval([99.0, 100.0, 100.0])[1] == 100.0
    assert seed_interval([-30.0, 5.0, -2.0], (-100.0, 100.0)) == pytest.approx(_t_interval([-30.0, 5.0, -2.0]))
    assert all(math.isnan(v) for v in seed_interval([3.0]))  # one run: no interval
    assert all(math.isnan(v) for v in seed_interval([3.0, float("nan")]))


def _vertical_segments(ax) -> list[tuple[float, float, float]]:
    """(x, low, high) of every vertical error-bar segment drawn on ``ax`` (Line2D or LineCollection)."""
    segs = []
    for ln in ax.lines:  # seaborn's bars with caps: one line of NaN-separated pieces (cap, bar, cap)
        x, y = np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)
        cuts = np.flatnonzero(np.isnan(x) | np.isnan(y))
        for px, py in zip(np.split(x, cuts), np.split(y, cuts)):
            px, py = px[np.isfinite(px)], py[np.isfinite(py)]
            if len(px) == 2 and px[0] == px[1]:
                segs.append((float(px[0]), float(min(py)), float(max(py))))
    for c in ax.collections:
        if isinstance(c, LineCollection):
            for s in c.get_segments():
                if len(s) == 2 and s[0][0] == s[1][0] and np.isfinite(s).all():
                    segs.append((float(s[0][0]), float(min(s[:, 1])), float(max(s[:, 1]))))
    return segs


def test_ablation_bars_and_csv_stay_at_or_above_zero(tmp_path: Path, saved):
    dirs = []
    for m in ("No-Curiosity", "CD-GTMLL"):
        for k, v in enumerate(ENRON_RARE):
            dirs.append(write_metrics(run(tmp_path / "runs", "enron", "clean", m, k),
                                      {"rare_f1": v, "mAP": 0.25 + v, "micro_f1": 0.54}))
    comparison.ablation_figure(dirs, tmp_path / "abl", order=["No-Curiosity", "CD-GTMLL"])
    df = pd.read_csv(tmp_path / "abl.csv")
    rare = df[df.metric == "rare_f1"]
    assert (rare.ci_low == 0.0).all()  # the t-interval's -9.9 % is cut at 0
    assert rare.ci_high.to_numpy() == pytest.approx(_t_interval(ENRON_RARE)[1])
    assert (df.ci_low >= 0).all() and (df.ci_high <= 1).all()
    assert set(df.error_bars) == {"bars: 95% t-interval of the mean, cut to [0, 1]"}
    fig = saved[0]
    segs = _vertical_segments(fig.axes[0])
    assert len(segs) == len(df)  # one bar per (method, metric)
    assert min(lo for _, lo, _ in segs) >= 0.0
    drawn = sorted((round(lo, 6), round(hi, 6)) for _, lo, hi in segs)
    assert drawn == sorted((round(100 * r.ci_low, 6), round(100 * r.ci_high, 6)) for r in df.itertuples())
    note = " ".join(f"{fig.get_suptitle()} {fig.axes[0].get_title()}".split())
    assert "bars: 95% t-interval of the mean, cut to [0, 100]" in note and "± std" not in note


def test_sweep_error_bars_and_csv_stay_at_or_above_zero(tmp_path: Path, saved):
    dirs = []
    for n in ("1", "2"):
        for k, v in enumerate(ENRON_RARE):
            d = write_metrics(run(tmp_path / "runs", "enron", "clean", f"CD-GTMLL@n_players={n}", k), {"rare_f1": v})
            write_json(d / "method_outputs.json", {"hparams": {"n_players": float(n)}})
            dirs.append(d)
    comparison.sweep_figure(dirs, tmp_path / "n", "n_players")
    df = pd.read_csv(tmp_path / "n.csv")
    assert (df.ci_low == 0.0).all() and df.ci_high.to_numpy() == pytest.approx(_t_interval(ENRON_RARE)[1])
    segs = _vertical_segments(saved[0].axes[0])
    assert len(segs) == 2 and min(lo for _, lo, _ in segs) == 0.0
    for _, lo, hi in segs:
        assert (lo, hi) == pytest.approx((100 * df.ci_low.iloc[0], 100 * df.ci_high.iloc[0]))


def test_robustness_drop_keeps_its_sign_and_is_cut_to_plus_minus_100(tmp_path: Path, saved):
    """A drop is a difference: its bar may go below 0 (a corruption that helped), only not past -100 pp."""
    dirs = []
    clean, noisy = [0.50, 0.52, 0.51], [0.60, 0.50, 0.58]  # drops -10, +2, -7 pp
    for k, (c, nz) in enumerate(zip(clean, noisy)):
        dirs.append(write_metrics(run(tmp_path / "runs", "yeast", "clean", "BCE", k), {"rare_f1": c}))
        dirs.append(write_metrics(run(tmp_path / "runs", "yeast", "N0.10-s0", "BCE", k), {"rare_f1": nz}))
    comparison.robustness_figure(dirs, tmp_path / "rob", kind="noise")
    df = pd.read_csv(tmp_path / "rob.csv")
    lo, hi = _t_interval([c - nz for c, nz in zip(clean, noisy)])
    assert (df.degradation_ci_low.iloc[0], df.degradation_ci_high.iloc[0]) == pytest.approx((lo, hi))
    assert df.degradation_ci_low.iloc[0] < 0
    segs = _vertical_segments(saved[0].axes[0])
    assert len(segs) == 1 and (segs[0][1], segs[0][2]) == pytest.approx((100 * lo, 100 * hi))


def test_specialization_band_and_csv_stay_within_0_and_100(tmp_path: Path, saved):
    """Two seeds whose shares differ widely: the t-interval (t = 12.7 at one degree of freedom)
    leaves [0, 1] for most players and epochs; the band drawn and the CSV are cut to it."""
    dirs = []
    rng = np.random.default_rng(7)
    for k in (0, 1):
        d = run(tmp_path / "runs", "yeast", "clean", "CD-GTMLL", k)
        write_player_acc(d, TOY_PLAYER, TOY_LABEL, rng.random((4, len(TOY_PLAYER))))
        write_metrics(d, {}, train_counts=[50, 3, 20, 1, 40, 7])
        dirs.append(d)
    players.specialization_figure(dirs, tmp_path / "spec")
    df = pd.read_csv(tmp_path / "spec.csv")
    half = stats.t.ppf(0.975, 1) * df.share_std / math.sqrt(2)
    assert ((df.share_mean - half < 0) | (df.share_mean + half > 1)).sum() > 5  # the cut is exercised
    assert (df.share_ci_low >= 0).all() and (df.share_ci_high <= 1).all()
    assert df.share_ci_low.to_numpy() == pytest.approx(np.maximum(0, df.share_mean - half))
    assert df.share_ci_high.to_numpy() == pytest.approx(np.minimum(1, df.share_mean + half))
    ax = saved[0].axes[0]  # by accuracy
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    ys = np.concatenate([p.vertices[:, 1] for c in bands for p in c.get_paths()])
    assert bands and ys.min() >= 0.0 and ys.max() <= 100.0
    drawn = {round(float(y), 6) for y in ys}
    assert {round(100 * v, 6) for v in (*df.share_ci_low, *df.share_ci_high)} <= drawn
