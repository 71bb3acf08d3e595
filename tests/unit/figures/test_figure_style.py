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
    names = [*ps.BUILTIN_ORDER, *aliases, *(f"extra{i}" for i in range(6))]  # 36 methods
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
        assert (lo + hi) / 2 == pytest.approx(100 * df.loc[x, "mean"])
        assert (hi - lo) / 2 == pytest.approx(100 * df.loc[x, "std"])
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
    assert title(fig).startswith("Yeast-R, 40% tail positives removed (sampling seeds 0, 1)")
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
    assert "3 other methods" in [t.get_text() for t in legend_texts(fig)]
    assert "grey: 3 other methods" in " ".join(t.get_text() for t in texts(fig))
    assert len(pd.read_csv(tmp_path / "pr.csv")) == 5 * len(RECALL_GRID)  # every method

    base = loader.load(ROOT / "config/config.yaml")
    assert plan.pr_highlight(base) == ["CD-GTMLL", "MLC-NC", "ASL", "BCE"]
    assert plan.pr_highlight(loader.load(ROOT / "config/config.yaml", {"figures": {"pr_curve": {"highlight": "all"}}})) \
        is None
    with pytest.raises(schema.ConfigError, match=r"figures\.pr_curve\.highlight\[1\].*unknown method 'Nope'"):
        loader.load(ROOT / "config/config.yaml", {"figures": {"pr_curve": {"highlight": ["BCE", "Nope"]}}})


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
    assert src["identical_predictions"] == [{"within": ["yeast/clean", "CD-GTMLL"], "identical": [4.0, 5.0, 8.0]}]

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
