"""Report writing of the claims check: the Markdown summary (:func:`render_markdown`), the
same as one HTML page (:func:`render_html`, for Snakemake's report) and the CSV text of the
result table, plus the cell formatting they share with
:func:`cdgtmll.claims.compare.mark_paper_inconsistency`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cdgtmll.claims.verdict import CONSISTENT, INCONSISTENT, KINDS, PAPER_INCONSISTENT, STATUS_ORDER
from cdgtmll.tables.html import esc, frame_table, page


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
CLAIM_TABLE = ("claim", "what", "paper", "reproduced (n)", "95% CI", "Δ vs paper", "test", "status")


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
    return dict(zip(CLAIM_TABLE, (cid, _claim_text(r), _paper_text(r), rep, ci, _f(r["diff_vs_paper"]), test,
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
            "not a failure to reproduce (details in the claim's row)."]


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
                    extra: list[str]) -> str:
    order, counts, partial, kinds = _summary(res)
    md = ["# Paper claims vs. reproduced runs", "",
          *[f"- {h}" for h in _header(res, runs_path, claims_path, n_runs, datasets, extra)], "",
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
               "|---|---|---:|---:|---|---:|---|---|"]
        md += ["| " + " | ".join(_claim_cells(r).values()) + " |" for r in recs if _group(r["claim_id"]) == grp]
    return "\n".join(md) + "\n"


def _status_class(status: str) -> str:
    if status.startswith(CONSISTENT):
        return "text status-consistent"
    if status.startswith(INCONSISTENT):
        return "text status-inconsistent"
    if status.startswith(PAPER_INCONSISTENT):
        return "text status-paper"
    return "text status-notchecked"


def _inline(text: str) -> str:
    """Markdown inline code (`x`) as HTML, the rest escaped."""
    parts = str(text).split("`")
    return "".join(f"<code>{esc(p)}</code>" if i % 2 else esc(p) for i, p in enumerate(parts))


def render_html(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
                extra: list[str], stamp: str = "") -> str:
    """The claims check as one HTML page: the same header, summary and per-group tables as
    :func:`render_markdown`; the status cell coloured (consistent green, inconsistent red,
    paper inconsistency yellow, not checked grey)."""
    order, counts, partial, kinds = _summary(res)
    title = "Paper claims vs. reproduced runs"
    body = [f"<h1>{esc(title)}</h1>"]
    if stamp:
        body.append(f'<p class="stamp">{esc(stamp)}</p>')
    body.append('<ul class="meta">' + "".join(
        f"<li>{_inline(h)}</li>" for h in _header(res, runs_path, claims_path, n_runs, datasets, extra)) + "</ul>")
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


def _csv_text(res: pd.DataFrame) -> str:
    out = res.copy()
    for c in ("reproduced_mean", "reproduced_std", "ci_low", "ci_high", "diff_vs_paper", "method_mean",
              "other_mean", "t"):
        out[c] = pd.to_numeric(out[c], errors="coerce").round(4)
    out["p"] = pd.to_numeric(out["p"], errors="coerce").map(lambda v: "" if not np.isfinite(v) else f"{v:.4g}")
    return out.to_csv(index=False)
