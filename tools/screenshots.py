"""Regenerate the report screenshots of docs/screenshots/ from a real run of the code on disk, and
record where each came from (docs/screenshots/screenshots.json).

In a scratch copy of this checkout (the files git sees: no outputs, caches or .git): the quick profile
(``snakemake all --cores N --configfile config/quick.yaml``), its HTML report
(``snakemake --report``), then tools/report_browser.py's screenshots of the landing page, Table 1,
the claims check and the PR figure. ``readme-table1.png`` (README.md) is the Table 1 shot.

screenshots.json holds, per PNG: the date, the profile, and its ``sources``: the commit of the
code that made it, whether the code it shows had uncommitted changes then (``dirty``: those
paths), and the code paths it shows (``code``). tests/unit/test_screenshots.py fails when a
later commit changed one of those paths. The entries of PNGs this tool does not make (the Enron
study figures: long runs) are kept as they are.

    .venv/bin/python tools/screenshots.py [--cores 2] [--keep]

Exit status 1, naming the screenshot, when one is blank or missing (report_browser's check).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cdgtmll.io import atomic_write

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs/screenshots"
RECORD = OUT / "screenshots.json"
PROFILE = "config/quick.yaml"

#: the code whose results every shot of a run shows (its numbers): data, training, evaluation
NUMBERS = ["src/cdgtmll/data", "src/cdgtmll/variants", "src/cdgtmll/methods", "src/cdgtmll/nn",
           "src/cdgtmll/train.py", "src/cdgtmll/metrics", "config/quick.yaml", "workflow/rules"]
#: PNG -> (what report_browser names it, the code paths it shows)
SHOTS = {
    "report-landing.png": ("landing", ["Snakefile", "workflow/report/workflow.rst", "src/cdgtmll/pipeline/landing.py",
                                       "workflow/rules/report_common.smk"]),
    "report-table1.png": ("table1", [*NUMBERS, "src/cdgtmll/tables", "workflow/report/tables.rst"]),
    "readme-table1.png": ("table1", [*NUMBERS, "src/cdgtmll/tables", "workflow/report/tables.rst"]),
    "report-claims.png": ("claims", [*NUMBERS, "src/cdgtmll/tables", "src/cdgtmll/claims"]),
    "report-figure.png": ("figure", [*NUMBERS, "src/cdgtmll/figures/pr_curve.py", "src/cdgtmll/figures/style.py"]),
}


def git(*args: str) -> str:
    """git's output as it printed it (``status --porcelain`` lines start with a space)."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def dirty_paths(code: list[str]) -> list[str]:
    """The files under ``code`` with uncommitted changes (untracked ones too)."""
    return sorted(ln[3:] for ln in git("status", "--porcelain", "--", *code).splitlines() if ln.strip())


def copy_checkout(dst: Path) -> None:
    """The files git sees in this checkout (tracked, and untracked ones .gitignore does not name:
    no outputs, caches or environments), with their uncommitted changes, copied to ``dst``."""
    for rel in git("ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0"):
        src = ROOT / rel
        if rel and src.is_file():  # a tracked file deleted on disk is left out
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel, follow_symlinks=False)


def _run(cmd: list[str], cwd: Path, env: dict, what: str) -> None:
    print(f"screenshots: {what}: {' '.join(cmd)}", flush=True)
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"screenshots: {what} failed (exit {res.returncode}):\n{(res.stdout + res.stderr)[-4000:]}")


def _browser():
    sys.path.insert(0, str(ROOT / "tools"))
    import report_browser

    return report_browser


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", default="2")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    args = ap.parse_args(argv)
    rb = _browser()
    commit = git("rev-parse", "HEAD").strip()
    profile_name = next((ln.split(":", 1)[1].strip().strip("'\"") for ln in (ROOT / PROFILE).read_text().splitlines()
                         if ln.startswith("name:")), Path(PROFILE).stem)
    scratch = Path(tempfile.mkdtemp(prefix="cdgtmll-screenshots-"))
    repo = scratch / "repo"
    try:
        copy_checkout(repo)
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        env.setdefault("MPLCONFIGDIR", str(scratch / "mpl"))
        smk = [sys.executable, "-m", "snakemake"]
        _run([*smk, "all", "--cores", args.cores, "--configfile", PROFILE], repo, env, "the quick profile")
        _run([*smk, "--report", "results/report.html", "--configfile", PROFILE], repo, env, "the report")
        shots_dir = scratch / "shots"
        skipped: dict[str, str] = {}
        try:
            shots = rb.screenshots(repo / "results/report.html", shots_dir, skipped)
        except (rb.BlankScreenshotError, rb.BrokenPageError) as exc:
            print(f"screenshots: {exc}", file=sys.stderr)
            return 1
        missing = {png: skipped.get(name, "not taken") for png, (name, _) in SHOTS.items() if name not in shots}
        if missing:
            for png, why in missing.items():
                print(f"screenshots: {png}: {why}", file=sys.stderr)
            return 1
        record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        today = dt.date.today().isoformat()
        for png, (name, code) in SHOTS.items():
            atomic_write(OUT / png, Path(shots[name]).read_bytes())
            dirty = dirty_paths(code)
            record[png] = {"date": today, "profile": f"{profile_name} ({PROFILE})",
                           "made_by": "tools/screenshots.py",
                           "sources": [{"commit": commit, "dirty": dirty, "code": code}]}
            print(f"screenshots: {OUT / png}" + (f" (uncommitted changes to {', '.join(dirty)})" if dirty else ""))
        atomic_write(RECORD, json.dumps(dict(sorted(record.items())), indent=2, ensure_ascii=False) + "\n")
        return 0
    finally:
        if args.keep:
            print(f"screenshots: scratch copy kept at {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
