"""Report writing of the claims check: the Markdown summary (:func:`render_markdown`), the
same as one HTML page (:func:`render_html`, for Snakemake's report) and the CSV text of the
result table, plus the cell formatting they share with
:func:`cdgtmll.claims.compare.mark_paper_inconsistency`.

Both pages open, right under the title, with the verdict of each claim group (:func:`verdicts`:
Table 1, Table 2, Table 3, the experiments text with its figure claims), in five lines or fewer:
what reproduces, what does not, what no model here reaches (the paper's value above the
ceiling), which metric readings would fit the paper (column ``readings_that_fit`` where the
result table has it) and what cannot be checked here and why (the ``not checked`` reasons,
most frequent first; with the tables' ``profile.json``, whether a dataset or method not run is
outside the profile). Then how the check was made, the counts, and every claim by group
(with the columns ``readings_that_fit`` and ``tail_detail`` where the result table has them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cdgtmll.claims.verdict import (
    ABOVE_ANY,
    ABOVE_PANEL,
    BOUND_TOLERANCE,
    CONSISTENT,
    INCONSISTENT,
    KINDS,
    NC_DATASET,
    NC_METHOD,
    PAPER_INCONSISTENT,
    STATUS_ORDER,
    UNDECIDED,
)
from cdgtmll.tables.html import esc, frame_table, page
from cdgtmll.tables.render import banner_html, md_cell


def _missing(x) -> bool:
    if x is None or x is pd.NA:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def _s(x) -> str:
    return "" if _missing(x) else str(x)


def _f(x, nd: int = 2) -> str:
    if _missing(x):
        return ""
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    try:
        return f"{float(x):.{nd}f}"
    except (TypeError, ValueError):
        return str(x)


def _group(claim_id: str) -> str:
    return {"T1": "Table 1 (tab:main_standard)", "T2": "Table 2 (tab:main_rare)",
            "T3": "Table 3 (tab:xmc)"}.get(claim_id.split(":")[0], "Experiments text (Sec. 5.2-5.4)")


def _paper_text(r: dict) -> str:
    k, pv, hi, cmp = r["kind"], r["paper_value"], r["paper_value_hi"], r["comparator"]
    if k == "beats":
        return "better"
    if k == "range":
        return f"{_f(pv, 2)} to {_f(hi, 2)}"
    if k == "bound":
        return f"{cmp} {_f(pv, 2)}"
    return ("≈ " if cmp in ("≈", "~") else "") + _f(pv, 2)


def _claim_text(r: dict) -> str:
    what = f"{r['method']}"
    if r["kind"] in ("difference", "range", "beats"):
        other = r["other_method"]
        other = "all others" if other == "*" else (f"best of {len(other.split('|'))}" if "|" in other else other)
        what += f" − {other}"
    return f"{what}, {r['metric']}, {r['dataset']} {r['setting']}"


#: columns of a claims table, in the Markdown and the HTML; :data:`OPTIONAL_COLUMNS` follow
#: where the result table has them
CLAIM_TABLE = ("claim", "what", "paper", "ceiling", "reproduced (n)", "95% CI", "Δ vs paper", "test", "p (Holm)",
               "equivalence", "status")
#: result-table columns shown when present (written by :mod:`cdgtmll.claims.check`), and their headings
OPTIONAL_COLUMNS = {"readings_that_fit": "readings that fit", "tail_detail": "tail detail"}


def claim_columns(res: pd.DataFrame) -> tuple[str, ...]:
    """The columns of the per-claim tables: :data:`CLAIM_TABLE` and the optional ones present
    with at least one value."""
    extra = tuple(h for c, h in OPTIONAL_COLUMNS.items()
                  if c in res.columns and res[c].map(lambda v: bool(_s(v).strip())).any())
    return CLAIM_TABLE[:-1] + extra + CLAIM_TABLE[-1:]


def status_text(r: dict) -> str:
    """The status as the page shows it: ``above every model run here`` names the panel."""
    st = _s(r.get("status"))
    if st == ABOVE_PANEL and _s(r.get("ceiling_panel")):
        st += f" ({r['ceiling_panel']})"
    return st


def _p_text(r: dict) -> str:
    p, ph = r.get("p"), r.get("p_holm")
    if _missing(p):
        return ""
    return f"{_p(p)} ({_p(ph)})" if not _missing(ph) else _p(p)


def _p(x) -> str:
    return f"{float(x):.3g}"


def _claim_cells(r: dict) -> dict[str, str]:
    """One result row as the cells of :data:`CLAIM_TABLE` (and of the optional columns present)."""
    cid = r["claim_id"] + (" (in LaTeX comment)" if r["in_comment"] else "")
    rep = ""
    if not _missing(r["reproduced_mean"]):
        rep = _f(r["reproduced_mean"])
        if not _missing(r["reproduced_std"]):
            rep += f" ± {_f(r['reproduced_std'])}"
        rep += f" ({int(r['n'])})"
    ci = f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]" if not _missing(r["ci_low"]) else ""
    test = _s(r.get("test"))
    if not _missing(r["t"]):
        test += f"; t={_f(r['t'])}"
    if not _missing(r.get("n_pairs")):
        test += f", {int(r['n_pairs'])} pairs"
    if _s(r["compared_with"]):
        test = (test + "; " if test else "") + f"vs {r['compared_with']}"
        cov = _s(r["coverage"])
        if "/" in cov and cov.split("/")[0] != cov.split("/")[1]:
            test += f" ({cov} listed run)"
    status = status_text(r) + (f" — {r['detail']}" if _s(r["detail"]) else "")
    if r.get("within_tolerance") is True or _s(r.get("within_tolerance")) == "True":
        status += f" (outside the 95 % interval, within the implementation tolerance ±{_f(r.get('tolerance'), 1)})"
    eq = _s(r.get("equivalence"))
    if eq and not _missing(r.get("p_tost")):
        eq += f" (TOST p={_p(r['p_tost'])})"
    cells = dict(zip(CLAIM_TABLE, (cid, _claim_text(r), _paper_text(r), _f(r.get("ceiling")), rep, ci,
                                   _f(r["diff_vs_paper"]), test, _p_text(r), eq, status)))
    for col, head in OPTIONAL_COLUMNS.items():
        cells[head] = _s(r.get(col))
    return cells


def _setting(res: pd.DataFrame, col: str, default: float) -> str:
    vals = pd.to_numeric(res[col], errors="coerce").dropna() if col in res else pd.Series(dtype=float)
    return f"{(vals.iloc[0] if len(vals) else default):g}"


def _points(value: str) -> str:
    """``'1'`` -> ``'1 point'``, ``'0.5'`` -> ``'0.5 points'``."""
    return f"{value} point" if value == "1" else f"{value} points"


def _header(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
            extra: list[str], settings: dict | None = None) -> list[str]:
    """The bullet points above the summary (Markdown inline: `code`). ``settings``: the config's
    ``claims:`` section as used (default: the values recorded in the result table)."""
    st = settings or {}
    tol = f"{st['implementation_tolerance']:g}" if "implementation_tolerance" in st else _setting(res, "tolerance", 1.0)
    margin = f"{st['equivalence_margin']:g}" if "equivalence_margin" in st else _setting(res, "margin", 1.0)
    alpha, power = f"{st.get('alpha', 0.05):g}", f"{st.get('power', 0.8):g}"
    return [f"runs: `{runs_path}` ({n_runs} rows; datasets run: {', '.join(datasets) or 'none'})",
            f"claims: `{claims_path}` ({len(res)} claims, {int(res['in_comment'].sum())} only inside LaTeX comments)",
            *extra,
            "values in %; reproduced = mean ± sample std over n runs (differences: over paired runs, "
            "method − comparator); CI = 95 % t-interval of that mean.",
            "`consistent`: value/difference inside the CI, range overlapping it, bound met by the mean, "
            "`beats` with the whole CI in the claimed direction. Claims marked `not checked` are neither passed "
            "nor failed.",
            f"`consistent` / `inconsistent` use an implementation tolerance of ±{_points(tol)} on top of the "
            f"interval (config `claims.implementation_tolerance`): a value, difference or range is `inconsistent` "
            f"only when the paper's number lies more than {_points(tol)} outside the 95 % interval; a bound only when "
            "the widened interval lies wholly on the wrong side. `beats` needs the interval: `consistent` when the "
            "whole interval of the paired difference lies on the claimed side of 0, `inconsistent` when it lies "
            "on the other side, else `undecided` (no tolerance: both methods are run here).",
            f"Paired comparisons also give an equivalence verdict (column `equivalence`): `better` / `worse` when "
            f"the interval excludes 0, `equivalent within ±{margin}` when two one-sided t-tests (TOST, margin "
            f"config `claims.equivalence_margin`) reject a difference of {_points(margin)} or more at level {alpha}, "
            f"else `undecided (n seeds detect >= x points)`: x is the true difference the paired t-test would find "
            f"with {power} power at level {alpha}, from the observed std of the paired differences.",
            "`p (Holm)`: the raw two-sided p (paired t-test; for a single value the one-sample t-test of the "
            "paper's value) and, in brackets, Holm's correction within the claim's family (the claims of one "
            "table; the experiments text). R-variant settings with two or more sampling seeds are nested: the "
            "interval is over the sampling seeds' means, each the mean over the training seeds (column `test`).",
            "`paper inconsistency`: the paper prints a row's mAP or P@k different from another row's that it "
            "would equal by construction *if* that row re-used the other's scores, as this project's PE re-uses "
            "BCE's (PE only thresholds BCE's probabilities; `cdgtmll.tables.collect.equal_by_construction`). "
            "Neither the paper nor Koyejo et al. (2015), which defines the plug-in estimator, states that the "
            "paper's PE row re-used its BCE row's scores, and no official PE code was found; so: a fault of the "
            "paper if that identity holds, not a failure to reproduce (details in the claim's row).",
            f"`{ABOVE_ANY}`: the paper's value (less {BOUND_TOLERANCE:g}, the rounding of its one printed decimal) "
            "lies above what no predictor exceeds on the same test split under App. E.4 (mAP and P@k: a perfect "
            "ranking of the test labels, from the label counts only; any metric: its exact maximum, 100).",
            f"`{ABOVE_PANEL}` (the panel in brackets, CSV column `ceiling_panel`): for Micro-/Macro-/Rare-F1 "
            "the paper's value lies above the best F1 that thresholding any model run here reaches, thresholds "
            "chosen on the test set itself (`cdgtmll.metrics.oracle`; Micro-F1: the exact maximum over per-label "
            "thresholds; Macro-/Rare-F1: each label at its F1-optimal threshold), the maximum over every run of "
            "every model of the dataset and setting: the profile's methods, with the scikit-learn reference rows "
            "(BR-LogReg, kNN-15, RF-300) where configured. It says what these models reach, not what the metric "
            "allows: another model could reach the paper's value. A claim whose value lies inside the reproduced "
            "interval stays `consistent`; the status the claim would have had otherwise is kept in its row.",
            "`ceiling` is printed for every value claim that has one (CSV columns `ceiling`, `ceiling_panel`, "
            "`ceiling_basis`)."]


#: the Micro-F1 / Hamming-accuracy comparison: heading, what it is (and is not), columns
HAMMING_TITLE = "Micro-F1 claims beside our Hamming accuracy (a measured comparison)"
HAMMING_TEXT = ("Numbers side by side, nothing more: for each Micro-F1 claim whose method was run, the paper's "
                "value, our Micro-F1 (Eq. E.2, mean over the runs) and our Hamming accuracy over the same runs "
                "(the share of correct label decisions, 1 - (FP + FN) / (M L), at the global threshold; not a metric "
                "of App. E.4). Which of the two the paper's value lies nearer is a measurement; it does not show "
                "which quantity the paper computed, and this check does not assume the paper used Hamming accuracy.")
HAMMING_TABLE = ("claim", "what", "paper Micro-F1", "our Micro-F1", "our Hamming accuracy", "runs")


def _hamming_cells(h: pd.DataFrame) -> list[dict[str, str]]:
    return [dict(zip(HAMMING_TABLE, (r["claim_id"], f"{r['method']}, {r['dataset']} {r['setting']} ({r['mode']})",
                                     _f(r["paper_value"]), _f(r["micro_f1"]), _f(r["hamming_accuracy"]),
                                     str(int(r["n"])))))
            for r in h.to_dict("records")]


def _hamming_markdown(h: pd.DataFrame | None) -> list[str]:
    if h is None or h.empty:
        return []
    md = [f"### {HAMMING_TITLE}", "", HAMMING_TEXT, "", "| " + " | ".join(HAMMING_TABLE) + " |",
          "|---|---|---:|---:|---:|---:|"]
    md += ["| " + " | ".join(md_cell(v) for v in c.values()) + " |" for c in _hamming_cells(h)]
    return md + [""]


def _summary(res: pd.DataFrame) -> tuple[list[str], pd.Series, int, list[tuple[str, list[int]]]]:
    """(status order, counts per status, checked claims with partial comparators, counts per kind)."""
    counts = res["status"].value_counts()
    order = [s for s in STATUS_ORDER if s in counts] + sorted(s for s in counts.index if s not in STATUS_ORDER)
    checked = res["status"].isin((CONSISTENT, INCONSISTENT))
    partial = checked & res["coverage"].map(lambda c: "/" in _s(c) and c.split("/")[0] != c.split("/")[1])
    kinds = []
    for k in KINDS:
        sub = res[res["kind"] == k]
        if len(sub):
            vc = sub["status"].value_counts()
            kinds.append((k, [int(vc.get(s, 0)) for s in order]))
    return order, counts, int(partial.sum()), kinds


def render_markdown(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
                    extra: list[str], profile: dict | None = None, hamming: pd.DataFrame | None = None,
                    ranks: str | None = None, banner: str = "") -> str:
    """``profile``: the tables' ``profile.json`` (which datasets and methods the profile has), for
    the reasons of the verdict; None when unknown. ``hamming``:
    :func:`cdgtmll.claims.compare.hamming_comparison`, shown at the end of "How this check was
    made" (omitted when None or empty). ``ranks``: the across-datasets section
    (``results/claims/ranks.md``, :func:`cdgtmll.claims.ranks.markdown`), appended when given.
    ``banner``: the first line of a partial page (:func:`cdgtmll.tables.render.partial_banner`)."""
    order, counts, partial, kinds = _summary(res)
    md = ([f"> {md_cell(banner)}", ""] if banner else []) + ["# Paper claims vs. reproduced runs", "", *_verdict_markdown(res, profile), "",
          "## How this check was made", "",
          *[f"- {h}" for h in _header(res, runs_path, claims_path, n_runs, datasets, extra)], "",
          *_hamming_markdown(hamming),
          "## Summary", "", "| status | claims |", "|---|---:|"]
    md += [f"| {s} | {int(counts[s])} |" for s in order]
    md += [f"| **total** | {len(res)} |", ""]
    if partial:
        md += [f"{partial} checked claim(s) compare with only part of their listed comparators "
               "(column `coverage`; e.g. 'best in Table 1' checked against the baselines that were run).", ""]
    md += ["| kind | " + " | ".join(order) + " |",
           "|---|" + "---:|" * len(order)]
    md += [f"| {k} | " + " | ".join(map(str, vals)) + " |" for k, vals in kinds]
    recs = res.to_dict("records")
    cols = claim_columns(res)
    align = {"paper": "---:", "ceiling": "---:", "reproduced (n)": "---:", "Δ vs paper": "---:"}
    for grp in dict.fromkeys(_group(r["claim_id"]) for r in recs):
        md += ["", f"## {grp}", "",
               "| " + " | ".join(cols) + " |",
               "|" + "|".join(align.get(c, "---") for c in cols) + "|"]
        md += ["| " + " | ".join(md_cell(_claim_cells(r)[c]) for c in cols) + " |"
               for r in recs if _group(r["claim_id"]) == grp]
    if ranks:
        md += ["", ranks.strip()]
    return "\n".join(md) + "\n"


def markdown_section_html(text: str) -> str:
    """A Markdown section written by this package (headings, pipe tables, paragraphs with `code`
    and **bold**: :func:`cdgtmll.claims.ranks.markdown`) as HTML, every text escaped."""
    out: list[str] = []
    table: list[list[str]] = []

    def inline(t: str) -> str:
        parts = t.split("**")
        return "".join(f"<strong>{_inline(p)}</strong>" if i % 2 else _inline(p) for i, p in enumerate(parts))

    def flush() -> None:
        if table:
            head, *rows = [r for r in table if not all(set(c) <= set("-:") for c in r)]
            out.append("<table><thead><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f'<td class="text">{inline(c)}</td>' for c in r) + "</tr>"
                                 for r in rows) + "</tbody></table>")
            table.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        flush()
        if line.startswith("### "):
            out.append(f"<h3>{inline(line[4:])}</h3>")
        elif line.startswith("## "):
            out.append(f"<h2>{inline(line[3:])}</h2>")
        elif line.strip():
            out.append(f'<p class="caption">{inline(line)}</p>')
    flush()
    return "\n".join(out)


def _status_class(status: str) -> str:
    if status.startswith(CONSISTENT):
        return "text status-consistent"
    if status.startswith(INCONSISTENT):
        return "text status-inconsistent"
    if status.startswith(PAPER_INCONSISTENT):
        return "text status-paper"
    if status.startswith((ABOVE_ANY, ABOVE_PANEL)):
        return "text status-above"
    if status.startswith(UNDECIDED):
        return "text status-undecided"
    return "text status-notchecked"


def _inline(text: str) -> str:
    """Markdown inline code (`x`) as HTML, the rest escaped."""
    parts = str(text).split("`")
    return "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def render_html(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
                extra: list[str], stamp: str = "", profile: dict | None = None,
                hamming: pd.DataFrame | None = None, ranks: str | None = None, banner: str = "") -> str:
    """The claims check as one HTML page: the same verdict, header, summary and per-group tables
    as :func:`render_markdown`; the status cell coloured (consistent green, inconsistent red,
    undecided blue, above the ceiling purple, paper inconsistency yellow, not checked grey)."""
    order, counts, partial, kinds = _summary(res)
    title = "Paper claims vs. reproduced runs"
    body = [*banner_html(banner), f"<h1>{esc(title)}</h1>"]
    if stamp:
        body.append(f'<p class="stamp">{esc(stamp)}</p>')
    body += [_verdict_html(res, profile), "<h2>How this check was made</h2>"]
    body.append('<ul class="meta">' + "".join(
        f"<li>{_inline(h)}</li>" for h in _header(res, runs_path, claims_path, n_runs, datasets, extra)) + "</ul>")
    if hamming is not None and not hamming.empty:
        hdf = pd.DataFrame(_hamming_cells(hamming), columns=list(HAMMING_TABLE))
        hcls = pd.DataFrame([["text" if c in ("claim", "what") else "" for c in HAMMING_TABLE]] * len(hdf),
                            columns=list(HAMMING_TABLE))
        body += [f"<h3>{esc(HAMMING_TITLE)}</h3>", f'<p class="caption">{esc(HAMMING_TEXT)}</p>',
                 frame_table(hdf, "claims_hamming", hcls)]
    summary = pd.DataFrame({"status": order + ["total"], "claims": [int(counts[s]) for s in order] + [len(res)]})
    cls = pd.DataFrame({"status": [_status_class(s) for s in order] + ["text best"],
                        "claims": [""] * len(order) + ["best"]})
    body += ["<h2>Summary</h2>", frame_table(summary, "claims_summary", cls)]
    if partial:
        body.append(f'<p class="caption">{partial} checked claim(s) compare with only part of their listed '
                    "comparators (column <code>coverage</code> of claims_check.csv; e.g. 'best in Table 1' checked "
                    "against the baselines that were run).</p>")
    by_kind = pd.DataFrame([[k, *vals] for k, vals in kinds], columns=["kind", *order])
    body.append(frame_table(by_kind, "claims_by_kind",
                            pd.DataFrame([["text"] + [""] * len(order)] * len(by_kind), columns=by_kind.columns)))
    recs = res.to_dict("records")
    cols = list(claim_columns(res))
    text_cols = {"claim", "what", "test", "equivalence", *OPTIONAL_COLUMNS.values()}
    for k, grp in enumerate(dict.fromkeys(_group(r["claim_id"]) for r in recs)):
        rows = [(_claim_cells(r), r["status"]) for r in recs if _group(r["claim_id"]) == grp]
        df = pd.DataFrame([{c: cells[c] for c in cols} for cells, _ in rows], columns=cols)
        cls = pd.DataFrame([[_status_class(st) if col == "status" else ("text" if col in text_cols else "")
                             for col in cols] for _, st in rows], columns=cols)
        body += [f"<h2>{esc(grp)}</h2>", frame_table(df, f"claims_group{k}", cls)]
    if ranks:
        body.append(markdown_section_html(ranks))
    return page(title, body)


# ------------------------------------------------------------------ the verdict per group

#: how many names a verdict line lists before "+k more"
_NAMES = 6


def _names(items, limit: int = _NAMES) -> str:
    items = list(dict.fromkeys(i for i in items if i))
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f", +{more} more" if more > 0 else "")


def _where(recs: list[dict]) -> str:
    """'yeast clean, R@0.40: BCE, CD-GTMLL; voc2007 clean: PE' -- the datasets, settings and
    methods of some claims, by dataset."""
    by_ds: dict[str, tuple[list[str], list[str]]] = {}
    for r in recs:
        settings, methods = by_ds.setdefault(_s(r["dataset"]) or "?", ([], []))
        settings.append(_s(r["setting"]))
        methods.append(_s(r["method"]))
    return "; ".join(f"{ds} {_names(st, 4)}: {_names(ms)}" for ds, (st, ms) in by_ds.items())


def _missing_methods(r: dict) -> list[str]:
    """The method(s) a ``method not run`` claim misses: the claim's method, or its comparators."""
    if _s(r["detail"]).startswith("no comparator"):
        other = _s(r["other_method"])
        return ["other methods"] if other.strip() == "*" else [o.strip() for o in other.split("|") if o.strip()]
    return [_s(r["method"])]


