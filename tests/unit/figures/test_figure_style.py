"""Camera-ready style of the figures (:mod:`cdgtmll.figures.style`): a fixed colour-blind-safe
style per method, display names in titles, legends >= 9 pt, 300-dpi PNGs, error bars at
swept values, bands beneath lines. Every figure is drawn from synthetic run directories in
the pipeline's exact layout (and, for the PR curve, Yeast's real labels) and inspected
through the matplotlib figure it saved."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.text import Text
from scipy import stats

from cdgtmll.figures import style as ps
from cdgtmll.figures.studies import comparison, players
from cdgtmll.io import write_json
from tests.support.paths import ROOT
from tests.support.study_runs import TOY_ACC, TOY_LABEL, TOY_PLAYER, run, write_metrics, write_player_acc, write_train_log


@pytest.fixture
def saved(monkeypatch):
    """Every matplotlib figure saved during the test, with the formats and dpi asked for."""
    out: list[tuple[Figure, str, float]] = []
    orig = Figure.savefig

    def spy(self, fname, *a, **kw):
        out.append((self, kw.get("format"), kw.get("dpi")))
        return orig(self, fname, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    return out


def texts(fig: Figure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def title(fig: Figure) -> str:
    return fig.get_suptitle().replace("\n", " ")


def legend_texts(fig: Figure) -> list[Text]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return [t for lg in legends for t in lg.get_texts()]


def check_print_rules(fig: Figure, forbidden: tuple[str, ...] = ("yeast/", "R0.50-s0", "R0.40-s1"),
                      legend: bool = True) -> None:
    """Legends >= 9 pt, no text under 8 pt, no internal ids in any text."""
    assert bool(legend_texts(fig)) == legend
    for t in legend_texts(fig):
        assert t.get_fontsize() >= ps.MIN_LEGEND_PT, t.get_text()
    for t in texts(fig):
        assert t.get_fontsize() >= 7.9, (t.get_text(), t.get_fontsize())
        for bad in forbidden:
            assert bad not in t.get_text(), f"internal id in figure text: {t.get_text()!r}"


# --------------------------------------------------------------------- the style itself


@pytest.mark.slow
def test_builtin_order_lists_every_registered_method():
    # the built-in registry of a fresh process: other tests register plugin methods in this one
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "from cdgtmll.methods.base import available; print(*available(), sep='\\n')"],
                         capture_output=True, text=True, check=True).stdout
    builtin = [m for m in out.splitlines() if m]
    missing = sorted(set(builtin) - set(ps.BUILTIN_ORDER))
    assert not missing, f"append {missing} to cdgtmll.figures.style.BUILTIN_ORDER (fixes their colour in every figure)"
    assert sorted(ps.BUILTIN_ORDER) == sorted(builtin)
    assert ps.BUILTIN_ORDER[0] == ps.PROPOSED


def test_method_style_is_fixed_unique_and_colour_blind_safe():
    aliases = ["No-Curiosity", "Single-Predictor", "No-Overlap", "No-Disagreement"]
    a = ps.FigureStyle(aliases)
    b = ps.FigureStyle(aliases)
    b.add_methods(["Zeta", "ASL", "Alpha"])  # another figure, other methods, other order
    for m in [*ps.BUILTIN_ORDER, *aliases]:
        assert a.method(m) == b.method(m), m
    assert a.method("CD-GTMLL@alpha=0.2") == a.method("CD-GTMLL")  # sweep points: their method
    safe = set(ps.palette_colors())
    # as many methods as the styles tell apart in bars: the proposed one, then 9 colours x 4 hatches
    capacity = 1 + (len(ps.palette_colors()) - 1) * len(ps.HATCHES)
    names = [*ps.BUILTIN_ORDER, *aliases]
    names += [f"extra{i}" for i in range(capacity - len(names))]
    assert len(names) == capacity == 37
    st = {m: a.method(m) for m in names}
    assert all(s.color in safe for s in st.values())
    assert len({(s.color, s.linestyle, s.marker) for s in st.values()}) == len(names)  # lines
    assert len({(s.color, s.hatch) for s in st.values()}) == len(names)  # bars
    assert len({st[m].color for m in ps.BUILTIN_ORDER[:10]}) == 10  # the usual ones: 10 colours
    assert st["CD-GTMLL"].color == ps.palette_colors()[0]
    assert all(s.color != st["CD-GTMLL"].color for m, s in st.items() if m != "CD-GTMLL")
    assert st["CD-GTMLL"].linewidth > st["BCE"].linewidth


def test_display_names_and_variant_titles():
    st = ps.FigureStyle(dataset_names={"mine": "My Data"})
    assert st.setting("yeast", "R0.50-s0") == "Yeast-R, 50% tail positives removed (sampling seed 0)"
    assert st.setting("voc2007", "clean") == "Pascal VOC 2007"
    assert st.setting("yeast", "N0.10-s2") == "Yeast, 10% label noise (seed 2)"
    assert st.setting("mine", "O0.30-s0") == "My Data, 30% occlusion (seed 0)"
    assert st.setting("unknown", "clean") == "unknown"
    assert st.settings_list("yeast", ["R0.40-s0", "R0.40-s1", "R0.40-s2"]) == \
        "Yeast-R, 40% tail positives removed (sampling seeds 0, 1, 2)"


def test_style_cli_args_of_the_shipped_configs():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    args = ps.style_cli_args(cfg)
    assert args == "--style-order No-Curiosity Single-Predictor No-Overlap No-Disagreement"
    cfg["data"]["custom"] = {"toy": {"display_name": "Toy (MULAN)"}}
    args = ps.style_cli_args(cfg)
    assert args.endswith("--dataset-name 'toy=Toy (MULAN)'")
    import argparse
    import shlex

    p = argparse.ArgumentParser()
    ps.add_style_args(p)
    st = ps.style_from_args(p.parse_args(shlex.split(args)))
    assert st.dataset("toy") == "Toy (MULAN)" and st.order[len(ps.BUILTIN_ORDER)] == "No-Curiosity"
    with pytest.raises(ValueError, match="ID=NAME"):
        ps.style_from_args(p.parse_args(["--dataset-name", "toy"]))


# ------------------------------------------------------------------------- figures


def test_comparison_figures_share_method_colours_and_follow_print_rules(tmp_path: Path, saved):
    from PIL import Image

    root = tmp_path / "runs"
    abl, rob = [], []
    for i, m in enumerate(["No-Curiosity", "CD-GTMLL", "BCE"]):
        for k in range(2):
            abl.append(write_metrics(run(root, "yeast", "R0.50-s0", m, k), {"rare_f1": 0.2 + 0.01 * i + 0.01 * k}))
    for m in ("ASL", "CD-GTMLL", "BCE"):
        for var in ("clean", "N0.10-s0", "N0.30-s0"):
            for k in range(2):
                rob.append(write_metrics(run(root, "yeast", var, m, k), {"rare_f1": 0.3 - 0.1 * (var != "clean")}))
    style = ps.FigureStyle(["No-Curiosity"])
    comparison.ablation_figure(abl, tmp_path / "abl", order=["No-Curiosity", "BCE", "CD-GTMLL"], style=style)
    comparison.robustness_figure(rob, tmp_path / "rob", kind="noise", style=ps.FigureStyle(["No-Curiosity"]))
    figs = {}
    for fig, fmt, dpi in saved:
        assert dpi == ps.DPI
        figs.setdefault(fig, fmt)
    abl_fig, rob_fig = list(figs)
    for fig in (abl_fig, rob_fig):
        check_print_rules(fig)
    # bars of a method have its fixed colour in both figures (hue order = bar containers)
    ax = abl_fig.axes[0]
    for m, c in zip(["No-Curiosity", "BCE", "CD-GTMLL"], ax.containers):
        assert {to_rgb(p.get_facecolor()) for p in c} == {style.method(m).color}
        assert {p.get_hatch() or "" for p in c} == {style.method(m).hatch}
    ax = rob_fig.axes[0]
    for m, c in zip(sorted(["ASL", "CD-GTMLL", "BCE"], key=style.index), ax.containers):
        assert {to_rgb(p.get_facecolor()) for p in c} == {style.method(m).color}
    # titles: display names; the gap labels use a real minus sign
    assert title(abl_fig).startswith("Yeast-R, 50% tail positives removed (sampling seed 0)")
    assert any(t.get_text().startswith("\u2212") for t in texts(abl_fig))
    # bar heights = the CSV means (in percent)
    df = pd.read_csv(tmp_path / "abl.csv").set_index(["method", "metric"])
    for m, c in zip(["No-Curiosity", "BCE", "CD-GTMLL"], abl_fig.axes[0].containers):
        assert c[2].get_height() == pytest.approx(100 * df.loc[(m, "rare_f1"), "mean"])
    for name in ("abl", "rob"):
        with Image.open(tmp_path / f"{name}.png") as im:
            assert im.info["dpi"] == pytest.approx((ps.DPI, ps.DPI), abs=0.5)
        assert (tmp_path / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"


def test_sweep_has_error_bars_at_the_swept_values_and_no_band(tmp_path: Path, saved):
    root = tmp_path / "runs"
    dirs = []
    for a, vs in {"0.0": [0.30, 0.34, 0.35], "0.4": [0.40, 0.44, 0.41], "1.0": [0.20, 0.21, 0.26]}.items():
        for k, v in enumerate(vs):
            d = write_metrics(run(root, "yeast", "clean", f"CD-GTMLL@alpha={a}", k), {"rare_f1": v})
            write_json(d / "method_outputs.json", {"hparams": {"alpha": float(a)}})
            dirs.append(d)
    comparison.sweep_figure(dirs, tmp_path / "alpha", "alpha")
    fig = saved[0][0]
    ax = fig.axes[0]
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)], "a band between sweep points"
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert bars, "no error bars"
    segs = [s for c in bars for s in c.get_segments()]
    df = pd.read_csv(tmp_path / "alpha.csv").set_index("value")
    assert sorted({round(float(s[0][0]), 9) for s in segs}) == [0.0, 0.4, 1.0]
    for s in segs:
        x, (lo, hi) = float(s[0][0]), sorted((s[0][1], s[1][1]))
        # the bar drawn is the CSV's interval: the 95% t-interval of the mean (none of these reach 0 or 100)
        assert (lo, hi) == pytest.approx((100 * df.loc[x, "ci_low"], 100 * df.loc[x, "ci_high"]))
        half = stats.t.ppf(0.975, df.loc[x, "n_seeds"] - 1) * df.loc[x, "std"] / np.sqrt(df.loc[x, "n_seeds"])
        assert (lo + hi) / 2 == pytest.approx(100 * df.loc[x, "mean"]) and (hi - lo) / 2 == pytest.approx(100 * half)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "0.4", "1"]
    assert title(fig).startswith("Yeast — CD-GTMLL")


def test_player_figures_put_bands_below_lines(tmp_path: Path, saved):
    root = tmp_path / "runs"
    dirs = []
    for k in (0, 1):
        d = run(root, "yeast", "R0.40-s1", "CD-GTMLL", k)
        write_player_acc(d, TOY_PLAYER, TOY_LABEL, np.vstack([np.full(10, 0.5), TOY_ACC, TOY_ACC[::-1]]))
        write_metrics(d, {}, train_counts=[50, 3, 20, 1, 40, 7])
        write_train_log(d, [-3.0, -2.0, -2.5, -1.0], beta=[0.1, 0.3, 0.3, 0.3])
        dirs.append(d)
    players.specialization_figure(dirs, tmp_path / "spec")
    players.ranks_figures(dirs, tmp_path / "ranks", tail_fraction=0.34)
    players.potential_figure(dirs, tmp_path / "pot")
    figs = list(dict.fromkeys(f for f, _, _ in saved))
    assert len(figs) == 4
    for fig, has_legend in zip(figs, (True, False, True, True)):  # the heatmap has a colour bar instead
        check_print_rules(fig, legend=has_legend)
        assert "Yeast-R, 40% tail positives removed (sampling seed 1)" in title(fig)
    ax = figs[0].axes[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert bands and max(c.get_zorder() for c in bands) < min(ln.get_zorder() for ln in ax.lines)


def test_pr_figure_title_style_and_interpolation(mirror, tmp_path: Path, saved):
    from cdgtmll.data.mulan import read_mulan_arff
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.figures.pr_curve import RECALL_GRID, pr_figure, tail_pr_curve

    # interpolated precision ignores scikit-learn's appended (recall 0, precision 1) point:
    # top score negative -> best precision over the real operating points is 2/3
    c = tail_pr_curve(np.array([[0], [1], [1], [0]]), np.array([[0.9], [0.8], [0.7], [0.1]]), np.array([0]))
    assert c[0] == pytest.approx(2 / 3) and c[50] == pytest.approx(2 / 3) and c[-1] == pytest.approx(2 / 3)

    X, Y, names = read_mulan_arff(mirror / "yeast" / "yeast-train.arff", 14)
    n = 400
    clean = ProcessedData("yeast", X[:n], Y[:n].astype(np.uint8), [f"Class{i}" for i in range(1, 15)],
                          {"train": np.arange(0, 250), "val": np.arange(250, 300), "test": np.arange(300, n)},
                          meta={"display_name": "Yeast"})
    rng = np.random.default_rng(0)
    runs = {}
    for m in ("BCE", "CD-GTMLL"):
        for s in (0, 1):
            d = run(tmp_path / "runs", "yeast", f"R0.40-s{s}", m, 0)
            d.mkdir(parents=True)
            np.savez(d / "predictions.npz", test=rng.random((100, 14)).astype(np.float32))
            runs.setdefault(m, []).append(d / "predictions.npz")
    pr_figure(runs, clean, 0.2, 0, tmp_path / "pr")
    fig = saved[0][0]
    check_print_rules(fig, ("yeast/", "R0.40-s0", "@40%"))
    assert title(fig) == "Yeast-R, 40% tail positives removed: tail PR"
    assert "sampling seeds 0, 1" in fig.axes[0].get_title().replace("\n", " ")
    ax = fig.axes[0]
    st = ps.FigureStyle()
    colors = {to_rgb(ln.get_color()) for ln in ax.lines}
    assert colors == {st.method("BCE").color, st.method("CD-GTMLL").color}
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert bands and max(c.get_zorder() for c in bands) < min(ln.get_zorder() for ln in ax.lines)
    df = pd.read_csv(tmp_path / "pr.csv")
    assert len(df) == 2 * len(RECALL_GRID) and set(df["n_runs"]) == {2}
    src = json.loads((tmp_path / "pr.sources.json").read_text())
    assert src["figure"] == "pr" and len(src["runs"]["BCE"]) == 2


def test_pr_figure_highlight_greys_the_other_methods(mirror, tmp_path: Path, saved):
    """figures.pr_curve.highlight: those methods in colour with a band, the rest thin grey lines
    (mean only) beneath them and one legend entry; the CSV keeps every method. The default
    config highlights the paper's PR comparison; `all` colours everything; an unknown method
    names the key."""
    from cdgtmll.config import loader, plan, schema
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.figures.pr_curve import CONTEXT_GREY, RECALL_GRID, pr_figure

    rng = np.random.default_rng(1)
    Y = (rng.random((300, 6)) < np.linspace(0.05, 0.5, 6)).astype(np.uint8)
    clean = ProcessedData("yeast", rng.random((300, 3)).astype(np.float32), Y, [f"l{i}" for i in range(6)],
                          {"train": np.arange(200), "val": np.arange(200, 220), "test": np.arange(220, 300)})
    runs = {}
    for m in ("BCE", "CD-GTMLL", "Focal", "CB", "LDAM"):
        d = run(tmp_path / "runs", "yeast", "R0.50-s0", m, 0)
        d.mkdir(parents=True)
        np.savez(d / "predictions.npz", test=rng.random((80, 6)).astype(np.float32))
        runs[m] = [d / "predictions.npz"]
    pr_figure(runs, clean, 0.2, 0, tmp_path / "pr", highlight=list(plan.PR_HIGHLIGHT_PAPER))
    fig = saved[0][0]
    ax = fig.axes[0]
    st = ps.FigureStyle()
    grey = [ln for ln in ax.lines if to_rgb(ln.get_color()) == CONTEXT_GREY]
    coloured = {to_rgb(ln.get_color()) for ln in ax.lines} - {CONTEXT_GREY}
    assert len(grey) == 3 and coloured == {st.method("BCE").color, st.method("CD-GTMLL").color}
    assert max(ln.get_zorder() for ln in grey) < min(ln.get_zorder() for ln in ax.lines if ln not in grey)
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 2  # bands: highlighted only
    # every line is named: the grey group in the legend, its members under the axes, in drawing order
    assert "3 other methods (named below)" in [t.get_text() for t in legend_texts(fig)]
    assert "grey, mean only: Focal, CB, LDAM" in [" ".join(t.get_text().split()) for t in texts(fig)]
    assert len(pd.read_csv(tmp_path / "pr.csv")) == 5 * len(RECALL_GRID)  # every method

    base = loader.load(ROOT / "config/config.yaml")
    assert plan.pr_highlight(base) == ["CD-GTMLL", "MLC-NC", "ASL", "BCE"]
    assert plan.pr_highlight(loader.load(ROOT / "config/config.yaml", {"figures": {"pr_curve": {"highlight": "all"}}})) \
        is None
    with pytest.raises(schema.ConfigError, match=r"figures\.pr_curve\.highlight\[1\].*unknown method 'Nope'"):
        loader.load(ROOT / "config/config.yaml", {"figures": {"pr_curve": {"highlight": ["BCE", "Nope"]}}})


def test_pr_figure_names_a_single_other_method_and_cuts_its_band_to_0_1(mirror, tmp_path: Path, saved):
    """One grey method: its legend entry is its name ("1 other methods" named nothing, and
    misspelt). The band, the 95% t-interval of the mean over 2 runs (t = 12.7), leaves [0, 1]
    at most recalls; the band drawn and the CSV's interval are cut to [0, 1]."""
    from scipy import stats

    from cdgtmll.figures.pr_curve import CONTEXT_GREY, RECALL_GRID, pr_figure

    runs = _pr_runs(tmp_path / "runs", ["CD-GTMLL", "BCE", "Focal"], 100, 14)
    pr_figure(runs, _yeast_clean(mirror), 0.2, 0, tmp_path / "pr", highlight=["CD-GTMLL", "BCE"])
    fig = saved[-1][0]
    check_print_rules(fig)
    labels = [t.get_text() for t in legend_texts(fig)]
    assert labels == ["CD-GTMLL", "BCE", "Focal"] and not any("other method" in t for t in labels)
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    assert to_rgb(legend.legend_handles[2].get_color()) == CONTEXT_GREY
    assert not any("grey, mean only" in t.get_text() for t in texts(fig))  # one: the legend names it
    df = pd.read_csv(tmp_path / "pr.csv")
    df = df[df.method.isin(["CD-GTMLL", "BCE"])]
    half = stats.t.ppf(0.975, 1) * df.precision_std / np.sqrt(2)
    assert ((df.precision_mean - half < 0) | (df.precision_mean + half > 1)).sum() > 20  # the cut is exercised
    assert df.precision_ci_low.to_numpy() == pytest.approx(np.maximum(0, df.precision_mean - half))
    assert df.precision_ci_high.to_numpy() == pytest.approx(np.minimum(1, df.precision_mean + half))
    bands = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    ys = np.concatenate([path.vertices[:, 1] for c in bands for path in c.get_paths()])
    assert len(bands) == 2 and ys.min() >= 0.0 and ys.max() <= 1.0
    assert {round(float(v), 6) for v in (*df.precision_ci_low, *df.precision_ci_high)} <= {round(float(y), 6)
                                                                                         for y in ys}
    assert len(RECALL_GRID) == len(df) // 2
    assert "band: 95% t-interval of the mean, cut to [0, 1]" in " ".join(fig.axes[0].get_title().split())


