"""Writers of a table built by :func:`cdgtmll.tables.layout.build_table`: CSV, Markdown,
LaTeX (booktabs), HTML, and the ``.sources.json`` lineage record; and of ``metrics_full``.

Every format shows the same cells: mean ± sample std in percent (with the table's number of
decimals), ``n.r.`` for a dataset or setting not run, ``not run†`` for a method that could
not run (reason in the footnotes); the best mean of a column bold, the second underlined
(Markdown ``**`` / ``<u>``, LaTeX ``\\textbf`` / ``\\underline``, HTML classes ``best`` /
``second``), where :func:`cdgtmll.tables.layout.rank_marks` gives a mark: never on a tie at the
printed precision, never in a column that cannot separate methods. Rows the paper's table
does not have come last, under a rule, labelled ``‡ not in the paper`` (CSV: column ``in paper``).

Partial tables (:mod:`cdgtmll.tables.partial`, written while the workflow runs): a cell whose runs
are not evaluated yet shows :data:`PENDING` instead of ``n.r.`` (a value followed by it: the mean of
the runs done so far), and every file but the CSV starts with the ``banner``
(:func:`partial_banner`: ``partial: k of n runs done (as of <UTC time>)``). Without pending cells
and banner the files are the final tables' byte for byte.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from cdgtmll.io import atomic_write, sha256_file, write_json
from cdgtmll.tables.collect import METRIC_LABEL, METRICS
from cdgtmll.tables.html import esc, frame_table, notes_list, page, styled_table
from cdgtmll.tables.layout import NOT_RUN, header

FORMATS = ("csv", "md", "tex", "html")
#: a cell (or the part of one) whose runs are planned but not evaluated yet (partial tables)
PENDING = "…"
#: the partial banner in HTML: a box above the title (inline style: the stylesheet, part of every
#: final page, stays as it is)
_BANNER_STYLE = "background: #fff1cc; border: 1px solid #c90; padding: 4px 8px; font-weight: 600;"


def partial_banner(done: int, total: int, as_of: str) -> str:
    """The first line of every partial page and table: how many of its runs are done, and when."""
    return (f"partial: {done} of {total} runs done (as of {as_of}) — not the final result: written while the "
            "workflow runs, from the runs evaluated so far; the final files replace it when the run ends.")


def pending_note() -> str:
    """The footnote that explains :data:`PENDING`."""
    return (f"{PENDING} = pending: the cell's runs are planned in the running workflow but not "
            f"evaluated yet; a value followed by {PENDING} is the mean over the runs evaluated so far. {NOT_RUN} stays "
            "for what this configuration does not run.")


def banner_html(banner: str) -> list[str]:
    """The partial banner as the first element of a page's body (none without a banner)."""
    return [f'<p class="partial" style="{_BANNER_STYLE}">{esc(banner)}</p>'] if banner else []


def fmt(mean: float, std: float, n: int, digits: int = 1) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "nan"
    s = f"{100 * mean:.{digits}f}"
    if n > 1 and std is not None and not math.isnan(std):
        s += f" ± {100 * std:.{digits}f}"
    return s


def cell_text(cell: dict | None, style: str, digits: int = 1) -> str:
    if cell is None:
        return NOT_RUN
    if "not_run" in cell:
        return "not run†"
    if "mean" not in cell:  # every run of the cell pending
        return PENDING
    more = f" {PENDING}" if cell.get("pending") else ""
    t = fmt(cell["mean"], cell["std"], cell["n"], digits)
    if style == "md":
        return {"best": f"**{t}**", "second": f"<u>{t}</u>"}.get(cell.get("mark", ""), t) + more
    if style == "tex":
        t = t.replace("±", r"$\pm$")
        return {"best": rf"\textbf{{{t}}}", "second": rf"\underline{{{t}}}"}.get(cell.get("mark", ""), t) + more
    return t + more


def _cell_class(cell: dict | None) -> str:
    if cell is None:
        return "nr"
    if "not_run" in cell:
        return "notrun"
    if "mean" not in cell:
        return "nr pending"
    return cell.get("mark", "")


#: LaTeX's ten special characters and what typesets each as itself (the ``\text...`` forms
#: need no package); a line break would end a table row's cell, so it becomes a space
_TEX = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
        "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
        "±": r"$\pm$", "\n": " ", "\r": " ", "\u2028": " ", "\u2029": " "}


def tex_escape(text: object) -> str:
    """``text`` as LaTeX text: each of ``& % $ # _ { } ~ ^ \\`` typeset as itself, ``±`` as
    ``$\\pm$``, line breaks as spaces. Every name and note in a ``.tex`` table goes through it:
    a display name may hold anything (``cdgtmll.config.names``) and must not break the table."""
    return "".join(_TEX.get(c, c) for c in str(text))


