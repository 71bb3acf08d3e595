"""Drive Snakemake's HTML report in headless Chromium, as a reader does: click a category in
the left-hand menu, click the eye icon of an entry, read what the page then shows (the text
inside the entry's frame, which cells are bold or underlined) and take screenshots.

The report is a single-page app without URLs for its entries: an entry is opened only by
clicks. Chromium is driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: JSON messages separated by NUL bytes on file descriptors 3 and
4), so nothing beyond the Python standard library and a ``chromium`` binary is needed.

Command line (screenshots of the landing page, Table 1, the claims check and a figure)::

    python tools/report_browser.py results/report.html OUTDIR

A report of a run that has not finished may lack a category (no Tables yet): its screenshot is
skipped and the command says so. A screenshot whose shown content is blank (nearly one colour:
:func:`blank_share`) is taken again after a longer wait, then fails: the command exits non-zero
naming it, and the blank file is not kept.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the Debian package's binary, then whatever PATH has
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for c in CANDIDATES:
        path = c if os.path.isabs(c) and os.access(c, os.X_OK) else shutil.which(c)
        if path:
            return path
    return None


def require_chromium() -> str:
    """For tests: the chromium binary; skips without one, except under CI (env var CI set),
    where .ci/run installs it and a skip would hide the test, so it fails instead."""
    import pytest

    exe = find_chromium()
    if exe is None:
        why = "chromium not found (Debian: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {why}: .ci/run installs it")
        pytest.skip(why)
    return exe


class ChromiumError(RuntimeError):
    pass


class BlankScreenshotError(ChromiumError):
    """A screenshot whose shown content is nearly one colour (nothing painted)."""


class BrokenPageError(ChromiumError):
    """A page that shows docutils' error in place of its text ("System Message: ERROR/3 ...")."""


#: a screenshot's content is blank when its most common colour covers at least this share of it
BLANK_SHARE = 0.995


def blank_share(png: bytes, box: tuple[int, int, int, int] | None = None) -> float:
    """The share of the pixels of ``png`` (inside ``box``: left, top, right, bottom, when
    given) that have its most common colour: 1.0 for a uniform image."""
    import io

    import numpy as np
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    if box is not None:
        left, top, right, bottom = box
        left, top = max(0, left), max(0, top)
        right, bottom = min(img.width, right), min(img.height, bottom)
        if right - left >= 8 and bottom - top >= 8:
            img = img.crop((left, top, right, bottom))
    px = np.asarray(img).reshape(-1, 3)
    packed = (px[:, 0].astype(np.uint32) << 16) | (px[:, 1].astype(np.uint32) << 8) | px[:, 2]
    return float(np.bincount(np.unique(packed, return_inverse=True)[1].ravel()).max() / len(packed))


