"""The documentation as a reader meets it: every relative link and ``#anchor`` resolves, the
pages describe what is (no development history: that is CHANGELOG.md's), and the blocks a tool
generates are current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.tools import load_tool

PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "config" / "README.md",
                *(ROOT / "docs").glob("*.md")])
#: pages that describe the current state only (CHANGELOG.md is the history)
CURRENT = [p for p in PAGES if p.name != "CHANGELOG.md"]
#: phrases of development history: an issue number, "before this change", ...
HISTORY = re.compile(r"\bissue \d|before this change|\bthe old code\b|\bstop \d+\b|\bin this work\b", re.I)
LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code removed."""
    out, fenced = [], False
    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((no, re.sub(r"`+[^`]*`+", "", line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, inline code and punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_with_code_headings(page.read_text()):
        if m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def prose_with_code_headings(text: str) -> list[tuple[int, str]]:
    """Lines outside fenced blocks, inline code kept (it is part of a heading's anchor)."""
    out, fenced = [], False
    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((no, line))
    return out


def links(page: Path) -> list[tuple[int, str]]:
    return [(no, m["target"]) for no, line in prose(page.read_text()) for m in LINK.finditer(line)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page: Path):
    bad = []
    for no, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}:{no}: ({target})"
        if not dest.exists():
            bad.append(f"{where}: {path} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not bad, "\n".join(bad)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for _, t in links(ROOT / "README.md") if not t.startswith("#")}
    missing = [str(p.relative_to(ROOT)) for p in PAGES if p.name != "README.md" or p.parent != ROOT
               if p.resolve() not in linked]
    assert not missing, f"pages the README does not link: {missing}"


@pytest.mark.parametrize("page", CURRENT, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_development_history(page: Path):
    hits = [f"{page.relative_to(ROOT)}:{no}: {line.strip()}" for no, line in prose(page.read_text())
            if HISTORY.search(line)]
    assert not hits, "history belongs in CHANGELOG.md:\n" + "\n".join(hits)


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_rule_resources_block_is_current():
    tool = load_tool("rule_resources")
    text = tool.TARGET.read_text()
    block = tool.BEGIN + text.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0] + tool.END
    assert block == tool.render(tool.rule_resources()), "run: python tools/rule_resources.py --write"
    assert any(r["rule"] == "extract_features" and r["resources"]["mem_mb"] == "16000"
               for r in tool.rule_resources())


def test_slug():
    assert slug("What `make venv` does") == "what-make-venv-does"
    assert slug("The README's commands") == "the-readmes-commands"
    assert slug("`studies` (the figures)") == "studies-the-figures"
    assert slug("What the number of players N changes (measured)") == "what-the-number-of-players-n-changes-measured"