def md_cell(text: object) -> str:
    """``text`` as the content of one Markdown table cell, shown as written: ``|`` would end
    the cell and a line break the row (GitHub, CommonMark tables), so ``\\ | * ` < > &`` are
    backslash-escaped (CommonMark shows an escaped ASCII punctuation character as itself, never
    as markup or HTML), so is a ``]`` that would make a link (before ``(``, ``[`` or ``:``), and
    a line break becomes ``<br>``. ``_`` and other brackets stay: inside a word ``_`` is no
    emphasis, and ids such as ``T1:yeast:micro_f1:BCE`` and intervals ``[1.0, 2.0]`` stay
    as they are."""
    out = []
    for c in str(text).replace("\r\n", "\n"):
        if c in "\\|*`<>&":
            out.append("\\" + c)
        elif c in "\r\n\u2028\u2029":
            out.append("<br>")
        else:
            out.append(c)
    return re.sub(r"\](?=[(\[:])", r"\\]", "".join(out))


def _md_line(text: object) -> str:
    """A caption or footnote on one Markdown line (a line break would end its list item)."""
    return " ".join(str(text).splitlines())


def write_table(table: dict, out: Path, stem: str, caption: str, footnotes: list[str],
                title: str | None = None, stamp: str = "", record: dict | None = None, banner: str = "") -> list[Path]:
    """``<out>/<stem>.{csv,md,tex,html}`` and ``<stem>.sources.json``; ``title`` heads the HTML
    page, ``stamp`` (which profile and runs produced it) goes under it; ``record`` adds keys to
    the sources file (the code that built the table and the runs' code lineage). ``banner``
    (partial tables, :func:`partial_banner`): the first line of the Markdown, LaTeX and HTML
    files and the ``partial`` key of the sources file."""
    rows, cols, cells = table["rows"], table["columns"], table["cells"]
    digits = table.get("digits", 1)
    headers = [header(c) for c in cols]
    blocks = table.get("blocks") or [(None, rows)]
    block_of = {r: label for label, rs in blocks for r in rs}
    # CSV: machine-readable mean/std/n per cell
    recs = []
    for r in rows:
        rec = {"method": r, "in paper": "no" if block_of.get(r) else "yes"}
        for j, h in enumerate(headers):
            c = cells.get((r, j))
            if c is None or "mean" not in c:
                rec.update({f"{h} mean": None, f"{h} std": None, f"{h} n": 0})
                if c is not None and "not_run" in c:
                    rec[f"{h} note"] = f"not run: {c['not_run']}"
                elif c is not None:
                    rec[f"{h} note"] = f"pending: {len(c['pending'])} run(s) not evaluated yet"
                continue
            rec[f"{h} mean"] = round(100 * c["mean"], 4)
            rec[f"{h} std"] = None if math.isnan(c["std"]) else round(100 * c["std"], 4)
            rec[f"{h} n"] = c["n"]
            if c.get("pending"):
                rec[f"{h} note"] = f"pending: {len(c['pending'])} more run(s) not evaluated yet"
        recs.append(rec)
    atomic_write(out / f"{stem}.csv", pd.DataFrame(recs).to_csv(index=False))
    # Markdown: a labelled separator row before the block of rows not in the paper
    md = ([f"> {md_cell(_md_line(banner))}", ""] if banner else []) + [
        f"**{_md_line(caption)}**", "", "| Method | " + " | ".join(md_cell(h) for h in headers) + " |",
          "|---|" + "---:|" * len(headers)]
    for label, rs in blocks:
        if label is not None:
            md.append(f"| *{md_cell(label)}* |" + " |" * len(headers))
        for r in rs:
            md.append(f"| {md_cell(r)} | " + " | ".join(cell_text(cells.get((r, j)), "md", digits)
                                                        for j in range(len(cols))) + " |")
    md += [""] + [f"{i + 1}. {_md_line(f)}" for i, f in enumerate(footnotes)]
    atomic_write(out / f"{stem}.md", "\n".join(md) + "\n")
    atomic_write(out / f"{stem}.tex", (f"% {tex_escape(banner)}\n" if banner else "")
                 + _tex(table, caption, footnotes, blocks, digits))
    atomic_write(out / f"{stem}.html", _html(table, stem, caption, footnotes, blocks, digits, title or caption,
                                             stamp, banner))
    sources = {f"{r} | {headers[j]}": c["sources"] for (r, j), c in cells.items() if "sources" in c}
    write_json(out / f"{stem}.sources.json",
               {"table": stem, **(record or {}), **({"partial": banner} if banner else {}),
                "cells": {k: [{"path": p, "sha256": sha256_file(p)} for p in v] for k, v in sources.items()}})
    return [out / f"{stem}.{ext}" for ext in FORMATS]


def _groups(cols: list) -> list[tuple[str, int]]:
    groups: list[tuple[str, int]] = []
    for c in cols:
        if groups and groups[-1][0] == c[1]:
            groups[-1] = (c[1], groups[-1][1] + 1)
        else:
            groups.append((c[1], 1))
    return groups


