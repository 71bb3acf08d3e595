"""Partial tables (cdgtmll.tables.partial, build --pending/--as-of) on real Yeast runs."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from cdgtmll.claims import check
from cdgtmll.claims.verdict import ABOVE_PANEL
from cdgtmll.tables import build
from cdgtmll.tables.partial import build as partial_build
from cdgtmll.tables.partial import interval_s, read_plan, refresh_soon, remove_partial, write_plan
from tests.support.runs import prepared_yeast, train_seeds

METHODS = ("BR-LogReg", "kNN-15")
SEEDS = (0, 1)
OPTIONS = ["--methods", *METHODS, "--threshold", "0.5", "--datasets", "yeast=Yeast", "--severities", "yeast=",
           "--profile", "unit", "--profile-file", "config/quick.yaml"]
BANNER = re.compile(r"partial: (\d+) of (\d+) runs done \(as of ([^)]*)\)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mirror):
    """Two methods x two seeds trained and evaluated on the real Yeast, as the rules do."""
    from cdgtmll.metrics import evaluate_run

    root = tmp_path_factory.mktemp("partial")
    clean, clean_path = prepared_yeast(root, mirror)
    paths = []
    for method in METHODS:
        rundir = root / "results" / "runs" / "yeast" / "clean" / method
        train_seeds(clean, clean_path, rundir, method, SEEDS, {})
        assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir),
                                  "--seeds", *map(str, SEEDS)]) == 0
        paths += [rundir / f"seed{s}" / "metrics.json" for s in SEEDS]
    return root, paths


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _tables(out: Path, metrics: list[Path], *extra: str) -> dict[str, bytes]:
    assert build.main(["--part", "all", "--metrics", *map(str, metrics), *OPTIONS, *extra, "--out", str(out)]) == 0
    return _files(out)


def _strip_banner(name: str, data: bytes) -> bytes:
    """The file as the final build writes it: without its first (banner) lines and sources key."""
    text = data.decode()
    if name.endswith(".md"):
        text = re.sub(r"\A> partial: [^\n]*\n\n", "", text)
    elif name.endswith(".tex"):
        text = re.sub(r"\A% partial: [^\n]*\n", "", text)
    elif name.endswith(".html"):
        text = re.sub(r'<p class="partial"[^\n]*</p>\n', "", text)
    elif name.endswith(".sources.json"):
        rec = json.loads(text)
        rec.pop("partial")
        text = json.dumps(rec, indent=2, sort_keys=True) + "\n"
    return text.encode()


def test_no_pending_path_is_the_final_build_byte_for_byte(runs, tmp_path):
    root, paths = runs
    final = _tables(tmp_path / "final", paths)
    assert _tables(tmp_path / "empty", paths, "--pending", "--keep-corrupt") == final
    # a partial build with every run done differs only by its banner
    partial = _tables(tmp_path / "partial", paths, "--as-of", "2030-01-01 00:00:00 UTC")
    assert partial.keys() == final.keys()
    for name, data in partial.items():
        if name.endswith((".md", ".tex", ".html")) and name != "all_runs.csv":
            text = data.decode()
            top = text.split("<h1>", 1)[0] if name.endswith(".html") else text.splitlines()[0]  # above the title
            m = BANNER.search(top)
            # every run of the table done (a table without runs of this profile: 0 of 0)
            assert m and m.group(1) == m.group(2) and int(m.group(2)) in (0, len(paths)), name
        assert _strip_banner(name, data) == final[name], name


def test_pending_runs_show_an_ellipsis_not_nr_and_the_banner_counts_them(runs, tmp_path):
    root, paths = runs
    done, pending = paths[:2], paths[2:]  # BR-LogReg done, kNN-15 pending
    files = _tables(tmp_path / "p", done, "--pending", *map(str, pending), "--as-of", "2030-01-01 00:00:00 UTC")
    md = files["table1_configured.md"].decode()
    assert BANNER.match(md.splitlines()[0].removeprefix("> ")).groups()[:2] == ("2", "4")
    row = next(line for line in md.splitlines() if line.startswith("| kNN-15 |"))
    cells = [c.strip() for c in row.strip("|").split("|")[1:]]
    assert cells and all(c == "…" for c in cells)
    assert "n.r. for kNN-15" not in md and "… = pending" in md
    assert next(line for line in md.splitlines() if line.startswith("| BR-LogReg |")).count("…") == 0
    csv = files["table1_configured.csv"].decode()
    assert "pending: 2 run(s) not evaluated yet" in csv
    html = files["table1_configured.html"].decode()
    assert '<p class="partial"' in html.split("<body>", 1)[1].split("<h1>", 1)[0]
    assert "…" in files["table1_configured.tex"].decode()
    full = files["metrics_full.md"].decode()
    assert BANNER.match(full.splitlines()[0].removeprefix("> ")).groups()[:2] == ("2", "4")
    # a cell with one of its two runs done: its mean, followed by …
    files = _tables(tmp_path / "q", paths[:3], "--pending", str(paths[3]), "--as-of", "t")
    row = next(line for line in files["table1_configured.md"].decode().splitlines() if line.startswith("| kNN-15 |"))
    assert all(re.fullmatch(r"\S+ …", c.strip().strip("*")) for c in row.strip("|").split("|")[1:])


def test_claims_page_marks_pending_claims_and_carries_the_banner(runs, tmp_path):
    root, paths = runs
    out = tmp_path / "t"
    _tables(out, paths[:2])
    assert check.main(["--runs", str(out / "all_runs.csv"), "--out", str(tmp_path / "final")]) == 0
    assert check.main(["--runs", str(out / "all_runs.csv"), "--pending", "--out", str(tmp_path / "same")]) == 0
    for ext in ("csv", "md", "html"):
        assert (tmp_path / f"same.{ext}").read_bytes() == (tmp_path / f"final.{ext}").read_bytes()
    pending = [str(p) for p in paths[2:]] + [str(root / "results/runs/yeast/clean/BCE/seed0/metrics.json")]
    assert check.main(["--runs", str(out / "all_runs.csv"), "--pending", *pending, "--as-of", "T",
                       "--out", str(tmp_path / "part")]) == 0
    md = (tmp_path / "part.md").read_text()
    assert BANNER.match(md.splitlines()[0].removeprefix("> ")).groups() == ("2", "5", "T")
    import pandas as pd

    res, final = pd.read_csv(tmp_path / "part.csv"), pd.read_csv(tmp_path / "final.csv")
    waiting = res["status"] == check.PENDING_STATUS
    assert waiting.any()
    # only claims on yeast/clean of a pending method, each not checked for want of runs without the pending runs
    assert set(res.loc[waiting, "dataset"]) == {"yeast"} and set(res.loc[waiting, "setting"]) == {"clean"}
    assert set(res.loc[waiting, "method"]) | set(res.loc[waiting, "other_method"].dropna()) & {"BCE", "kNN-15"}
    assert final.loc[waiting, "status"].map(lambda st: st.startswith("not checked") or st == ABOVE_PANEL).all()
    assert (res.loc[~waiting, "status"] == final.loc[~waiting, "status"]).all()


def _plan(root: Path, paths: list[Path]) -> Path:
    rel = [str(p.relative_to(root)) for p in paths]
    return write_plan({"out": "results/partial", "remade": [],
                       "tables": {"options": OPTIONS, "metrics": rel},
                       "summary": {"options": ["--profile", "unit"], "metrics": rel},
                       "claims": {"options": [], "figures": {"--pr-csv": ["figures/pr_tail.csv"]}}},
                      root / "results/partial/plan.json")


def test_builder_writes_staged_partial_results_of_the_runs_there_now(runs, tmp_path, monkeypatch):
    root, paths = runs
    work = tmp_path / "w"
    shutil.copytree(root / "results", work / "results")
    shutil.copytree(root / "data", work / "data")
    monkeypatch.chdir(work)
    # one run not there yet, one corrupt (being written or edited): both pending, neither deleted
    missing = Path(paths[3].relative_to(root))
    missing.unlink()
    corrupt = Path(paths[2].relative_to(root))
    corrupt.write_text(corrupt.read_text()[:50])
    plan = _plan(root, paths)
    assert read_plan(plan)["tables"]["options"] == OPTIONS
    status = partial_build(plan)
    assert corrupt.is_file()
    assert status["done"] == 2 and status["total"] == 4, status
    assert status["parts"]["claims"] == "built", status
    part = Path("results/partial")
    md = (part / "tables/table1_configured.md").read_text()
    assert BANNER.match(md.splitlines()[0].removeprefix("> ")).groups()[:2] == ("2", "4")
    assert "| kNN-15 | … |" in md
    assert BANNER.search((part / "claims/claims_check.html").read_text())
    assert json.loads((part / "build.json").read_text())["done"] == 2
    assert "partial" in (part / "README.md").read_text()
    # nothing half-written beside the published files: the staged folders are gone
    assert not [p for p in Path("results").rglob("*.tmp")]
    # the final rules never see it: the integrity check reads results/tables only
    from cdgtmll.lineage.integrity import recorded_metrics

    assert recorded_metrics() == {}
    remove_partial(part)
    assert not (part / "tables").exists() and not (part / "plan.json").exists()


@pytest.mark.slow  # starts the refresher process
def test_refresh_soon_needs_a_plan_and_starts_one_refresher(runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert refresh_soon(Path("results/partial/plan.json")) is False  # no plan: nothing started
    plan = Path("results/partial/plan.json")
    plan.parent.mkdir(parents=True)
    plan.write_text("{}")
    # a refresh started 10 s ago and used 1 s of CPU: a refresher started now waits for its turn
    (plan.parent / "refresh.json").write_text(json.dumps({"started": time.time() - 10, "cpu_s": 1.0}))
    monkeypatch.delenv("CDGTMLL_PARTIAL_INTERVAL_S", raising=False)
    assert refresh_soon(plan) is True
    assert json.loads((plan.parent / "request.json").read_text())["requested"] > time.time() - 5
    assert refresh_soon(plan) is False  # one refresher at a time: the request is recorded for it
    time.sleep(1.5)
    assert not (plan.parent / "build.json").exists()  # still waiting: max(60 s, 19 x 1 s) since the last
    remove_partial(plan.parent)  # the workflow ended: the waiting refresher is stopped, the folder goes
    assert not plan.parent.exists()


def test_interval_is_60_s_or_19_times_the_last_cpu_or_the_variable(monkeypatch):
    monkeypatch.delenv("CDGTMLL_PARTIAL_INTERVAL_S", raising=False)
    assert interval_s(None) == 60.0 and interval_s(1.0) == 60.0 and interval_s(10.0) == 190.0
    monkeypatch.setenv("CDGTMLL_PARTIAL_INTERVAL_S", "0")
    assert interval_s(10.0) == 0.0


def test_refresher_builds_again_for_requests_made_while_it_built(tmp_path, monkeypatch):
    """main(): one build per turn, another while requests came in during the last one, then exit."""
    import cdgtmll.tables.partial as partial

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDGTMLL_PARTIAL_INTERVAL_S", "0")
    plan = Path("results/partial/plan.json")
    plan.parent.mkdir(parents=True)
    plan.write_text("{}")
    builds = []

    def fake_build(path):  # a run finishes while the first build goes on: one request
        builds.append(time.time())
        if len(builds) == 1:
            time.sleep(0.05)
            (plan.parent / "request.json").write_text(json.dumps({"requested": time.time()}))
        return {"built": len(builds)}

    (plan.parent / "request.json").write_text(json.dumps({"requested": time.time()}))
    monkeypatch.setattr(partial, "build", fake_build)
    assert partial.main(["--plan", str(plan)]) == 0
    assert len(builds) == 2
    state = json.loads((plan.parent / "refresh.json").read_text())
    assert builds[0] < state["started"] <= builds[-1] and state["cpu_s"] >= 0
