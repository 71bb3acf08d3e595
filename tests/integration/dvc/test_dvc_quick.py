"""DVC on config/quick.yaml at test scale: outputs in the cache (hardlinked), checkpoints kept out
of it, push/pull through the default remote, no restore step (after a plain `dvc pull`, `dvc
checkout` or `dvc exp apply` Snakemake plans nothing: the records of results/jobs.json),
experiments with `dvc exp run -S` (show, diff, apply, plots diff), shared through a git remote
and the DVC remote into a fresh clone, the per-row metrics files and the headline `dvc exp show`
prints, the offline plots page, and `cdgtmll audit` against dvc.lock.

The profiles are used as shipped, only scale keys changed (tests/support/dvc_repo.py says how).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.dvc_repo import (
    DEFAULT,
    OUTS,
    QUICK,
    alphas,
    audit_cmd,
    checked,
    compact_exp_show,
    copy_run,
    digests,
    dvc_cmd,
    exp_rows,
    git_cmd,
    link_venv,
    offline_page,
    plans_nothing,
    remote_listing,
    repo_env,
    run_cmd,
)

slow = pytest.mark.slow


@slow
def test_quick_profile_cache_share_restore_and_experiments(tmp_path, mirror, quick_run):
    """config/quick.yaml (1 epoch, 1 seed, BR-LogReg + CD-GTMLL, Yeast-R at 50% only) reproduced with `dvc repro`
    and dvc.lock committed (the session's ``quick_run``, copied); then, on that one repository:
    the cache, the push/pull round trip, the experiments."""
    repo = copy_run(quick_run, tmp_path / "repo")
    env = repo_env(repo, mirror)
    _outputs_cached_as_hardlinks(repo, env)
    _push_delete_pull_restores_identical_results(repo, env, tmp_path)
    tables = _experiments_show_diff_apply_and_plots(repo, env, tmp_path)
    _experiments_shared_into_a_fresh_clone(repo, env, tmp_path, tables)


def _outputs_cached_as_hardlinks(repo: Path, env: dict) -> None:
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"pipeline"}  # one stage runs the whole DAG once
    outs = {o["path"]: o for s in lock["stages"].values() for o in s["outs"]}
    assert set(outs) == set(OUTS)
    assert all(o["md5"] for o in outs.values())
    # one copy on disk: the workspace file is the cache object (same inode)
    data = repo / "results/data/yeast/processed.npz"
    md5 = hashlib.md5(data.read_bytes()).hexdigest()
    cached = repo / ".dvc/cache/files/md5" / md5[:2] / md5[2:]
    assert cached.is_file() and os.stat(cached).st_ino == os.stat(data).st_ino
    # the stage ran the profile it tracks (tracked whole), and the settings laid over it
    stage = lock["stages"]["pipeline"]
    assert stage["params"][QUICK]["methods"]["CD-GTMLL"]["alpha"] == 0.4
    assert stage["params"]["params.yaml"]["profile"] == QUICK
    assert stage["params"]["params.yaml"]["settings"]["experiments"]["seeds"] == [0]
    assert "--configfile config/quick.yaml" in stage["cmd"]
    assert {d["path"] for d in stage["deps"]} >= {"Snakefile", "workflow", "src/cdgtmll", "mk", "requirements.lock"}
    assert "Data and pipelines are up to date" in checked(dvc_cmd(repo, env, "status")).stdout
    # the runs ran at the scale of the settings: one seed, one epoch, one R-variant
    assert {p.parent.name for p in (repo / "results/runs/yeast/clean/CD-GTMLL").glob("seed*/predictions.npz")} == {"seed0"}
    assert sorted(p.name for p in (repo / "results/runs/yeast").iterdir()) == ["R0.50-s0", "clean"]
    # checkpoints stay in the workspace (a killed job resumes from them) but out of the outputs
    ckpts = list((repo / "results/runs").rglob("checkpoint.pt"))
    assert ckpts, "CD-GTMLL trains with checkpoints"
    runs = outs["results/runs"]["md5"]
    listing = json.loads((repo / ".dvc/cache/files/md5" / runs[:2] / runs[2:]).read_text())
    names = [e["relpath"] for e in listing]
    assert any(n.endswith("predictions.npz") for n in names)
    assert not [n for n in names if n.endswith("checkpoint.pt")]


def _push_delete_pull_restores_identical_results(repo: Path, env: dict, tmp_path: Path) -> None:
    before = digests(repo, *OUTS)
    assert any(k.startswith("results/tables/table1_standard") for k in before)
    # the default remote: ../cdgtmll-dvc-remote beside the checkout
    assert "cdgtmll-dvc-remote" in checked(dvc_cmd(repo, env, "remote", "list")).stdout
    checked(dvc_cmd(repo, env, "push"))
    assert any((repo.parent / "cdgtmll-dvc-remote").rglob("*.dir"))
    size, names = remote_listing(repo.parent / "cdgtmll-dvc-remote")
    assert names and not [n for n in names if n.endswith("checkpoint.pt")]  # the remote holds no checkpoint
    print(f"\nDVC remote after the push of the quick profile at test scale: {size} bytes, {len(names)} files "
          f"listed; checkpoints left in the workspace only: "
          f"{sum(f.stat().st_size for f in (repo / 'results/runs').rglob('checkpoint.pt'))} bytes")
    for d in ("results", "figures", ".dvc/cache"):
        shutil.rmtree(repo / d)
    checked(dvc_cmd(repo, env, "pull"))
    assert digests(repo, *OUTS) == before  # byte-identical: data, runs, tables, claims, metrics, figures
    shutil.rmtree(repo / ".snakemake")  # as a fresh clone: no records but those results/jobs.json brings
    assert "output(s) have the bytes results/jobs.json records" in plans_nothing(repo, env, QUICK)
    ok = audit_cmd(repo, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Yeast Rare-F1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "dvc      stage 'pipeline' of dvc.lock" in ok.stdout
    assert "| dvc pipeline md5" in ok.stdout
    # a table that differs from dvc.lock fails the audit (replaced, not edited: it is a hardlink)
    table = repo / "results/tables/table1_standard.md"
    text = table.read_text()
    table.unlink()
    table.write_text(text.replace("CD-GTMLL", "CD-GTMLL*", 1))
    bad = audit_cmd(repo, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Yeast Rare-F1")
    assert bad.returncode == 1 and "DIFFERS FROM DVC.LOCK artifact: results/tables/table1_standard.md" in bad.stderr
    checked(dvc_cmd(repo, env, "checkout", "--force", "results/tables"))
    assert table.read_text() == text

    # a fresh clone, remote given by CDGTMLL_DVC_REMOTE (dvc remote modify --local)
    other = tmp_path / "other-remote"
    env2 = dict(env, CDGTMLL_DVC_REMOTE=str(other))
    checked(dvc_cmd(repo, env2, "remote", "modify", "--local", "cdgtmll", "url", env2["CDGTMLL_DVC_REMOTE"]))
    checked(dvc_cmd(repo, env2, "push"))
    clone = tmp_path / "clone"
    checked(subprocess.run(["git", "clone", "-q", str(repo), str(clone)], capture_output=True, text=True))
    link_venv(clone)
    # `make pull`: dvc pull (the url given by CDGTMLL_DVC_REMOTE); no restore step any more
    pulled = checked(run_cmd(clone, env2, "make", "--no-print-directory", "pull"))
    assert "snakemake" not in pulled.stdout
    assert digests(clone, "results/tables", "results/metrics.json") == digests(repo, "results/tables",
                                                                                  "results/metrics.json")
    assert not list((clone / "results/runs").rglob("checkpoint.pt"))
    plans_nothing(clone, env2, QUICK)  # no .snakemake: the records come from results/jobs.json
    assert audit_cmd(clone, env2, "results/tables/table2_rare.md", "--cell", "CD-GTMLL", "Yeast-R @50%").returncode == 0
    checked(dvc_cmd(repo, env, "remote", "modify", "--local", "--unset", "cdgtmll", "url"))  # back to the default


def _experiments_show_diff_apply_and_plots(repo: Path, env: dict, tmp_path: Path) -> None:
    br_prov = digests(repo, "results/runs/yeast/clean/BR-LogReg")
    tables = {}
    shipped = {f: (repo / f).read_bytes() for f in (QUICK, DEFAULT)}
    for name, alpha in (("alpha-0.2", 0.2), ("alpha-0.6", 0.6)):
        res = checked(dvc_cmd(repo, env, "exp", "run", "-n", name, "-S", f"++settings.methods.CD-GTMLL.alpha={alpha}"))
        assert "Ran experiment(s): " + name in res.stdout + res.stderr
        assert {f: (repo / f).read_bytes() for f in shipped} == shipped  # -S left the profiles alone
        assert alphas(repo) == {alpha}                                # every CD-GTMLL run re-trained
        assert digests(repo, "results/runs/yeast/clean/BR-LogReg") == br_prov  # BR-LogReg untouched
        tables[name] = digests(repo, "results/tables", "results/metrics")
    assert tables["alpha-0.2"] != tables["alpha-0.6"]

    rows = exp_rows(json.loads(checked(dvc_cmd(repo, env, "exp", "show", "--json")).stdout))
    for name, alpha in (("alpha-0.2", 0.2), ("alpha-0.6", 0.6)):
        data = rows[name]
        assert data["params"]["params.yaml"]["data"]["settings"]["methods"]["CD-GTMLL"]["alpha"] == alpha
        assert data["params"][QUICK]["data"]["methods"]["CD-GTMLL"]["alpha"] == 0.4  # the profile as shipped
        row = data["metrics"]["results/metrics/yeast/clean/CD-GTMLL.json"]["data"]
        assert set(row) == {"mAP", "micro_f1", "macro_f1", "rare_f1", "rare_f1_adaptive", "n"}
        assert 0 < row["mAP"] < 1 and row["n"] == 1
    md = checked(dvc_cmd(repo, env, "exp", "show", "--md", "--only-changed")).stdout
    assert "alpha-0.2" in md and "alpha-0.6" in md and "methods.CD-GTMLL.alpha" in md
    for line in (line for line in md.splitlines() if "[alpha-" in line):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert "!" not in cells and "-" not in cells[1:], md  # every column loads, for both experiments
    compact_exp_show(repo, env, {"alpha-0.2": "0.2", "alpha-0.6": "0.6"})

    diff = json.loads(checked(dvc_cmd(repo, env, "exp", "diff", "alpha-0.2", "alpha-0.6", "--json")).stdout)
    assert diff["params"]["params.yaml"]["settings.methods.CD-GTMLL.alpha"] == {
        "old": 0.2, "new": 0.6, "diff": pytest.approx(0.4)}
    changed = diff["metrics"]
    headline = changed.pop("results/headline.json")  # the headline moved with CD-GTMLL's rows
    assert "clean.mAP" in headline and set(headline) <= {"clean.mAP", "clean.rare", "R.rare"}
    assert changed and all("CD-GTMLL" in path for path in changed)  # only CD-GTMLL's rows moved
    assert any(isinstance(m["old"], float) and isinstance(m["new"], float)
               for per_file in changed.values() for m in per_file.values())

    out = tmp_path / "plots"
    checked(dvc_cmd(repo, env, "plots", "diff", "alpha-0.2", "alpha-0.6", "-o", str(out)))
    html = (out / "index.html").read_text()
    offline_page(html)
    for s in ('"rev": "alpha-0.2"', '"rev": "alpha-0.6"', '"method": "CD-GTMLL"', '"method": "BR-LogReg"'):
        assert s in html

    # back to the first experiment: its tables, and Snakemake in step with them (no restore step)
    checked(dvc_cmd(repo, env, "exp", "apply", "alpha-0.2"))
    assert digests(repo, "results/tables", "results/metrics") == tables["alpha-0.2"]
    assert alphas(repo) == {0.2}
    plans_nothing(repo, env, QUICK)
    # and back to the committed baseline: `make checkout` is dvc checkout
    git_cmd(repo, "checkout", "--", "params.yaml", "dvc.lock")
    checked(run_cmd(repo, env, "make", "--no-print-directory", "checkout"))
    plans_nothing(repo, env, QUICK)
    assert alphas(repo) == {0.4} and digests(repo, "results/runs/yeast/clean/BR-LogReg") == br_prov
    # after runs, pulls, experiments and checkouts through hardlinks: no cache object was written through
    objects = [f for f in (repo / ".dvc/cache/files/md5").rglob("*") if f.is_file() and f.suffix != ".dir"]
    assert len(objects) > 100
    assert all(hashlib.md5(f.read_bytes()).hexdigest() == f.parent.name + f.name for f in objects)
    return tables


def _experiments_shared_into_a_fresh_clone(repo: Path, env: dict, tmp_path: Path, tables: dict) -> None:
    """Both experiments pushed (git refs to a git remote, outputs to the default DVC remote),
    pulled into a fresh clone and applied there: each plans nothing right away, and
    the DVC remote holds no checkpoint."""
    origin = tmp_path / "origin.git"
    checked(subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(origin)], capture_output=True, text=True))
    git_cmd(repo, "remote", "add", "origin", str(origin))
    # `make push` pins the shipped relative url as an absolute path in .dvc/config.local: with
    # the relative url, `dvc exp push` sends the outputs to /cdgtmll-dvc-remote (DVC 3.67)
    checked(run_cmd(repo, env, "make", "--no-print-directory", "push"))
    remote = tmp_path / "cdgtmll-dvc-remote"
    assert checked(dvc_cmd(repo, env, "config", "--local", "remote.cdgtmll.url")).stdout.strip() == str(remote)
    checked(dvc_cmd(repo, env, "exp", "push", "origin", "alpha-0.2", "alpha-0.6"))
    size, names = remote_listing(remote)
    assert names and not [n for n in names if n.endswith("checkpoint.pt")]
    for name in ("alpha-0.2", "alpha-0.6"):  # each experiment's outputs are in this remote
        ref = git_cmd(repo, "for-each-ref", "--format=%(refname)", f"refs/exps/*/*/{name}").stdout.split()
        lock = yaml.safe_load(git_cmd(repo, "show", f"{ref[0]}:dvc.lock").stdout)
        for out in lock["stages"]["pipeline"]["outs"]:
            md5 = out["md5"]
            assert (remote / "files/md5" / md5[:2] / md5[2:]).is_file(), (name, out["path"])
    print(f"\nDVC remote after the baseline and 2 experiments: {size} bytes; "
          f"{len([f for f in remote.rglob('*') if f.is_file()])} objects")

    fresh = tmp_path / "fresh"
    checked(subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], capture_output=True, text=True))
    link_venv(fresh)
    checked(run_cmd(fresh, env, "make", "--no-print-directory", "pull"))  # the baseline
    plans_nothing(fresh, env, QUICK)
    for name in ("alpha-0.2", "alpha-0.6"):
        checked(dvc_cmd(fresh, env, "exp", "pull", "origin", name))
        checked(dvc_cmd(fresh, env, "exp", "apply", name))
        assert digests(fresh, "results/tables", "results/metrics") == tables[name]
        plans_nothing(fresh, env, QUICK)  # a plain `snakemake -n all --configfile config/quick.yaml`
    assert not list(fresh.rglob("checkpoint.pt"))