def _tex(table: dict, caption: str, footnotes: list[str], blocks: list, digits: int) -> str:
    cols, cells = table["columns"], table["cells"]
    groups = _groups(cols)
    tex = [r"\begin{table*}[t]", r"\centering", r"\begin{tabular}{l" + "c" * len(cols) + "}", r"\toprule",
           r"\multirow{2}{*}{Method} & " + " & ".join(rf"\multicolumn{{{n}}}{{c}}{{{tex_escape(g)}}}"
                                                     for g, n in groups) + r"\\"]
    start, rules = 2, []
    for _, n in groups:
        rules.append(rf"\cmidrule(lr){{{start}-{start + n - 1}}}")
        start += n
    tex.append("".join(rules))
    tex.append(" & " + " & ".join(tex_escape(c[4]) for c in cols) + r"\\")
    tex.append(r"\midrule")
    for label, rs in blocks:
        if label is not None:
            tex += [r"\midrule", rf"\multicolumn{{{len(cols) + 1}}}{{l}}{{\emph{{{tex_escape(label)}}}}}\\"]
        for r in rs:
            tex.append(f"{tex_escape(r)} & " + " & ".join(cell_text(cells.get((r, j)), "tex", digits)
                                                          for j in range(len(cols))) + r"\\")
    tex += [r"\bottomrule", r"\end{tabular}",
            rf"\caption{{{tex_escape(caption + ' ' + ' '.join(footnotes))}}}",
            r"\end{table*}"]
    return "\n".join(tex) + "\n"


def _html(table: dict, stem: str, caption: str, footnotes: list[str], blocks: list, digits: int, title: str,
          stamp: str, banner: str = "") -> str:
    cols, cells = table["columns"], table["cells"]
    index = pd.MultiIndex.from_tuples([(label or "", r) for label, rs in blocks for r in rs])
    columns = pd.MultiIndex.from_tuples([(c[1], c[4]) for c in cols], names=["", "Method"]) if cols else pd.Index([])
    order = [r for _, rs in blocks for r in rs]
    text = pd.DataFrame([[cell_text(cells.get((r, j)), "html", digits) for j in range(len(cols))] for r in order],
                        index=index, columns=columns)
    classes = pd.DataFrame([[_cell_class(cells.get((r, j))) for j in range(len(cols))] for r in order],
                           index=index, columns=columns)
    starts = [sum(len(rs) for _, rs in blocks[:k]) for k in range(1, len(blocks))]
    tab = styled_table(text, classes, uuid=stem, hide_index_levels=[0] if len(blocks) < 2 else None,
                       index_class={i: "first-of-block" for i in starts})
    body = [*banner_html(banner), f"<h1>{esc(title)}</h1>", f'<p class="caption">{esc(caption)}</p>']
    if stamp:
        body.append(f'<p class="stamp">{esc(stamp)}</p>')
    body += [tab, notes_list(footnotes)]
    return page(title, body)


def write_metrics_full(summary: pd.DataFrame, out: Path, notes: list[str], stamp: str = "",
                       banner: str = "") -> list[Path]:
    """``metrics_full.{csv,md,html}``: every metric, mean ± std, per (mode, dataset, setting, method);
    ``banner`` (partial tables): the first line of the Markdown and HTML files."""
    full = summary.drop(columns=["sources"])
    atomic_write(out / "metrics_full.csv", full.to_csv(index=False))
    head = ["mode", "dataset", "setting", "method", "n"] + [METRIC_LABEL[m] for m in METRICS]
    recs = [[r["mode"], r["dataset"], r["setting"], r["method"], str(r["n"])] +
            [fmt(r[f"{m}_mean"], r[f"{m}_std"], r["n"]) for m in METRICS] for _, r in summary.iterrows()]
    md = ([f"> {md_cell(_md_line(banner))}", ""] if banner else []) + [
        "| " + " | ".join(head) + " |", "|---|---|---|---|---:|" + "---:|" * len(METRICS)]
    md += ["| " + " | ".join(md_cell(c) for c in rec) + " |" for rec in recs]
    md += [""] + [f"{i + 1}. {_md_line(n)}" for i, n in enumerate(notes)]
    atomic_write(out / "metrics_full.md", "\n".join(md) + "\n")
    df = pd.DataFrame(recs, columns=head)
    classes = pd.DataFrame([["text"] * 4 + [""] * (len(head) - 4)] * len(df), columns=head)
    title = "Every metric of every run: mean ± sample std (%) per mode, dataset, setting and method"
    body = [*banner_html(banner), f"<h1>{esc(title)}</h1>"]
    if stamp:
        body.append(f'<p class="stamp">{esc(stamp)}</p>')
    body += [frame_table(df, "metrics_full", classes), notes_list(notes)]
    atomic_write(out / "metrics_full.html", page("metrics_full", body))
    return [out / f"metrics_full.{ext}" for ext in ("csv", "md", "html")]
