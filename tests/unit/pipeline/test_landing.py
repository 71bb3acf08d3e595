"""The report's landing page on a run that has not finished, and one line instead of Snakemake's
warning per missing output (src/cdgtmll/pipeline/landing.py). Through `snakemake --report`:
tests/integration/report/test_report.py."""

from __future__ import annotations

import html
import json
import logging
import os
from pathlib import Path

import docutils.core
import pytest

from cdgtmll.pipeline.landing import (
    MISSING_METADATA,
    PARTIAL_TABLES,
    RST_LINE_LIMIT,
    STATUS_FILE,
    MissingMetadataSummary,
    PlannedRun,
    html_text,
    report_path,
    run_status,
    status_html,
)


@pytest.mark.parametrize("argv, want", [
    (["snakemake", "--report", "results/report.html", "--configfile", "c.yaml"], "results/report.html"),
    (["python -m snakemake", "--report"], "report.html"),
    (["snakemake", "--report", "--configfile", "c.yaml"], "report.html"),
    (["snakemake", "--report=out/r.zip"], "out/r.zip"),
    (["snakemake", "--cores", "2", "all"], None),
    (["snakemake", "--report-after-run", "--report-html-path", "x.html"], None),
])
def test_report_mode_is_read_from_the_command_line(argv, want):
    assert report_path(argv) == want


def _warn_missing(log: logging.Logger, path: str) -> None:
    # the message as snakemake/report/__init__.py formats it
    log.warning(f"Missing metadata for file {path}. Maybe metadata was deleted or it was created using an older "
                "version of Snakemake. This is a non critical warning.")


def test_missing_metadata_warnings_become_one_line_with_the_count(tmp_path, caplog):
    log = logging.getLogger("cdgtmll-test-landing")
    f = MissingMetadataSummary()
    log.addFilter(f)
    made = tmp_path / "made.csv"
    made.write_text("x")
    try:
        with caplog.at_level(logging.INFO, logger=log.name):
            for k in range(40):
                _warn_missing(log, str(tmp_path / f"missing{k}.json"))
            _warn_missing(log, str(made))
            log.info("Adding table.html (1 kB).")
            log.info("Report created.")
    finally:
        log.removeFilter(f)
    lines = [r.getMessage() for r in caplog.records]
    assert not any(MISSING_METADATA in ln for ln in lines)
    assert lines[0].startswith("40 outputs not made yet: the report leaves them out")
    assert "1 outputs made outside" in lines[0]
    assert lines[1:] == ["Adding table.html (1 kB).", "Report created."]  # once, then the rest as it was
    assert len(f.missing) == 40 and f.unrecorded == [str(made)]


def _runs(root: Path, done: dict[tuple[str, str, str], int]) -> list[PlannedRun]:
    """Planned runs of two methods x (clean, R0.40-s0) on yeast, three seeds each; ``done``: how
    many seeds of a run have their metrics written."""
    planned = []
    for method in ("BCE", "CD-GTMLL"):
        for setting in ("clean", "R0.40-s0"):
            files = tuple(f"results/runs/yeast/{setting}/{method}/seed{s}/metrics.json" for s in range(3))
            for f in files[: done.get(("yeast", setting, method), 0)]:
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).write_text("{}")
            planned.append(PlannedRun(method, "yeast", setting, files))
    return planned


def test_status_from_files_counts_runs_and_outputs_and_lists_what_is_pending(tmp_path):
    planned = _runs(tmp_path, {("yeast", "clean", "BCE"): 3, ("yeast", "clean", "CD-GTMLL"): 1})
    targets = [m for r in planned for m in r.metrics] + ["results/tables/table1_standard.html"]
    st = run_status(tmp_path, planned, targets)
    assert (st.runs_done, st.runs_total) == (4, 12)
    assert (st.outputs_done, st.outputs_total) == (4, 13)
    assert st.pending == {"BCE": [("yeast", "R0.40-s0", 3, 3)],
                          "CD-GTMLL": [("yeast", "clean", 2, 3), ("yeast", "R0.40-s0", 3, 3)]}
    assert st.steps is None and st.steps_note == "" and not st.finished
    page = status_html(st, tmp_path)
    assert "4 of 12 runs done" in page and "4 of 13 files of the run's targets" in page
    assert "yeast / clean (2 of 3)" in page and "No partial tables yet" in page


def test_a_shared_run_counts_once(tmp_path):
    files = ("results/runs/d/clean/M/seed0/metrics.json",)
    st = run_status(tmp_path, [PlannedRun("M", "d", "clean", files), PlannedRun("M", "d", "N0.0", files)], files)
    assert st.runs_total == 1 and len(st.pending["M"]) == 2


