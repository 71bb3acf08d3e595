"""A display name is text for people and may hold anything (``cdgtmll.config.names``): markup,
quotes, Markdown and LaTeX syntax, a newline, non-ASCII letters. This runs config/quick.yaml at
a tiny scale (one generated MULAN dataset, two methods, two seeds, 2 epochs) with such a
display name, then reads every output a reader opens:

* ``results/report.html`` (``snakemake --report``) and every HTML table and claims page, in
  headless Chromium: no script runs (the title stays, no console message, no page error), and
  the name is shown as text;
* every Markdown table: the same number of cells in every row;
* every LaTeX table: compiles (``latexmk``, Debian ``latexmk texlive-latex-recommended``,
  which ``.ci/run`` installs; without it the test skips, under CI it fails).

Chromium is optional as in test_report.py (``report_browser.require_chromium``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.support.workflow import copy_repo, snakemake_env

pytestmark = pytest.mark.slow

#: one display name that would run script, end a JSON string, break a Markdown row or a LaTeX
#: cell if any writer pasted it raw
HOSTILE = ("</script><script>document.title=/PWNED/.source;console.log(/PWNED/.source)</script>"
           "</SCRIPT><script>document.title='PWNED';console.log('PWNED')</script>"
           "<img src=x onerror=\"document.title='PWNED-IMG'\"><!-- \"q\" 'a' |p| & #1 $x$ 100% "
           "C:\\new {b} ~t ^c _u\u2028\nsecond line Ünïcødé café ±")
NOTES = "notes </script><b>bold</b> | & $ % # \\ {"


def _arff(path: Path, n: int, seed: int, n_labels: int = 6, d: int = 5) -> None:
    """A dense MULAN ARFF: ``d`` numeric features, then ``n_labels`` {0,1} labels whose
    frequencies fall off (a tail for the R-variant and the PR figure)."""
    rng = np.random.default_rng(seed)
    lines = [f"@relation 'hostile: -C -{n_labels}'", ""]
    lines += [f"@attribute f{j} numeric" for j in range(d)]
    lines += [f"@attribute l{k} {{0,1}}" for k in range(n_labels)]
    lines += ["", "@data"]
    prev = np.linspace(0.6, 0.08, n_labels)
    for _ in range(n):
        x = rng.normal(size=d)
        y = (rng.random(n_labels) < prev).astype(int)
        y[0] = 1 if not y.any() else y[0]
        lines.append(",".join(f"{v:.4f}" for v in x) + "," + ",".join(map(str, y)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _config(repo: Path) -> str:
    """config/quick.yaml with the scale made tiny and the dataset replaced by a generated one
    that has the hostile display name; the file's path."""
    cfg = yaml.safe_load((repo / "config/quick.yaml").read_text())
    cfg["name"] = "hostile"
    cfg["data"]["allow_download"] = False
    cfg["data"]["custom"] = {"evil": {"format": "mulan-arff", "train": "evil-train.arff", "test": "evil-test.arff",
                                      "n_labels": 6, "display_name": HOSTILE, "notes": NOTES}}
    cfg["experiments"].update(datasets=["evil"], methods=["BR-LogReg", "BCE"], seeds=[0, 1])
    cfg["r_variants"]["severities"] = {"evil": [0.5]}
    cfg["training"]["default"]["epochs"] = 2
    cfg["figures"]["pr_curve"] = {"dataset": "evil", "severity": 0.5}
    (repo / "config/hostile.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return "config/hostile.yaml"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """The workflow run to its tables, figure, claims and report with the hostile name; (repo,
    report, seconds)."""
    base = tmp_path_factory.mktemp("hostile")
    repo = copy_repo(base / "repo")
    mirror = base / "mirror"
    _arff(mirror / "evil" / "evil-train.arff", 400, 0)
    _arff(mirror / "evil" / "evil-test.arff", 200, 1)
    configfile = _config(repo)
    env = snakemake_env(mirror)
    t0 = time.monotonic()
    for args in (["--cores", "2", "all"], ["--report", "results/report.html"]):
        r = subprocess.run([sys.executable, "-m", "snakemake", *args, "--configfile", configfile], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return repo, repo / "results/report.html", time.monotonic() - t0


def _html_outputs(repo: Path) -> list[Path]:
    return sorted([*repo.glob("results/tables/*.html"), *repo.glob("results/claims/*.html")])


def _watching(report_browser):
    """tools/report_browser.py's browser, keeping the protocol's events (console calls, page
    errors, log entries) that its ``send`` passes over while it waits for a reply."""

    class Watching(report_browser.ReportBrowser):
        def __init__(self, *a, **kw):
            self.events: list[dict] = []
            super().__init__(*a, **kw)
            for domain in ("Runtime.enable", "Log.enable", "Network.enable"):
                self.send(domain)

        def send(self, method, params=None, browser=False):
            self._id += 1
            msg = {"id": self._id, "method": method, "params": params or {}}
            if self.session and not browser:
                msg["sessionId"] = self.session
            self._w.write(json.dumps(msg).encode() + b"\0")
            while True:
                while b"\0" not in self._buf:
                    chunk = self._r.read(1 << 20)
                    if not chunk:
                        raise report_browser.ChromiumError(f"chromium closed the pipe during {method}")
                    self._buf += chunk
                raw, _, self._buf = self._buf.partition(b"\0")
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise report_browser.ChromiumError(f"{method}: {reply['error']}")
                    return reply["result"]
                if "method" in reply:
                    self.events.append(reply)

    return Watching


#: what a script, a broken script or a failed <img src=x> leaves in the protocol
SIGNS = ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")
#: the one console message of every report, a clean one too: Snakemake's template inlines
#: Tailwind's in-browser build (the "Play CDN" script, nothing fetched), which warns so
TAILWIND_WARNING = "cdn.tailwindcss.com should not be used in production"


def _sign_of_script(event: dict) -> bool:
    if event["method"] not in SIGNS:
        return False
    args = event["params"].get("args") or [{}]
    return not (event["method"] == "Runtime.consoleAPICalled" and event["params"].get("type") == "warning"
                and str(args[0].get("value", "")).startswith(TAILWIND_WARNING))


def _fetched(events: list[dict]) -> list[str]:
    """URLs requested that are not the local file itself or inline data (the report must work offline)."""
    return [u for e in events if e["method"] == "Network.requestWillBeSent"
            and not (u := e["params"]["request"]["url"]).startswith(("file:", "data:", "about:", "blob:"))]


@pytest.mark.slow
def test_hostile_display_name_runs_no_script_and_keeps_every_format(hostile_run, report_browser):
    repo, report, took = hostile_run
    print(f"snakemake all + --report: {took:.1f} s")
    exe = report_browser.require_chromium()
    pages = [report, *_html_outputs(repo)]
    assert len(pages) >= 1 + 12 + 1, pages  # the report, 6 tables x 2 modes, metrics_full, claims
    problems = {}
    shown = {}
    browser = _watching(report_browser)
    for page in pages:
        with browser(exe) as b:
            b.send("Page.navigate", {"url": page.resolve().as_uri()})
            b.wait_for("document.readyState === 'complete'", str(page))
            if page == report:
                b.wait_for("document.body.innerText.includes('RESULTS')", "the report's menu")
                b.click_menu("Tables")
                b.wait_for("document.body.innerText.includes('Table 1 (configured datasets)')", "the tables' list")
                b.open_entry("Table 1 (configured datasets)")
                shown[page.name] = b.frame_text()
            else:
                shown[page.name] = b.eval("document.body.innerText")
            time.sleep(0.5)  # a timer or an onerror would have fired by now
            title = b.eval("document.title")
            got = [e for e in b.events if _sign_of_script(e)]
            if "PWNED" in title or got or _fetched(b.events):
                problems[page.name] = {"title": title, "events": [json.dumps(e["params"])[:300] for e in got],
                                       "fetched": _fetched(b.events)}
    assert not problems, json.dumps(problems, indent=1)[:6000]
    # the name is shown as text, markup and all
    assert "document.title='PWNED'" in shown["table1_configured.html"]
    assert "document.title='PWNED'" in shown["report.html"]


def _md_tables(md: str) -> list[list[list[str]]]:
    """The tables of a Markdown file (runs of lines starting with '|'), each as its rows'
    cells, split at every '|' that no backslash escapes."""
    tables, rows = [], []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            rows.append(re.split(r"(?<!\\)\|", line.strip())[1:-1])
        elif rows:
            tables.append(rows)
            rows = []
    return tables


def _well_formed(rows: list[list[str]]) -> bool:
    """A header, the separator line, then rows, all with the header's number of cells (a line
    break in a cell ends the table after its header, which then has no separator)."""
    return (len(rows) >= 2 and all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in rows[1])
            and len({len(r) for r in rows}) == 1)


@pytest.mark.slow
def test_hostile_display_name_keeps_markdown_tables_well_formed(hostile_run):
    repo, _, _ = hostile_run
    mds = sorted([*repo.glob("results/tables/*.md"), *repo.glob("results/claims/*.md")])
    assert len(mds) >= 14
    bad = {}
    for md in mds:
        for k, rows in enumerate(_md_tables(md.read_text())):
            if not _well_formed(rows):
                bad[f"{md.name} table {k + 1}"] = [len(r) for r in rows]
    assert not bad, bad
    assert "PWNED" in (repo / "results/tables/table1_configured.md").read_text()


def _latexmk() -> str:
    exe = shutil.which("latexmk")
    if exe is None or shutil.which("pdflatex") is None:
        why = "latexmk/pdflatex not found (Debian: apt-get install latexmk texlive-latex-recommended)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {why}: .ci/run installs it")
        pytest.skip(why)
    return exe


DOC = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage[utf8]{inputenc}
\usepackage{booktabs}
\usepackage{multirow}
\begin{document}
\input{%s}
\end{document}
"""


@pytest.mark.slow
def test_hostile_display_name_keeps_latex_tables_compiling(hostile_run, tmp_path):
    repo, _, _ = hostile_run
    exe = _latexmk()
    texs = sorted(repo.glob("results/tables/*.tex"))
    assert len(texs) == 12
    assert any("PWNED" in t.read_text() for t in texs)
    failed = {}
    for tex in texs:
        doc = tmp_path / f"{tex.stem}-doc.tex"
        doc.write_text(DOC % tex.resolve().as_posix())
        r = subprocess.run([exe, "-pdf", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                           capture_output=True, text=True, errors="replace", timeout=120)
        if r.returncode != 0:
            log = doc.with_suffix(".log")
            lines = log.read_text(errors="replace").splitlines() if log.exists() else r.stdout.splitlines()
            failed[tex.name] = [ln for ln in lines if ln.startswith("!")][:3] or lines[-5:]
    assert not failed, failed
