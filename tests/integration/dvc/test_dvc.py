"""DVC on the shipped profiles, at tiny scale, in temporary git repositories made from the
working tree: outputs in the cache (hardlinked), checkpoints kept out of it, push/pull through
the default remote, no restore step (after a plain `dvc pull`, `dvc checkout` or `dvc exp apply`
Snakemake plans nothing: the records of results/jobs.json), experiments with `dvc exp run -S`
(show, diff, apply, plots diff, `--temp`, shared through a git remote and the DVC remote into a
fresh clone), the per-row metrics files and the headline `dvc exp show` prints, the offline plots
page, and `cdgtmll audit` against dvc.lock.

The profiles are used as shipped, byte for byte: the profile is put under DVC the documented
way (``profile`` in params.yaml, as `dvc exp run -S profile=...` does) and only scale keys
(epochs, seeds, methods, study sweep sizes) are changed, as ``settings`` laid over it in
params.yaml, with DVC's own `-S` override code (``dvc.utils.hydra.apply_overrides``) or
`dvc exp run -S`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import ROOT
from tests.support.workflow import checkout_ignore

#: never copied into a test repository (build/run state of the working tree), besides the outputs
#: and caches every copy of the checkout leaves out
SKIP_PATHS = ("dvc_plots", ".dvc/cache", ".dvc/tmp", ".dvc/config.local", "dvc.lock")
QUICK = "config/quick.yaml"
DEFAULT = "config/config.yaml"

slow = pytest.mark.slow


# ---------------------------------------------------------------------------------------------
# helpers


def _env(mirror: Path, **extra: str) -> dict:
    """The environment of the tools run in a test repository; ``PYTHONPATH=<repo>/src`` (see
    :func:`_repo_env`) makes them import that repository's package."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["XDG_CACHE_HOME"] = env.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache")
    env["MPLCONFIGDIR"] = "/tmp/cdgtmll-mpl"
    env["CDGTMLL_DATA_MIRROR"] = str(mirror)
    env["DVC_NO_ANALYTICS"] = "1"
    env["COLUMNS"] = "250"
    env.update(extra)
    return env


def _repo_env(repo: Path, mirror: Path) -> dict:
    """:func:`_env` with the package of ``repo`` (a copy of the working tree as the test began)
    ahead of the checkout the venv installs in editable mode: the jobs, DVC's code hashes and the
    audit see one version of the code even while the working tree is being edited."""
    return _env(mirror, PYTHONPATH=str(repo / "src"))


