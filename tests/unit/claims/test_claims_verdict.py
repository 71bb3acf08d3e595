"""The claims page (claims_check.md / .html) opens with a verdict per claim group -- Table 1,
Table 2, Table 3, the experiments text -- right under the title: the counts per status, what
reproduces, what does not, and what cannot be checked here and why (from the statuses the
check computed; with the tables' profile.json, whether a dataset or method is outside the
profile). The detailed sections follow."""

from __future__ import annotations

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from cdgtmll.claims import check
from cdgtmll.claims.paper import CLAIM_COLUMNS

METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")
GROUPS = {"T1": "Table 1 (tab:main_standard)", "T2": "Table 2 (tab:main_rare)", "T3": "Table 3 (tab:xmc)"}
OTHER = "Experiments text (Sec. 5.2-5.4)"


def _all_runs(path: Path, methods=("BR-LogReg", "BCE", "CD-GTMLL")) -> None:
    """An all_runs.csv of a quick-like run: Yeast clean and R@0.40/0.50, three seeds, both modes;
    CD-GTMLL 10 points above BCE, BR-LogReg 5 below."""
    rows = []
    for variant in ("clean", "R0.40-s0", "R0.50-s0"):
        for method in methods:
            for seed in range(3):
                for mode in ("global", "adaptive"):
                    base = {"BR-LogReg": 0.45, "BCE": 0.50, "CD-GTMLL": 0.60}.get(method, 0.5) + 0.002 * seed
                    rows.append({"dataset": "yeast", "variant": variant, "method": method, "seed": seed,
                                 "mode": mode, "own_thresholds": False, "metrics_path": "x", "metrics_sha256": "0",
                                 **{m: base for m in METRICS}})
    pd.DataFrame(rows).to_csv(path, index=False)


def _claim(cid, dataset="yeast", method="CD-GTMLL", value=60.1, setting="clean", kind="value", other=""):
    row = dict.fromkeys(CLAIM_COLUMNS, "")
    row.update({"claim_id": cid, "location": "test", "line": "1", "quote": "q", "kind": kind, "dataset": dataset,
                "setting": setting, "metric": "rare_f1", "method": method, "other_method": other,
                "paper_value": "" if kind == "beats" else str(value), "comparator": "=", "mode": "global",
                "in_comment": "false"})
    return row


def _write_claims(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CLAIM_COLUMNS)
        w.writeheader()
        w.writerows(rows)


def _verdict_block(md: str) -> list[str]:
    """The lines between the title and the next heading, without blank lines."""
    lines = md.splitlines()
    assert lines[0] == "# Paper claims vs. reproduced runs" and lines[1] == ""
    end = next(i for i, line in enumerate(lines) if i > 0 and line.startswith("#"))
    return [line for line in lines[2:end] if line.strip()]