def test_sweep_and_ablation_name_runs_with_byte_identical_predictions(tmp_path: Path, saved):
    """A swept value or an ablation whose predictions equal another's for every seed (by the
    sha256 metrics.json records) measures nothing: the subtitle, the CSV and the sources say so.
    (The default run's N = 4..8 on Yeast are byte-identical: the partition reaches the model only
    through per-player gradient clipping; docs/methods.md.)"""

    def with_predictions(d: Path, sha: str) -> Path:
        m = json.loads((d / "metrics.json").read_text())
        write_json(d / "metrics.json", {**m, "inputs": {"predictions": {"path": str(d / "predictions.npz"),
                                                                         "sha256": sha}}})
        return d

    root = tmp_path / "runs"
    dirs = []
    for n in (1, 2, 4, 5, 8):
        for k in (0, 1):
            d = write_metrics(run(root, "yeast", "clean", f"CD-GTMLL@n_players={n}", k), {"rare_f1": 0.3, "mAP": 0.5})
            write_json(d / "method_outputs.json", {"hparams": {"n_players": n}})
            same = n in (4, 5, 8) or (n == 2 and k == 0)  # N=2 matches on one seed only: not identical
            dirs.append(with_predictions(d, f"{'same' if same else n}-{k}"))
    rows = comparison.sweep_figure(dirs, tmp_path / "players", "n_players", metrics=["rare_f1"])
    assert "byte-identical predictions for every seed: N = 4, 5, 8" in title(saved[-1][0]) + " ".join(
        t.get_text().replace("\n", " ") for t in texts(saved[-1][0]))
    by_value = {r["value"]: r["same_predictions_as"] for r in rows}
    assert by_value == {1.0: "", 2.0: "", 4.0: "5;8", 5.0: "4;8", 8.0: "4;5"}
    src = json.loads((tmp_path / "players.sources.json").read_text())
    assert src["identical_predictions"] == [{"within": ["yeast/clean", "as written (E.1)", "CD-GTMLL"],
                                             "identical": [4.0, 5.0, 8.0]}]

    abl = []
    for m, sha in (("CD-GTMLL", "a"), ("No-Disagreement", "a"), ("No-Curiosity", "c")):
        for k in (0, 1):
            d = write_metrics(run(root, "yeast", "clean", m, k), {"rare_f1": 0.3, "mAP": 0.5, "micro_f1": 0.4})
            abl.append(with_predictions(d, f"{sha}-{k}"))
    comparison.ablation_figure(abl, tmp_path / "abl")
    text = " ".join(t.get_text().replace("\n", " ") for t in texts(saved[-1][0]))
    assert "byte-identical predictions for every seed: CD-GTMLL = No-Disagreement" in text
    df = pd.read_csv(tmp_path / "abl.csv", keep_default_na=False)
    assert set(df[df.method == "No-Disagreement"].same_predictions_as) == {"CD-GTMLL"}
    assert set(df[df.method == "No-Curiosity"].same_predictions_as) == {""}


