"""End to end: snakemake on a tiny config in a temporary copy of the repository."""

import csv
import json

import pytest
import yaml

from tests.support.workflow import copy_repo, run_audit, run_snakemake, snakemake_env

pytestmark = pytest.mark.slow


TINY = {
    "name": "tiny",
    "data": {"mirror": None, "allow_download": False},
    "experiments": {"datasets": ["yeast"], "methods": ["BR-LogReg", "BCE"], "seeds": [0, 1]},
    "r_variants": {"sampling_seeds": [0], "severities": {"yeast": [0.5]}},
    "training": {"default": {"epochs": 2}},
    "methods": {"BR-LogReg": {"C": 1.0}},
    "figures": {"pr_curve": {"dataset": "yeast", "severity": 0.5}},
}
# DVC (dvc repro, metrics, experiments, push/pull) runs on the shipped profiles, at test scale,
# in tests/integration/dvc/test_dvc_*.py; this snakemake-only config is never written over config/config.yaml.


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, mirror):
    repo = copy_repo(tmp_path_factory.mktemp("e2e") / "repo")
    (repo / "config/tiny.yaml").write_text(yaml.safe_dump(TINY))
    env = snakemake_env(mirror)
    env["PYTHONPATH"] = str(repo / "src")  # the copy's code plans and runs (test_code_edit_replans_exactly_its_jobs)
    res = run_snakemake(repo, env, "--cores", "2", "all", "--configfile", "config/tiny.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return repo, env


def test_tables_written_with_all_metrics(tiny_run):
    repo, _ = tiny_run
    rows = list(csv.DictReader(open(repo / "results/tables/metrics_full.csv")))
    settings = {(r["mode"], r["setting"]) for r in rows if r["method"] == "BR-LogReg"}
    assert settings == {("global", "clean"), ("adaptive", "clean"), ("global", "R@0.50"), ("adaptive", "R@0.50")}
    assert {r["method"] for r in rows} == {"BR-LogReg", "BCE"}
    for r in rows:  # BR-LogReg is deterministic: fitted once, one run per cell (n = 1)
        assert r["n"] == ("1" if r["method"] == "BR-LogReg" else "2")
        for m in ("mAP", "micro_f1", "macro_f1", "rare_f1", "p@1", "p@3", "p@5"):
            v = float(r[f"{m}_mean"])
            assert 0.0 <= v <= 1.0, (m, v)
            if r["method"] == "BR-LogReg":  # a fitted model: strictly inside (BCE has 2 epochs only)
                assert 0.0 < v < 1.0, (m, v)
    t1 = (repo / "results/tables/table1_standard.md").read_text()
    yeast_row = next(line for line in t1.splitlines() if line.startswith("| BR-LogReg"))
    cells = [c.strip() for c in yeast_row.strip("|").split("|")]
    assert cells[1:5] == ["n.r."] * 4 and cells[7:9] == ["n.r."] * 2  # VOC, COCO, Mediamill not run
    assert "±" not in cells[5] and "±" not in cells[6]  # Yeast Micro-F1, Rare-F1: one run, no std
    bce_row = next(line for line in t1.splitlines() if line.startswith("| BCE"))
    assert bce_row.count("±") == 2
    assert "BR-LogReg: deterministic (its fit does not use the seed): fitted once, n = 1." in t1
    assert "not run in this configuration" in t1
    t2 = {r["method"]: r for r in csv.DictReader(open(repo / "results/tables/table2_rare.csv"))}
    assert t2["BCE"]["Yeast-R @50% n"] == "2" and t2["BCE"]["Yeast-R @40% n"] == "0"
    assert t2["BR-LogReg"]["Yeast-R @50% n"] == "1"
    assert sorted(p.name for p in (repo / "results/runs/yeast/clean/BR-LogReg").iterdir()) == ["seed0"]
    # a mark per separated column: Yeast's Rare-F1 has 2 tail labels (< tables.min_tail_labels), so
    # it cannot separate methods and gets none; Micro-F1 gets its best in bold unless tied
    tex = (repo / "results/tables/table1_standard.tex").read_text()
    assert tex.count(r"\textbf") <= 1
    assert "Yeast Rare-F1 cannot separate methods: 2 tail labels enter Rare-F1, fewer than 3" in t1


def test_provenance_recorded(tiny_run):
    repo, _ = tiny_run
    prov = json.loads((repo / "results/runs/yeast/R0.50-s0/BR-LogReg/seed0/provenance.json").read_text())
    assert prov["seed"] == 0 and prov["config"]["seeds"] == [0] and prov["config"]["deterministic"] is True
    assert len(prov["config_sha256"]) == 64
    assert set(prov["inputs"]) == {"data", "clean"}
    assert all(len(v["sha256"]) == 64 for v in prov["inputs"].values())
    assert prov["packages"]["numpy"] and prov["packages"]["scikit-learn"]
    assert "commit" in prov["git"] and "dirty" in prov["git"] and len(prov["code_sha256"]) == 64
    assert prov["device"]["cpu_count"] >= 1 and prov["started"] <= prov["finished"]
    assert prov["device"]["omp_wait_policy"] == "PASSIVE"  # set by the Snakefile: the run's env had none
    # the rule's gpu resource reaches the job (a local run: none, and GPUs do not come by request)
    assert prov["device"]["job_gpus"] == "0" and prov["device"]["gpus_by_request"] == "0"
    vendor = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("vendor_id")), None)
    assert prov["device"]["cpu"]["vendor"] == vendor  # torch picks CPU kernels by vendor (dropout's draws)
    metrics = json.loads((repo / "results/runs/yeast/R0.50-s0/BR-LogReg/seed0/metrics.json").read_text())
    assert metrics["tail_labels"] and len(metrics["tail_labels"]) == 2  # floor(0.2 * 14)
    book = json.loads((repo / "results/data/yeast/variants/R0.50-s0.json").read_text())
    assert book["severity"] == 0.5