class ReportBrowser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, chromium: str | None = None, width: int = 1600, height: int = 1000, timeout: float = 60):
        exe = chromium or find_chromium()
        if exe is None:
            raise ChromiumError("no chromium found (Debian: apt-get install chromium)")
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="cdgtmll-chromium-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()

        def wire():  # in the child: the protocol's fds 3 (read) and 4 (write)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-pipe", f"--window-size={width},{height}", f"--user-data-dir={self._profile}",
             "about:blank"],
            preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._w = os.fdopen(to_chrome_w, "wb", buffering=0)
        self._r = os.fdopen(from_chrome_r, "rb", buffering=0)
        self._buf, self._id, self.session = b"", 0, None
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # ------------------------------------------------------------------ protocol
    def send(self, method: str, params: dict | None = None, browser: bool = False) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        try:
            self._w.write(json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise ChromiumError(f"chromium exited: {self._stderr()}") from None
        while True:
            while b"\0" not in self._buf:
                chunk = self._r.read(1 << 20)
                if not chunk:
                    raise ChromiumError(f"chromium closed the pipe during {method}: {self._stderr()}")
                self._buf += chunk
            raw, _, self._buf = self._buf.partition(b"\0")
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply["result"]

    def _stderr(self) -> str:
        self.proc.poll()
        return (self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.returncode is not None
                else "(still running)")

    def eval(self, expression: str, context: int | None = None):
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if context is not None:
            params["contextId"] = context
        res = self.send("Runtime.evaluate", params)
        if "exceptionDetails" in res:
            raise ChromiumError(f"{expression[:80]}...: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def wait_for(self, expression: str, what: str, context_fn=None):
        """Poll ``expression`` until it is truthy; its value."""
        end = time.monotonic() + self.timeout
        while True:
            try:
                v = self.eval(expression, context_fn() if context_fn else None)
            except ChromiumError:
                v = None
            if v:
                return v
            if time.monotonic() > end:
                raise ChromiumError(f"timed out after {self.timeout} s waiting for {what}")
            time.sleep(0.2)

    # ------------------------------------------------------------------ the report
    def open(self, report: Path) -> str:
        """Load the report; the text of its landing page."""
        self.send("Page.navigate", {"url": Path(report).resolve().as_uri()})
        # a report with no entries yet has no RESULTS section, only GENERAL
        return self.wait_for("document.readyState === 'complete' && (document.body.innerText.includes('RESULTS') "
                             "|| document.body.innerText.includes('GENERAL')) && document.body.innerText",
                             "the report's menu")

    def has_menu(self, text: str) -> bool:
        """Whether the left-hand menu has an item whose text is ``text`` (a category)."""
        return bool(self.eval(f"""(() => {{ const t = {json.dumps(text)};
            return [...document.querySelectorAll('li, a, span')].some(e => e.textContent.trim() === t); }})()"""))

    def click_menu(self, text: str) -> None:
        """Click the item of the left-hand menu whose text is ``text`` (a category)."""
        found = self.eval(f"""(() => {{ const t = {json.dumps(text)};
            const el = [...document.querySelectorAll('li, a, span')].filter(e => e.textContent.trim() === t).pop();
            if (!el) return false; el.click(); return true; }})()""")
        if not found:
            raise ChromiumError(f"no menu item {text!r}; page text: {self.eval('document.body.innerText')[:500]}")

    def open_entry(self, label: str) -> None:
        """Click the eye icon of the entry whose first column is ``label`` (the category's
        list must be shown), and wait until its frame has loaded."""
        js = f"""(() => {{ const t = {json.dumps(label)};
            const tr = [...document.querySelectorAll('tbody tr')].find(r => r.cells.length && r.cells[0].textContent.trim() === t);
            if (!tr) return false; tr.cells[tr.cells.length - 1].querySelector('a').click(); return true; }})()"""
        self.wait_for(js, f"the entry {label!r}")
        self.wait_for("(() => { const f = document.querySelector('iframe, img'); "
                      "return !!f && (f.tagName === 'IMG' ? f.complete : !!f.src); })()", f"the content of {label!r}")

    def entries(self) -> list[list[str]]:
        """The rows of the shown category's list (label columns)."""
        return self.eval("[...document.querySelectorAll('tbody tr')].filter(r => r.cells.length > 1)"
                         ".map(r => [...r.cells].slice(0, -1).map(c => c.textContent.trim()))")

    def _frame_context(self) -> int:
        frames = self.send("Page.getFrameTree")["frameTree"].get("childFrames") or []
        if not frames:
            raise ChromiumError("no frame shown")
        frame = frames[-1]["frame"]["id"]
        return self.send("Page.createIsolatedWorld", {"frameId": frame, "worldName": "cdgtmll-test"})[
            "executionContextId"]

    def frame_eval(self, expression: str):
        """Evaluate ``expression`` inside the shown entry's frame (an HTML entry)."""
        self.wait_for("document.readyState === 'complete'", "the frame", self._frame_context)
        return self.eval(expression, self._frame_context())

    def frame_text(self) -> str:
        return self.frame_eval("document.body ? document.body.innerText : ''")

    def marked_cells(self) -> dict[str, list[str]]:
        """Texts of the cells shown bold (computed font-weight >= 600) and underlined, inside the frame."""
        return self.frame_eval("""(() => { const out = {bold: [], underlined: []};
            for (const td of document.querySelectorAll('td')) { const s = getComputedStyle(td);
              if (parseInt(s.fontWeight) >= 600) out.bold.push(td.innerText.trim());
              if (s.textDecorationLine.includes('underline')) out.underlined.push(td.innerText.trim()); }
            return out; })()""")

    def toggles(self) -> str:
        """The text of the toggle bar above a category's list ('' when there is none)."""
        return self.eval("(() => { const t = document.querySelector('.bg-slate-800.flex-wrap'); "
                         "return t ? t.innerText : ''; })()") or ""

    def shown_content(self) -> str:
        """What the main panel shows: 'html', 'pdf', 'img' (by the frame's data URI), or ''."""
        return self.eval("""(() => { const f = document.querySelector('iframe'); if (f && f.src)
              return f.src.startsWith('data:application/pdf') ? 'pdf' : 'html';
              return document.querySelector('img') ? 'img' : ''; })()""")

    def content_box(self) -> tuple[int, int, int, int] | None:
        """The shown entry's frame or image on the page (left, top, right, bottom), or None."""
        return self.eval("""(() => { const f = document.querySelector('iframe') || document.querySelector('main img');
              if (!f) return null; const r = f.getBoundingClientRect();
              return r.width > 0 && r.height > 0 ? [r.left, r.top, r.right, r.bottom].map(Math.round) : null; })()""")

    def screenshot(self, path: Path, settle: float = 1.0, tries: int = 3) -> Path:
        """Save a PNG of the page at ``path``. Its content (the shown entry's frame or image,
        else the whole page) must not be blank (:data:`BLANK_SHARE`): taken again after a longer
        wait, up to ``tries`` times, then :class:`BlankScreenshotError` naming ``path``, which is
        not written."""
        share = 1.0
        for k in range(tries):
            time.sleep(settle * (k + 1))  # let the PDF viewer / frame paint
            png = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])
            share = blank_share(png, self.content_box())
            if share < BLANK_SHARE:
                Path(path).write_bytes(png)
                return Path(path)
        raise BlankScreenshotError(f"{path}: blank screenshot ({share:.1%} of its content is one colour, after "
                                   f"{tries} tries); nothing was painted, not saved")

    def close(self) -> None:
        try:
            self.send("Browser.close", browser=True)
        except ChromiumError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self._w, self._r, self.proc.stderr):
            f.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