# ------------------------------------------------ what a reviewer circled


def _pr_runs(root: Path, methods, n_rows: int, n_labels: int, seeds=(0, 1), tied=()) -> dict[str, list[Path]]:
    """Prediction files in the pipeline's layout (R0.50-s0), random scores; ``tied`` methods
    score every row and label 0.5 (a model that ranks nothing, as MLC-NC's saturated heads)."""
    rng = np.random.default_rng(3)
    runs = {}
    for m in methods:
        for k in seeds:
            d = run(root, "yeast", "R0.50-s0", m, k)
            d.mkdir(parents=True)
            S = np.full((n_rows, n_labels), 0.5, np.float32) if m in tied else rng.random((n_rows, n_labels),
                                                                                             dtype=np.float32)
            np.savez(d / "predictions.npz", test=S)
            runs.setdefault(m, []).append(d / "predictions.npz")
    return runs


def _yeast_clean(mirror: Path):
    from cdgtmll.data.mulan import read_mulan_arff
    from cdgtmll.data.processed import ProcessedData

    X, Y, _ = read_mulan_arff(mirror / "yeast" / "yeast-train.arff", 14)
    n = 400
    return ProcessedData("yeast", X[:n], Y[:n].astype(np.uint8), [f"Class{i}" for i in range(1, 15)],
                         {"train": np.arange(0, 250), "val": np.arange(250, 300), "test": np.arange(300, n)},
                         meta={"display_name": "Yeast"})


