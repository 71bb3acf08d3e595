"""Report writing of the claims check: the Markdown summary (:func:`render_markdown`) and the
CSV text of the result table, plus the cell formatting they share with
:func:`cdgtmll.claims.compare.mark_paper_inconsistency`. :mod:`cdgtmll.claims.check`
re-exports every public name of this module.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cdgtmll.claims.verdict import CONSISTENT, INCONSISTENT, KINDS, STATUS_ORDER


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


def render_markdown(res: pd.DataFrame, runs_path: str, claims_path: str, n_runs: int, datasets: list[str],
                    extra: list[str]) -> str:
    counts = res["status"].value_counts()
    order = [s for s in STATUS_ORDER if s in counts] + sorted(s for s in counts.index if s not in STATUS_ORDER)
    md = ["# Paper claims vs. reproduced runs", "",
          f"- runs: `{runs_path}` ({n_runs} rows; datasets run: {', '.join(datasets) or 'none'})",
          f"- claims: `{claims_path}` ({len(res)} claims, {int(res['in_comment'].sum())} only inside LaTeX comments)",
          *[f"- {e}" for e in extra],
          "- values in %; reproduced = mean ± sample std over n runs (differences: over paired runs, "
          "method − comparator); CI = 95 % t-interval of that mean.",
          "- `consistent`: value/difference inside the CI, range overlapping it, bound met by the mean, "
          "`beats` in the claimed direction. Claims marked `not checked` are neither passed nor failed.",
          "- `paper inconsistency`: the paper prints a value different from one it must equal by construction "
          "(PE's mAP and P@k are BCE's: PE only thresholds BCE's probabilities); a fault of the paper, "
          "not a failure to reproduce (details in the claim's row).", "",
          "## Summary", "", "| status | claims |", "|---|---:|"]
    md += [f"| {s} | {int(counts[s])} |" for s in order]
    checked = res["status"].isin((CONSISTENT, INCONSISTENT))
    partial = checked & res["coverage"].map(lambda c: "/" in _s(c) and c.split("/")[0] != c.split("/")[1])
    md += [f"| **total** | {len(res)} |", ""]
    if partial.any():
        md += [f"{int(partial.sum())} checked claim(s) compare with only part of their listed comparators "
               "(column `coverage`; e.g. 'best in Table 1' checked against the baselines that were run).", ""]
    md += ["| kind | " + " | ".join(order) + " |",
           "|---|" + "---:|" * len(order)]
    for k in KINDS:
        sub = res[res["kind"] == k]
        if len(sub):
            vc = sub["status"].value_counts()
            md.append(f"| {k} | " + " | ".join(str(int(vc.get(s, 0))) for s in order) + " |")
    recs = res.to_dict("records")
    for grp in dict.fromkeys(_group(r["claim_id"]) for r in recs):
        md += ["", f"## {grp}", "",
               "| claim | what | paper | reproduced (n) | 95% CI | Δ vs paper | test | status |",
               "|---|---|---:|---:|---|---:|---|---|"]
        for r in recs:
            if _group(r["claim_id"]) != grp:
                continue
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
            md.append(f"| {cid} | {_claim_text(r)} | {_paper_text(r)} | {rep} | {ci} | "
                      f"{_f(r['diff_vs_paper'])} | {test} | {status} |")
    return "\n".join(md) + "\n"


def _csv_text(res: pd.DataFrame) -> str:
    out = res.copy()
    for c in ("reproduced_mean", "reproduced_std", "ci_low", "ci_high", "diff_vs_paper", "method_mean",
              "other_mean", "t"):
        out[c] = pd.to_numeric(out[c], errors="coerce").round(4)
    out["p"] = pd.to_numeric(out["p"], errors="coerce").map(lambda v: "" if not np.isfinite(v) else f"{v:.4g}")
    return out.to_csv(index=False)