def _run(repo: Path, env: dict, *cmd: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, f"{res.args}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    return res


def _dvc(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return _run(repo, env, sys.executable, "-m", "dvc", *args)


def _smk(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return _run(repo, env, sys.executable, "-m", "snakemake", *args)


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return _ok(subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=120))


def _make_repo(dst: Path, profile: str = DEFAULT, overrides: tuple[str, ...] = ()) -> Path:
    """A git repository holding the working tree, with ``profile`` under DVC and the scale
    ``overrides`` laid over it as params.yaml settings (as `dvc exp run -S profile=<profile>
    -S '++settings.<key>=<value>'` would write them), committed; the venv linked for make."""
    from dvc.utils.hydra import apply_overrides

    shutil.copytree(ROOT, dst, ignore=checkout_ignore(*SKIP_PATHS), symlinks=True)
    (dst / "results").mkdir(exist_ok=True)
    apply_overrides(str(dst / "params.yaml"), [f"profile={profile}", *(f"++settings.{o.lstrip('+')}" for o in overrides)])
    assert (dst / profile).read_bytes() == (ROOT / profile).read_bytes()  # the profile as shipped
    _git(dst, "init", "-q")
    _link_venv(dst)
    _git(dst, "config", "user.name", "cdgtmll test")
    _git(dst, "config", "user.email", "test@cdgtmll.invalid")
    _git(dst, "add", "-A")
    _git(dst, "commit", "-qm", f"{profile} at test scale")
    return dst


def _link_venv(repo: Path) -> None:
    """This interpreter's venv as the checkout's .venv, up to date for the Makefile (its stamp
    newer than the lock files), so that `make pull`/`make push` run as documented."""
    (repo / ".venv").symlink_to(Path(sys.executable).parent.parent)
    (repo / ".git/info").mkdir(parents=True, exist_ok=True)  # .gitignore's `.venv/` misses a link
    with open(repo / ".git/info/exclude", "a") as fh:
        fh.write("/.venv\n")
    for f in ("requirements.lock", "pyproject.toml"):
        os.utime(repo / f, (946684800, 946684800))  # 2000-01-01


def _commit(repo: Path, msg: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", msg)


def _digests(repo: Path, *tops: str) -> dict[str, str]:
    """sha256 of every file of the outputs ``tops`` (checkpoints are not outputs: .dvcignore)."""
    out = {}
    for top in tops:
        p = repo / top
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file() and f.name != "checkpoint.pt")
        out.update({str(f.relative_to(repo)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files})
    return out


def _job_counts(output: str) -> dict[str, int]:
    """``{rule: jobs}`` from the first "Job stats" table Snakemake printed in ``output``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "Job stats:") + 3
    counts = {}
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def _remote_listing(remote: Path) -> tuple[int, list[str]]:
    """(bytes, file names) of everything a DVC remote holds: object sizes, and the names in
    every directory listing (.dir) it holds."""
    objects = [f for f in remote.rglob("*") if f.is_file()]
    names = [e["relpath"] for f in objects if f.suffix == ".dir" for e in json.loads(f.read_text())]
    return sum(f.stat().st_size for f in objects), names


def _plans_nothing(repo: Path, env: dict, profile: str) -> str:
    """`snakemake -n all --configfile <profile>` as a user types it (the workflow profile
    profiles/default is read by itself): nothing to be done. Returns its output."""
    dry = _ok(_smk(repo, env, "-n", "all", "--configfile", profile))
    assert "Nothing to be done" in dry.stdout + dry.stderr, (dry.stdout + dry.stderr)[-3000:]
    return dry.stdout + dry.stderr


def _alphas(repo: Path, method: str = "CD-GTMLL") -> set[float]:
    return {json.loads(p.read_text())["config"]["hparams"]["alpha"]
            for p in (repo / "results/runs/yeast").glob(f"*/{method}/seed*/provenance.json")}


def _audit(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return _run(repo, env, sys.executable, "-m", "cdgtmll.cli", "audit", *args, timeout=300)


#: the one-screen `dvc exp show` of docs/dvc.md: the parameters that vary and the headline
#: (results/headline.json), without the per-row metrics files, the time and a queued run's state
EXP_SHOW = ("--only-changed", "--drop", "results/metrics/|Created|State|Executor", "--keep", r"([\w-]+\.)?(clean\.|R\.rare)")


def _compact_exp_show(repo: Path, env: dict, values: dict[str, str], setting: str = "settings.methods.CD-GTMLL.alpha") -> str:
    """The documented `dvc exp show` fits 100 columns: every column shown (none collapsed to
    '…'), the setting that varies with its exact values, the headline's short names."""
    assert "dvc exp show " + " ".join(f"'{w}'" if "|" in w or "\\" in w else w for w in EXP_SHOW) in \
        (ROOT / "docs/dvc.md").read_text(), "docs/dvc.md shows another dvc exp show command"
    table = _ok(_dvc(repo, dict(env, COLUMNS="100"), "exp", "show", *EXP_SHOW)).stdout
    lines = table.splitlines()
    assert max(map(len, lines)) <= 100 and "…" not in table, table
    header = next(line for line in lines if "Experiment" in line).split()
    assert header == ["Experiment", "clean.mAP", "clean.rare", "R.rare", *([setting] if values else [])], table
    for name, value in values.items():
        row = next(line for line in lines if f"[{name}]" in line).split()
        assert row[-1] == value and all(0 <= float(v) <= 1 for v in row[-4:-1]), table
    print(f"\n$ dvc exp show {' '.join(EXP_SHOW)}   (COLUMNS=100)\n{table}")
    return table


def _exp_rows(shown: list) -> dict[str, dict]:
    """``{experiment name or rev: data}`` from `dvc exp show --json`."""
    rows = {}
    for base in shown:
        rows[base.get("name") or base["rev"]] = base.get("data") or {}
        for exp in base.get("experiments") or []:
            for rev in exp.get("revs") or []:
                rows[rev.get("name") or rev["rev"]] = rev.get("data") or {}
    return rows


def _offline_page(html: str) -> None:
    assert "<script src=" not in html and "cdn.jsdelivr" not in html  # nothing from the network
    assert "vegaEmbed(" in html and '"field": "method"' in html      # vega inlined; colour by method


# ---------------------------------------------------------------------------------------------
# config/quick.yaml: share, restore, lineage, experiments

#: every output dvc.yaml caches
OUTS = ("results/raw", "results/data", "results/runs", "results/tables", "results/claims", "results/metrics",
        "results/metrics.json", "results/jobs.json", "results/headline.json", "figures")
QUICK_SCALE = ("training.default.epochs=1", "experiments.seeds=[0]", "experiments.methods=[BR-LogReg,CD-GTMLL]",
               "r_variants.severities.yeast=[0.5]")


@slow
def test_an_experiment_pushed_and_pulled_plans_nothing_and_passes_the_audit(tmp_path, mirror):
    """Sharing an experiment, on the quick profile at test scale: in a fresh clone `dvc exp run -S
    '++settings.methods.CD-GTMLL.alpha=0.2'`, `git commit`, `dvc push`; in another clone a plain
    `dvc pull`, then `snakemake -n all` plans nothing and `cdgtmll audit` passes. Then, where
    .snakemake holds another run's records: `dvc exp run --temp` (a copy without .snakemake)
    re-runs only CD-GTMLL's jobs, and after `dvc exp apply` and `dvc checkout` Snakemake plans
    nothing, with no restore step; a changed setting still re-runs its jobs."""
    src = _make_repo(tmp_path / "src", QUICK, QUICK_SCALE)  # the working tree at test scale, no results
    env = _repo_env(src, mirror)
    first = tmp_path / "first"
    _ok(subprocess.run(["git", "clone", "-q", str(src), str(first)], capture_output=True, text=True))
    _link_venv(first)
    for key, value in (("user.name", "cdgtmll test"), ("user.email", "test@cdgtmll.invalid")):
        _git(first, "config", key, value)
    _ok(_dvc(first, env, "exp", "run", "-S", "++settings.methods.CD-GTMLL.alpha=0.2"))
    _commit(first, "CD-GTMLL alpha 0.2")
    _ok(_dvc(first, env, "push"))  # the default remote, ../cdgtmll-dvc-remote

    second = tmp_path / "second"
    _ok(subprocess.run(["git", "clone", "-q", str(first), str(second)], capture_output=True, text=True))
    _link_venv(second)
    _ok(_dvc(second, env, "pull"))
    assert _alphas(second) == {0.2}
    assert "output(s) have the bytes results/jobs.json records" in _plans_nothing(second, env, QUICK)
    audit = _audit(second, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Yeast Rare-F1")
    assert audit.returncode == 0 and "0 problem(s)" in audit.stdout, audit.stdout[-3000:] + audit.stderr[-3000:]
    # a setting changed since: its jobs (and only they, and what reads them) re-run
    from dvc.utils.hydra import apply_overrides

    apply_overrides(str(second / "params.yaml"), ["++settings.methods.CD-GTMLL.alpha=0.3"])
    dry = _ok(_smk(second, env, "-n", "all", "--configfile", QUICK))
    out = dry.stdout + dry.stderr
    assert _job_counts(out)["train"] == 2 and "method=BR-LogReg" not in out and "method=CD-GTMLL" in out, out[-3000:]

    # a copy without .snakemake (`--temp`): the baseline's records come with its results/jobs.json
    br_logreg = _digests(first, "results/runs/yeast/clean/BR-LogReg", "results/runs/yeast/R0.50-s0/BR-LogReg")
    temp = _ok(_dvc(first, env, "exp", "run", "--temp", "-n", "alpha-0.6", "-S", "++settings.methods.CD-GTMLL.alpha=0.6"))
    out = temp.stdout + temp.stderr
    assert "--forceall" not in out.split("Command:")[1].splitlines()[0], out[-3000:]
    assert _job_counts(out)["train"] == 2, out[-3000:]  # CD-GTMLL's clean and R-variant runs only
    # .snakemake here holds alpha 0.2's records: apply the experiment, then check the commit out again
    _ok(_dvc(first, env, "exp", "apply", "alpha-0.6"))
    assert _alphas(first) == {0.6}
    assert _digests(first, "results/runs/yeast/clean/BR-LogReg", "results/runs/yeast/R0.50-s0/BR-LogReg") == br_logreg
    _plans_nothing(first, env, QUICK)
    _git(first, "checkout", "--", "params.yaml", "dvc.lock")
    _ok(_dvc(first, env, "checkout"))
    assert _alphas(first) == {0.2}
    _plans_nothing(first, env, QUICK)
    assert "Data and pipelines are up to date" in _ok(_dvc(first, env, "status")).stdout


@slow
def test_quick_profile_cache_share_restore_and_experiments(tmp_path, mirror):
    """config/quick.yaml (1 epoch, 1 seed, BR-LogReg + CD-GTMLL, Yeast-R at 50% only) reproduced with `dvc repro`
    and dvc.lock committed; then, on that one repository (one pipeline run for all three
    parts): the cache, the push/pull round trip, the experiments."""
    repo = _make_repo(tmp_path / "repo", QUICK, QUICK_SCALE)
    env = _repo_env(repo, mirror)
    _ok(_dvc(repo, env, "repro"))
    _commit(repo, "dvc repro of the quick profile")
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
    assert "Data and pipelines are up to date" in _ok(_dvc(repo, env, "status")).stdout
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
    before = _digests(repo, *OUTS)
    assert any(k.startswith("results/tables/table1_standard") for k in before)
    # the default remote: ../cdgtmll-dvc-remote beside the checkout
    assert "cdgtmll-dvc-remote" in _ok(_dvc(repo, env, "remote", "list")).stdout
    _ok(_dvc(repo, env, "push"))
    assert any((repo.parent / "cdgtmll-dvc-remote").rglob("*.dir"))
    size, names = _remote_listing(repo.parent / "cdgtmll-dvc-remote")
    assert names and not [n for n in names if n.endswith("checkpoint.pt")]  # the remote holds no checkpoint
    print(f"\nDVC remote after the push of the quick profile at test scale: {size} bytes, {len(names)} files "
          f"listed; checkpoints left in the workspace only: "
          f"{sum(f.stat().st_size for f in (repo / 'results/runs').rglob('checkpoint.pt'))} bytes")
    for d in ("results", "figures", ".dvc/cache"):
        shutil.rmtree(repo / d)
    _ok(_dvc(repo, env, "pull"))
    assert _digests(repo, *OUTS) == before  # byte-identical: data, runs, tables, claims, metrics, figures
    shutil.rmtree(repo / ".snakemake")  # as a fresh clone: no records but those results/jobs.json brings
    assert "output(s) have the bytes results/jobs.json records" in _plans_nothing(repo, env, QUICK)
    ok = _audit(repo, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Yeast Rare-F1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "dvc      stage 'pipeline' of dvc.lock" in ok.stdout
    assert "| dvc pipeline md5" in ok.stdout
    # a table that differs from dvc.lock fails the audit (replaced, not edited: it is a hardlink)
    table = repo / "results/tables/table1_standard.md"
    text = table.read_text()
    table.unlink()
    table.write_text(text.replace("CD-GTMLL", "CD-GTMLL*", 1))
    bad = _audit(repo, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Yeast Rare-F1")
    assert bad.returncode == 1 and "DIFFERS FROM DVC.LOCK artifact: results/tables/table1_standard.md" in bad.stderr
    _ok(_dvc(repo, env, "checkout", "--force", "results/tables"))
    assert table.read_text() == text

    # a fresh clone, remote given by CDGTMLL_DVC_REMOTE (dvc remote modify --local)
    other = tmp_path / "other-remote"
    env2 = dict(env, CDGTMLL_DVC_REMOTE=str(other))
    _ok(_dvc(repo, env2, "remote", "modify", "--local", "cdgtmll", "url", env2["CDGTMLL_DVC_REMOTE"]))
    _ok(_dvc(repo, env2, "push"))
    clone = tmp_path / "clone"
    _ok(subprocess.run(["git", "clone", "-q", str(repo), str(clone)], capture_output=True, text=True))
    _link_venv(clone)
    # `make pull`: dvc pull (the url given by CDGTMLL_DVC_REMOTE); no restore step any more
    pulled = _ok(_run(clone, env2, "make", "--no-print-directory", "pull"))
    assert "snakemake" not in pulled.stdout
    assert _digests(clone, "results/tables", "results/metrics.json") == _digests(repo, "results/tables",
                                                                                  "results/metrics.json")
    assert not list((clone / "results/runs").rglob("checkpoint.pt"))
    _plans_nothing(clone, env2, QUICK)  # no .snakemake: the records come from results/jobs.json
    assert _audit(clone, env2, "results/tables/table2_rare.md", "--cell", "CD-GTMLL", "Yeast-R @50%").returncode == 0
    _ok(_dvc(repo, env, "remote", "modify", "--local", "--unset", "cdgtmll", "url"))  # back to the default


def _experiments_show_diff_apply_and_plots(repo: Path, env: dict, tmp_path: Path) -> None:
    br_prov = _digests(repo, "results/runs/yeast/clean/BR-LogReg")
    tables = {}
    shipped = {f: (repo / f).read_bytes() for f in (QUICK, DEFAULT)}
    for name, alpha in (("alpha-0.2", 0.2), ("alpha-0.6", 0.6)):
        res = _ok(_dvc(repo, env, "exp", "run", "-n", name, "-S", f"++settings.methods.CD-GTMLL.alpha={alpha}"))
        assert "Ran experiment(s): " + name in res.stdout + res.stderr
        assert {f: (repo / f).read_bytes() for f in shipped} == shipped  # -S left the profiles alone
        assert _alphas(repo) == {alpha}                                # every CD-GTMLL run re-trained
        assert _digests(repo, "results/runs/yeast/clean/BR-LogReg") == br_prov  # BR-LogReg untouched
        tables[name] = _digests(repo, "results/tables", "results/metrics")
    assert tables["alpha-0.2"] != tables["alpha-0.6"]

    rows = _exp_rows(json.loads(_ok(_dvc(repo, env, "exp", "show", "--json")).stdout))
    for name, alpha in (("alpha-0.2", 0.2), ("alpha-0.6", 0.6)):
        data = rows[name]
        assert data["params"]["params.yaml"]["data"]["settings"]["methods"]["CD-GTMLL"]["alpha"] == alpha
        assert data["params"][QUICK]["data"]["methods"]["CD-GTMLL"]["alpha"] == 0.4  # the profile as shipped
        row = data["metrics"]["results/metrics/yeast/clean/CD-GTMLL.json"]["data"]
        assert set(row) == {"mAP", "micro_f1", "macro_f1", "rare_f1", "rare_f1_adaptive", "n"}
        assert 0 < row["mAP"] < 1 and row["n"] == 1
    md = _ok(_dvc(repo, env, "exp", "show", "--md", "--only-changed")).stdout
    assert "alpha-0.2" in md and "alpha-0.6" in md and "methods.CD-GTMLL.alpha" in md
    for line in (line for line in md.splitlines() if "[alpha-" in line):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert "!" not in cells and "-" not in cells[1:], md  # every column loads, for both experiments
    _compact_exp_show(repo, env, {"alpha-0.2": "0.2", "alpha-0.6": "0.6"})

    diff = json.loads(_ok(_dvc(repo, env, "exp", "diff", "alpha-0.2", "alpha-0.6", "--json")).stdout)
    assert diff["params"]["params.yaml"]["settings.methods.CD-GTMLL.alpha"] == {
        "old": 0.2, "new": 0.6, "diff": pytest.approx(0.4)}
    changed = diff["metrics"]
    headline = changed.pop("results/headline.json")  # the headline moved with CD-GTMLL's rows
    assert "clean.mAP" in headline and set(headline) <= {"clean.mAP", "clean.rare", "R.rare"}
    assert changed and all("CD-GTMLL" in path for path in changed)  # only CD-GTMLL's rows moved
    assert any(isinstance(m["old"], float) and isinstance(m["new"], float)
               for per_file in changed.values() for m in per_file.values())

    out = tmp_path / "plots"
    _ok(_dvc(repo, env, "plots", "diff", "alpha-0.2", "alpha-0.6", "-o", str(out)))
    html = (out / "index.html").read_text()
    _offline_page(html)
    for s in ('"rev": "alpha-0.2"', '"rev": "alpha-0.6"', '"method": "CD-GTMLL"', '"method": "BR-LogReg"'):
        assert s in html

    # back to the first experiment: its tables, and Snakemake in step with them (no restore step)
    _ok(_dvc(repo, env, "exp", "apply", "alpha-0.2"))
    assert _digests(repo, "results/tables", "results/metrics") == tables["alpha-0.2"]
    assert _alphas(repo) == {0.2}
    _plans_nothing(repo, env, QUICK)
    # and back to the committed baseline: `make checkout` is dvc checkout
    _git(repo, "checkout", "--", "params.yaml", "dvc.lock")
    _ok(_run(repo, env, "make", "--no-print-directory", "checkout"))
    _plans_nothing(repo, env, QUICK)
    assert _alphas(repo) == {0.4} and _digests(repo, "results/runs/yeast/clean/BR-LogReg") == br_prov
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
    _ok(subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(origin)], capture_output=True, text=True))
    _git(repo, "remote", "add", "origin", str(origin))
    # `make push` pins the shipped relative url as an absolute path in .dvc/config.local: with
    # the relative url, `dvc exp push` sends the outputs to /cdgtmll-dvc-remote (DVC 3.67)
    _ok(_run(repo, env, "make", "--no-print-directory", "push"))
    remote = tmp_path / "cdgtmll-dvc-remote"
    assert _ok(_dvc(repo, env, "config", "--local", "remote.cdgtmll.url")).stdout.strip() == str(remote)
    _ok(_dvc(repo, env, "exp", "push", "origin", "alpha-0.2", "alpha-0.6"))
    size, names = _remote_listing(remote)
    assert names and not [n for n in names if n.endswith("checkpoint.pt")]
    for name in ("alpha-0.2", "alpha-0.6"):  # each experiment's outputs are in this remote
        ref = _git(repo, "for-each-ref", "--format=%(refname)", f"refs/exps/*/*/{name}").stdout.split()
        lock = yaml.safe_load(_git(repo, "show", f"{ref[0]}:dvc.lock").stdout)
        for out in lock["stages"]["pipeline"]["outs"]:
            md5 = out["md5"]
            assert (remote / "files/md5" / md5[:2] / md5[2:]).is_file(), (name, out["path"])
    print(f"\nDVC remote after the baseline and 2 experiments: {size} bytes; "
          f"{len([f for f in remote.rglob('*') if f.is_file()])} objects")

    fresh = tmp_path / "fresh"
    _ok(subprocess.run(["git", "clone", "-q", str(origin), str(fresh)], capture_output=True, text=True))
    _link_venv(fresh)
    _ok(_run(fresh, env, "make", "--no-print-directory", "pull"))  # the baseline
    _plans_nothing(fresh, env, QUICK)
    for name in ("alpha-0.2", "alpha-0.6"):
        _ok(_dvc(fresh, env, "exp", "pull", "origin", name))
        _ok(_dvc(fresh, env, "exp", "apply", name))
        assert _digests(fresh, "results/tables", "results/metrics") == tables[name]
        _plans_nothing(fresh, env, QUICK)  # a plain `snakemake -n all --configfile config/quick.yaml`
    assert not list(fresh.rglob("checkpoint.pt"))


# ---------------------------------------------------------------------------------------------
# fast: the stage (profile variable, derived deps), the metrics rows, the audit's dvc.lock lookup


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

    env = _env(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    (src / "Snakefile").write_text(TINY_SNAKEFILE)
    (src / "dvc.yaml").write_text("stages:\n  s:\n    cmd: snakemake all\n    outs: [results/a.txt, results/b.txt]\n")
    _ok(_smk(src, env, "--cores", "1", "all"))
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
        dry = _ok(_smk(repo, env, "-n", "all", *args))
        out = dry.stdout + dry.stderr
        return {} if "Nothing to be done" in out else _job_counts(out)

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


# ---------------------------------------------------------------------------------------------
# config/config.yaml (the default profile dvc.yaml ships with)

DEFAULT_SCALE = ("training.default.epochs=1", "experiments.seeds=[0]", "power.seeds=[0]", "experiments.methods=[CD-GTMLL]",
                 "studies.ablation.methods=[No-Curiosity,CD-GTMLL]", "studies.noise.rates=[0.2]",
                 "studies.noise.methods=[CD-GTMLL]", "studies.occlusion.methods=[CD-GTMLL]",
                 "studies.alpha.values=[0.2]", "studies.players.values=[2]",
                 "+studies.readings.readings=['payoff_scale=sum']")


@slow
def test_default_profile_repro_metrics_exp_show_and_plots(tmp_path, mirror):
    repo = _make_repo(tmp_path / "repo", DEFAULT, DEFAULT_SCALE)
    env = _repo_env(repo, mirror)
    _ok(_dvc(repo, env, "repro"))
    _commit(repo, "dvc repro of the default profile")
    assert "Data and pipelines are up to date" in _ok(_dvc(repo, env, "status")).stdout
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"pipeline"}
    tracked = lock["stages"]["pipeline"]["params"][DEFAULT]
    assert {"methods", "aliases", "studies", "thresholds", "evaluation"} <= set(tracked)

    # one row per (dataset, setting, method), the headline metrics as columns; and the headline
    shown = _ok(_dvc(repo, env, "metrics", "show", "results/metrics")).stdout.splitlines()
    header = shown[0].split()
    assert header == ["Path", "mAP", "macro_f1", "micro_f1", "n", "rare_f1", "rare_f1_adaptive"]
    paths = {line.split()[0] for line in shown[1:] if line.strip()}
    everything = _ok(_dvc(repo, env, "metrics", "show")).stdout
    assert "results/headline.json" in everything and "clean.mAP" in everything.splitlines()[0]
    assert {"results/metrics/yeast/clean/CD-GTMLL.json", "results/metrics/yeast/R@0.50/CD-GTMLL.json",
            "results/metrics/yeast/N@0.20/CD-GTMLL.json", "results/metrics/yeast/clean/No-Curiosity.json"} <= paths
    assert json.loads((repo / "results/metrics.json").read_text())  # the flat summary is still written

    diff = _ok(_dvc(repo, env, "metrics", "diff", "HEAD", "--all", "--json"))
    assert "failed to load" not in diff.stderr and "results/metrics/yeast/clean/CD-GTMLL.json" in diff.stdout
    rows = _exp_rows(json.loads(_ok(_dvc(repo, env, "exp", "show", "--json")).stdout))
    baseline = next(v for k, v in rows.items() if k != "workspace")
    assert baseline["metrics"]["results/metrics/yeast/clean/CD-GTMLL.json"]["data"]["mAP"] > 0
    assert baseline["metrics"]["results/headline.json"]["data"]["clean"]["mAP"] == \
        baseline["metrics"]["results/metrics/yeast/clean/CD-GTMLL.json"]["data"]["mAP"]
    _compact_exp_show(repo, env, {})  # the default profile's headline: one screen, the same short names

    out = tmp_path / "plots"
    _ok(_dvc(repo, env, "plots", "show", "-o", str(out)))
    _offline_page((out / "index.html").read_text())