def _layout(fig: Figure) -> tuple[float, int, int]:
    """(axes height / saved height, title lines, subtitle lines) of a saved one-panel figure,
    measured in the saved figure's tight box (what the PNG shows)."""
    r = fig.canvas.get_renderer()
    box = fig.get_tightbbox(r)  # inches
    ax = fig.axes[0]
    return (ax.get_window_extent(r).height / fig.dpi / box.height, fig.get_suptitle().count("\n") + 1,
            ax.get_title().count("\n") + 1)


@pytest.mark.parametrize("n_methods,highlight", [(3, None), (20, None), (20, "paper")])
def test_pr_figure_axes_get_most_of_the_height(mirror, tmp_path: Path, monkeypatch, n_methods, highlight):
    """The title is one line, the subtitle at most two, and the axes take at least 55% of the
    saved figure's height, at 3 methods and at the default profile's count (20 run on Yeast),
    all in colour or with the paper's highlight. (The old title block -- a two-line title and
    a three-line note -- left the axes 44% of the height at 3 methods.)"""
    from cdgtmll.config.plan import PR_HIGHLIGHT_PAPER
    from cdgtmll.figures.pr_curve import pr_figure

    measured = []
    orig = Figure.savefig

    def spy(self, fname, *a, **kw):
        res = orig(self, fname, *a, **kw)
        measured.append(_layout(self))  # after the save: the layout the file has
        return res

    monkeypatch.setattr(Figure, "savefig", spy)
    methods = [m for m in ps.BUILTIN_ORDER if m not in ("XR-Transformer", "MatchXML", "XR-Linear")][:n_methods]
    runs = _pr_runs(tmp_path / "runs", methods, 100, 14)
    pr_figure(runs, _yeast_clean(mirror), 0.2, 0, tmp_path / "pr",
              highlight=None if highlight is None else list(PR_HIGHLIGHT_PAPER))
    frac, title_lines, subtitle_lines = measured[-1]
    assert frac >= 0.55, f"axes take {frac:.2f} of the figure's height"
    assert title_lines == 1 and subtitle_lines <= 2, (title_lines, subtitle_lines)
    src = json.loads((tmp_path / "pr.sources.json").read_text())
    assert src["setting"] == "Yeast-R, 50% tail positives removed (sampling seed 0)"  # the details, in full


