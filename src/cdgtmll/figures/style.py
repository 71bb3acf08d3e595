"""The look shared by every figure (:mod:`cdgtmll.figures.pr_curve`, :mod:`cdgtmll.figures.studies.build`).

* **Theme**: seaborn ``whitegrid`` axes with the ``paper`` context and the fonts of
  :data:`RC` (9 pt text, 8 pt ticks and notes, legends 9 pt = :data:`MIN_LEGEND_PT`),
  sized for print: one panel is one column of a two-column paper (:data:`ONE_COLUMN` =
  3.4 in), so the points are the printed sizes. PDF fonts embedded as TrueType
  (``pdf.fonttype 42``; camera-ready checkers reject Type 3 fonts); a PNG at :data:`DPI` =
  300 beside every PDF; no timestamps in either file. Draw and save inside
  :func:`figure_style`.
* **One style per method, the same in every figure.** A method's colour, marker, line
  style and bar hatch follow from its position in :data:`BUILTIN_ORDER` (every built-in
  method of :mod:`cdgtmll.methods`), then the methods the caller names (``--style-order``:
  the config's aliases, which the Snakemake rules pass identically to every figure), then
  any other name in sorted order. It never depends on which methods a figure draws or in
  which order; a sweep point ``X@param=v`` is drawn as ``X``.
* **Colour-blind safe**: seaborn's ``colorblind`` palette (10 colours, after Wong, Nature
  Methods 8:441, 2011), and more methods than colours are told apart by line style, bar
  hatch and marker. The proposed method :data:`PROPOSED` alone is ``colorblind`` blue, with
  a thicker line drawn beneath the others (a thin line on it stays visible; on top it
  would hide them). The others take, by position j (0, 1, ...) after it, colour
  ``j mod 9`` of the other 9 colours and group ``j div 9``: group 0 solid lines and plain
  bars, group 1 dashed and bars hatched ``////``, group 2 dotted and ``\\\\\\\\``, group 3
  dash-dot and ``xxxx`` (:data:`LINESTYLES`, :data:`HATCHES`), so two methods with the same
  colour are 9 positions apart and differ in line style and hatch. Each method also has one
  of 7 markers (:data:`MARKERS`, by position). The first 9 after the proposed method are
  the ones most often drawn together (:data:`BUILTIN_ORDER`), so they never share a colour.
* **Names for people**: datasets by their registry ``display_name`` (custom datasets: the
  config's ``display_name``, passed as ``--dataset-name id=Name``); variants spelled out
  (:meth:`FigureStyle.setting`): ``yeast/R0.50-s0`` -> "Yeast-R, 50% tail positives
  removed (sampling seed 0)".
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cdgtmll.figures.intervals import PERCENT, seed_interval
from cdgtmll.methods.builtin import BUILTIN

PALETTE = "colorblind"
PROPOSED = "CD-GTMLL"
#: Every built-in method, in the order of their specs (:data:`cdgtmll.methods.builtin.BUILTIN`,
#: whose docstring says why): a method's style follows from its position.
BUILTIN_ORDER = tuple(spec.name for spec in BUILTIN)
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.")
HATCHES = ("", "////", "\\\\\\\\", "xxxx")
DPI = 300
MIN_LEGEND_PT = 9.0
NOTE_PT = 8.0
RC: dict[str, Any] = {
    "font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": 8,
    "ytick.labelsize": 8, "legend.fontsize": MIN_LEGEND_PT, "legend.title_fontsize": MIN_LEGEND_PT,
    "figure.titlesize": 9, "axes.titlepad": 4.0, "lines.linewidth": 1.3, "lines.markersize": 4.5,
    "axes.linewidth": 0.6, "axes.edgecolor": "0.35", "patch.linewidth": 0.5, "grid.linewidth": 0.4,
    "grid.color": "0.88", "hatch.linewidth": 0.6, "xtick.major.width": 0.6, "ytick.major.width": 0.6,
    "legend.frameon": False, "legend.handlelength": 1.8, "legend.columnspacing": 1.0,
    "pdf.fonttype": 42, "ps.fonttype": 42, "savefig.dpi": DPI, "figure.dpi": 100,
    # every text is drawn as written: a display name may hold '$' (a config's text, any
    # characters), which matplotlib would otherwise read as mathtext (two: set as math; one:
    # a ValueError and no figure). No figure of the project writes math.
    "text.parse_math": False,
}  # fmt: skip
#: figure widths (inches): one column and two columns of a two-column paper
ONE_COLUMN, TWO_COLUMNS = 3.4, 7.0
#: the least a y axis of percentages spans (points): a zoom onto a narrower range makes
#: differences of a few tenths (or flat lines) look like a trend (:func:`honest_ylim`)
MIN_SPAN_PP = 5.0

PARAM_LABELS = {"alpha": "curiosity weight α", "n_players": "number of players N"}

_VARIANT_RE = re.compile(r"^([RNO])(\d+(?:\.\d+)?)-s(\d+)$")
_SWEEP_RE = re.compile(r"^(?P<base>.+?)@[A-Za-z_]\w*=[^@]+$")


@dataclass(frozen=True)
class MethodStyle:
    """How one method is drawn, in lines (colour, marker, linestyle) and bars (hatch)."""

    color: tuple[float, float, float]
    marker: str
    linestyle: str
    hatch: str
    linewidth: float
    zorder: float

    def line_kw(self) -> dict[str, Any]:
        return {"color": self.color, "marker": self.marker, "linestyle": self.linestyle,
                "linewidth": self.linewidth, "zorder": self.zorder}


def palette_colors() -> list[tuple[float, float, float]]:
    import seaborn as sns

    return [tuple(c) for c in sns.color_palette(PALETTE)]


def base_method(name: str) -> str:
    """``CD-GTMLL@alpha=0.2`` -> ``CD-GTMLL`` (a sweep point is drawn as its method)."""
    m = _SWEEP_RE.match(name)
    return m["base"] if m else name


@dataclass
class FigureStyle:
    """Method styles and display names for one figure command.

    ``extra_methods``: methods that are not built in (config aliases), in the order that
    fixes their style; ``dataset_names``: dataset id -> display name, overriding the registry.
    """

    extra_methods: Sequence[str] = ()
    dataset_names: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.order: list[str] = list(dict.fromkeys([*BUILTIN_ORDER, *self.extra_methods]))
        self._colors = palette_colors()

    # ------------------------------------------------------------------ methods
    def add_methods(self, names: Iterable[str]) -> None:
        """Append names not in the order yet, sorted (call with all of a figure's methods
        before drawing, so the result does not depend on the drawing order)."""
        new = sorted({base_method(n) for n in names} - set(self.order))
        self.order.extend(new)

    def index(self, name: str) -> int:
        name = base_method(name)
        if name not in self.order:
            self.add_methods([name])
        return self.order.index(name)

    def method(self, name: str) -> MethodStyle:
        i = self.index(name)
        proposed = base_method(name) == PROPOSED
        if proposed:
            color, group = self._colors[0], 0
        else:
            j = i - 1 if PROPOSED in self.order[:i] else i
            group, color = j // 9, self._colors[1 + j % 9]
        return MethodStyle(color=color, marker=MARKERS[i % len(MARKERS)],
                           linestyle=LINESTYLES[group % len(LINESTYLES)], hatch=HATCHES[group % len(HATCHES)],
                           linewidth=2.0 if proposed else 1.3, zorder=2.8 if proposed else 3.0)

    # ----------------------------------------------------------------- datasets
    def dataset(self, ds: str) -> str:
        if ds in self.dataset_names:
            return self.dataset_names[ds]
        try:
            from cdgtmll.data.registry import get_spec

            return get_spec(ds).display_name
        except KeyError:
            return ds

    def setting(self, ds: str, variant: str) -> str:
        """A title for ``<dataset>/<variant>``: ``Yeast``, ``Yeast-R, 50% tail positives
        removed (sampling seed 0)``, ``Yeast, 10% label noise (seed 0)``, ``Yeast, 10%
        occlusion (seed 0)`` (:func:`describe_variant`)."""
        name = self.dataset(ds)
        if variant == "clean":
            return name
        return f"{name}{'-R' if variant.startswith('R') else ''}, {describe_variant(variant)}"

    def settings_list(self, ds: str, variants: Sequence[str]) -> str:
        """One title for runs of several R-variants of the same severity (pooled sampling
        seeds): "Yeast-R, 50% ... removed (sampling seeds 0, 1, 2)"."""
        parsed = [_VARIANT_RE.match(v) for v in variants]
        if len(variants) > 1 and all(parsed) and len({(m[1], float(m[2])) for m in parsed}) == 1:
            m = parsed[0]
            seeds = ", ".join(sorted({p[3] for p in parsed}, key=int))
            return self.setting(ds, variants[0]).replace(f"(sampling seed {m[3]})", f"(sampling seeds {seeds})") \
                .replace(f"(seed {m[3]})", f"(seeds {seeds})")
        return "; ".join(self.setting(ds, v) for v in variants)


def describe_variant(variant: str) -> str:
    """``R0.50-s0`` -> "50% tail positives removed (sampling seed 0)" (App. E.3: that share
    of each tail label's training positives set to 0); ``N0.10-s0`` -> "10% label noise
    (seed 0)" (training positives flipped to 0 with that probability); ``O0.10-s0`` ->
    "10% occlusion (seed 0)" (a patch over that share of each training image's pixels);
    any other id unchanged."""
    m = _VARIANT_RE.match(variant)
    if not m:
        return variant
    pct = f"{100 * float(m[2]):g}%"
    if m[1] == "R":
        return f"{pct} tail positives removed (sampling seed {m[3]})"
    if m[1] == "N":
        return f"{pct} label noise (seed {m[3]})"
    return f"{pct} occlusion (seed {m[3]})"


def wrap(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters (each ``\\n``-separated part
    wrapped), never breaking inside parentheses ("(sampling seed 0)" stays on one line)."""
    if not text:
        return text
    keep = re.sub(r"\([^()]*\)", lambda m: m.group(0).replace(" ", "\u00a0"), text)
    out = "\n".join("\n".join(textwrap.wrap(part, width=width, break_on_hyphens=False)) or part
                    for part in keep.split("\n"))
    return out.replace("\u00a0", " ")


def chars_per_line(width_in: float, pt: float) -> int:
    """About how many characters of a ``pt``-point sans-serif font fit in ``width_in`` inches."""
    return max(20, int(width_in * 72 / (0.5 * pt)))


def titles(fig: Any, axes: Sequence[Any], panel_titles: Sequence[str], note: str = "", override: str = "",
           panel_width: float = ONE_COLUMN) -> None:
    """Titles and the note (what is averaged, what the marks mean), each wrapped to the
    panel width. One panel: its title is the figure title and the note (8 pt) sits between
    it and the axes; one title for a row of panels (``axes`` all of them): title and note
    above all; several panels with titles: each its own title, the note (8 pt) above all.
    ``override`` (``--title``) replaces the panel titles."""
    if override:
        panel_titles = [override] * len(panel_titles)
    if len(panel_titles) == 1 and len([ax for ax in axes if ax.get_visible()]) > 1:  # one title, a row of panels
        w = chars_per_line(fig.get_figwidth(), 9.5)
        fig.suptitle(wrap(panel_titles[0], w) + (f"\n{wrap(note, w)}" if note else ""), fontsize=9)
        return
    if len(panel_titles) == 1:
        fig.suptitle(wrap(panel_titles[0], chars_per_line(panel_width, 9.5)), fontsize=9.5)
        if note:
            axes[0].set_title(wrap(note, chars_per_line(panel_width, NOTE_PT)), fontsize=NOTE_PT, color="0.25")
        return
    for ax, t in zip(axes, panel_titles):
        ax.set_title(wrap(t, chars_per_line(panel_width, 9)))
    if note:
        fig.suptitle(wrap(note, chars_per_line(fig.get_figwidth(), NOTE_PT)), fontsize=NOTE_PT, color="0.25")


def footnote(ax: Any, text: str) -> Any:
    """A note (:data:`NOTE_PT`, already wrapped: at most as wide as the axes, or the
    constrained layout narrows the axes to make room) centred under the x-axis label of
    ``ax``. It belongs to the axes, so the layout keeps it clear of a legend below the panels
    and the saved tight box takes it in. Returns the text artist."""
    return ax.annotate(text, xy=(0.5, 0.0), xycoords=("axes fraction", ax.xaxis.label), xytext=(0, -2),
                       textcoords="offset points", ha="center", va="top", fontsize=NOTE_PT, color="0.25",
                       annotation_clip=False)


@contextmanager
def figure_style() -> Iterator[None]:
    """seaborn ``whitegrid`` + ``paper`` context with :data:`RC` for the drawing and saving
    inside the block (restored afterwards)."""
    import matplotlib

    matplotlib.use("Agg")
    import seaborn as sns

    rc = {**sns.axes_style("whitegrid"), **sns.plotting_context("paper"), **RC}
    with matplotlib.rc_context(rc):
        yield


def bands_below_lines(ax: Any) -> None:
    """Put every filled band (``fill_between``, seaborn's error bands) under every line,
    so that no line is hidden by another line's band."""
    from matplotlib.collections import PolyCollection

    for c in ax.collections:
        if isinstance(c, PolyCollection):
            c.set_zorder(1.5)
    for ln in ax.lines:
        if ln.get_zorder() <= 1.5:
            ln.set_zorder(2.0)


def honest_ylim(ax: Any, min_span: float = MIN_SPAN_PP, floor: float = 0.0, ceil: float = 100.0) -> tuple[float, float]:
    """Widen the y axis of ``ax`` (drawn, autoscaled to everything on it) to at least
    ``min_span``, around its centre, shifted to stay within [``floor``, ``ceil``] (plus a
    margin of 4% of ``min_span``; percentages: 0-100; a signed difference: -100-100). An axis that already spans
    ``min_span`` is left as drawn. Returns the limits."""
    lo, hi = ax.get_ylim()
    if hi - lo >= min_span:
        return lo, hi
    mid = (lo + hi) / 2
    lo, hi = mid - min_span / 2, mid + min_span / 2
    margin = 0.04 * min_span  # a mark at the floor (0%) is drawn whole, not cut by the axis
    if lo < floor - margin:
        lo, hi = floor - margin, floor - margin + min_span
    elif hi > ceil + margin:
        lo, hi = ceil + margin - min_span, ceil + margin
    ax.set_ylim(lo, hi)
    return lo, hi


def save_kw() -> dict[str, Any]:
    """``savefig`` options of every figure: 300 dpi, tight box, no timestamps in the files."""
    return {"dpi": DPI, "bbox_inches": "tight", "pad_inches": 0.03}


def save_metadata(ext: str) -> dict[str, Any]:
    return {"pdf": {"CreationDate": None, "ModDate": None}, "png": {"Software": None}}.get(ext, {})


# ------------------------------------------------------------------------ drawing


def method_handles(methods: Sequence[str], style: FigureStyle, labels: Sequence[str] | None = None,
                   kind: str = "bar") -> tuple[list[Any], list[str]]:
    """Legend handles that show a method exactly as drawn (bar: colour + hatch; line:
    colour + line style + marker)."""
    from matplotlib.lines import Line2D

    sts = {m: style.method(m) for m in methods}
    if kind == "bar":
        handles = bar_handles(methods, {m: s.color for m, s in sts.items()}, {m: s.hatch for m, s in sts.items()})
    else:
        handles = [Line2D([], [], **{**sts[m].line_kw(), "markersize": 5}) for m in methods]
    return handles, list(labels if labels is not None else methods)


def seed_bars(ax: Any, long: Sequence[Mapping[str, Any]], x: str, xorder: Sequence[str],
              methods: Sequence[str], style: FigureStyle, bounds: tuple[float, float] = PERCENT) -> list[Any]:
    """:func:`group_bars` with one bar per method in ``methods`` (``long`` rows carry
    ``x``, ``"method"``, ``"value"``), coloured and hatched by ``style``."""
    sts = {m: style.method(m) for m in methods}
    rows = [{x: r[x], "hue": r["method"], "value": r["value"]} for r in long]
    return group_bars(ax, rows, x, xorder, methods, {m: s.color for m, s in sts.items()},
                      {m: s.hatch for m, s in sts.items()}, bounds)


def group_bars(ax: Any, long: Sequence[Mapping[str, Any]], x: str, xorder: Sequence[str], hues: Sequence[str],
               colors: Mapping[str, Any], hatches: Mapping[str, str] | None = None,
               bounds: tuple[float, float] = PERCENT) -> list[Any]:
    """Grouped bars (seaborn ``barplot``): the mean of ``value`` over the rows of ``long`` per
    (``x``, ``hue``) with its error bar, the 95% t-interval of the mean cut to ``bounds`` (the
    values' range: :func:`cdgtmll.figures.intervals.seed_interval`; none for one row), each
    row as a dot on its bar. Returns the bar containers in ``hues`` order (one bar per
    ``xorder`` entry each)."""
    import pandas as pd
    import seaborn as sns

    rows = list(long)
    have = {(r[x], r["hue"]) for r in rows}
    # a NaN row for every missing (x, hue) keeps each bar in its slot, under its dots
    rows += [{x: xv, "hue": h, "value": float("nan")} for xv in xorder for h in hues if (xv, h) not in have]
    df = pd.DataFrame(rows, columns=[x, "hue", "value"])
    common = {"data": df, "x": x, "y": "value", "hue": "hue", "order": list(xorder),
              "hue_order": list(hues), "ax": ax, "legend": False}
    n_before = len(ax.containers)
    sns.barplot(**common, palette=dict(colors), saturation=1.0, errorbar=lambda v: seed_interval(v, bounds),
                capsize=0.15, edgecolor="0.15",
                linewidth=0.5, err_kws={"linewidth": 0.9, "color": "0.15"}, zorder=2)
    containers = list(ax.containers)[n_before:]
    for h, c in zip(hues, containers):
        for bar in c:
            bar.set_hatch((hatches or {}).get(h, ""))
    sns.stripplot(**common, palette={h: "0.1" for h in hues}, dodge=True, jitter=False, size=2.4,
                  alpha=0.75, zorder=5)
    return containers


def bar_handles(hues: Sequence[str], colors: Mapping[str, Any], hatches: Mapping[str, str] | None = None) -> list[Any]:
    from matplotlib.patches import Patch

    return [Patch(facecolor=colors[h], edgecolor="0.15", hatch=(hatches or {}).get(h, ""), linewidth=0.5)
            for h in hues]


def n_labels(methods: Sequence[str], ns: Mapping[str, int]) -> list[str]:
    """Legend labels: the method names, with ``(n=k)`` only when the run counts differ."""
    same = len({ns[m] for m in methods}) <= 1
    return [m if same else f"{m} (n={ns[m]})" for m in methods]


def legend_below(fig: Any, handles: Sequence[Any], labels: Sequence[str], ncol: int) -> None:
    """The figure's legend under the panels (outside the data), at :data:`MIN_LEGEND_PT`;
    needs the figure's constrained layout (:func:`cdgtmll.figures.studies.runs._grid`)."""
    fig.legend(handles, labels, loc="outside lower center", ncol=max(1, ncol), fontsize=MIN_LEGEND_PT)


def legend_right(ax: Any, handles: Sequence[Any], labels: Sequence[str], ncol: int = 1) -> None:
    """The legend right of the axes ``ax`` (outside the data), at :data:`MIN_LEGEND_PT`,
    below the figure title (constrained layout makes room for it)."""
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              ncol=max(1, ncol), fontsize=MIN_LEGEND_PT)


# --------------------------------------------------------------------------- CLI


def add_style_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--style-order", nargs="*", default=[], metavar="METHOD",
                   help="methods that are not built in (config aliases), in the order that fixes their "
                        "colour and marker after the built-in ones; pass the same list to every figure")
    p.add_argument("--dataset-name", action="append", default=[], metavar="ID=NAME",
                   help="display name of a dataset (custom datasets); repeatable")


