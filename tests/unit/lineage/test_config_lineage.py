"""Config is data, not dirt: a run made with uncommitted edits to
``params.yaml`` and the profile (what ``dvc exp run -S`` leaves before its stage runs) is not
dirty, records the config files' sha256, and passes ``cdgtmll audit`` with 0 problems; a later
config change is checked for what it changes for the run (nothing: a note; its run spec or
evaluation settings: STALE CONFIG); an uncommitted edit to a source file still fails the audit
(MIXED CODE) and gives the tables their code-lineage footnote.

The checkout is a real git repository (a profile, ``params.yaml`` and a module, committed); the
run is real: trained by :func:`cdgtmll.train.run_seed` with the run spec the profile gives,
scored by ``cdgtmll.metrics.evaluate_run`` with the config record rule ``evaluate`` puts in its
environment,
tabulated by ``cdgtmll.tables.build``, all in the checkout as the workflow's jobs run.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cdgtmll import cli
from tests.support.paths import ROOT
from tests.unit.lineage.test_audit_cell_values import _dataset

#: runs real git in a temporary repository or this checkout: processes, so outside the fast loop
#: (there git gives a fixed state: tests/conftest.py)
REAL_GIT = pytest.mark.slow

PROFILE = "config/test.yaml"
CELL = ("tables/table1_standard.md", "--cell", "BCE", "Yeast Micro-F1")
RUN = Path("runs/yeast/clean/BCE")
#: what `dvc exp run -S '++settings.methods.CD-GTMLL.alpha=0.2'` writes before the stage runs
DVC_SETTINGS = {"profile": PROFILE, "settings": {"methods": {"CD-GTMLL": {"alpha": 0.2}}}}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def _write_params(root: Path, params: dict) -> None:
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _checkout(root: Path) -> Path:
    """A git repository with the quick profile (one seed, two epochs), ``params.yaml`` naming it
    and a module, committed."""
    profile = yaml.safe_load((ROOT / "config/quick.yaml").read_text())
    profile["experiments"].update({"methods": ["BCE", "CD-GTMLL"], "seeds": [0], "r_variants": False})
    profile["training"]["default"].update({"epochs": 2, "hidden_dim": 32, "batch_size": 64})
    (root / "config").mkdir(parents=True)
    (root / PROFILE).write_text(yaml.safe_dump(profile, sort_keys=False))
    _write_params(root, {"profile": PROFILE, "settings": {}})
    (root / "src/cdgtmll").mkdir(parents=True)
    (root / "src/cdgtmll/extra.py").write_text("X = 1\n")
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.org")
    _git(root, "config", "user.name", "t")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    return root


def _run(root: Path, monkeypatch) -> None:
    """Train, evaluate and tabulate BCE's seed 0 in ``root`` as the workflow's jobs do (its
    config loaded as the Snakefile loads it, params.yaml's settings laid over the profile)."""
    from cdgtmll import train
    from cdgtmll.config.dvc_params import settings_layer
    from cdgtmll.config.loader import load_files
    from cdgtmll.config.plan import run_spec
    from cdgtmll.data.processed import ProcessedData
    from cdgtmll.labels import tail_labels
    from cdgtmll.lineage.config_record import CONFIG_RECORD_ENV
    from cdgtmll.lineage.configs import record_text
    from cdgtmll.metrics import evaluate_run
    from cdgtmll.tables import build

    monkeypatch.chdir(root)
    config = load_files([PROFILE], None, layer=settings_layer([PROFILE], root))
    clean_path = Path("data/yeast/processed.npz")
    if not clean_path.exists():
        _dataset(root)
    clean = ProcessedData.load(clean_path)
    tail = tail_labels(clean.part("train")[1], q=config["r_variants"]["tail_fraction"],
                       tie_seed=config["r_variants"]["tie_seed"])
    spec = run_spec(config, "yeast", "clean", "BCE")
    train.run_seed(clean, tail, spec, 0, RUN / "seed0", {"data": clean_path, "clean": clean_path})
    # what workflow/rules/evaluate.smk puts in the environment of its jobs (cdgtmll.lineage.configs.export_record)
    monkeypatch.setenv(CONFIG_RECORD_ENV, record_text([PROFILE], root, {}))
    assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(RUN), "--seeds", "0"]) == 0
    assert build.main(["--metrics", str(RUN / "seed0/metrics.json"), "--methods", "BCE", "--out", "tables"]) == 0


