"""HTML pages of the tables and the claims check, for Snakemake's report (which shows images,
PDF and HTML, not Markdown) and for opening in a browser.

A page is self-contained: one stylesheet in ``<head>``, no script, nothing fetched. Every text
placed in a page goes through :func:`esc`, the one HTML escaping of the project: cells, row and
column labels (a custom dataset's ``display_name`` heads the ``*_configured`` tables' columns
and may hold anything, ``<script>`` included), titles and notes alike. Tables are
rendered by :class:`pandas.io.formats.style.Styler` from a frame of cell texts (escaped here;
the Styler's own escaping covers cells but not the labels) plus a frame
of CSS classes per cell (``best`` bold, ``second`` underlined, ``first-of-block`` a rule above
the row, ``status-*`` the claims' status colours). The Styler gets a fixed ``uuid``, so the
same inputs give byte-identical HTML (DVC and the Slurm test compare outputs by hash).
"""

from __future__ import annotations

import html
import shlex

import pandas as pd

#: what must not reach Snakemake's report raw (:func:`report_shell_word`): markup and JSON-ending
#: characters, Snakemake's ``{...}`` params formatting, line breaks and other control characters
_REPORT_UNSAFE = frozenset("<>&{}\u2028\u2029\x7f") | frozenset(map(chr, range(32)))
#: what stays as it is inside ``$'...'``: printable ASCII but quotes, backslash and the above
_ANSI_C_PLAIN = frozenset(map(chr, range(32, 127))) - frozenset("<>&{}'\"\\")

CSS = """
body { font-family: "DejaVu Sans", Arial, Helvetica, sans-serif; font-size: 14px; color: #111; margin: 16px 24px; }
h1 { font-size: 18px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 22px 0 6px 0; }
p.caption { margin: 4px 0 10px 0; max-width: 70em; }
p.stamp { margin: 0 0 10px 0; color: #555; font-size: 12px; }
table { border-collapse: collapse; margin: 6px 0 12px 0; }
th, td { padding: 3px 9px; }
thead th { border-bottom: 1px solid #333; text-align: center; font-weight: 600; }
table { border-top: 2px solid #111; border-bottom: 2px solid #111; }
tbody th { text-align: left; font-weight: normal; white-space: nowrap; }
td { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.text { text-align: left; white-space: normal; }
td.best { font-weight: 700; }
td.second { text-decoration: underline; }
td.nr, td.notrun { color: #777; }
.first-of-block { border-top: 1px solid #333; }
tbody th.level0 { font-style: italic; color: #444; vertical-align: top; }
thead th.index_name { text-align: left; }
td.status-consistent { background: #e3f4e3; }
td.status-inconsistent { background: #f9dddd; }
td.status-paper { background: #fff1cc; }
td.status-above { background: #ecd9f3; }
td.status-undecided { background: #e3eefa; }
td.status-notchecked { color: #666; }
ol.notes { font-size: 12px; max-width: 80em; padding-left: 22px; }
ol.notes li { margin: 2px 0; }
ul.meta { font-size: 13px; max-width: 80em; }
"""


