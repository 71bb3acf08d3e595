"""DVC test repositories (``from tests.support.dvc_repo import ...``): a git repository holding the
working tree with a shipped profile under DVC at test scale (:func:`make_repo`), the tools run in
it (``dvc``, ``snakemake``, ``git``, ``make``, ``cdgtmll audit``), and what the tests read back
(digests, job counts, the remote's listing, ``dvc exp show``).

The quick profile's finished run at test scale (:data:`QUICK_SCALE`: one epoch, one seed) is
made once per pytest session, by ``dvc repro`` and committed (:func:`quick_dvc_run`, the
``quick_run`` fixture of tests/integration/conftest.py); a test that needs a finished run takes
its own copy (:func:`copy_run`) and does what it tests on that.

The profiles are used as shipped, byte for byte: the profile is put under DVC the documented
way (``profile`` in params.yaml, as `dvc exp run -S profile=...` does) and only scale keys
(epochs, seeds, methods, study sweep sizes) are changed, as ``settings`` laid over it in
params.yaml, with DVC's own `-S` override code (``dvc.utils.hydra.apply_overrides``) or
`dvc exp run -S`. The DVC tests are four files (tests/integration/dvc/) so that `make test`'s
workers (``--dist loadfile``) run the three end-to-end ones side by side.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT
from tests.support.workflow import checkout_ignore

#: never copied into a test repository (build/run state of the working tree), besides the outputs
#: and caches every copy of the checkout leaves out
SKIP_PATHS = ("dvc_plots", ".dvc/cache", ".dvc/tmp", ".dvc/config.local", "dvc.lock")
QUICK = "config/quick.yaml"
DEFAULT = "config/config.yaml"


def tool_env(mirror: Path, **extra: str) -> dict:
    """The environment of the tools run in a test repository; ``PYTHONPATH=<repo>/src`` (see
    :func:`repo_env`) makes them import that repository's package."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["XDG_CACHE_HOME"] = env.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache")
    env["MPLCONFIGDIR"] = "/tmp/cdgtmll-mpl"
    env["CDGTMLL_DATA_MIRROR"] = str(mirror)
    env["DVC_NO_ANALYTICS"] = "1"
    env["COLUMNS"] = "250"
    env.update(extra)
    return env


def repo_env(repo: Path, mirror: Path) -> dict:
    """:func:`tool_env` with the package of ``repo`` (a copy of the working tree as the test began)
    ahead of the checkout the venv installs in editable mode: the jobs, DVC's code hashes and the
    audit see one version of the code even while the working tree is being edited."""
    return tool_env(mirror, PYTHONPATH=str(repo / "src"))