def test_pr_figure_names_every_method_without_a_curve(mirror, tmp_path: Path, saved):
    """A method with no curve -- every run's tail scores tied (no ranking), or no runs at all
    (a configured method that cannot run here) -- is named with its reason under the legend,
    in the CSV (n_runs 0) and in sources.json; before, it dropped out silently (or was drawn
    as a flat line at the tail prevalence that ranks nothing)."""
    from cdgtmll.figures.pr_curve import RECALL_GRID, pr_figure

    runs = _pr_runs(tmp_path / "runs", ["CD-GTMLL", "MLC-NC", "BCE"], 100, 14, tied={"MLC-NC"})
    clean = _yeast_clean(mirror)
    pr_figure(runs, clean, 0.2, 0, tmp_path / "tied")
    text = " ".join(t.get_text().replace("\n", " ") for t in texts(saved[-1][0]))
    assert "no curve: MLC-NC \u2014 all tail-label scores tied: no ranking in 2 of 2 runs" in text
    pr_figure(runs, clean, 0.2, 0, tmp_path / "pr",
              no_runs={"XR-Linear": "environment .venv/xmc/pecos not built: run `make xmc-envs`"})
    fig = saved[-1][0]
    check_print_rules(fig)
    text = " ".join(t.get_text().replace("\n", " ") for t in texts(fig))
    assert "no curve: MLC-NC \u2014 all tail-label scores tied: no ranking in 2 of 2 runs" in text
    assert "XR-Linear \u2014 not run: environment .venv/xmc/pecos not built" in text
    st = ps.FigureStyle()
    assert {to_rgb(ln.get_color()) for ln in fig.axes[0].lines} == {st.method("CD-GTMLL").color,
                                                                    st.method("BCE").color}
    assert [t.get_text() for t in legend_texts(fig)] == ["CD-GTMLL", "BCE"]
    df = pd.read_csv(tmp_path / "pr.csv", keep_default_na=False)
    assert len(df[df.method == "CD-GTMLL"]) == len(RECALL_GRID) and set(df[df.method == "CD-GTMLL"].no_curve) == {""}
    for m, why in (("MLC-NC", "all tail-label scores tied: no ranking in 2 of 2 runs"),
                   ("XR-Linear", "not run: environment .venv/xmc/pecos not built: run `make xmc-envs`")):
        row = df[df.method == m]
        assert len(row) == 1 and row.iloc[0].n_runs == 0 and row.iloc[0].no_curve == why
    src = json.loads((tmp_path / "pr.sources.json").read_text())
    assert [e["method"] for e in src["no_curve"]] == ["MLC-NC", "XR-Linear"]
    assert len(src["runs"]["MLC-NC"]) == 2  # the files read, curve or not