def _audit(capsys, *args: str) -> tuple[int, str, str]:
    rc = cli.main(["audit", *CELL, *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.fixture(scope="module")
def dvc_run(tmp_path_factory):
    """A run made as `dvc exp run -S` makes it: params.yaml and the profile edited, not committed."""
    root = _checkout(tmp_path_factory.mktemp("config_lineage") / "repo")
    _write_params(root, DVC_SETTINGS)
    with open(root / PROFILE, "a") as fh:
        fh.write("# an uncommitted note in the profile\n")
    with pytest.MonkeyPatch.context() as mp:
        _run(root, mp)
    return root


@REAL_GIT
def test_config_edits_do_not_make_the_run_dirty(dvc_run):
    root = dvc_run
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    assert " M params.yaml" in status and f" M {PROFILE}" in status
    ev = json.loads((root / RUN / "seed0/metrics.provenance.json").read_text())
    assert ev["git"]["dirty"] is False and ev["git"]["code_dirty_files"] == []
    assert sorted(ev["git"]["dirty_files"]) == [f" M {PROFILE}", " M params.yaml"]
    # the config files are recorded by content, params.yaml too (its profile is the run's config file)
    assert ev["config"]["configfiles"] == [PROFILE] and ev["config"]["params_file"] == "params.yaml"
    from cdgtmll.io import sha256_file

    assert ev["config"]["files"] == {PROFILE: sha256_file(root / PROFILE), "params.yaml": sha256_file(root / "params.yaml")}
    # the training's record is made by the same function, with the same code-only rule
    prov = json.loads((root / RUN / "seed0/provenance.json").read_text())
    assert prov["git"] == ev["git"]
    from cdgtmll.lineage.worktree import code_dirty

    assert code_dirty(prov["git"]) is False
    md = (root / "tables/table1_standard.md").read_text()
    assert "Code lineage" not in md and "uncommitted" not in md
    profile = json.loads((root / "tables/profile.json").read_text())
    assert profile["mixed_code"] is False and profile["code_lineage"]["dirty_runs"] == 0
    with open(root / "tables/all_runs.csv", newline="") as fh:
        assert {row["git_dirty"] for row in csv.DictReader(fh)} == {"False"}


@REAL_GIT
def test_the_audit_passes_with_zero_problems(dvc_run, capsys, monkeypatch):
    monkeypatch.chdir(dvc_run)
    rc, out, err = _audit(capsys)
    assert rc == 0, out[-3000:] + err
    assert "; 0 problem(s)" in out and "MIXED CODE" not in out + err
    assert f"ok       config {PROFILE} sha256 " in out and "params.yaml sha256 " in out and " as recorded" in out
    assert "code dirty=False" in out


@REAL_GIT
def test_a_later_config_change_for_other_runs_is_a_note(dvc_run, capsys, monkeypatch):
    """Another `dvc exp run -S` that changes only CD-GTMLL: the BCE run is what the config now gives."""
    root = dvc_run
    before = (root / "params.yaml").read_bytes()
    monkeypatch.chdir(root)
    try:
        _write_params(root, {"profile": PROFILE, "settings": {"methods": {"CD-GTMLL": {"alpha": 0.3}}}})
        rc, out, err = _audit(capsys)
        assert rc == 0, out[-3000:] + err
        assert "; 0 problem(s)" in out
        assert "ok       config changed since the run: params.yaml (recorded " in out
        assert "the config now gives this run the same run spec and evaluation settings" in out
    finally:
        (root / "params.yaml").write_bytes(before)


@pytest.mark.parametrize("settings, said", [
    ({"training": {"default": {"epochs": 3}}}, "run spec training.epochs: 2 -> 3"),
    ({"thresholds": {"global": 0.6}}, "evaluation settings threshold: 0.5 -> 0.6"),
])
@REAL_GIT
def test_a_later_config_change_for_this_run_is_stale_config(dvc_run, capsys, monkeypatch, settings, said):
    root = dvc_run
    before = (root / "params.yaml").read_bytes()
    monkeypatch.chdir(root)
    try:
        _write_params(root, {"profile": PROFILE, "settings": settings})
        rc, out, err = _audit(capsys)
        assert rc == 1, out[-3000:]
        assert f"STALE CONFIG {RUN}/seed0/metrics.provenance.json: changed since the run: params.yaml (recorded " in err
        assert "what the config now gives this run differs: " in err and said in err
        assert "re-run it (`snakemake all` re-runs exactly such jobs)" in err
        rc, out, err = _audit(capsys, "--allow-stale")
        assert rc == 0 and "STALE CONFIG" in err  # still said, as a warning
    finally:
        (root / "params.yaml").write_bytes(before)


@REAL_GIT
def test_a_profile_that_is_gone_is_stale_config(dvc_run, capsys, monkeypatch):
    root = dvc_run
    monkeypatch.chdir(root)
    shutil.move(root / PROFILE, root / "moved.yaml")
    try:
        rc, out, err = _audit(capsys)
        assert rc == 1
        assert f"STALE CONFIG {RUN}/seed0/metrics.provenance.json: changed since the run: {PROFILE} (recorded " in err
        assert "now missing" in err and "the config cannot be loaded now" in err
    finally:
        shutil.move(root / "moved.yaml", root / PROFILE)


@REAL_GIT
def test_an_uncommitted_source_edit_still_fails_the_audit(tmp_path, capsys, monkeypatch):
    root = _checkout(tmp_path / "repo")
    _write_params(root, DVC_SETTINGS)
    with open(root / "src/cdgtmll/extra.py", "a") as fh:
        fh.write("Y = 2\n")
    _run(root, monkeypatch)
    ev = json.loads((root / RUN / "seed0/metrics.provenance.json").read_text())
    assert ev["git"]["dirty"] is True and ev["git"]["code_dirty_files"] == [" M src/cdgtmll/extra.py"]
    assert "Code lineage: " in (root / "tables/table1_standard.md").read_text()
    assert "1 of them were made from a working tree with uncommitted changes to code" in \
        (root / "tables/table1_standard.md").read_text()
    rc, out, err = _audit(capsys)
    assert rc == 1, out[-3000:]
    assert (f"MIXED CODE: 1 run(s) were made from a working tree with uncommitted changes to code, e.g. {RUN}/seed0 "
            "( M src/cdgtmll/extra.py)") in err, err
    assert "params.yaml" not in err.split("MIXED CODE")[1].split("\n")[0]  # the config edit is not named as dirt


@pytest.mark.parametrize("text, said", [
    ('{"configfiles": ["config/gone.yaml"], "params_file": null, "overrides": {}}',
     "config file config/gone.yaml not found"),
    ("config/test.yaml", "not JSON"),
    ('{"configfiles": []}', 'expected {"configfiles": [...]'),
])
@REAL_GIT
def test_a_bad_config_record_is_named_and_writes_nothing(dvc_run, capsys, monkeypatch, text, said):
    from cdgtmll.lineage.config_record import CONFIG_RECORD_ENV
    from cdgtmll.metrics import evaluate_run

    root = dvc_run
    monkeypatch.chdir(root)
    monkeypatch.setenv(CONFIG_RECORD_ENV, text)
    before = {p: p.read_bytes() for p in (root / RUN / "seed0").glob("metrics*.json")}
    assert evaluate_run.main(["--clean", "data/yeast/processed.npz", "--rundir", str(RUN), "--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"[evaluate] ERROR config record ({CONFIG_RECORD_ENV} / --config-record): ") and said in err
    assert {p: p.read_bytes() for p in before} == before


def test_the_record_names_params_yaml_only_for_its_own_profile(tmp_path, monkeypatch):
    """params.yaml is recorded when its profile is exactly the run's config files (then the
    Snakefile lays its settings over them); paths are relative to the working directory, where
    the jobs run and find them."""
    from cdgtmll.lineage.config_record import config_record
    from cdgtmll.lineage.configs import record_text

    root = tmp_path / "wf"
    (root / "config").mkdir(parents=True)
    for name in ("a", "b"):
        (root / f"config/{name}.yaml").write_text(f"name: {name}\n")
    _write_params(root, {"profile": "config/a.yaml", "settings": {}})
    monkeypatch.chdir(root)
    rec = json.loads(record_text([root / "config/a.yaml"], root, {"cluster": True}))  # Snakemake's absolute paths
    assert rec == {"configfiles": ["config/a.yaml"], "params_file": "params.yaml", "overrides": {"cluster": True}}
    assert json.loads(record_text(["config/b.yaml"], root))["params_file"] is None
    assert json.loads(record_text(["config/a.yaml", "config/b.yaml"], root))["params_file"] is None
    monkeypatch.chdir(tmp_path)  # another working directory than the workflow's (snakemake --directory)
    text = record_text([root / "config/a.yaml"], root)
    assert json.loads(text)["configfiles"] == ["wf/config/a.yaml"] and json.loads(text)["params_file"] == "wf/params.yaml"
    assert set(config_record(text)["files"]) == {"wf/config/a.yaml", "wf/params.yaml"}