def run_cmd(repo: Path, env: dict, *cmd: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def checked(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, f"{res.args}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    return res


def dvc_cmd(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return run_cmd(repo, env, sys.executable, "-m", "dvc", *args)


def smk_cmd(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return run_cmd(repo, env, sys.executable, "-m", "snakemake", *args)


def git_cmd(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return checked(subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=120))


def make_repo(dst: Path, profile: str = DEFAULT, overrides: tuple[str, ...] = ()) -> Path:
    """A git repository holding the working tree, with ``profile`` under DVC and the scale
    ``overrides`` laid over it as params.yaml settings (as `dvc exp run -S profile=<profile>
    -S '++settings.<key>=<value>'` would write them), committed; the venv linked for make."""
    from dvc.utils.hydra import apply_overrides

    shutil.copytree(ROOT, dst, ignore=checkout_ignore(*SKIP_PATHS), symlinks=True)
    (dst / "results").mkdir(exist_ok=True)
    apply_overrides(str(dst / "params.yaml"), [f"profile={profile}", *(f"++settings.{o.lstrip('+')}" for o in overrides)])
    assert (dst / profile).read_bytes() == (ROOT / profile).read_bytes()  # the profile as shipped
    git_cmd(dst, "init", "-q")
    link_venv(dst)
    git_cmd(dst, "config", "user.name", "cdgtmll test")
    git_cmd(dst, "config", "user.email", "test@cdgtmll.invalid")
    git_cmd(dst, "add", "-A")
    git_cmd(dst, "commit", "-qm", f"{profile} at test scale")
    return dst


def link_venv(repo: Path) -> None:
    """This interpreter's venv as the checkout's .venv, up to date for the Makefile (its stamp
    newer than the lock files), so that `make pull`/`make push` run as documented."""
    (repo / ".venv").symlink_to(Path(sys.executable).parent.parent)
    (repo / ".git/info").mkdir(parents=True, exist_ok=True)  # .gitignore's `.venv/` misses a link
    with open(repo / ".git/info/exclude", "a") as fh:
        fh.write("/.venv\n")
    for f in ("requirements.lock", "pyproject.toml"):
        os.utime(repo / f, (946684800, 946684800))  # 2000-01-01


def commit_all(repo: Path, msg: str) -> None:
    git_cmd(repo, "add", "-A")
    git_cmd(repo, "commit", "-qm", msg)


def digests(repo: Path, *tops: str) -> dict[str, str]:
    """sha256 of every file of the outputs ``tops`` (checkpoints are not outputs: .dvcignore)."""
    out = {}
    for top in tops:
        p = repo / top
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file() and f.name != "checkpoint.pt")
        out.update({str(f.relative_to(repo)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files})
    return out


def job_counts(output: str) -> dict[str, int]:
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


def remote_listing(remote: Path) -> tuple[int, list[str]]:
    """(bytes, file names) of everything a DVC remote holds: object sizes, and the names in
    every directory listing (.dir) it holds."""
    objects = [f for f in remote.rglob("*") if f.is_file()]
    names = [e["relpath"] for f in objects if f.suffix == ".dir" for e in json.loads(f.read_text())]
    return sum(f.stat().st_size for f in objects), names


def plans_nothing(repo: Path, env: dict, profile: str) -> str:
    """`snakemake -n all --configfile <profile>` as a user types it (the workflow profile
    profiles/default is read by itself): nothing to be done. Returns its output."""
    dry = checked(smk_cmd(repo, env, "-n", "all", "--configfile", profile))
    assert "Nothing to be done" in dry.stdout + dry.stderr, (dry.stdout + dry.stderr)[-3000:]
    return dry.stdout + dry.stderr


def alphas(repo: Path, method: str = "CD-GTMLL") -> set[float]:
    return {json.loads(p.read_text())["config"]["hparams"]["alpha"]
            for p in (repo / "results/runs/yeast").glob(f"*/{method}/seed*/provenance.json")}


def audit_cmd(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return run_cmd(repo, env, sys.executable, "-m", "cdgtmll.cli", "audit", *args, timeout=300)


#: the one-screen `dvc exp show` of docs/dvc.md: the parameters that vary and the headline
#: (results/headline.json), without the per-row metrics files, the time and a queued run's state
EXP_SHOW = ("--only-changed", "--drop", "results/metrics/|Created|State|Executor", "--keep", r"([\w-]+\.)?(clean\.|R\.rare)")


def compact_exp_show(repo: Path, env: dict, values: dict[str, str], setting: str = "settings.methods.CD-GTMLL.alpha") -> str:
    """The documented `dvc exp show` fits 100 columns: every column shown (none collapsed to
    '…'), the setting that varies with its exact values, the headline's short names."""
    assert "dvc exp show " + " ".join(f"'{w}'" if "|" in w or "\\" in w else w for w in EXP_SHOW) in \
        (ROOT / "docs/dvc.md").read_text(), "docs/dvc.md shows another dvc exp show command"
    table = checked(dvc_cmd(repo, dict(env, COLUMNS="100"), "exp", "show", *EXP_SHOW)).stdout
    lines = table.splitlines()
    assert max(map(len, lines)) <= 100 and "…" not in table, table
    header = next(line for line in lines if "Experiment" in line).split()
    assert header == ["Experiment", "clean.mAP", "clean.rare", "R.rare", *([setting] if values else [])], table
    for name, value in values.items():
        row = next(line for line in lines if f"[{name}]" in line).split()
        assert row[-1] == value and all(0 <= float(v) <= 1 for v in row[-4:-1]), table
    print(f"\n$ dvc exp show {' '.join(EXP_SHOW)}   (COLUMNS=100)\n{table}")
    return table


def exp_rows(shown: list) -> dict[str, dict]:
    """``{experiment name or rev: data}`` from `dvc exp show --json`."""
    rows = {}
    for base in shown:
        rows[base.get("name") or base["rev"]] = base.get("data") or {}
        for exp in base.get("experiments") or []:
            for rev in exp.get("revs") or []:
                rows[rev.get("name") or rev["rev"]] = rev.get("data") or {}
    return rows


def offline_page(html: str) -> None:
    assert "<script src=" not in html and "cdn.jsdelivr" not in html  # nothing from the network
    assert "vegaEmbed(" in html and '"field": "method"' in html      # vega inlined; colour by method

#: every output dvc.yaml caches
OUTS = ("results/raw", "results/data", "results/runs", "results/tables", "results/claims", "results/metrics",
        "results/metrics.json", "results/jobs.json", "results/headline.json", "figures")
QUICK_SCALE = ("training.default.epochs=1", "experiments.seeds=[0]", "experiments.methods=[BR-LogReg,CD-GTMLL]",
               "r_variants.severities.yeast=[0.5]")
#: the commit message of the quick profile's ``dvc repro`` (:func:`quick_dvc_run`)
QUICK_RUN_COMMIT = "dvc repro of the quick profile"


def quick_dvc_run(dst: Path, mirror: Path) -> Path:
    """config/quick.yaml as shipped at :data:`QUICK_SCALE` (1 epoch, 1 seed, BR-LogReg +
    CD-GTMLL, Yeast-R at 50% only) in a repository of its own at ``dst`` (:func:`make_repo`),
    reproduced with `dvc repro` and dvc.lock committed: outputs in the workspace and hardlinked
    into the DVC cache, Snakemake's records in .snakemake, the run made from the first commit."""
    repo = make_repo(dst, QUICK, QUICK_SCALE)
    checked(dvc_cmd(repo, repo_env(repo, mirror), "repro"))
    commit_all(repo, QUICK_RUN_COMMIT)
    return repo


def copy_run(src: Path, dst: Path) -> Path:
    """A copy of the repository ``src`` (:func:`quick_dvc_run`) at ``dst``, by ``cp -a``: the
    outputs and the DVC cache stay one file each (the hardlinks between them are kept), times and
    modes as they were; without .dvc/tmp (DVC's state, keyed by the original's paths and inodes:
    DVC builds it again). ``dst``'s parent holds the default remote (``../cdgtmll-dvc-remote``)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    checked(subprocess.run(["cp", "-a", str(src), str(dst)], capture_output=True, text=True, timeout=600))
    shutil.rmtree(dst / ".dvc/tmp", ignore_errors=True)
    return dst