def page(title: str, body: list[str]) -> str:
    """A complete HTML document; ``body`` are HTML fragments (already escaped)."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
                      *body, "</body>", "</html>"]) + "\n"


def esc(text: object) -> str:
    """``text`` as HTML text or a quoted attribute value: ``& < > " '`` as character references.
    The one HTML escaping of the project (tables, the claims page): whatever a config says, a
    page shows it as text and never runs it."""
    return html.escape(str(text), quote=True)


def report_shell_word(value: object) -> str:
    """``value`` as one bash word whose text holds no ``< > & { }``, line break or other
    control character: :func:`shlex.quote` when it has none of them, else ``$'...'`` with every
    such character (and quotes, backslash, non-ASCII) as ``\\xHH`` UTF-8 bytes, which bash
    turns back into exactly ``value``.

    For the params of a rule whose output is in Snakemake's HTML report: the report embeds each
    such job's params as a JSON string inside an inline ``<script>`` without escaping ``</`` or
    ``<!--`` (snakemake 9 ``report/html_reporter/data/results.py``: plain ``json.dumps``), so a
    display name ``</script><script>...`` would end that script and run its own; and Snakemake
    formats ``{...}`` in a params string as a wildcard (a name holding ``{b}`` stops the DAG).
    Written this way, a param carries the name to the job unchanged, the report shows an inert
    ``$'...\\x3c...'``, and only a change of the value re-runs the job. Snakemake runs ``shell:``
    commands with bash (``set -euo pipefail``), which ``$'...'`` needs."""
    text = str(value)
    if not any(c in _REPORT_UNSAFE for c in text):
        return shlex.quote(text)
    return "$'" + "".join(c if c in _ANSI_C_PLAIN else "".join(f"\\x{b:02x}" for b in c.encode("utf-8"))
                          for c in text) + "'"


def notes_list(notes: list[str]) -> str:
    """Footnotes as a numbered list (numbers as in the Markdown)."""
    if not notes:
        return ""
    return '<ol class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ol>"


def styled_table(text: pd.DataFrame, classes: pd.DataFrame | None, uuid: str, *,
                 hide_index_levels: list[int] | None = None, index_class: dict | None = None) -> str:
    """``text`` (cell strings, any index / column MultiIndex) as an HTML ``<table>``, each data
    cell with the CSS classes of ``classes`` (same shape). Row index levels in
    ``hide_index_levels`` are not shown; ``index_class`` maps a row position to a CSS class for
    its whole row (e.g. ``first-of-block``)."""
    from pandas.io.formats.style import Styler  # imports jinja2: only when a page is written

    text, classes = _escaped(text), (None if classes is None else _escaped(classes, cells=False))
    st = Styler(text, uuid=uuid, cell_ids=False)
    if classes is not None:
        st = st.set_td_classes(classes)
    for level in hide_index_levels or []:
        st = st.hide(axis="index", level=level)
    if index_class:
        st = st.set_table_styles(
            {text.index[i]: [{"selector": "td, th", "props": "border-top: 1px solid #333;"}]
             for i in index_class}, axis=1, overwrite=False)
    return st.to_html(sparse_index=True, sparse_columns=True)


def frame_table(df: pd.DataFrame, uuid: str, classes: pd.DataFrame | None = None) -> str:
    """A plain frame (string cells, default index hidden) as an HTML table."""
    from pandas.io.formats.style import Styler

    df = _escaped(df.astype(str))
    st = Styler(df, uuid=uuid, cell_ids=False).hide(axis="index")
    if classes is not None:
        st = st.set_td_classes(_escaped(classes, cells=False))
    return st.to_html()


def report_label(value: object) -> str:
    """``value`` as a label or caption text handed to Snakemake's report (``report(...,
    labels=...)``): Snakemake shows labels as text but embeds them in a ``<script>`` as plain
    JSON (see :func:`report_shell_word`), and its captions are reStructuredText, so ``< > &``,
    a backquote, line breaks and other control characters become ``?``. For text the project
    does not choose (a config file's path); the names of profiles, datasets and methods are
    plain already (``cdgtmll.config.names``)."""
    return "".join("?" if c in _REPORT_UNSAFE or c == "`" else c for c in str(value))


def _escaped_index(index: pd.Index) -> pd.Index:
    names = [None if n is None else esc(n) for n in index.names]
    if isinstance(index, pd.MultiIndex):
        return pd.MultiIndex.from_tuples([tuple(esc(v) for v in t) for t in index], names=names)
    return pd.Index([esc(v) for v in index], name=names[0])


def _escaped(df: pd.DataFrame, cells: bool = True) -> pd.DataFrame:
    """``df`` with its row and column labels (and, with ``cells``, its cells) through
    :func:`esc`: the Styler is then told to escape nothing, so that one function escapes all."""
    out = df.map(esc) if cells else df.copy()
    out.index, out.columns = _escaped_index(df.index), _escaped_index(df.columns)
    return out