def test_rerun_is_noop_and_deterministic(tiny_run):
    repo, env = tiny_run
    res = run_snakemake(repo, env, "-n", "all", "--configfile", "config/tiny.yaml")
    assert res.returncode == 0
    assert "Nothing to be done" in res.stdout + res.stderr


def test_bad_config_stops_before_any_job(tiny_run, tmp_path):
    repo, env = tiny_run
    bad = dict(TINY, training={"default": {"epocs": 2}})
    (repo / "config/bad.yaml").write_text(yaml.safe_dump(bad))
    res = run_snakemake(repo, env, "-n", "all", "--configfile", "config/bad.yaml")
    assert res.returncode != 0
    assert "training.default.epocs" in res.stdout + res.stderr


def test_lint_and_dry_run_default_config(tiny_run):
    repo, env = tiny_run
    lint = run_snakemake(repo, env, "--lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "Lints for" not in lint.stdout + lint.stderr
    dry = run_snakemake(repo, env, "-n", "all")
    assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr[-2000:]


def test_audit_traces_and_detects_tampering(tiny_run):
    repo, env = tiny_run
    ok = run_audit(repo, env, "results/tables/table1_standard.md", "--cell", "BR-LogReg", "Yeast Rare-F1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "results/runs/yeast/clean/BR-LogReg/seed0/metrics.json" in ok.stdout
    assert "yeast-train.arff" in ok.stdout and "commit" in ok.stdout
    fig = run_audit(repo, env, "figures/pr_tail.pdf")
    assert fig.returncode == 0 and "R0.50-s0/BR-LogReg/seed0/predictions.npz" in fig.stdout
    assert "R0.50-s0/BCE/seed1/predictions.npz" in fig.stdout
    target = repo / "results/runs/yeast/clean/BR-LogReg/seed0/metrics.json"
    original = target.read_text()
    try:
        target.write_text(original.replace('"rare_f1": 0.', '"rare_f1": 0.9', 1))
        bad = run_audit(repo, env, "results/tables/table1_standard.md", "--cell", "BR-LogReg", "Yeast Rare-F1")
        assert bad.returncode == 1
        assert "MODIFIED metrics" in bad.stderr and str(target.relative_to(repo)) in bad.stderr
    finally:
        target.write_text(original)
    data = repo / "results/data/yeast/processed.npz"
    moved = data.with_suffix(".bak")
    data.rename(moved)
    try:
        gone = run_audit(repo, env, "results/tables/table1_standard.md", "--cell", "BR-LogReg", "Yeast Micro-F1")
        assert gone.returncode == 1 and "MISSING" in gone.stderr and "processed.npz" in gone.stderr
    finally:
        moved.rename(data)


def test_report_is_one_self_contained_html(tiny_run, report_browser):
    repo, env = tiny_run
    res = run_snakemake(repo, env, "--report", "results/report.html", "--configfile", "config/tiny.yaml")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    html = (repo / "results/report.html").read_text(errors="replace")
    assert "table1_standard.html" in html and "pr_tail.pdf" in html and "claims_check.html" in html
    assert "Produced by config profile" in html and "tiny" in html  # captions name the config
    assert "<script src=\"http" not in html  # nothing fetched from the network when opened
    # what a reader sees, opened by clicks in headless Chromium (tools/report_browser.py): Table 1's
    # numbers, the PR figure and the claims summary (tests/integration/report/test_report.py: the
    # report after another profile)
    t1 = {r["method"]: r for r in csv.DictReader(open(repo / "results/tables/table1_standard.csv"))}
    with report_browser.ReportBrowser(report_browser.require_chromium()) as b:
        b.open(repo / "results/report.html")
        b.click_menu("Tables")
        b.open_entry("Table 1 (as in the paper)")
        text = b.frame_text()
        mean, std = (float(t1["BCE"][f"Yeast Micro-F1 {k}"]) for k in ("mean", "std"))
        assert f"{mean:.1f} ± {std:.1f}" in text
        once = float(t1["BR-LogReg"]["Yeast Micro-F1 mean"])  # deterministic: one run, no std
        assert t1["BR-LogReg"]["Yeast Micro-F1 std"] == "" and f"{once:.1f}" in text
        assert "Profile tiny (config/tiny.yaml)" in text
        b.open(repo / "results/report.html")
        b.click_menu("Figures")
        b.open_entry("figures/pr_tail.pdf")
        assert b.shown_content() == "pdf"
        b.open(repo / "results/report.html")
        b.click_menu("Claims")
        b.open_entry("Paper claims vs. reproduced runs")
        claims = b.frame_text()
        n = len(list(csv.DictReader(open(repo / "results/claims/claims_check.csv"))))
        assert "Summary" in claims and f"total\t{n}" in claims


def planned_jobs(out: str) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job in a dry run's output."""
    jobs, rule = set(), None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule = line.split()[1].rstrip(":")
            jobs.add((rule, ""))
        elif line.startswith("wildcards:") and rule:
            jobs.discard((rule, ""))
            jobs.add((rule, line.split(":", 1)[1].strip()))
    return jobs


@pytest.mark.parametrize(
    ("module", "edit", "expected"),
    [
        # one loss's arithmetic: that loss's method only (BCE trains with nn/losses/bce.py), on
        # every variant, then what follows; BR-LogReg is not re-planned
        ("src/cdgtmll/nn/losses/bce.py", ("return reduce(", "return 2.0 * reduce("),
         {("train", "dataset=yeast, variant=clean, method=BCE"), ("train", "dataset=yeast, variant=R0.50-s0, method=BCE"),
          ("evaluate", "dataset=yeast, variant=clean, method=BCE"),
          ("evaluate", "dataset=yeast, variant=R0.50-s0, method=BCE"),
          ("tables", ""), ("metrics_summary", ""), ("claims_check", ""), ("figure_pr", ""), ("all", "")}),
        # evaluation-only code: every evaluate job and what reads metrics.json; no training, and
        # not the PR figure (it reads the predictions)
        ("src/cdgtmll/metrics/evaluation.py", ("\n", "\n# edited\n"),
         {("evaluate", f"dataset=yeast, variant={v}, method=BCE") for v in ("clean", "R0.50-s0")}
         | {("evaluate_once", f"dataset=yeast, variant={v}, method=BR-LogReg") for v in ("clean", "R0.50-s0")}
         | {("tables", ""), ("metrics_summary", ""), ("claims_check", ""), ("all", "")}),
    ],
    ids=["one-loss", "evaluation"],
)
def test_code_edit_replans_exactly_its_jobs(tiny_run, module, edit, expected):
    """Code is an input (cdgtmll.lineage.code): an edit re-plans the jobs whose code closure holds
    the edited module, and everything downstream of them, nothing else."""
    repo, env = tiny_run
    path = repo / module
    before = path.read_text()
    assert edit[0] in before
    try:
        path.write_text(before.replace(edit[0], edit[1], 1))
        res = run_snakemake(repo, env, "-n", "all", "--configfile", "config/tiny.yaml")
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-3000:]
        assert planned_jobs(out) == expected, out[-4000:]
        assert "params have changed since last execution" in out
    finally:
        path.write_text(before)
    res = run_snakemake(repo, env, "-n", "all", "--configfile", "config/tiny.yaml")
    # the same code again: no run is re-planned (other tests of this module touch the tables' inputs)
    assert not {j for j in planned_jobs(res.stdout) if j[0].startswith(("train", "evaluate"))}, res.stdout[-3000:]