def _not_checked(recs: list[dict], profile: dict | None) -> list[tuple[int, str]]:
    """(claims, reason) of the not-checked claims, most frequent first; with ``profile`` (the
    tables' ``profile.json``: which datasets and methods the profile has) a dataset or method
    not run is said to be out of the profile or in it without runs."""
    name = _s((profile or {}).get("profile"))
    this = f"profile {name}" if name else "this profile"
    p_ds = set((profile or {}).get("datasets") or ())
    p_methods = {m.split("@")[0] for m in (profile or {}).get("methods") or ()}
    groups: dict[str, list[dict]] = {}
    for r in recs:
        groups.setdefault(r["status"], []).append(r)
    out = []
    for status, rs in groups.items():
        what = status.removeprefix("not checked: ")
        if status == NC_DATASET:
            ds = list(dict.fromkeys(_s(r["dataset"]) for r in rs))
            if profile:
                out_ = [d for d in ds if d not in p_ds]
                in_ = [d for d in ds if d in p_ds]
                parts = ([f"{_names(out_)}: not in {this}'s datasets"] if out_ else []) + \
                        ([f"{_names(in_)}: in {this}, but no runs"] if in_ else [])
                what += f" ({'; '.join(parts)})"
            else:
                what += f" ({_names(ds)})"
        elif status == NC_METHOD:
            ms = [m for r in rs for m in _missing_methods(r)]
            if profile:
                base = list(dict.fromkeys(ms))
                out_ = [m for m in base if m.split("@")[0] not in p_methods]
                in_ = [m for m in base if m.split("@")[0] in p_methods]
                parts = ([f"{_names(out_)}: not in {this}'s methods"] if out_ else []) + \
                        ([f"{_names(in_)}: in {this}, but no run there"] if in_ else [])
                what += f" ({'; '.join(parts)})"
            else:
                what += f" ({_names(ms)})"
        out.append((len(rs), what))
    return sorted(out, key=lambda x: -x[0])