def _sweep_dirs(root: Path, param: str, values: dict, metric: str = "rare_f1") -> list[Path]:
    dirs = []
    for v, ys in values.items():
        for k, y in enumerate(ys):
            d = write_metrics(run(root, "yeast", "clean", f"CD-GTMLL@{param}={v}", k), {metric: y})
            write_json(d / "method_outputs.json", {"hparams": {param: float(v)}})
            dirs.append(d)
    return dirs


def test_sweep_titles_name_the_swept_parameter(tmp_path: Path, saved):
    """The α sweep's title names α (the curiosity weight), the N sweep's N (the number of
    players), with one setting and with several (then the note says it)."""
    comparison.sweep_figure(_sweep_dirs(tmp_path / "a", "alpha", {"0.0": [0.3, 0.32], "0.4": [0.35, 0.31]}),
                            tmp_path / "alpha", "alpha")
    comparison.sweep_figure(_sweep_dirs(tmp_path / "n", "n_players", {"1": [0.3, 0.32], "3": [0.35, 0.31]}),
                            tmp_path / "players", "n_players")
    assert title(saved[0][0]).startswith("Yeast — CD-GTMLL, varying the curiosity weight α")
    assert title(saved[-1][0]).startswith("Yeast — CD-GTMLL, varying the number of players N")
    dirs = _sweep_dirs(tmp_path / "b", "alpha", {"0.0": [0.3], "0.4": [0.35]})
    for v in ("0.0", "0.4"):
        d = write_metrics(run(tmp_path / "b", "yeast", "R0.50-s0", f"CD-GTMLL@alpha={v}", 0), {"rare_f1": 0.2})
        write_json(d / "method_outputs.json", {"hparams": {"alpha": float(v)}})
        dirs.append(d)
    comparison.sweep_figure(dirs, tmp_path / "two", "alpha")
    assert title(saved[-1][0]).startswith("CD-GTMLL, varying the curiosity weight α:")