def test_the_loggers_status_is_used_when_fresh_and_named_when_stale(tmp_path):
    planned = _runs(tmp_path, {("yeast", "clean", "BCE"): 2})
    targets = [m for r in planned for m in r.metrics]
    status = tmp_path / STATUS_FILE
    status.parent.mkdir(parents=True)
    rec = {"done": 7, "total": 30, "left_s_low": 240, "left_s_high": 600, "updated": "2026-11-28T10:00:00",
           "per_rule": {}}
    status.write_text(json.dumps(rec))
    newest = max(os.stat(tmp_path / t).st_mtime for t in targets if (tmp_path / t).exists())
    os.utime(status, (newest + 5, newest + 5))
    st = run_status(tmp_path, planned, targets)
    assert st.steps == rec
    page = status_html(st, tmp_path)
    assert "7 of 30 steps done" in page and "about 4 min to 10 min left" in page
    # a metrics file newer than the status: an earlier run's status, not used
    os.utime(status, (newest - 60, newest - 60))
    st = run_status(tmp_path, planned, targets)
    assert st.steps is None and "older than the newest output" in st.steps_note
    # ... unless a run holds the locks: a job of several seeds writes each seed's predictions
    # before it finishes, and the status is the running workflow's as of its last finished job
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("")
    assert run_status(tmp_path, planned, targets).steps == rec
    (locks / "0.input.lock").unlink()
    status.write_text("{broken")
    st = run_status(tmp_path, planned, targets)
    assert st.steps is None and STATUS_FILE in st.steps_note and "not readable JSON" in st.steps_note


def test_partial_tables_table1_embedded_sandboxed_the_rest_linked_from_the_report(tmp_path):
    planned = _runs(tmp_path, {})
    tables = tmp_path / PARTIAL_TABLES
    tables.mkdir(parents=True)
    body = '<html><body><p class="partial">partial: 1 of 12 runs done</p><td>A "q" & b</td></body></html>'
    (tables / "table1_standard.html").write_text(body)
    (tables / "table2_rare.html").write_text("<p>t2</p>")
    st = run_status(tmp_path, planned, [])
    assert st.partial_tables == [f"{PARTIAL_TABLES}/table1_standard.html", f"{PARTIAL_TABLES}/table2_rare.html"]
    page = status_html(st, tmp_path, report="results/report.html")
    # links relative to the report file (results/report.html -> partial/tables/...)
    assert 'href="partial/tables/table2_rare.html"' in page
    frame = page[page.index("<iframe"):page.index("</iframe>")]
    assert 'sandbox=""' in frame
    srcdoc = frame.split('srcdoc="', 1)[1].rsplit('"', 1)[0]
    assert html.unescape(srcdoc) == body


def test_a_real_size_partial_table_keeps_every_landing_line_under_the_docutils_limit(tmp_path):
    """A partial Table 1 of the default profile (24 rows, ~25 kB) written on one line of the raw
    block exceeded docutils' line_length_limit, and the report showed "System Message: ERROR/3 ...
    Line 93 exceeds the line-length-limit" instead of the landing page."""
    planned = _runs(tmp_path, {})
    tables = tmp_path / PARTIAL_TABLES
    tables.mkdir(parents=True)
    rows = "\n".join(f"<tr><td>Method {i} &amp; co</td><td>61.{i} ± 0.4 …</td></tr>" for i in range(400))
    body = f"<html><body><table>\n{rows}\n</table></body></html>"
    (tables / "table1_standard.html").write_text(body)
    page = status_html(run_status(tmp_path, planned, []), tmp_path, report="results/report.html")
    assert max(len(line) for line in page.splitlines()) <= RST_LINE_LIMIT
    srcdoc = page.split('srcdoc="', 1)[1].rsplit('"></iframe>', 1)[0]
    assert html.unescape(srcdoc) == body  # the page whole, its lines kept
    # one line of the page too long to embed: linked, not embedded
    (tables / "table1_standard.html").write_text("<p>" + "x" * RST_LINE_LIMIT + "</p>")
    page = status_html(run_status(tmp_path, planned, []), tmp_path, report="results/report.html")
    assert "<iframe" not in page and "too long to embed" in page
    assert max(len(line) for line in page.splitlines()) <= RST_LINE_LIMIT


def test_a_finished_run_says_so_in_one_line(tmp_path):
    planned = _runs(tmp_path, {("yeast", s, m): 3 for s in ("clean", "R0.40-s0") for m in ("BCE", "CD-GTMLL")})
    targets = [m for r in planned for m in r.metrics]
    st = run_status(tmp_path, planned, targets)
    assert st.finished
    page = status_html(st, tmp_path)
    assert len(page.splitlines()) == 1 and f"all {len(targets)} outputs" in page and "Pending" not in page


HOSTILE = "</script><script>alert(1)</script>\n.. raw:: html\n\u2028<b>x</b> `y`_ |z| & \"q\""


def test_hostile_names_stay_text_inside_the_raw_directive(tmp_path):
    files = ("results/runs/d/clean/M/seed0/metrics.json",)
    st = run_status(tmp_path, [PlannedRun(HOSTILE, HOSTILE, "clean", files)], files)
    block = status_html(st, tmp_path)
    assert len(html_text(HOSTILE).splitlines()) == 1
    rst = "Landing.\n\n.. raw:: html\n\n" + "\n".join("   " + ln for ln in block.splitlines()) + "\n\nAfter.\n"
    out = docutils.core.publish_parts(rst, writer="html")["html_body"]
    assert "<script>" not in out and "<b>x</b>" not in out
    assert "<p>After.</p>" in out  # the block ended where it should, nothing of the name became rst
    assert html.unescape(html_text(HOSTILE)) == HOSTILE
