"""What the HTML report (``snakemake --report``) says about a run that has not finished: the
landing page's progress block, and one line instead of Snakemake's warning per missing output.

Snakemake parses the Snakefile before it knows it is building a report, so report mode is read
from the command line (:func:`report_path`, ``sys.argv``: the same for the ``snakemake`` entry
point and ``python -m snakemake``). In report mode the Snakefile

* installs :class:`MissingMetadataSummary` on Snakemake's logger: the report warns "Missing
  metadata for file ..." once per output of every job not run yet (hundreds on a half-finished
  run); they become one line with the count;
* computes :func:`run_status` and hands :func:`status_html` of it to the landing page
  (workflow/report/workflow.rst) as ``config["_report_status"]``, which exists only then.

The status: ``results/partial/status.json`` (written by the logger plugin after each step:
``done``, ``total``, ``left_s_low``, ``left_s_high``, ``updated``, ``per_rule``) when it is at
least as new as every planned output present, and always the count from files (runs whose
``metrics.json`` exists of the runs the config plans, outputs present of the targets), the
pending runs per method, and the partial tables of ``results/partial/tables/`` (they are not
Snakemake outputs, so not report entries: Table 1's is embedded, the others linked).

Everything from a config or a data file is HTML-escaped, and no line break survives
(:func:`html_text`): the block is a reStructuredText ``raw`` directive, which one unindented
line would end.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

#: the logger plugin's status file and the partial tables' folder, relative to the workflow
STATUS_FILE = "results/partial/status.json"
PARTIAL_TABLES = "results/partial/tables"
#: the start of Snakemake's warning per output without metadata (snakemake/report/__init__.py)
MISSING_METADATA = "Missing metadata for file "
#: pending runs listed per method before "and N more"
MAX_PENDING = 12
#: the longest line docutils takes in the landing page (its setting ``line_length_limit``)
RST_LINE_LIMIT = 10_000


def report_path(argv: Sequence[str]) -> str | None:
    """The report file ``argv`` (Snakemake's command line) asks for with ``--report [FILE]``
    (``report.html`` when it names none); None when it builds no report. ``--report-after-run``
    and the ``--report-*`` options are not report mode (the first runs jobs first)."""
    args = list(argv[1:])
    for i, a in enumerate(args):
        if a == "--":
            break
        if a.startswith("--report="):
            return a.split("=", 1)[1] or "report.html"
        if a == "--report":
            nxt = args[i + 1] if i + 1 < len(args) else ""
            return nxt if nxt and not nxt.startswith("-") and nxt.endswith((".html", ".zip")) else "report.html"
    return None


class MissingMetadataSummary(logging.Filter):
    """Drops Snakemake's "Missing metadata for file X ..." warnings, counting the files X that
    do not exist (not made yet) and those that exist without Snakemake's record (made outside
    it), and logs one line with the counts before the next other message (or :meth:`flush`)."""

    def __init__(self) -> None:
        super().__init__()
        self.missing: list[str] = []
        self.unrecorded: list[str] = []
        self._pending = False
        self._emitting = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self._emitting:
            return True
        try:
            msg = record.getMessage()
        except Exception:  # a record whose arguments do not format is not ours to judge
            return True
        if isinstance(msg, str) and msg.startswith(MISSING_METADATA):
            path = msg[len(MISSING_METADATA):].split(". Maybe metadata", 1)[0]
            (self.unrecorded if os.path.exists(path) else self.missing).append(path)
            self._pending = True
            return False
        self.flush(logging.getLogger(record.name))
        return True

    def summary(self) -> str | None:
        """The one line, or None when nothing was dropped."""
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} outputs not made yet: the report leaves them out")
        if self.unrecorded:
            parts.append(f"{len(self.unrecorded)} outputs made outside this workflow's Snakemake (no metadata): "
                         "the report shows them without their job's times")
        return "; ".join(parts) or None

    def flush(self, logger: logging.Logger) -> None:
        """Log the summary line once, if anything was dropped since the last one."""
        if not self._pending:
            return
        self._pending = False
        line = self.summary()
        if line:
            self._emitting = True
            try:
                logger.warning(line)
            finally:
                self._emitting = False


def quiet_missing_metadata(logger: logging.Logger) -> MissingMetadataSummary:
    """Install :class:`MissingMetadataSummary` on ``logger`` (Snakemake's: snakemake.logging.logger)."""
    f = MissingMetadataSummary()
    logger.addFilter(f)
    return f


@dataclass(frozen=True)
class PlannedRun:
    """One run the config plans: the method, dataset and setting, and its seeds' metrics files."""

    method: str
    dataset: str
    setting: str
    metrics: tuple[str, ...]


@dataclass
class RunStatus:
    """How far the run is (see the module docstring)."""

    runs_done: int
    runs_total: int
    outputs_done: int
    outputs_total: int
    #: method -> [(dataset, setting, seeds missing, seeds planned)]
    pending: dict[str, list[tuple[str, str, int, int]]] = field(default_factory=dict)
    #: results/partial/status.json when fresh, else None
    steps: dict | None = None
    #: why status.json was not used ("" when it was, or when there is none)
    steps_note: str = ""
    #: partial tables (paths relative to the workflow), Table 1's first
    partial_tables: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.outputs_done == self.outputs_total and self.runs_done == self.runs_total


def _mtime(path: str | os.PathLike) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def snakemake_running(root: Path) -> bool:
    """A Snakemake run holds the locks of ``root/.snakemake`` (or a killed one left them)."""
    try:
        return any((root / ".snakemake" / "locks").iterdir())
    except OSError:
        return False


def read_steps(root: Path, newest_output: float | None) -> tuple[dict | None, str]:
    """results/partial/status.json when it is usable and, unless a Snakemake run holds the
    workflow's locks, at least as new as ``newest_output`` (the newest planned output present);
    else None and why (``""`` when there is no file). While a run goes on, the status is that
    run's, as of its last finished job: a training job of several seeds writes each seed's
    predictions before it finishes, so an output newer than the status is no sign of an earlier
    run."""
    path = root / STATUS_FILE
    when = _mtime(path)
    if when is None:
        return None, ""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{STATUS_FILE} is not readable JSON ({exc}); counted from the files instead"
    if not isinstance(rec, dict) or not all(isinstance(rec.get(k), int) for k in ("done", "total")):
        return None, f"{STATUS_FILE} has no integer fields 'done' and 'total'; counted from the files instead"
    if newest_output is not None and when < newest_output and not snakemake_running(root):
        return None, f"{STATUS_FILE} is older than the newest output (an earlier run's); counted from the files instead"
    return rec, ""


def _table1_first(names: Iterable[str]) -> list[str]:
    def key(n: str) -> tuple[int, str]:
        stem = Path(n).stem
        return (0 if stem == "table1_standard" else 1 if stem.startswith("table1") else 2, n)

    return sorted(names, key=key)


def run_status(root: str | os.PathLike, planned: Sequence[PlannedRun], targets: Sequence[str]) -> RunStatus:
    """The status of the run under ``root`` whose config plans ``planned`` runs and ``targets``
    (paths relative to ``root``)."""
    root = Path(root)
    pending: dict[str, list[tuple[str, str, int, int]]] = {}
    runs_done = runs_total = 0
    seen: set[str] = set()
    for run in planned:
        missing = 0
        for m in run.metrics:
            if m not in seen:
                seen.add(m)
                runs_total += 1
                runs_done += (root / m).exists()
            missing += not (root / m).exists()
        if missing:
            pending.setdefault(run.method, []).append((run.dataset, run.setting, missing, len(run.metrics)))
    times = [t for t in (_mtime(root / t) for t in dict.fromkeys(targets)) if t is not None]
    uniq = list(dict.fromkeys(targets))
    steps, note = read_steps(root, max(times, default=None))
    tables_dir = root / PARTIAL_TABLES
    partial = _table1_first(str(p.relative_to(root)) for p in tables_dir.glob("*.html")) if tables_dir.is_dir() else []
    return RunStatus(runs_done, runs_total, len(times), len(uniq), pending, steps, note, partial)


def html_text(value: object) -> str:
    """``value`` as HTML text: markup escaped (quotes too), and every character at which Python
    (and so docutils) would break a line written as a character reference, so that the text
    stays on its line of the ``raw`` directive."""
    out = []
    for ch in html.escape(str(value), quote=True):
        out.append(f"&#{ord(ch)};" if len(f"a{ch}a".splitlines()) > 1 else ch)
    return "".join(out)


def _minutes(seconds: object) -> str | None:
    if not isinstance(seconds, (int, float)) or seconds < 0:
        return None
    m = seconds / 60
    return f"{m:.0f} min" if m >= 1 else f"{seconds:.0f} s"


def _steps_line(steps: Mapping) -> str:
    done, total = steps["done"], steps["total"]
    line = f"<b>{html_text(done)} of {html_text(total)} steps done</b> in the last run"
    extra = []
    if steps.get("updated"):
        extra.append(f"updated {html_text(steps['updated'])}")
    lo, hi = _minutes(steps.get("left_s_low")), _minutes(steps.get("left_s_high"))
    if done < total and lo and hi:
        extra.append(f"about {html_text(lo)} to {html_text(hi)} left" if lo != hi else f"about {html_text(lo)} left")
    if extra:
        line += f" ({'; '.join(extra)})"
    return line + f", from <span class='docutils literal'>{html_text(STATUS_FILE)}</span>."


def _href(path: Path, report: str | os.PathLike | None, root: Path) -> str:
    """A link from the report file to ``path`` (both may be anywhere)."""
    start = Path(os.path.abspath(root / report)).parent if report else root.resolve()
    return quote(os.path.relpath(os.path.abspath(path), start))


def status_html(status: RunStatus, root: str | os.PathLike = ".", report: str | os.PathLike | None = None,
                updated: dt.datetime | None = None) -> str:
    """The landing page's block for ``status``: HTML, one element per line, every value escaped
    (:func:`html_text`). ``report``: the report's path (relative to ``root``), for the links to
    the partial tables."""
    root = Path(root)
    when = (updated or dt.datetime.now().astimezone()).strftime("%Y-%m-%d %H:%M")
    if status.finished:
        return (f"<p>Run status ({html_text(when)}): all {status.outputs_total} outputs of this profile are made "
                f"({status.runs_done} runs).</p>")
    out = [f"<p><b>This run has not finished</b> (status at {html_text(when)}).</p>", "<ul>"]
    if status.steps is not None:
        out.append(f"<li>{_steps_line(status.steps)}</li>")
    literal = "<span class='docutils literal'>{}</span>".format
    out.append(f"<li><b>{status.runs_done} of {status.runs_total} runs done</b> (their {literal('metrics.json')} "
               f"exists); {status.outputs_done} of {status.outputs_total} files of the run's targets (rule "
               f"<span class='docutils literal'>all</span>) present.</li>")
    if status.steps_note:
        out.append(f"<li>{html_text(status.steps_note)}</li>")
    out.append("</ul>")
    if status.partial_tables:
        links = ", ".join(f'<a href="{html_text(_href(root / p, report, root))}" target="_blank">'
                          f"{html_text(Path(p).name)}</a>" for p in status.partial_tables)
        folder = f"<span class='docutils literal'>{html_text(PARTIAL_TABLES)}/</span>"
        out.append(f"<p><b>Partial tables</b> from the runs done so far ({folder}; not outputs of the workflow, "
                   f"so not entries under RESULTS): {links}. The first:</p>")
        try:
            page = (root / status.partial_tables[0]).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            out.append(f"<p>({html_text(status.partial_tables[0])} could not be read: {html_text(exc)})</p>")
        else:
            # sandbox: the page shows, no script of it runs; srcdoc: the report stays one file. The
            # page keeps its own lines (each escaped): docutils refuses a line of the raw block
            # longer than RST_LINE_LIMIT, and then shows an error in place of the whole landing page
            lines = [html_text(line) for line in page.splitlines()]
            if max(map(len, lines), default=0) + 8 <= RST_LINE_LIMIT:
                out.append(f'<iframe sandbox="" title="{html_text(Path(status.partial_tables[0]).name)}" '
                           f'style="width:100%;height:32em;border:1px solid #999;background:#fff" '
                           'srcdoc="' + "\n".join(lines) + '"></iframe>')
            else:
                out.append(f"<p>({html_text(status.partial_tables[0])} has a line too long to embed here: open "
                           "its link.)</p>")
    else:
        out.append(f"<p>No partial tables yet (<span class='docutils literal'>{html_text(PARTIAL_TABLES)}/</span>)."
                   "</p>")
    # the pending runs last: a long list (every setting of the studies) after the tables
    if status.pending:
        out.append("<p><b>Pending</b> (runs whose metrics are missing, per method: dataset / setting, seeds "
                   "missing of planned):</p>")
        out.append("<ul>")
        for method in sorted(status.pending):
            items = status.pending[method]
            shown = ", ".join(f"{html_text(d)} / {html_text(s)} ({k} of {n})" for d, s, k, n in items[:MAX_PENDING])
            more = f", and {len(items) - MAX_PENDING} more" if len(items) > MAX_PENDING else ""
            out.append(f"<li><b>{html_text(method)}</b>: {shown}{more}</li>")
        out.append("</ul>")
    return "\n".join(out)
