r"""Study figures of Sec. 5.3-5.4 (ablation, robustness, sensitivity, multi-player analysis).

Every subcommand takes explicit run directories ``.../<dataset>/<variant>/<method>/seed<k>``
(``--runs``) and an output stem ``--out`` and writes, like :mod:`cdgtmll.figures.pr_curve`,

* ``<out>.pdf`` and ``<out>.png`` (atomic writes),
* ``<out>.csv`` -- the numbers drawn,
* ``<out>.sources.json`` -- ``{"figure": <out name>, "runs": {"<dataset>/<variant>/<method>":
  [{"path", "sha256"}, ...]}, ...}`` listing **every** file read (hashed from the very
  bytes that were parsed), so ``cdgtmll audit <out>.pdf`` can trace and re-verify it;
  ``"aliases": {"<dataset>/<variant>/<setting>": "<dataset>/<variant>/<method>"}`` when a
  setting was read from another setting's run (``--alias``: the same run spec, trained once).

The suffixes are appended to the stem (``<out>`` + ``.pdf``), never substituted, so a stem
containing a dot (``figs/alpha_0.4``) keeps its full name. Numbers in CSVs are fractions
in [0, 1] as in ``metrics.json`` (figures show percent / percentage points). "mean ± std"
is over the runs listed (std with ``ddof=1``; 0 for a single run), and every CSV row says
how many runs (``n_seeds`` / ``n_pairs``) it averages. The error bars (bands) drawn are the
95% t-interval of the mean over the runs cut to the quantity's range, [0, 100] % for a
metric or a share and [-100, 100] pp for a drop (cutting a confidence interval to where the
mean can be keeps its coverage; none for one run:
:func:`cdgtmll.figures.intervals.seed_interval`); the CSV holds the bar drawn
(``ci_low``, ``ci_high``, fractions) and says what it is (``error_bars``).

Subcommands
-----------
``ablation --runs DIR... [--full CD-GTMLL] [--order M...] [--mode global|adaptive]
[--metrics mAP micro_f1 rare_f1] [--under READING...]``
    Bars of each metric per method (grouped by the method directory name), the mean over
    seeds with its error bar; one panel per ``<dataset>/<variant>``. Above every non-full bar: the
    signed absolute gap ``mean(method) - mean(full)`` (percentage points). CSV: one row
    per (setting, reading, method, metric) with ``mean, std, n_seeds, ci_low, ci_high, seeds, gap_to_full``.
    ``--under`` (the study's ``under`` readings, ``player_backbones=separate``): a run named
    ``<method>@<reading>`` is ``<method>`` under that reading; one row of panels per setting,
    one column per reading ("as written (E.1)" first, one y scale per row), the gap taken to
    the full model under the same reading; CSV column ``reading``.
``robustness --runs DIR... --kind noise|occlusion [--clean-variant clean] [--metric rare_f1]``
    Absolute degradation ``metric(clean, seed k) - metric(corrupted, seed k)`` per
    corruption level, paired by **training seed** k (a corrupted variant ``N0.10-s1`` run
    with seed k is paired with the clean run with seed k; several sampling seeds give
    several pairs). Level from the variant id: ``N0.10-s0`` -> 0.10 (noise),
    ``O0.10-s0`` -> 0.10 (occlusion). A corrupted run without its clean partner is an
    error. With ``--kind occlusion`` and no ``O*`` runs on a dataset that has no images
    (registry kind not ``image``), the figure and the CSV carry the note
    ``no images: occlusion not applicable to <dataset>`` instead of failing.
``sweep --runs DIR... --param alpha|n_players [--metrics rare_f1 mAP] [--under READING...]``
    Metric vs the swept value, parsed from the method name ``<base>@<param>=<value>``
    (e.g. ``CD-GTMLL@alpha=0.2``); a run whose name carries no value (the base method
    itself) takes it from ``method_outputs.json`` ``hparams[<param>]``. When both are
    present they must agree (a mis-wired alias is an error). ``--under``: a run named
    ``<base>@<param>=<value>,<reading>`` is that point under the reading; a row of panels per
    (setting, metric), a column per reading ("as written (E.1)" first), one y scale per row;
    CSV column ``reading``. An ``n_players`` sweep as written whose N >= 2 runs gave
    byte-identical predictions for every seed is marked flat by construction (caption under
    the panel, CSV ``flat_by_construction``): under E.1 every N >= 2 is one optimisation
    problem (docs/methods.md).
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
    (Eq. 8), i.e. a running training estimate, and beta warms up during the first 10% of
    steps, so the potential itself changes then. ``<out>.monotonicity.csv`` records per
    run (and for each group's mean curve, ``seed = mean``) whether Phi rose
    monotonically: ``n_decreases`` and ``decrease_epochs`` (epochs e with
    ``Phi[e] < Phi[e-1] - tol``), the largest drop, and the same count restricted to
    epochs after the beta warm-up (``beta`` at its final value at e-1 and e).

Figures look as :mod:`cdgtmll.figures.style` says (seaborn theme, one colour-blind-safe style
per method fixed across figures, display names in titles, 300-dpi PNGs); every subcommand
takes ``--style-order`` (config aliases, in the order that fixes their style) and
``--dataset-name ID=NAME`` (display names of custom datasets) for that, and ``--title`` to
replace the titles.

Players are numbered from 1 in figures and CSVs (``player`` = index in
``player_val_acc.npz`` + 1), as in the paper ("Player 1..N").

Layout: this module is the command line (:func:`main`); the work is done in
:mod:`cdgtmll.figures.studies.runs` (run directories, the source log, reading run files, writing
figure files), :mod:`cdgtmll.figures.studies.comparison` (``ablation``, ``robustness``, ``sweep``) and
:mod:`cdgtmll.figures.studies.players` (``specialization``, ``ranks``, ``potential``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cdgtmll.figures.studies.comparison import KIND_PREFIX, ablation_figure, robustness_figure, sweep_figure
from cdgtmll.figures.studies.players import potential_figure, ranks_figures, specialization_figure
from cdgtmll.figures.studies.runs import parse_runs
from cdgtmll.figures.style import add_style_args, style_from_args

# ------------------------------------------------------------------------------ CLI


def alias_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alias", nargs=2, action="append", default=[], metavar=("SETTING_DIR", "RUN_DIR"),
                   help="a setting whose run spec is another's (e.g. .../CD-GTMLL@alpha=0.4 and .../CD-GTMLL): "
                        "its --runs seed folders are read from RUN_DIR, under the setting's name; "
                        "the .sources.json records it under 'aliases'")


def under_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--under", nargs="*", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                   help="the readings the study also ran under (studies.<study>.under, as the plan names them: "
                        "player_backbones=separate): a run '<setting>@<reading>' or '<setting>,<reading>' is "
                        "<setting> under that reading; one panel (column) per reading, the default "
                        "('as written (E.1)') first")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cdgtmll.figures.studies.build", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="fig", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runs", nargs="+", required=True, help=".../<dataset>/<variant>/<method>/seed<k> dirs")
        p.add_argument("--out", required=True, type=Path, help="output stem (no extension)")
        p.add_argument("--title", default="", help="replaces the panel titles (default: dataset display names)")
        alias_arg(p)
        add_style_args(p)

    p = sub.add_parser("ablation", help="bars of metrics per ablated method, gap to the full model")
    common(p)
    p.add_argument("--full", default="CD-GTMLL")
    p.add_argument("--order", nargs="*", default=[])
    p.add_argument("--mode", default="global", help="global | adaptive | global@<tau>")
    p.add_argument("--metrics", nargs="+", default=["mAP", "micro_f1", "rare_f1"])
    under_arg(p)

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
    under_arg(p)

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
        a.runs = parse_runs(a.runs, dict(a.alias))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        st = style_from_args(a)
        if a.fig == "ablation":
            ablation_figure(a.runs, a.out, a.full, a.order, a.mode, a.metrics, a.title, style=st, readings=a.under)
        elif a.fig == "robustness":
            robustness_figure(a.runs, a.out, a.kind, a.clean_variant, a.mode, a.metric, a.title, style=st)
        elif a.fig == "sweep":
            sweep_figure(a.runs, a.out, a.param, a.metrics, a.mode, a.title, style=st, readings=a.under)
        elif a.fig == "specialization":
            specialization_figure(a.runs, a.out, a.labels, a.title, style=st)
        elif a.fig == "ranks":
            ranks_figures(a.runs, a.out, a.tail_fraction, a.tie_seed, a.labels, a.title, style=st)
        elif a.fig == "potential":
            _, summary = potential_figure(a.runs, a.out, a.tol, a.title, style=st)
            for s in summary:
                print(f"[potential] {s['dataset']}/{s['variant']}/{s['method']} seed {s['seed']}: "
                      f"{'monotone' if s['monotone'] else str(s['n_decreases']) + ' decrease(s) at epochs ' + s['decrease_epochs']}")
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
