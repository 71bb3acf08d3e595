"""DVC's stage and what it relies on, without running the pipeline: the profile as a params.yaml
parameter, the stage's deps covering every file the pipeline runs, --forceall only without
records, Snakemake judging restored outputs by the imported records (a tiny workflow), the
per-row metrics files, and the audit's dvc.lock lookup.

The end-to-end DVC tests run the shipped profiles at test scale: test_dvc_quick.py (cache,
push/pull, experiments), test_dvc_share.py (an experiment shared between clones) and
test_dvc_default.py (the default profile); four files so that `make test`'s workers (``--dist
loadfile``) run them side by side.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.support.dvc_repo import DEFAULT, QUICK, checked, job_counts, smk_cmd, tool_env
from tests.support.paths import ROOT


def test_one_stage_runs_and_tracks_the_params_profile(tmp_path):
    """dvc.yaml's single stage takes its profile from params.yaml (`dvc exp run -S
    profile=...`): another profile is a parameter, not an edit of dvc.yaml."""
    from dvc.repo import Repo

    for f in ("dvc.yaml", "params.yaml", "config/quick.yaml", "config/config.yaml"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tmp_path / f)
    Repo.init(str(tmp_path), no_scm=True)
    assert "config/" not in (ROOT / "dvc.yaml").read_text().split("stages:")[1].split("outs:")[0]  # no profile written out
    for profile in (DEFAULT, QUICK):
        from dvc.utils.hydra import apply_overrides

        apply_overrides(str(tmp_path / "params.yaml"), [f"profile={profile}"])
        (stage,) = Repo(str(tmp_path)).index.stages
        assert stage.name == "pipeline"
        assert f"all --configfile {profile} && python -m cdgtmll.pipeline.records export && " \
               "python -m cdgtmll.metrics.headline" in " ".join(stage.cmd.split()), stage.cmd
        params = {str(Path(d.def_path).relative_to(tmp_path)) if Path(d.def_path).is_absolute() else d.def_path:
                  d.params for d in stage.deps if type(d).__name__ == "ParamsDependency"}
        assert params == {"params.yaml": ["profile", "settings"], profile: []}, params  # the profile tracked whole


def test_stage_runs_every_job_only_without_any_record(tmp_path):
    """The stage adds --forceall only where neither results/jobs.json nor records in
    .snakemake/metadata exist (results from before jobs.json was an output): Snakemake could not
    tell which settings they were made with. `dvc exp run --temp`/`--queue` run in a copy without
    .snakemake, but with the baseline's results/jobs.json (a persist output): Snakemake decides."""
    import re

    cmd = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["pipeline"]["cmd"]
    (snippet,) = re.findall(r"\$\(([^()]*)\)", cmd)
    meta = tmp_path / ".snakemake/metadata"

    def flag() -> str:
        return subprocess.run(["sh", "-c", snippet], cwd=tmp_path, capture_output=True, text=True).stdout.strip()

    assert flag() == "--forceall"  # no .snakemake, no results/jobs.json
    meta.mkdir(parents=True)
    assert flag() == "--forceall"  # what `snakemake -n` leaves in a fresh clone
    (tmp_path / "results").mkdir()
    (tmp_path / "results/jobs.json").write_text("{}")
    assert flag() == ""  # the records travel with the results: the Snakefile imports them
    (tmp_path / "results/jobs.json").unlink()
    (meta / "cmVzdWx0cy9ydW5z").write_text("{}")
    assert flag() == ""
    outs = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["pipeline"]["outs"]
    assert {"results/jobs.json": {"persist": True}} in outs


#: a tiny workflow: rule a (a param) -> rule b (reads a's output)
TINY_SNAKEFILE = """\
from cdgtmll.pipeline.records import import_records

if workflow.is_main_process:
    import_records()

rule all:
    input: "results/b.txt"

rule a:
    output: "results/a.txt"
    params: alpha=config.get("alpha", 0.2)
    shell: "echo {params.alpha} > {output}"

rule b:
    input: "results/a.txt"
    output: "results/b.txt"
    shell: "cat {input} > {output}; echo b >> {output}"
"""


def test_snakemake_judges_restored_outputs_by_the_imported_records(tmp_path):
    """Snakemake 9.27's own triggers with the records results/jobs.json brings: outputs restored
    with new times in the wrong order (b older than its input a) plan nothing; a changed param
    re-runs its job and what follows; an output with other bytes keeps no record, so its reader
    (whose recorded input checksum differs) re-runs. Without the import, b re-runs (before this
    change every restored output needed `make restore`)."""
    from cdgtmll.pipeline.records import EXPORT, export_records

    env = tool_env(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    (src / "Snakefile").write_text(TINY_SNAKEFILE)
    (src / "dvc.yaml").write_text("stages:\n  s:\n    cmd: snakemake all\n    outs: [results/a.txt, results/b.txt]\n")
    checked(smk_cmd(src, env, "--cores", "1", "all"))
    export_records(src)

    def restored(name: str) -> Path:
        """A clone that pulled the outputs: no .snakemake, files written b first, then a."""
        clone = tmp_path / name
        clone.mkdir()
        for f in ("Snakefile", "dvc.yaml"):
            shutil.copy(src / f, clone / f)
        (clone / "results").mkdir()
        for i, f in enumerate(("b.txt", "a.txt")):
            shutil.copy(src / "results" / f, clone / "results" / f)
            os.utime(clone / "results" / f, (2e9 + i, 2e9 + i))
        return clone

    def planned(repo: Path, *args: str) -> dict[str, int]:
        dry = checked(smk_cmd(repo, env, "-n", "all", *args))
        out = dry.stdout + dry.stderr
        return {} if "Nothing to be done" in out else job_counts(out)

    without = restored("without")
    assert planned(without) == {"b": 1, "all": 1, "total": 2}  # the problem: b looks older than its input

    clone = restored("clone")
    shutil.copy(src / EXPORT, clone / EXPORT)
    assert planned(clone) == {}
    assert planned(clone, "--config", "alpha=0.4") == {"a": 1, "b": 1, "all": 1, "total": 3}

    edited = restored("edited")
    shutil.copy(src / EXPORT, edited / EXPORT)
    (edited / "results/a.txt").write_text("0.3\n")
    os.utime(edited / "results/a.txt", (2e9 + 1, 2e9 + 1))
    assert planned(edited) == {"b": 1, "all": 1, "total": 2}


def test_stage_deps_cover_every_file_the_pipeline_runs():
    """The stage's deps are folders and lock files, so a new module or rule is covered without
    editing dvc.yaml: every tracked file of the package, the rules, the Snakefile, mk/ and the
    lock files lies under one of them."""
    deps = [d for stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values() for d in stage["deps"]]
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    code = [f for f in tracked if f.startswith(("src/cdgtmll/", "workflow/", "mk/", "config/"))
            or f in ("Snakefile", "pyproject.toml") or (f.startswith("requirements") and f.endswith(".lock"))]
    assert len(code) > 100 and "workflow/rules/common.smk" in code and "Snakefile" in code
    uncovered = [f for f in code if not any(f == d or f.startswith(d.rstrip("/") + "/") for d in deps)]
    assert not uncovered, f"dvc.yaml's stage does not depend on {uncovered}"


def test_summary_rows_one_file_per_dataset_setting_method(tmp_path):
    import pandas as pd

    from cdgtmll.tables.collect import write_summary_dir

    def row(mode, setting, method, **m):
        base = {"mAP": 0.5, "micro_f1": 0.6, "macro_f1": 0.3, "rare_f1": 0.1, "p@1": 0.9, "p@3": 0.7, "p@5": 0.6}
        base.update(m)
        return {"mode": mode, "dataset": "yeast", "setting": setting, "method": method, "n": 3,
                **{f"{k}_mean": v for k, v in base.items()}, **{f"{k}_std": 0.0 for k in base}}

    summary = pd.DataFrame([row("global", "clean", "CD-GTMLL", rare_f1=0.123456), row("adaptive", "clean", "CD-GTMLL", rare_f1=0.2),
                            row("global", "R@0.50", "BCE", mAP=float("nan")), row("adaptive", "R@0.50", "BCE")])
    out = tmp_path / "metrics"
    (out / "yeast/clean").mkdir(parents=True)
    (out / "yeast/clean/Gone.json").write_text("{}")  # a row of an earlier configuration
    written = write_summary_dir(summary, out)
    assert sorted(p.relative_to(out).as_posix() for p in written) == ["yeast/R@0.50/BCE.json", "yeast/clean/CD-GTMLL.json"]
    assert not (out / "yeast/clean/Gone.json").exists()
    assert json.loads((out / "yeast/clean/CD-GTMLL.json").read_text()) == {
        "mAP": 0.5, "micro_f1": 0.6, "macro_f1": 0.3, "rare_f1": 0.1235, "rare_f1_adaptive": 0.2, "n": 3}
    assert json.loads((out / "yeast/R@0.50/BCE.json").read_text())["mAP"] is None


def test_audit_checks_files_against_dvc_lock(tmp_path, monkeypatch):
    from cdgtmll.lineage.audit import AuditReport
    from cdgtmll.lineage.dvc import DvcLineage, md5_file

    (tmp_path / "results/tables").mkdir(parents=True)
    table = tmp_path / "results/tables/t.md"
    table.write_text("| a |\n")
    summary = tmp_path / "results/metrics.json"
    summary.write_text("{}\n")
    listing = [{"md5": md5_file(table), "relpath": "t.md"}]
    dir_md5 = hashlib.md5(json.dumps(listing).encode()).hexdigest() + ".dir"
    cache = tmp_path / ".dvc/cache/files/md5"
    (cache / dir_md5[:2]).mkdir(parents=True)
    (cache / dir_md5[:2] / dir_md5[2:]).write_text(json.dumps(listing))
    lock = {"schema": "2.0", "stages": {"report": {"cmd": "snakemake all", "outs": [
        {"path": "results/tables", "hash": "md5", "md5": dir_md5},
        {"path": "results/metrics.json", "hash": "md5", "md5": md5_file(summary)}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    monkeypatch.chdir(tmp_path / "results")  # found from a folder below the repository root too
    dvc = DvcLineage.find()
    assert dvc is not None and dvc.root == tmp_path
    rep = AuditReport(dvc=dvc)
    assert rep.dvc_check(table, "table", 1).startswith(" | dvc report md5 ")
    assert rep.dvc_check(summary, "summary", 1).startswith(" | dvc report md5 ")
    assert rep.dvc_check(tmp_path / "README.md", "not an output", 1) == "" and not rep.problems
    table.unlink()
    table.write_text("| b |\n")
    rep = AuditReport(dvc=dvc)
    assert rep.dvc_check(table, "table", 1) == ""
    assert rep.problems and rep.problems[0].startswith("DIFFERS FROM DVC.LOCK table")
    (tmp_path / "results/tables/new.md").write_text("x")
    rep.dvc_check(tmp_path / "results/tables/new.md", "table", 1)
    assert rep.problems[-1].startswith("NOT IN DVC.LOCK table")
    (cache / dir_md5[:2] / dir_md5[2:]).unlink()  # listing not fetched
    rep = AuditReport(dvc=DvcLineage.find(tmp_path))
    rep.dvc_check(table, "table", 1)
    assert rep.problems[0].startswith("UNVERIFIED table")