def test_sweep_y_axis_spans_the_minimum_and_says_when_flat(tmp_path: Path, saved):
    """A flat N sweep (47.9% at every N, as Yeast's Micro-F1) is drawn on a y axis of at least
    5 pp and says "identical at every N" (it was zoomed to 47.5-48.3, a flat line read as a
    trend); a sweep that varies by a few tenths is not zoomed either; the CSV marks the flat panel."""
    flat = {str(n): [0.4792, 0.4792] for n in (1, 2, 4, 8)}
    comparison.sweep_figure(_sweep_dirs(tmp_path / "f", "n_players", flat, "micro_f1"), tmp_path / "flat",
                            "n_players", metrics=["micro_f1"])
    ax = saved[-1][0].axes[0]
    lo, hi = ax.get_ylim()
    assert hi - lo >= 5.0 and lo <= 47.92 <= hi
    assert "identical at every N: 47.92%" in [t.get_text() for t in ax.texts]
    df = pd.read_csv(tmp_path / "flat.csv")
    assert set(df.all_values_identical) == {True}
    src = json.loads((tmp_path / "flat.sources.json").read_text())
    assert src["all_values_identical"] == [{"setting": "yeast/clean", "reading": "as written (E.1)", "metric": "micro_f1",
                                            "value": pytest.approx(47.92)}]

    near = {"1": [0.476, 0.478], "2": [0.481, 0.483], "3": [0.479, 0.480]}
    comparison.sweep_figure(_sweep_dirs(tmp_path / "g", "n_players", near, "micro_f1"), tmp_path / "near",
                            "n_players", metrics=["micro_f1"])
    ax = saved[-1][0].axes[0]
    lo, hi = ax.get_ylim()
    assert hi - lo >= 5.0 and not ax.texts
    zero = {"0.0": [0.0, 0.0], "1.0": [0.0, 0.0]}  # Rare-F1 0 everywhere: from 0, never below
    comparison.sweep_figure(_sweep_dirs(tmp_path / "z", "alpha", zero), tmp_path / "zero", "alpha")
    lo, hi = saved[-1][0].axes[0].get_ylim()
    assert -0.5 < lo <= 0 and hi - lo >= 5.0


