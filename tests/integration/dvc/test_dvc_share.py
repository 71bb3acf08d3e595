"""DVC on config/quick.yaml at test scale, an experiment shared: pushed from one clone, pulled into
another, where Snakemake plans nothing and `cdgtmll audit` passes; `dvc exp run --temp`, `dvc exp
apply` and `dvc checkout` with no restore step.

The profiles are used as shipped, only scale keys changed (tests/support/dvc_repo.py says how).
"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.dvc_repo import (
    QUICK,
    alphas,
    audit_cmd,
    checked,
    commit_all,
    copy_run,
    digests,
    dvc_cmd,
    git_cmd,
    job_counts,
    link_venv,
    plans_nothing,
    repo_env,
    smk_cmd,
)

slow = pytest.mark.slow


@slow
def test_an_experiment_pushed_and_pulled_plans_nothing_and_passes_the_audit(tmp_path, mirror, quick_run):
    """Sharing an experiment, on the quick profile at test scale: the session's quick run
    (``quick_run``: `dvc repro`, committed) pushed to the default remote; in a fresh clone `dvc
    pull`, then `dvc exp run -S '++settings.methods.CD-GTMLL.alpha=0.2'` re-runs only CD-GTMLL's
    jobs, `git commit`, `dvc push`; in another clone a plain `dvc pull`, then `snakemake -n all`
    plans nothing and `cdgtmll audit` passes. Then, where .snakemake holds another run's
    records: `dvc exp run --temp` (a copy without .snakemake) re-runs only CD-GTMLL's jobs, and
    after `dvc exp apply` and `dvc checkout` Snakemake plans nothing, with no restore step; a
    changed setting still re-runs its jobs."""
    src = copy_run(quick_run, tmp_path / "src")
    env = repo_env(src, mirror)
    checked(dvc_cmd(src, env, "push"))  # the baseline, to the default remote ../cdgtmll-dvc-remote
    first = tmp_path / "first"
    checked(subprocess.run(["git", "clone", "-q", str(src), str(first)], capture_output=True, text=True))
    link_venv(first)
    for key, value in (("user.name", "cdgtmll test"), ("user.email", "test@cdgtmll.invalid")):
        git_cmd(first, "config", key, value)
    checked(dvc_cmd(first, env, "pull"))
    exp = checked(dvc_cmd(first, env, "exp", "run", "-S", "++settings.methods.CD-GTMLL.alpha=0.2"))
    out = exp.stdout + exp.stderr
    # the pulled baseline's records come with results/jobs.json: CD-GTMLL's clean and R-variant runs only
    assert job_counts(out)["train"] == 2 and "method=BR-LogReg" not in out, out[-3000:]
    commit_all(first, "CD-GTMLL alpha 0.2")
    checked(dvc_cmd(first, env, "push"))  # the default remote, ../cdgtmll-dvc-remote

    second = tmp_path / "second"
    checked(subprocess.run(["git", "clone", "-q", str(first), str(second)], capture_output=True, text=True))
    link_venv(second)
    checked(dvc_cmd(second, env, "pull"))
    assert alphas(second) == {0.2}
    assert "output(s) have the bytes results/jobs.json records" in plans_nothing(second, env, QUICK)
    audit = audit_cmd(second, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Yeast Rare-F1")
    assert audit.returncode == 0 and "0 problem(s)" in audit.stdout, audit.stdout[-3000:] + audit.stderr[-3000:]
    # a setting changed since: its jobs (and only they, and what reads them) re-run
    from dvc.utils.hydra import apply_overrides

    apply_overrides(str(second / "params.yaml"), ["++settings.methods.CD-GTMLL.alpha=0.3"])
    dry = checked(smk_cmd(second, env, "-n", "all", "--configfile", QUICK))
    out = dry.stdout + dry.stderr
    assert job_counts(out)["train"] == 2 and "method=BR-LogReg" not in out and "method=CD-GTMLL" in out, out[-3000:]

    # a copy without .snakemake (`--temp`): the baseline's records come with its results/jobs.json
    br_logreg = digests(first, "results/runs/yeast/clean/BR-LogReg", "results/runs/yeast/R0.50-s0/BR-LogReg")
    temp = checked(dvc_cmd(first, env, "exp", "run", "--temp", "-n", "alpha-0.6", "-S", "++settings.methods.CD-GTMLL.alpha=0.6"))
    out = temp.stdout + temp.stderr
    assert "--forceall" not in out.split("Command:")[1].splitlines()[0], out[-3000:]
    assert job_counts(out)["train"] == 2, out[-3000:]  # CD-GTMLL's clean and R-variant runs only
    # .snakemake here holds alpha 0.2's records: apply the experiment, then check the commit out again
    checked(dvc_cmd(first, env, "exp", "apply", "alpha-0.6"))
    assert alphas(first) == {0.6}
    assert digests(first, "results/runs/yeast/clean/BR-LogReg", "results/runs/yeast/R0.50-s0/BR-LogReg") == br_logreg
    plans_nothing(first, env, QUICK)
    git_cmd(first, "checkout", "--", "params.yaml", "dvc.lock")
    checked(dvc_cmd(first, env, "checkout"))
    assert alphas(first) == {0.2}
    plans_nothing(first, env, QUICK)
    assert "Data and pipelines are up to date" in checked(dvc_cmd(first, env, "status")).stdout