def _fit_named(v) -> bool:
    """A ``readings_that_fit`` cell that names readings (not empty, ``none`` or ``not ...``)."""
    t = _s(v).strip().lower()
    return bool(t) and t != "none" and not t.startswith(("not ", "none "))


def _fits(rs: list[dict]) -> str:
    """'T1:yeast-BCE-micro: flattened weighted, Hamming; ...': the claims whose metric readings fit
    the paper (column ``readings_that_fit``, where present), by claim."""
    parts = [f"{r['claim_id']}: {_s(r.get('readings_that_fit'))}" for r in rs if _fit_named(r.get("readings_that_fit"))]
    more = len(parts) - 4
    return "; ".join(parts[:4]) + (f"; +{more} more" if more > 0 else "")


def verdicts(res: pd.DataFrame, profile: dict | None = None) -> list[tuple[str, list[str]]]:
    """The verdict of each claim group (Table 1, 2, 3, the experiments text), in five lines or
    fewer, from the statuses of its claims: the counts and what reproduces (``consistent``);
    what does not (``inconsistent``, ``undecided``; ``paper inconsistency`` apart); what no
    model here reaches (``above every model run here``, ``above any predictor``); which metric
    readings would fit the paper (column ``readings_that_fit``, where the result table has it);
    what cannot be checked here and why (the ``not checked`` reasons, most frequent first)."""
    out = []
    recs = res.to_dict("records")
    for grp in dict.fromkeys(_group(r["claim_id"]) for r in recs):
        rs = [r for r in recs if _group(r["claim_id"]) == grp]
        by = {s: [r for r in rs if r["status"] == s]
              for s in (CONSISTENT, INCONSISTENT, UNDECIDED, ABOVE_PANEL, ABOVE_ANY, PAPER_INCONSISTENT)}
        nc = [r for r in rs if r["status"] not in by]
        counts = [f"{len(by[CONSISTENT])} consistent", f"{len(by[INCONSISTENT])} inconsistent"]
        counts += [f"{len(by[s])} {s}" for s in (UNDECIDED, ABOVE_PANEL, ABOVE_ANY, PAPER_INCONSISTENT) if by[s]]
        counts.append(f"{len(nc)} not checked")
        checked = sum(len(by[s]) for s in (CONSISTENT, INCONSISTENT, UNDECIDED, ABOVE_PANEL, ABOVE_ANY))
        head = f"{len(rs)} claim{'' if len(rs) == 1 else 's'}: {', '.join(counts)}."
        if checked:
            head += f" Reproduces: {len(by[CONSISTENT])} of {checked} checked"
            head += f" ({_where(by[CONSISTENT])})." if by[CONSISTENT] else "."
        else:
            head += " Nothing could be checked here."
        lines = [head]
        bad = []
        if by[INCONSISTENT]:
            bad.append(f"Does not reproduce: {len(by[INCONSISTENT])} ({_where(by[INCONSISTENT])}).")
        if by[UNDECIDED]:
            bad.append(f"Undecided: {len(by[UNDECIDED])} (the interval neither supports nor contradicts the claim; "
                       f"{_where(by[UNDECIDED])}).")
        if by[PAPER_INCONSISTENT]:
            bad.append(f"Paper inconsistency: {len(by[PAPER_INCONSISTENT])} (the paper prints different values "
                       f"where they would be equal by construction if one row re-used the other's scores; "
                       f"{_where(by[PAPER_INCONSISTENT])}).")
        if bad:
            lines.append(" ".join(bad))
        above = []
        if by[ABOVE_PANEL]:
            panels = ", ".join(sorted({m.strip() for r in by[ABOVE_PANEL]
                                       for m in _s(r.get("ceiling_panel")).split(",") if m.strip()}))
            above.append(f"No model here reaches: {len(by[ABOVE_PANEL])} (above every model run here, the panel: "
                         f"{panels}; {_where(by[ABOVE_PANEL])}).")
        if by[ABOVE_ANY]:
            above.append(f"No predictor reaches: {len(by[ABOVE_ANY])} (above a data-only ceiling; "
                         f"{_where(by[ABOVE_ANY])}).")
        if above:
            lines.append(" ".join(above))
        fits = _fits(rs)
        if fits:
            lines.append(f"Metric readings that would fit the paper (evidence beside E.4, not a verdict): {fits}.")
        if nc:
            reasons = _not_checked(nc, profile)
            shown = "; ".join(f"{n} {why}" for n, why in reasons[:3])
            rest = sum(n for n, _ in reasons[3:])
            lines.append(f"Not checked here: {len(nc)} — {shown}" + (f"; {rest} other" if rest else "") + ".")
        out.append((grp, lines))
    return out