def test_ablation_robustness_and_specialization_axes_span_the_minimum(tmp_path: Path, saved):
    """Near-equal or all-zero values are not drawn on a sliver of an axis: the ablation (Rare-F1
    0 for every variant: was 0 to 1e-9), robustness (drops of a few hundredths of a point) and
    specialisation (shares flat at 33.3%) axes span at least 5 pp."""
    root = tmp_path / "runs"
    abl, rob = [], []
    for m in ("No-Curiosity", "CD-GTMLL"):
        for k in (0, 1):
            abl.append(write_metrics(run(root, "yeast", "clean", m, k), {"rare_f1": 0.0, "mAP": 0.0, "micro_f1": 0.0}))
    for m in ("BCE", "CD-GTMLL"):
        for var, v in (("clean", 0.3), ("N0.10-s0", 0.2999)):
            for k in (0, 1):
                rob.append(write_metrics(run(root, "yeast", var, m, k), {"rare_f1": v}))
    comparison.ablation_figure(abl, tmp_path / "abl")
    comparison.robustness_figure(rob, tmp_path / "rob", kind="noise")
    # specialisation shares flat at 1/3 (every player equally accurate on every label)
    spec = []
    for k in (0, 1):
        d = run(root, "yeast", "R0.50-s0", "CD-GTMLL", k)
        write_player_acc(d, TOY_PLAYER, TOY_LABEL, np.full((4, len(TOY_ACC)), 0.5))
        write_metrics(d, {})
        spec.append(d)
    players.specialization_figure(spec, tmp_path / "spec")
    figs = list(dict.fromkeys(f for f, _, _ in saved))
    assert len(figs) == 3
    for fig in figs:
        lo, hi = fig.axes[0].get_ylim()
        assert hi - lo >= 5.0, (lo, hi)


def test_pr_figure_names_a_custom_dataset_by_its_configured_display_name(tmp_path: Path, saved):
    """prepare is not given a custom dataset's display_name (a name is not data: renaming re-runs
    no prepare), so its processed file holds the id; the figure takes the name from
    --dataset-name, as every other figure does."""
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.figures.pr_curve import pr_figure

    rng = np.random.default_rng(2)
    n = 120
    Y = (rng.random((n, 5)) < 0.3).astype(np.uint8)
    clean = ProcessedData("toy", rng.random((n, 3)).astype(np.float32), Y, [f"l{i}" for i in range(5)],
                          {"train": np.arange(0, 60), "val": np.arange(60, 80), "test": np.arange(80, n)},
                          meta={"display_name": "toy"})
    d = run(tmp_path / "runs", "toy", "R0.40-s0", "BCE", 0)
    d.mkdir(parents=True)
    np.savez(d / "predictions.npz", test=rng.random((40, 5)).astype(np.float32))
    style = ps.FigureStyle(dataset_names={"toy": "Toy (MULAN)"})
    pr_figure({"BCE": [d / "predictions.npz"]}, clean, 0.2, 0, tmp_path / "pr", style=style)
    assert title(saved[0][0]).startswith("Toy (MULAN)-R, 40% tail positives removed")
