"""A display name is a config's text and may hold anything (``cdgtmll.config.names``): every
writer shows it as written. HTML through :func:`cdgtmll.tables.html.esc` (labels too, not only
cells), Markdown cells through :func:`cdgtmll.tables.render.md_cell`, LaTeX through
:func:`cdgtmll.tables.render.tex_escape`; the params Snakemake's report embeds through
:func:`cdgtmll.tables.html.report_shell_word`; figure texts are never mathtext."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from cdgtmll.figures import style
from cdgtmll.tables import build
from cdgtmll.tables.html import esc, report_label, report_shell_word
from cdgtmll.tables.render import md_cell, tex_escape

NAME = ("</script><script>document.title='X'</script><img src=x onerror=\"alert(1)\"><!-- "
        "a|b & c #1 $x$ 100% C:\\new {b} ~t ^c _u\nline2 Ünïcødé \u2028end")


class _Elements(HTMLParser):
    """Element names and the text of a page, as a browser's parser sees them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Elements:
    p = _Elements()
    p.feed(page)
    return p


def test_esc_leaves_no_markup_and_reads_back_as_the_text():
    out = esc(NAME)
    assert not set("<>\"'") & set(out)
    p = _parse(f'<p title="{out}">{out}</p>')
    assert p.tags == ["p"] and "".join(p.text) == NAME


def _tables_with_name(tmp_path, name: str):
    """The tables of two runs of one custom dataset titled ``name``."""
    paths = []
    for seed in (0, 1):
        d = tmp_path / "runs/mydata/clean/BCE" / f"seed{seed}"
        d.mkdir(parents=True)
        block = {m: 0.3 + 0.1 * seed for m in ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5")}
        (d / "metrics.json").write_text(json.dumps({"global@0.5": block, "adaptive": block}))
        paths.append(str(d / "metrics.json"))
    out = tmp_path / "tables"
    build.main(["--metrics", *paths, "--methods", "BCE", "--out", str(out), "--datasets", f"mydata={name}",
                "--severities", "mydata=", "--not-run", f"mydata|Focal|{name}"])
    return out


def test_html_tables_escape_the_column_labels(tmp_path):
    out = _tables_with_name(tmp_path, NAME)
    for page in sorted(out.glob("*configured*.html")):
        p = _parse(page.read_text())
        assert {"script", "img"}.isdisjoint(p.tags), page.name
        assert "document.title='X'" in "".join(p.text), page.name  # shown as text


def _md_tables(md: str) -> list[list[int]]:
    """Cells per row of each table of a Markdown text (split at unescaped '|')."""
    tables, rows = [], []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            rows.append(len(re.split(r"(?<!\\)\|", line.strip())) - 2)
        elif rows:
            tables.append(rows)
            rows = []
    return tables


def test_markdown_tables_keep_one_cell_count_per_table(tmp_path):
    out = _tables_with_name(tmp_path, NAME)
    for md in sorted(out.glob("*.md")):
        for rows in _md_tables(md.read_text()):
            assert len(rows) >= 2 and len(set(rows)) == 1, (md.name, rows)
    assert "a\\|b" in (out / "table1_configured.md").read_text()


def test_md_cell_escapes_what_would_end_a_cell_or_become_markup():
    assert md_cell("a|b") == "a\\|b"
    assert md_cell("x\ny\r\nz\u2028w") == "x<br>y<br>z<br>w"
    assert md_cell("<b>*x*</b> & `c` [l](u) [r][1] [d]: u \\") == \
        "\\<b\\>\\*x\\*\\</b\\> \\& \\`c\\` [l\\](u) [r\\][1] [d\\]: u \\\\"
    assert md_cell("[55.56, 56.53]") == "[55.56, 56.53]"
    assert md_cell("T1:yeast:micro_f1:BCE") == "T1:yeast:micro_f1:BCE"  # ids stay as they are


def test_tex_escape_covers_the_ten_special_characters():
    got = tex_escape("& % $ # _ { } ~ ^ \\ ±\nx")
    assert got == (r"\& \% \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{} \textbackslash{} $\pm$ x")


def _pdflatex():
    exe = shutil.which("pdflatex")
    if exe is None:
        pytest.skip("pdflatex not found (Debian: apt-get install latexmk texlive-latex-recommended)")
    return exe


@pytest.mark.slow
def test_tex_escape_compiles_to_the_text(tmp_path):
    """Typeset, every special character comes out as itself (pdftotext would need poppler:
    the test checks that pdflatex accepts it, without errors or missing characters)."""
    exe = _pdflatex()
    (tmp_path / "t.tex").write_text("\\documentclass{article}\\usepackage[T1]{fontenc}\\usepackage[utf8]{inputenc}"
                                    "\\begin{document}" + tex_escape(NAME.replace("\u2028", " ")) + "\\end{document}\n")
    r = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "Missing character" not in (tmp_path / "t.log").read_text(errors="replace")


@pytest.mark.slow
@pytest.mark.parametrize("value", [NAME, "plain", "toy=Toy (MULAN)", "O'Brien", "", "a{b}c", "tab\tx"])
def test_report_shell_word_is_inert_text_that_bash_reads_back(value):
    word = report_shell_word(value)
    assert not set("<>&{}\n\r\u2028\u2029\t") & set(word), word
    out = subprocess.run(["bash", "-c", f"printf '%s' {word}"], capture_output=True, text=True, check=True).stdout
    assert out == value


def test_report_label_holds_no_markup():
    assert report_label("quick (config/a<b>&`c`\n.yaml)") == "quick (config/a?b???c??.yaml)"


@pytest.mark.slow
def test_style_cli_args_carry_a_display_name_as_inert_bash_words():
    cfg = {"experiments": {"methods": ["BCE"]}, "data": {"custom": {"toy": {"display_name": NAME}}}}
    args = style.style_cli_args(cfg)
    assert not set("<>&{}\n") & set(args)
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {args}"], capture_output=True, text=True, check=True).stdout
    assert out.split("\0")[:2] == ["--dataset-name", f"toy={NAME}"]


def test_figure_texts_are_drawn_as_written_never_as_mathtext():
    """Two '$' in a name made matplotlib read the text between them as mathtext: set as math,
    or, as here, a ValueError at drawing and no figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with style.figure_style():
        fig, ax = plt.subplots()
        ax.plot(np.arange(3), np.arange(3), label="$x^$ a")
        style.titles(fig, [ax], ["Cost $5 ^ {b, 100% $"])
        ax.legend()
        fig.savefig(io.BytesIO(), format="png")
        assert ax.get_legend().get_texts()[0].get_text() == "$x^$ a"
        plt.close(fig)
