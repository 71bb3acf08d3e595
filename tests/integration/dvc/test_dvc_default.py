"""DVC on config/config.yaml (the default profile dvc.yaml ships with) at test scale: `dvc repro`,
the per-row metrics files (`dvc metrics show/diff`), the headline `dvc exp show` prints and the
offline plots page.

The profiles are used as shipped, only scale keys changed (tests/support/dvc_repo.py says how).
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.dvc_repo import DEFAULT, checked, commit_all, compact_exp_show, dvc_cmd, exp_rows, make_repo, offline_page, repo_env

slow = pytest.mark.slow


DEFAULT_SCALE = ("training.default.epochs=1", "experiments.seeds=[0]", "power.seeds=[0]", "experiments.methods=[CD-GTMLL]",
                 "studies.ablation.methods=[No-Curiosity,CD-GTMLL]", "studies.noise.rates=[0.2]",
                 "studies.noise.methods=[CD-GTMLL]", "studies.occlusion.methods=[CD-GTMLL]",
                 "studies.alpha.values=[0.2]", "studies.players.values=[2]",
                 "+studies.readings.readings=['payoff_scale=sum']")


@slow
def test_default_profile_repro_metrics_exp_show_and_plots(tmp_path, mirror):
    repo = make_repo(tmp_path / "repo", DEFAULT, DEFAULT_SCALE)
    env = repo_env(repo, mirror)
    checked(dvc_cmd(repo, env, "repro"))
    commit_all(repo, "dvc repro of the default profile")
    assert "Data and pipelines are up to date" in checked(dvc_cmd(repo, env, "status")).stdout
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"pipeline"}
    tracked = lock["stages"]["pipeline"]["params"][DEFAULT]
    assert {"methods", "aliases", "studies", "thresholds", "evaluation"} <= set(tracked)

    # one row per (dataset, setting, method), the headline metrics as columns; and the headline
    shown = checked(dvc_cmd(repo, env, "metrics", "show", "results/metrics")).stdout.splitlines()
    header = shown[0].split()
    assert header == ["Path", "mAP", "macro_f1", "micro_f1", "n", "rare_f1", "rare_f1_adaptive"]
    paths = {line.split()[0] for line in shown[1:] if line.strip()}
    everything = checked(dvc_cmd(repo, env, "metrics", "show")).stdout
    assert "results/headline.json" in everything and "clean.mAP" in everything.splitlines()[0]
    assert {"results/metrics/yeast/clean/CD-GTMLL.json", "results/metrics/yeast/R@0.50/CD-GTMLL.json",
            "results/metrics/yeast/N@0.20/CD-GTMLL.json", "results/metrics/yeast/clean/No-Curiosity.json"} <= paths
    assert json.loads((repo / "results/metrics.json").read_text())  # the flat summary is still written

    diff = checked(dvc_cmd(repo, env, "metrics", "diff", "HEAD", "--all", "--json"))
    assert "failed to load" not in diff.stderr and "results/metrics/yeast/clean/CD-GTMLL.json" in diff.stdout
    rows = exp_rows(json.loads(checked(dvc_cmd(repo, env, "exp", "show", "--json")).stdout))
    baseline = next(v for k, v in rows.items() if k != "workspace")
    assert baseline["metrics"]["results/metrics/yeast/clean/CD-GTMLL.json"]["data"]["mAP"] > 0
    assert baseline["metrics"]["results/headline.json"]["data"]["clean"]["mAP"] == \
        baseline["metrics"]["results/metrics/yeast/clean/CD-GTMLL.json"]["data"]["mAP"]
    compact_exp_show(repo, env, {})  # the default profile's headline: one screen, the same short names

    out = tmp_path / "plots"
    checked(dvc_cmd(repo, env, "plots", "show", "-o", str(out)))
    offline_page((out / "index.html").read_text())