def _by_group(block: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in block:
        m = re.match(r"- \*\*(.+?)\*\*: (.*)", line)
        if m:
            cur = m.group(1)
            out[cur] = [m.group(2)]
        else:
            assert line.startswith("  "), line  # a continuation line of the group's bullet
            out[cur].append(line.strip())
    return out


def test_verdict_opens_the_page_with_exact_counts_and_reasons(tmp_path):
    """A small claims table: per group, the counts, what reproduces (dataset, setting, method),
    what does not, and why the rest is not checked, with the profile's datasets and methods."""
    runs = tmp_path / "tables" / "all_runs.csv"
    runs.parent.mkdir()
    _all_runs(runs)
    (runs.parent / "profile.json").write_text(json.dumps(
        {"profile": "quick", "configfiles": ["config/quick.yaml"], "datasets": ["yeast"],
         "methods": ["BR-LogReg", "BCE", "CD-GTMLL"], "runs": 27}))
    claims = tmp_path / "claims.csv"
    _write_claims(claims, [
        _claim("T1:yeast:rare_f1:CD-GTMLL", value=60.2),            # consistent (60.2 in the CI)
        _claim("T1:yeast:rare_f1:BCE", method="BCE", value=70.0),   # inconsistent
        _claim("T1:voc2007:rare_f1:CD-GTMLL", dataset="voc2007"),   # dataset not in the profile
        _claim("T1:mediamill:rare_f1:BCE", dataset="mediamill", method="BCE"),
        _claim("T1:yeast:rare_f1:PE", method="PE"),                 # method not in the profile
        _claim("T2:yeast:rare_f1:CD-GTMLL:0.40", setting="R@0.40", value=60.2),
        _claim("T2:yeast:rare_f1:CD-GTMLL:0.30", setting="R@0.30"),  # severity not run
        _claim("T3:eurlex-4k:p@1:BCE", dataset="eurlex-4k", method="BCE"),
        _claim("S5.2:beats", kind="beats", other="BCE"),            # consistent (CD-GTMLL > BCE)
    ])
    out = tmp_path / "claims" / "claims_check"
    assert check.main(["--runs", str(runs), "--claims", str(claims), "--out", str(out)]) == 0
    md = Path(f"{out}.md").read_text(encoding="utf-8")
    v = _by_group(_verdict_block(md))
    assert list(v) == [GROUPS["T1"], GROUPS["T2"], GROUPS["T3"], OTHER]
    assert all(1 <= len(lines) <= 5 for lines in v.values()), v  # five lines or fewer
    t1 = v[GROUPS["T1"]]
    assert t1[0] == ("5 claims: 1 consistent, 1 inconsistent, 3 not checked. Reproduces: 1 of 2 checked "
                     "(yeast clean: CD-GTMLL).")
    assert t1[1] == "Does not reproduce: 1 (yeast clean: BCE)."
    assert t1[2] == ("Not checked here: 3 — 2 dataset not run (voc2007, mediamill: not in profile quick's "
                     "datasets); 1 method not run (PE: not in profile quick's methods).")
    t2 = v[GROUPS["T2"]]
    assert t2[0] == "2 claims: 1 consistent, 0 inconsistent, 1 not checked. Reproduces: 1 of 1 checked " \
                    "(yeast R@0.40: CD-GTMLL)."
    assert t2[1] == "Not checked here: 1 — 1 needs R@0.30 runs on yeast."
    assert v[GROUPS["T3"]] == ["1 claim: 0 consistent, 0 inconsistent, 1 not checked. Nothing could be checked "
                               "here.", "Not checked here: 1 — 1 dataset not run (eurlex-4k: not in profile "
                               "quick's datasets)."]
    assert v[OTHER][0].startswith("1 claim: 1 consistent, 0 inconsistent, 0 not checked.")
    # the detailed sections are still there, after the verdict
    assert md.index("## Summary") > md.index("Not checked here") and "## Table 1 (tab:main_standard)" in md

    # the HTML page: the same verdict right under the title, before the summary table
    page = Path(f"{out}.html").read_text(encoding="utf-8")
    body = page[page.index("</h1>") + 5:]
    assert body.lstrip().startswith('<ul class="verdict">'), body[:200]

    class Items(HTMLParser):
        def __init__(self):
            super().__init__()
            self.items, self.inside = [], False

        def handle_starttag(self, tag, attrs):
            if tag == "ul" and dict(attrs).get("class") == "verdict":
                self.inside = True
            elif tag == "li" and self.inside:
                self.items.append("")
            elif tag == "br" and self.inside:
                self.items[-1] += "\n"

        def handle_endtag(self, tag):
            if tag == "ul":
                self.inside = False

        def handle_data(self, data):
            if self.inside and self.items:
                self.items[-1] += data

    p = Items()
    p.feed(page)
    assert [i.split("\n") for i in p.items] == [[f"{g}: {lines[0]}", *lines[1:]] for g, lines in v.items()]
    assert page.index('<ul class="verdict">') < page.index("<h2>Summary</h2>")


def test_verdict_counts_match_the_check_on_the_packaged_claims(tmp_path):
    """The packaged claims against a quick-like run: each group's counts are those of the
    result CSV; datasets not run are named as outside the profile. Without profile.json the
    reasons still name the datasets."""
    runs = tmp_path / "all_runs.csv"
    _all_runs(runs)
    out = tmp_path / "claims_check"
    assert check.main(["--runs", str(runs), "--out", str(out)]) == 0
    res = pd.read_csv(f"{out}.csv")
    res["group"] = res["claim_id"].map(lambda c: GROUPS.get(c.split(":")[0], OTHER))
    v = _by_group(_verdict_block(Path(f"{out}.md").read_text(encoding="utf-8")))
    assert list(v) == list(dict.fromkeys(res["group"]))
    for grp, sub in res.groupby("group", sort=False):
        vc = sub["status"].value_counts()
        nc = int(sub["status"].str.startswith("not checked").sum())
        want = (f"{len(sub)} claim{'' if len(sub) == 1 else 's'}: {int(vc.get('consistent', 0))} consistent, "
                f"{int(vc.get('inconsistent', 0))} inconsistent")
        if vc.get("paper inconsistency", 0):
            want += f", {int(vc['paper inconsistency'])} paper inconsistency"
        assert v[grp][0].startswith(want + f", {nc} not checked."), (grp, v[grp][0])
        if nc:
            assert v[grp][-1].startswith(f"Not checked here: {nc} — "), v[grp]
    n_ds = int((res[res["group"] == GROUPS["T1"]]["status"] == "not checked: dataset not run").sum())
    assert f"{n_ds} dataset not run (voc2007, coco2014, mediamill)" in v[GROUPS["T1"]][-1]
