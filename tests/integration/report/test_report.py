"""Snakemake's HTML report shows every table and the claims check: built after a run
of one profile with the config of another (the failure "figures/specialization.pdf marked for
report but does not exist"), opened in headless Chromium and read as a reader would, by clicks.

Chromium (Debian: ``apt-get install chromium``) is optional here: without it the browser test
skips, except under CI (env var CI set), where .ci/run installs it and a skip would hide the
test, so it fails instead. The pipeline run behind a report of real runs, and the Figures
entry, are checked in tests/integration/pipeline/test_pipeline_e2e.py
(``test_report_is_one_self_contained_html``). The browser is tools/report_browser.py, which the
``report_browser`` fixture (tests/integration/conftest.py) loads.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.support.paths import ROOT
from tests.support.workflow import checkout_ignore, snakemake_env

METRICS = ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")
QUICK_METHODS = ("BR-LogReg", "BCE", "CD-GTMLL")  # config/quick.yaml's rows


def _quick_results(repo: Path) -> None:
    """results/ as config/quick.yaml's `tables` and `claims_check` rules leave them, from
    format-exact metrics.json files (Yeast clean and R@0.40/0.50, three seeds, the profile's
    three rows; BR-LogReg scored by its own thresholds in global mode, and deterministic: one
    seed, its provenance saying so, as rule train_once writes it)."""
    from cdgtmll.claims import check
    from cdgtmll.tables import build as tables

    rng = np.random.default_rng(7)
    paths = []
    for variant in ("clean", "R0.40-s0", "R0.50-s0"):
        for i, method in enumerate(QUICK_METHODS):
            for seed in range(1 if method == "BR-LogReg" else 3):
                d = repo / "results/runs/yeast" / variant / method / f"seed{seed}"
                d.mkdir(parents=True)
                if method == "BR-LogReg":
                    (d / "provenance.json").write_text(json.dumps({"config": {
                        "method": method, "registered_method": method, "seeds": [0], "deterministic": True}}))
                block = {m: round(0.40 + 0.05 * i + 0.02 * rng.random(), 6) for m in METRICS}
                rec = {"global@0.5": block, "adaptive": {m: round(v * 0.95, 6) for m, v in block.items()}}
                if method == "BR-LogReg":
                    rec["method"] = dict(block)
                (d / "metrics.json").write_text(json.dumps(rec))
                paths.append(str((d / "metrics.json").relative_to(repo)))
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        tables.main(["--metrics", *paths, "--methods", *QUICK_METHODS, "--out", "results/tables",
                     "--datasets", "yeast=Yeast", "--severities", "yeast=0.4,0.5", "--profile", "quick",
                     "--profile-file", "config/quick.yaml", "--summary-json", "results/metrics.json"])
        check.main(["--runs", "results/tables/all_runs.csv", "--out", "results/claims/claims_check"])
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory, mirror):
    """A copy of the workflow holding the quick profile's tables and claims, and the report that
    plain `snakemake --report` (the default config, whose DAG has study figures this run never
    made) builds from them; (repo, report, seconds the report took)."""
    repo = tmp_path_factory.mktemp("report") / "repo"
    shutil.copytree(ROOT, repo, ignore=checkout_ignore(".dvc"),
                    symlinks=True)
    _quick_results(repo)
    report = repo / "results/report.html"
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "snakemake", "--report", str(report)], cwd=repo,
                         env=snakemake_env(mirror), capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "marked for report but does not exist" not in res.stderr
    return repo, report, took


def _fmt(v: str) -> str:
    return f"{float(v):.1f}"


@pytest.mark.slow
def test_report_after_another_profiles_run_shows_tables_and_claims(quick_report, report_browser):
    repo, report, took = quick_report
    print(f"snakemake --report: {took:.1f} s")
    html = report.read_text(errors="replace")
    assert "<script src=\"http" not in html
    with report_browser.ReportBrowser(report_browser.require_chromium()) as b:
        landing = b.open(report)
        # the landing page lists what the report holds and says whose results they are
        assert "were written by a run of profile quick (config/quick.yaml)" in landing
        assert "table1_standard.html" in landing and "claims_check.html" in landing
        assert "table3_xmc.html" in landing and "table2_configured.html" in landing
        b.click_menu("Tables")
        b.wait_for("document.body.innerText.includes('Table 3 (configured datasets)')", "the tables' list")
        listed = [r[0] for r in b.entries()]
        assert listed == [f"Table {k} ({w})" for k in (1, 2, 3) for w in ("as in the paper", "configured datasets")]
        assert "global 0.5" in b.toggles() and "label-adaptive" in b.toggles()
        b.open_entry("Table 1 (as in the paper)")
        assert b.shown_content() == "html"
        text = b.frame_text()
        # Table 1's numbers as the CSV has them (global mode), and its marks
        rows = {r["method"]: r for r in csv.DictReader(open(repo / "results/tables/table1_standard.csv"))}
        assert "Table 1 (as in the paper), global threshold 0.5" in text
        assert "Profile quick (config/quick.yaml)" in text
        for method in QUICK_METHODS:
            for col in ("Yeast Micro-F1", "Yeast Rare-F1"):
                if method == "BR-LogReg":  # deterministic: one run, no std
                    assert rows[method][f"{col} std"] == "" and _fmt(rows[method][f"{col} mean"]) in text
                    continue
                mean, std = _fmt(rows[method][f"{col} mean"]), _fmt(rows[method][f"{col} std"])
                assert f"{mean} ± {std}" in text, (method, col)
        assert "BR-LogReg: deterministic (its fit does not use the seed): fitted once, n = 1." in text
        marks = b.marked_cells()
        best = max(QUICK_METHODS, key=lambda m: float(rows[m]["Yeast Micro-F1 mean"]))
        assert any(c.startswith(_fmt(rows[best]["Yeast Micro-F1 mean"])) for c in marks["bold"])
        assert len(marks["underlined"]) >= 2  # second best of each run column
        assert "‡ not in the paper" in text and "BR-LogReg" in text
        b.screenshot(repo / "results/report-table1.png")
        # the claims summary
        b.open(report)
        b.click_menu("Claims")
        b.open_entry("Paper claims vs. reproduced runs")
        claims = b.frame_text()
        res = list(csv.DictReader(open(repo / "results/claims/claims_check.csv")))
        assert "Summary" in claims and f"total\t{len(res)}" in claims
        n_incons = sum(r["status"] == "inconsistent" for r in res)
        assert f"inconsistent\t{n_incons}" in claims
        assert "Table 3 (tab:xmc)" in claims


def test_chromium_reads_a_table_page(tmp_path, report_browser):
    """Fast check of the browser driver on one table page: bold and underlined cells as the
    Markdown marks them (no Snakemake run)."""
    exe = report_browser.require_chromium()
    repo = tmp_path / "repo"
    repo.mkdir()
    _quick_results(repo)
    md = (repo / "results/tables/table2_rare.md").read_text()
    want_bold = sorted(c.strip().strip("*") for line in md.splitlines() if line.startswith("| ")
                       for c in line.split("|") if c.strip().startswith("**"))
    with report_browser.ReportBrowser(exe) as b:
        b.send("Page.navigate", {"url": (repo / "results/tables/table2_rare.html").as_uri()})
        b.wait_for("document.readyState === 'complete' && document.querySelectorAll('td').length > 0", "the page")
        bold = b.eval("[...document.querySelectorAll('td')].filter(td => parseInt(getComputedStyle(td).fontWeight) >= 600)"
                      ".map(td => td.innerText.trim()).sort()")
    assert bold == want_bold and len(bold) == 2  # Yeast-R @40% and @50%


# ---------------------------------------------------------------------------------------------
# a run that has not finished: the landing page says how far it is, the log stays short


def _planned_quick_runs(repo: Path) -> int:
    """The runs config/quick.yaml plans: every dataset's clean split and R-variant severities
    (one sampling seed each), every method, every training seed (the first only for a
    deterministic method, BR-LogReg: cdgtmll.config.plan.fit_seeds)."""
    from cdgtmll.config import loader, plan

    cfg = loader.load(repo / "config/quick.yaml")
    exp = cfg["experiments"]
    settings = sum(1 + len(cfg["r_variants"]["severities"].get(d, [])) * len(cfg["r_variants"]["sampling_seeds"])
                   for d in exp["datasets"])
    return settings * sum(len(plan.fit_seeds(cfg, m)) for m in exp["methods"])


BANNER = "partial: 3 of {n} runs done"


@pytest.fixture(scope="module")
def unfinished_report(tmp_path_factory, mirror):
    """A copy of the workflow where config/quick.yaml's run has written BCE's clean runs only
    (no tables yet) and a partial Table 1, and `snakemake --report` of it; (repo, report, its
    output, the number of runs planned)."""
    repo = tmp_path_factory.mktemp("unfinished") / "repo"
    shutil.copytree(ROOT, repo, ignore=checkout_ignore(".dvc"), symlinks=True)
    n = _planned_quick_runs(repo)
    for seed in range(3):
        d = repo / f"results/runs/yeast/clean/BCE/seed{seed}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"global@0.5": {m: 0.5 for m in METRICS}}))
    partial = repo / "results/partial/tables/table1_standard.html"
    partial.parent.mkdir(parents=True)
    partial.write_text(f"<!DOCTYPE html><html><body><p class='banner'>{BANNER.format(n=n)}</p><table><tr>"
                       "<td>BCE &lt;script&gt;</td><td>50.0</td></tr></table></body></html>")
    report = repo / "results/report.html"
    res = subprocess.run([sys.executable, "-m", "snakemake", "--report", str(report), "--configfile",
                          "config/quick.yaml"], cwd=repo, env=snakemake_env(mirror), capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return repo, report, res.stdout + res.stderr, n


def test_unfinished_runs_report_prints_one_line_for_the_outputs_not_made(unfinished_report):
    _, _, out, _ = unfinished_report
    assert "Missing metadata" not in out
    counted = [ln for ln in out.splitlines() if "outputs not made yet: the report leaves them out" in ln]
    assert len(counted) == 1 and int(counted[0].split()[0]) > 0, out[-3000:]
    assert len(out.splitlines()) < 30, out[-3000:]


@pytest.mark.slow
def test_unfinished_runs_landing_page_says_how_far_what_is_pending_and_shows_partial_table1(
        unfinished_report, report_browser, tmp_path):
    repo, report, _, n = unfinished_report
    with report_browser.ReportBrowser(report_browser.require_chromium()) as b:
        landing = b.open(report)
        assert "This run has not finished" in landing
        assert f"3 of {n} runs done" in landing
        pending = landing.split("Pending", 1)[1]
        for method in QUICK_METHODS:
            assert f"{method}: yeast / " in pending
        bce = next(ln for ln in pending.splitlines() if ln.startswith("BCE:"))
        assert "yeast / clean" not in bce  # its three seeds are done
        assert "table1_standard.html" in landing
        assert "In this report:" not in landing and "the report has no entries" in landing
        # Table 1's partial page, embedded whole in a sandboxed frame (no script of it runs; its
        # opaque origin keeps the frame's text from the page's scripts, so its source is read)
        frame = b.eval("(() => { const f = document.querySelector('iframe[srcdoc]'); "
                       "return f && {sandbox: f.getAttribute('sandbox'), src: f.srcdoc}; })()")
        assert frame and frame["sandbox"] == "", frame
        assert frame["src"] == (repo / "results/partial/tables/table1_standard.html").read_text()
        b.screenshot(tmp_path / "landing.png")
    # report_browser on it: the landing page only, the categories not there yet said so
    skipped: dict[str, str] = {}
    shots = report_browser.screenshots(report, tmp_path / "shots", skipped)
    assert set(shots) == {"landing"} and shots["landing"].exists()
    assert set(skipped) == {"table1", "claims", "figure"}
    assert all("no category" in why for why in skipped.values()), skipped


def test_report_browser_fails_on_a_blank_screenshot_naming_it(tmp_path, report_browser):
    """A page that paints nothing: the screenshot is taken again, then fails naming the file,
    which is not written; a painted one passes."""
    exe = report_browser.require_chromium()
    blank, painted = tmp_path / "blank.png", tmp_path / "painted.png"
    page = tmp_path / "page.html"
    page.write_text("<html><body style='font:40px sans-serif'>" + "Table 1 of the report " * 40 + "</body></html>")
    with report_browser.ReportBrowser(exe) as b:
        with pytest.raises(report_browser.BlankScreenshotError) as e:
            b.screenshot(blank, settle=0.1, tries=2)
        assert str(blank) in str(e.value) and not blank.exists()
        b.send("Page.navigate", {"url": page.as_uri()})
        b.wait_for("document.readyState === 'complete'", "the page")
        b.screenshot(painted, settle=0.1)
    share = report_browser.blank_share(painted.read_bytes())
    assert painted.exists() and share < report_browser.BLANK_SHARE
