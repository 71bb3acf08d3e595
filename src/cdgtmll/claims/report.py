"""Report writing of the claims check: the Markdown summary (:func:`render_markdown`), the
same as one HTML page (:func:`render_html`, for Snakemake's report) and the CSV text of the
result table, plus the cell formatting they share with
:func:`cdgtmll.claims.compare.mark_paper_inconsistency`.

Both pages open, right under the title, with the verdict of each claim group (:func:`verdicts`:
Table 1, Table 2, Table 3, the experiments text with its figure claims): the counts per
status, what reproduces, what does not, and what cannot be checked here and why (the
``not checked`` reasons, most frequent first; with the tables' ``profile.json``, whether a
dataset or method not run is outside the profile). Then how the check was made, the counts,
and every claim by group.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cdgtmll.claims.verdict import (
    BOUND_TOLERANCE,
    CONSISTENT,
    INCONSISTENT,
    KINDS,
    NC_DATASET,
    NC_METHOD,
    PAPER_INCONSISTENT,
    STATUS_ORDER,
    UNATTAINABLE,
)
from cdgtmll.tables.html import esc, frame_table, page
from cdgtmll.tables.render import md_cell


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


#: columns of a claims table, in the Markdown and the HTML
CLAIM_TABLE = ("claim", "what", "paper", "bound", "reproduced (n)", "95% CI", "Δ vs paper", "test", "status")


def _claim_cells(r: dict) -> dict[str, str]:
    """One result row as the cells of :data:`CLAIM_TABLE`."""
    cid = r["claim_id"] + (" (in LaTeX comment)" if r["in_comment"] else "")
    rep = ""
    if not _missing(r["reproduced_mean"]):
        rep = _f(r["reproduced_mean"])
        if not _missing(r["reproduced_std"]):
            rep += f" ± {_f(r['reproduced_std'])}"
        rep += f" ({int(r['n'])})"
    ci = f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]" if not _missing(r["ci_low"]) else ""
    test = ""
    if not _missing(r["t"]):
        test = f"t={_f(r['t'])}, p={_f(r['p'], 3)}"
        if not _missing(r["n_pairs"]):
            test += f", {int(r['n_pairs'])} pairs"
    if _s(r["compared_with"]):
        test = (test + "; " if test else "") + f"vs {r['compared_with']}"
        cov = _s(r["coverage"])
        if "/" in cov and cov.split("/")[0] != cov.split("/")[1]:
            test += f" ({cov} listed run)"
    status = r["status"] + (f" — {r['detail']}" if _s(r["detail"]) else "")
    bound = _f(r.get("bound"))
    return dict(zip(CLAIM_TABLE, (cid, _claim_text(r), _paper_text(r), bound, rep, ci, _f(r["diff_vs_paper"]), test,
                                  status)))


def _header(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
            extra: list[str]) -> list[str]:
    """The bullet points above the summary (Markdown inline: `code`)."""
    return [f"runs: `{runs_path}` ({n_runs} rows; datasets run: {', '.join(datasets) or 'none'})",
            f"claims: `{claims_path}` ({len(res)} claims, {int(res['in_comment'].sum())} only inside LaTeX comments)",
            *extra,
            "values in %; reproduced = mean ± sample std over n runs (differences: over paired runs, "
            "method − comparator); CI = 95 % t-interval of that mean.",
            "`consistent`: value/difference inside the CI, range overlapping it, bound met by the mean, "
            "`beats` in the claimed direction. Claims marked `not checked` are neither passed nor failed.",
            "`paper inconsistency`: the paper prints a value different from one it must equal by construction "
            "(PE's mAP and P@k are BCE's: PE only thresholds BCE's probabilities); a fault of the paper, "
            "not a failure to reproduce (details in the claim's row).",
            f"`{UNATTAINABLE}`: the paper's value (less {BOUND_TOLERANCE:g}, the rounding of its one printed decimal) lies "
            "above "
            "`bound`, the most the metric reaches on the same test split under the definitions of App. E.4 "
            "(`cdgtmll.metrics.oracle`). Micro-/Macro-/Rare-F1: the best any thresholding of our runs' test "
            "scores reaches, thresholds chosen on the test set itself (Micro-F1: the exact maximum over per-label "
            "thresholds; Macro-/Rare-F1: each label at its F1-optimal threshold), the maximum over the claim's "
            "method's runs -- a bound for the scores that were run, not for the method. mAP and P@k: a perfect "
            "ranking of the test labels (mAP 100; P@k the mean of min(k, labels of the row) / k), which no "
            "method can exceed. A claim whose value lies inside the reproduced interval stays `consistent`; "
            "the status the claim would have had otherwise is kept in its row.",
            "`bound` is printed for every claim that has one (CSV columns `bound`, `bound_basis`)."]


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
                    extra: list[str], profile: dict | None = None, hamming: pd.DataFrame | None = None) -> str:
    """``profile``: the tables' ``profile.json`` (which datasets and methods the profile has), for
    the reasons of the verdict; None when unknown. ``hamming``:
    :func:`cdgtmll.claims.compare.hamming_comparison`, shown at the end of "How this check was
    made" (omitted when None or empty)."""
    order, counts, partial, kinds = _summary(res)
    md = ["# Paper claims vs. reproduced runs", "", *_verdict_markdown(res, profile), "",
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
    for grp in dict.fromkeys(_group(r["claim_id"]) for r in recs):
        md += ["", f"## {grp}", "",
               "| " + " | ".join(CLAIM_TABLE) + " |",
               "|---|---|---:|---:|---:|---|---:|---|---|"]
        md += ["| " + " | ".join(md_cell(v) for v in _claim_cells(r).values()) + " |"
               for r in recs if _group(r["claim_id"]) == grp]
    return "\n".join(md) + "\n"


def _status_class(status: str) -> str:
    if status.startswith(CONSISTENT):
        return "text status-consistent"
    if status.startswith(INCONSISTENT):
        return "text status-inconsistent"
    if status.startswith(PAPER_INCONSISTENT):
        return "text status-paper"
    if status.startswith(UNATTAINABLE):
        return "text status-unattainable"
    return "text status-notchecked"


def _inline(text: str) -> str:
    """Markdown inline code (`x`) as HTML, the rest escaped."""
    parts = str(text).split("`")
    return "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def render_html(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
                extra: list[str], stamp: str = "", profile: dict | None = None,
                hamming: pd.DataFrame | None = None) -> str:
    """The claims check as one HTML page: the same verdict, header, summary and per-group tables
    as :func:`render_markdown`; the status cell coloured (consistent green, inconsistent red,
    paper inconsistency yellow, not checked grey)."""
    order, counts, partial, kinds = _summary(res)
    title = "Paper claims vs. reproduced runs"
    body = [f"<h1>{esc(title)}</h1>"]
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
    text_cols = {"claim", "what", "test"}
    for k, grp in enumerate(dict.fromkeys(_group(r["claim_id"]) for r in recs)):
        rows = [(_claim_cells(r), r["status"]) for r in recs if _group(r["claim_id"]) == grp]
        df = pd.DataFrame([c for c, _ in rows], columns=list(CLAIM_TABLE))
        cls = pd.DataFrame([[_status_class(st) if col == "status" else ("text" if col in text_cols else "")
                             for col in CLAIM_TABLE] for _, st in rows], columns=list(CLAIM_TABLE))
        body += [f"<h2>{esc(grp)}</h2>", frame_table(df, f"claims_group{k}", cls)]
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


