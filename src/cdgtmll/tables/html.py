"""HTML pages of the tables and the claims check, for Snakemake's report (which shows images,
PDF and HTML, not Markdown) and for opening in a browser.

A page is self-contained: one stylesheet in ``<head>``, no script, nothing fetched. Tables are
rendered by :class:`pandas.io.formats.style.Styler` from a frame of cell texts plus a frame
of CSS classes per cell (``best`` bold, ``second`` underlined, ``first-of-block`` a rule above
the row, ``status-*`` the claims' status colours). The Styler gets a fixed ``uuid``, so the
same inputs give byte-identical HTML (DVC and the Slurm test compare outputs by hash).
"""

from __future__ import annotations

import html

import pandas as pd

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
td.status-unattainable { background: #ecd9f3; }
td.status-notchecked { color: #666; }
ol.notes { font-size: 12px; max-width: 80em; padding-left: 22px; }
ol.notes li { margin: 2px 0; }
ul.meta { font-size: 13px; max-width: 80em; }
"""


def page(title: str, body: list[str]) -> str:
    """A complete HTML document; ``body`` are HTML fragments (already escaped)."""
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
                      *body, "</body>", "</html>"]) + "\n"


def esc(text: str) -> str:
    return html.escape(str(text), quote=False)


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

    st = Styler(text, uuid=uuid, cell_ids=False, escape="html")
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

    st = Styler(df.astype(str), uuid=uuid, cell_ids=False, escape="html").hide(axis="index")
    if classes is not None:
        st = st.set_td_classes(classes)
    return st.to_html()