def _verdict_markdown(res: pd.DataFrame, profile: dict | None) -> list[str]:
    md = []
    for grp, lines in verdicts(res, profile):
        md.append(f"- **{grp}**: {lines[0]}")
        md += [f"  {line}" for line in lines[1:]]
    if (profile or {}).get("code_footnote"):
        md.append(f"- **Code**: {profile['code_footnote']}")
    if (profile or {}).get("device_footnote"):
        md.append(f"- **Devices**: {profile['device_footnote']}")
    return md


def _verdict_html(res: pd.DataFrame, profile: dict | None) -> str:
    items = "".join(f"<li><b>{esc(grp)}</b>: " + "<br>".join(esc(line) for line in lines) + "</li>"
                    for grp, lines in verdicts(res, profile))
    if (profile or {}).get("code_footnote"):
        items += f"<li><b>Code</b>: {esc(profile['code_footnote'])}</li>"
    if (profile or {}).get("device_footnote"):
        items += f"<li><b>Devices</b>: {esc(profile['device_footnote'])}</li>"
    return f'<ul class="verdict">{items}</ul>'


def _csv_text(res: pd.DataFrame) -> str:
    out = res.copy()
    for c in ("reproduced_mean", "reproduced_std", "ci_low", "ci_high", "diff_vs_paper", "method_mean",
              "other_mean", "t", "ceiling", "detectable"):
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce").round(4)
    for c in ("p", "p_holm", "p_tost"):
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce").map(lambda v: "" if not np.isfinite(v) else f"{v:.4g}")
    return out.to_csv(index=False)
