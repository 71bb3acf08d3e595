"""Check the paper's claims (``paper_claims.csv``) against the reproduced runs.

``python -m cdgtmll.claims.check --runs results/tables/all_runs.csv --out results/claims/claims_check
[--claims PATH] [--pr-csv figures/pr_tail.csv] [--spec-csv PATH] [--mode claims|global|adaptive]
[--profile-json results/tables/profile.json]``

writes ``<out>.csv`` (one row per claim), ``<out>.md`` (a verdict per claim group -- Table 1, 2,
3, the experiments text -- then a status summary, then every claim) and ``<out>.html`` (the same
as one page, for Snakemake's report). The verdict names why claims are not checked; with the
tables' ``profile.json`` (by default the one beside ``--runs``: rule ``tables`` writes it, and rule
``metrics_summary``, which writes ``all_runs.csv``, runs after it) it also says whether a dataset or
method not run is outside the profile.

Per claim, the reproduced quantity is computed in percent from the runs of the claim's
(dataset, setting, method, mode); R-variant settings: nested, over sampling seeds of the means
over training seeds.

* ``value`` / ``bound``: mean ± sample std (ddof 1) over the n runs and the 95 % t-interval
  ``mean ± t_{0.975, n-1} s / sqrt(n)``.
* ``difference`` / ``range`` / ``beats``: runs of the two methods are paired on
  (training seed, sampling seed); the reproduced value is the mean paired difference
  (method - other) with its t-interval, and ``scipy.stats.ttest_rel`` (two-sided) gives t, p.
  A deterministic method's row (fitted once: ``all_runs.csv`` column ``deterministic``) has one
  run per setting and draw, the value every seed would give: it is paired with each run of the
  other row (the test is then over that row's runs, and ``detail`` says so); two such rows, or a
  ``value`` / ``bound`` claim on one, have one run and get no interval and no test
  (``not checked: too few runs``, ``detail`` saying why).
  Figure claims read from ``--pr-csv`` only have per-method means/stds, so they use Welch's
  test from summary statistics instead (column ``test`` says which).

Status
------
``consistent`` / ``inconsistent``:

* ``value``, ``difference``: the paper's number lies inside the 95 % t-interval.
* ``range``: the t-interval overlaps the paper's interval.
* ``bound``: the reproduced mean satisfies the bound (``ci_side`` tells whether the whole
  interval does).
* ``beats``: the reproduced mean difference has the claimed sign (``p`` tells whether it is
  significant).

Numeric claims are judged with their sampling error (a number reproduced to within noise is
consistent); directional claims by the side the estimate falls on, with the test reported.

``paper inconsistency`` — a property of the paper, not of the reproduction: the paper
prints a row's mAP or P@k *different* from another row's although, as the rows are built,
the two are equal by construction (:func:`cdgtmll.tables.collect.equal_by_construction`: PE's mAP
and P@k are BCE's; ETU's P@k only with ``utility: precision``). Such a claim cannot be
reproduced by any correct run, so it is not reported as ``inconsistent``; the reproduced
values are still filled in, and ``detail`` gives both printed numbers and what the
reproduction check alone would have said. Which construction applies comes from the runs
(``all_runs.csv`` column ``equal_by_construction``, from each run's provenance) where the
method was run on the claim's dataset, else from the default hyper-parameters.

``above every model run here`` — a Micro-/Macro-/Rare-F1 claim whose value (less 0.05, the
rounding of its printed decimal; :data:`cdgtmll.claims.verdict.BOUND_TOLERANCE`) lies above the
best that thresholding any run's test scores reaches on the claim's dataset and setting, over the
*panel* of every model run there (the profile's rows, the scikit-learn references kNN-15 and
RF-300 among them; thresholds chosen on the test set, so a ceiling for these scores, not for the
metric). ``above any predictor`` — an mAP or P@k claim above a perfect ranking of the test labels,
or any claim above the metric's maximum: no predictor reaches it. CSV columns ``ceiling``,
``ceiling_panel``, ``ceiling_basis`` (:func:`cdgtmll.claims.compare.ceiling`, from the runs'
``oracle`` blocks, :mod:`cdgtmll.metrics.oracle`). Only ``value`` claims and ``>`` bounds; a claim
already ``consistent`` keeps that status, any other status is replaced and kept in ``detail``.

Statistics (:mod:`cdgtmll.claims.verdict`, the config's ``claims:`` section): ``inconsistent``
only when the paper's number lies farther than ``claims.implementation_tolerance`` (1 point) from
the 95 % interval; ``beats`` is ``consistent`` only when the whole interval is on the claimed side
of 0 (``undecided`` when it straddles 0); paired comparisons add ``equivalence`` (``better``,
``worse``, ``equivalent within ±margin`` by two one-sided tests, or ``undecided (n seeds detect
>= x points)``); ``p_holm`` is Holm-corrected within each table's claims. R-variant intervals
are over sampling seeds of means over training seeds (column ``test`` says so).

The page also sets each Micro-F1 claim beside our Micro-F1 and our Hamming accuracy from the
same runs (:func:`cdgtmll.claims.compare.hamming_comparison`): a measured comparison, not a
statement of what the paper computed.

Readings of the metric, beside the verdict (:mod:`cdgtmll.claims.readings`; they never change
a status): ``readings_that_fit`` names, for a single-value Micro-/Macro-/Rare-F1 claim, the
readings of App. E.4 (:mod:`cdgtmll.metrics.readings`: as written, the tail of Sec. 3.1's
cumulative rule, the tail as ``ceil(0.2 L)``, per-label F1 over both classes, flattened macro /
weighted F1, Hamming accuracy, sample-averaged F1) whose 95 % t-interval over the claim's runs
holds the paper's value (``none`` if none does); ``tail_detail`` gives, for a Rare-F1 claim,
each tail label's F1 with its test and training positive counts and the bootstrap interval of
Rare-F1 over test rows.

``not checked: ...`` — never counted as passed or failed:

* ``dataset not run``: no run of the claim's dataset (or the figure input is on another dataset);
* ``method not run``: the method, or every listed comparator, has no run there;
* ``too few runs``: fewer than 2 runs (or 2 pairs) — no interval or test is possible;
* ``needs <what>``: an input the claim depends on is missing (a setting not run, a figure
  input not given, a metric not recorded).

Partial pages (:mod:`cdgtmll.tables.partial`, while the workflow runs): ``--pending PATH ...``
names the metrics files planned but not evaluated yet; a claim not checked for want of runs
whose dataset, setting and method (or comparator) has pending runs is ``… pending`` instead
(its former status kept in ``detail``). ``--as-of TIME`` puts ``partial: k of n runs done (as of
TIME)`` at the top of the Markdown and HTML pages. Without them the pages are the final ones.

Layout: this module is the command line (:func:`main`); the work is done in

* :mod:`cdgtmll.claims.paper` -- the packaged claims table (:func:`~cdgtmll.claims.paper.read_claims`)
  and the parser of the paper's Tables 1-3 (:func:`~cdgtmll.claims.paper.extract_table_cells`,
  :func:`~cdgtmll.claims.paper.table_claims`);
* :mod:`cdgtmll.claims.verdict` -- the status names and the arithmetic, in pure functions
  (:func:`~cdgtmll.claims.verdict.to_percent`, :func:`~cdgtmll.claims.verdict.t_interval`,
  :func:`~cdgtmll.claims.verdict.describe`, :func:`~cdgtmll.claims.verdict.paired_test`,
  :func:`~cdgtmll.claims.verdict.welch_from_stats`, :func:`~cdgtmll.claims.verdict.judge`);
* :mod:`cdgtmll.claims.compare` -- :func:`~cdgtmll.claims.compare.check_claims` maps a claims
  table and a runs table to the result table;
* :mod:`cdgtmll.claims.readings` -- :func:`~cdgtmll.claims.readings.add_reading_columns`, the
  columns ``readings_that_fit`` and ``tail_detail``;
* :mod:`cdgtmll.claims.report` -- :func:`~cdgtmll.claims.report.render_markdown`,
  :func:`~cdgtmll.claims.report.render_html` and the CSV text.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

# Re-exported: the public names of the modules the checker was split into stay importable
# from here (``from cdgtmll.claims.check import X``).
from cdgtmll.claims.compare import (
    check_claims,
    hamming_comparison,
    load_pr,
    load_spec,
)
from cdgtmll.claims.paper import (
    CLAIMS_CSV,
    read_claims,
    table_claims,
)
from cdgtmll.claims.readings import add_reading_columns
from cdgtmll.claims.report import _csv_text, render_html, render_markdown
from cdgtmll.claims.verdict import ABOVE_PANEL, NC_DATASET, NC_FEW, NC_METHOD, ClaimSettings
from cdgtmll.io import atomic_write, sha256_file
from cdgtmll.lineage.summary import code_footnote, code_lineage, device_footnote, device_lineage
from cdgtmll.tables.collect import pending_runs
from cdgtmll.tables.render import PENDING, partial_banner

#: the status of a claim that waits for runs of the running workflow (partial pages)
PENDING_STATUS = f"{PENDING} pending: runs not evaluated yet"


def _profile(path: Path, explicit: bool) -> dict | None:
    """The tables' ``profile.json`` (profile, configfiles, datasets, methods), or None when absent
    (an error when it was asked for with --profile-json)."""
    if not path.is_file():
        if explicit:
            raise SystemExit(f"--profile-json {path}: no such file")
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def mark_pending(res: pd.DataFrame, pending: dict[tuple[str, str, str], list[str]]) -> pd.DataFrame:
    """``res`` with :data:`PENDING_STATUS` for each claim not checked for want of runs (dataset
    or method not run, too few runs), or above the ceiling of a panel that is still growing
    (``above every model run here``), whose dataset, setting and method or comparator has
    pending runs (``pending``: :func:`cdgtmll.tables.collect.pending_runs`); the former status
    goes to the front of ``detail``."""
    if not pending or res.empty:
        return res
    res = res.copy()
    waiting = {(d, s) for d, s, _ in pending}
    for i, r in res.iterrows():
        if r["status"] not in (NC_DATASET, NC_METHOD, NC_FEW, ABOVE_PANEL):
            continue
        ds, setting = str(r.get("dataset") or ""), str(r.get("setting") or "")
        methods = [str(r.get("method") or "")] + [m for m in str(r.get("other_method") or "").replace(";", " ").split()
                                                  if m and m != "nan"]
        if any((ds, setting, m) in pending for m in methods) or (r["status"] == NC_DATASET and (ds, setting) in waiting):
            detail = str(r.get("detail") or "")
            res.at[i, "detail"] = r["status"] + ("; " + detail if detail and detail != "nan" else "")
            res.at[i, "status"] = PENDING_STATUS
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=Path, help="results/tables/all_runs.csv")
    ap.add_argument("--out", type=Path, help="output stem: writes <out>.csv, <out>.md and <out>.html")
    ap.add_argument("--claims", type=Path, default=CLAIMS_CSV, help="claims table (default: the packaged one)")
    ap.add_argument("--pr-csv", type=Path, help="figures/pr_tail.csv (Fig. pr_tail claims)")
    ap.add_argument("--pr-dataset", help="dataset of --pr-csv when it has no .sources.json sidecar")
    ap.add_argument("--spec-csv", type=Path, help="player-specialisation shares (dataset, epoch, player, share[, seed])")
    ap.add_argument("--mode", choices=("claims", "global", "adaptive"), default="claims",
                    help="threshold mode: each claim's own (default) or one for all")
    ap.add_argument("--profile-json", type=Path,
                    help="the tables' profile.json (profile, datasets, methods); default: the one beside --runs")
    ClaimSettings.add_arguments(ap)  # the config's claims: section (rule claims_check)
    ap.add_argument("--ranks-md", type=Path, help="results/claims/ranks.md (cdgtmll.claims.ranks): across datasets")
    ap.add_argument("--pending", nargs="*", default=[], type=Path, metavar="PATH",
                    help="partial page: metrics.json files planned but not evaluated yet (their claims: … pending)")
    ap.add_argument("--as-of", metavar="TIME", help="partial page: starts with 'partial: k of n runs done (as of TIME)'")
    ap.add_argument("--extract-tables", type=Path, metavar="TEX",
                    help="dev: print the table-cell claim rows parsed from the paper source and exit")
    args = ap.parse_args(argv)
    if args.extract_tables:
        sys.stdout.write(table_claims(args.extract_tables).to_csv(index=False))
        return 0
    if args.runs is None or args.out is None:
        ap.error("--runs and --out are required")
    claims = read_claims(args.claims)
    runs = pd.read_csv(args.runs)
    pr = load_pr(args.pr_csv, args.pr_dataset) if args.pr_csv else None
    spec = load_spec(args.spec_csv) if args.spec_csv else None
    mode = None if args.mode == "claims" else args.mode
    res = check_claims(claims, runs, pr, spec, mode, settings=ClaimSettings.from_args(args))
    res = add_reading_columns(res, runs)  # evidence beside the verdict
    res = mark_pending(res, pending_runs(args.pending))  # partial page: claims whose runs are coming
    stem = args.out.with_suffix("") if args.out.suffix in (".csv", ".md") else args.out
    extra = [f"threshold mode: {'per claim (default global)' if mode is None else mode}"]
    profile = _profile(args.profile_json or args.runs.parent / "profile.json", explicit=args.profile_json is not None)
    if profile:
        files = ", ".join(profile.get("configfiles") or [])
        extra.insert(0, f"profile: {profile.get('profile') or '(unnamed)'}" + (f" ({files})" if files else "")
                     + f"; its datasets: {', '.join(profile.get('datasets') or []) or 'none'}")
    note = code_footnote(code_lineage(runs))  # several commits or a dirty tree behind the runs
    if note:
        profile = {**(profile or {}), "code_footnote": note}
        extra.insert(0, note)
    device_note = device_footnote(device_lineage(runs))  # runs on several kinds of machine
    if device_note:
        profile = {**(profile or {}), "device_footnote": device_note}
        extra.insert(0, device_note)
    if pr is not None:
        extra.append(f"PR figure: `{pr.path}` ({', '.join(sorted(pr.datasets)) or 'dataset unknown'})")
    if spec is not None:
        extra.append(f"specialisation data: `{spec.path}`")
    atomic_write(stem.parent / f"{stem.name}.csv", _csv_text(res))
    # the packaged table is named by its place in the package (the same in every clone), with its
    # sha256; a table given with --claims by the path given
    claims_name = ("cdgtmll/claims/paper_claims.csv" if args.claims.resolve() == CLAIMS_CSV.resolve()
                   else str(args.claims))
    claims_name = f"{claims_name}, sha256 {sha256_file(args.claims)[:16]}…"
    report_args = (res, str(args.runs), claims_name, len(runs),
                   sorted(set(runs["dataset"])) if "dataset" in runs else [], extra)
    hamming = hamming_comparison(res, runs)
    ranks = args.ranks_md.read_text(encoding="utf-8") if args.ranks_md else None
    banner = ""
    if args.as_of:
        done = set(runs["metrics_path"]) if "metrics_path" in runs else set()
        banner = partial_banner(len(done), len(done | set(map(str, args.pending))), args.as_of)
    atomic_write(stem.parent / f"{stem.name}.md",
                 render_markdown(*report_args, profile=profile, hamming=hamming, ranks=ranks, banner=banner))
    atomic_write(stem.parent / f"{stem.name}.html",
                 render_html(*report_args, profile=profile, hamming=hamming, ranks=ranks, banner=banner))
    counts = res["status"].value_counts().to_dict()
    print(json.dumps({"claims": len(res), "status": counts, "out": [f"{stem}.{e}" for e in ("csv", "md", "html")]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