def verdicts(res: pd.DataFrame, profile: dict | None = None) -> list[tuple[str, list[str]]]:
    """The verdict of each claim group (Table 1, 2, 3, the experiments text), in 1-3 lines,
    from the statuses of its claims only: the counts; what reproduces (``consistent``), what
    does not (``inconsistent``; ``paper inconsistency`` apart); what cannot be checked here and
    why (the ``not checked`` reasons, most frequent first)."""
    out = []
    recs = res.to_dict("records")
    for grp in dict.fromkeys(_group(r["claim_id"]) for r in recs):
        rs = [r for r in recs if _group(r["claim_id"]) == grp]
        by = {s: [r for r in rs if r["status"] == s]
              for s in (CONSISTENT, INCONSISTENT, UNATTAINABLE, PAPER_INCONSISTENT)}
        nc = [r for r in rs if r["status"] not in by]
        counts = [f"{len(by[CONSISTENT])} consistent", f"{len(by[INCONSISTENT])} inconsistent"]
        if by[UNATTAINABLE]:
            counts.append(f"{len(by[UNATTAINABLE])} {UNATTAINABLE}")
        if by[PAPER_INCONSISTENT]:
            counts.append(f"{len(by[PAPER_INCONSISTENT])} paper inconsistency")
        counts.append(f"{len(nc)} not checked")
        checked = len(by[CONSISTENT]) + len(by[INCONSISTENT]) + len(by[UNATTAINABLE])
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
        if by[UNATTAINABLE]:
            bad.append(f"Unattainable under E.4: {len(by[UNATTAINABLE])} (the paper's value lies above the most "
                       f"the metric reaches on the test split; {_where(by[UNATTAINABLE])}).")
        if by[PAPER_INCONSISTENT]:
            bad.append(f"Paper inconsistency: {len(by[PAPER_INCONSISTENT])} (the paper prints different values "
                       f"where they are equal by construction; not a reproduction failure; "
                       f"{_where(by[PAPER_INCONSISTENT])}).")
        if bad:
            lines.append(" ".join(bad))
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
              "other_mean", "t"):
        out[c] = pd.to_numeric(out[c], errors="coerce").round(4)
    out["p"] = pd.to_numeric(out["p"], errors="coerce").map(lambda v: "" if not np.isfinite(v) else f"{v:.4g}")
    return out.to_csv(index=False)