def style_from_args(args: argparse.Namespace) -> FigureStyle:
    names = {}
    for item in args.dataset_name or []:
        ds, sep, name = item.partition("=")
        if not sep or not ds or not name:
            raise ValueError(f"--dataset-name '{item}': expected ID=NAME")
        names[ds] = name
    return FigureStyle(tuple(args.style_order or ()), names)


def style_cli_args(config: Mapping[str, Any]) -> str:
    """The ``--style-order`` / ``--dataset-name`` arguments of a config, for the Snakemake
    rules: every method the config names that is not built in (aliases first, in config
    order, then study methods), and the ``display_name`` of every custom dataset. Each a bash
    word (:func:`cdgtmll.tables.html.report_shell_word`): the figures are in Snakemake's HTML
    report, which embeds their rules' params in a ``<script>`` unescaped, and a display name may
    hold anything."""
    from cdgtmll.tables.html import report_shell_word

    names = list(config.get("experiments", {}).get("methods", []))
    names += list(config.get("aliases", {}) or {})
    for spec in (config.get("studies", {}) or {}).values():
        names += list(spec.get("methods", []) or [])
        if spec.get("method"):
            names.append(spec["method"])
    extra = [n for n in dict.fromkeys(base_method(n) for n in names) if n not in BUILTIN_ORDER]
    out = ["--style-order", *map(report_shell_word, extra)] if extra else []
    for ds, cfg in sorted(((config.get("data", {}) or {}).get("custom", {}) or {}).items()):
        if isinstance(cfg, Mapping) and cfg.get("display_name"):
            out += ["--dataset-name", report_shell_word(f"{ds}={cfg['display_name']}")]
    return " ".join(out)