#: the screenshots after the landing page: name -> (category, entry label or None for the first)
SHOTS = {
    "table1": ("Tables", "Table 1 (as in the paper)"),
    "claims": ("Claims", "Paper claims vs. reproduced runs"),
    "figure": ("Figures", None),
}


def screenshots(report: Path, out: Path, skipped: dict[str, str] | None = None) -> dict[str, Path]:
    """Landing page, Table 1 (paper's columns, global mode), the claims check and the first
    figure, each as ``out/report-<name>.png``. A category or entry the report does not have is
    skipped, with the reason in ``skipped``; a blank screenshot raises :class:`BlankScreenshotError`,
    a landing page that shows a docutils error :class:`BrokenPageError`."""
    out.mkdir(parents=True, exist_ok=True)
    skipped = {} if skipped is None else skipped
    shots = {}
    with ReportBrowser() as b:
        landing = b.open(report)
        if "System Message:" in landing:  # docutils could not render the landing page's text
            raise BrokenPageError(f"{report}: the landing page shows a docutils error instead of its text: "
                                  + landing[landing.index("System Message:"):][:300])
        shots["landing"] = b.screenshot(out / "report-landing.png")
        for name, (category, label) in SHOTS.items():
            b.open(report)
            if not b.has_menu(category):
                skipped[name] = f"the report has no category {category!r} (not made yet)"
                continue
            b.click_menu(category)
            rows = [r[0] for r in b.entries()] if label is None else []
            if label is None and not rows:
                skipped[name] = f"category {category!r} lists no entry"
                continue
            try:
                b.open_entry(label or rows[0])
            except ChromiumError as exc:
                skipped[name] = f"no entry {label!r} under {category!r} ({exc})"
                continue
            shots[name] = b.screenshot(out / f"report-{name}.png", settle=2.0 if name == "figure" else 1.0)
    return shots


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    skipped: dict[str, str] = {}
    try:
        shots = screenshots(Path(argv[0]), Path(argv[1]), skipped)
    except (BlankScreenshotError, BrokenPageError) as exc:
        print(f"report_browser: {exc}", file=sys.stderr)
        return 1
    for name, path in shots.items():
        print(name, path)
    for name, why in skipped.items():
        print(f"skipped {name}: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
