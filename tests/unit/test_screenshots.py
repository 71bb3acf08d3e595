"""The screenshots in docs/screenshots/ are not stale: docs/screenshots/screenshots.json records,
per PNG, the commit of the code that made it and the code paths it shows (tools/screenshots.py
writes the report screenshots' entries; the Enron figures' come from README.md and docs/). A
commit that changed one of those paths after the recorded one makes its PNG stale: regenerate it
(``.venv/bin/python tools/screenshots.py``). Needs git history; without it (no .git, no git, a
shallow clone without the recorded commit) the check skips, saying which."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.support.paths import ROOT

#: runs real git in a temporary repository or this checkout: processes, so outside the fast loop
#: (there git gives a fixed state: tests/conftest.py)
REAL_GIT = pytest.mark.slow

SHOTS = ROOT / "docs/screenshots"
RECORD = SHOTS / "screenshots.json"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def _history_or_skip() -> None:
    if shutil.which("git") is None:
        pytest.skip("git history unavailable: no git executable, so the screenshots' commits cannot be checked")
    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("git history unavailable: this checkout is not a git repository (an archive or a copy)")


def _record() -> dict:
    return json.loads(RECORD.read_text())


def test_every_screenshot_has_a_record_with_its_provenance():
    pngs = sorted(p.name for p in SHOTS.glob("*.png"))
    rec = _record()
    assert sorted(rec) == pngs, f"{RECORD}: entries {sorted(rec)} but PNGs {pngs}"
    for name, entry in rec.items():
        for key in ("date", "profile", "made_by", "sources"):
            assert entry.get(key), f"{RECORD}: {name} has no {key!r}"
        for src in entry["sources"]:
            assert len(src.get("commit", "")) == 40 and src.get("code"), f"{RECORD}: {name}: source {src}"
            missing = [c for c in src["code"] if not (ROOT / c).exists()]
            assert not missing, f"{RECORD}: {name} names code paths that do not exist: {missing}"


@REAL_GIT
@pytest.mark.parametrize("name", sorted(json.loads(RECORD.read_text())))
def test_screenshot_is_not_older_than_the_code_it_shows(name):
    _history_or_skip()
    entry = _record()[name]
    problems = []
    for src in entry["sources"]:
        commit = src["commit"]
        if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
            if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
                pytest.skip(f"git history unavailable: a shallow clone without commit {commit[:10]}")
            problems.append(f"recorded commit {commit[:10]} is not in this repository")
            continue
        if src.get("dirty"):
            problems.append(f"made with uncommitted changes to {', '.join(src['dirty'])} (on top of {commit[:10]})")
        for path in src["code"]:
            last = _git("log", "-1", "--format=%H", "--", path).stdout.strip()
            if last and _git("merge-base", "--is-ancestor", last, commit).returncode != 0:
                subject = _git("log", "-1", "--format=%h %ad %s", "--date=short", last).stdout.strip()[:120]
                problems.append(f"{path} changed after {commit[:10]}: {subject}")
    assert not problems, (f"docs/screenshots/{name} is stale ({entry['made_by']}):\n  " + "\n  ".join(problems)
                          + "\nregenerate it: .venv/bin/python tools/screenshots.py (the Enron figures: rerun "
                            "their profile, then update their entries)")
