"""Each distinct run spec is trained once (cdgtmll.config.plan.shared_runs): the settings of the
shipped profiles that equal another job's run spec, computed from the real run specs."""

from __future__ import annotations

import pytest

from cdgtmll.config import loader, plan
from tests.support.paths import ROOT


def configured_jobs(cfg: dict) -> tuple[list, list]:
    main = [(d, v, m) for d in cfg["experiments"]["datasets"] for v in plan.variants(cfg, d)
            for m in cfg["experiments"]["methods"]]
    studies = [j for js in plan.study_jobs(cfg).values() for j in js]
    jobs = [j for j in dict.fromkeys(main + studies) if not plan.not_runnable(cfg, j[0], j[2])]
    return main, jobs


def test_default_profile_shares_exactly_the_settings_that_are_another_jobs_spec():
    cfg = loader.load(ROOT / "config/config.yaml")
    main, jobs = configured_jobs(cfg)
    run_of = plan.shared_runs(jobs, lambda *j: plan.run_spec(cfg, *j), own=main)
    # CD-GTMLL's defaults are alpha 0.4 and N = 3; No-Curiosity is alpha 0, Single-Predictor N = 1
    assert plan.aliases(run_of) == {
        ("yeast", "clean", "CD-GTMLL@alpha=0.0"): ("yeast", "clean", "No-Curiosity"),
        ("yeast", "clean", "CD-GTMLL@alpha=0.4"): ("yeast", "clean", "CD-GTMLL"),
        ("yeast", "clean", "CD-GTMLL@n_players=1"): ("yeast", "clean", "Single-Predictor"),
        ("yeast", "clean", "CD-GTMLL@n_players=3"): ("yeast", "clean", "CD-GTMLL"),
        # the same under each reading of studies.*.under (the ablation's runs come first)
        **{("yeast", "clean", f"CD-GTMLL@n_players={n},{r}"): ("yeast", "clean", f"{a}@{r}")
           for r in ("player_backbones=separate", "divergence_form=vector")
           for n, a in ((1, "Single-Predictor"), (3, "CD-GTMLL"))},
    }
    trained = set(run_of.values())
    keys = [plan.result_key(plan.run_spec(cfg, *j)) for j in trained]
    assert len(keys) == len(set(keys))  # no two trained jobs with the same spec
    for job, run in run_of.items():  # and every job's result is one of theirs
        assert plan.result_key(plan.run_spec(cfg, *job)) == plan.result_key(plan.run_spec(cfg, *run))
    # the shared runs resolve to the same hyper-parameters, not only the same configured ones
    a, b = plan.run_spec(cfg, "yeast", "clean", "CD-GTMLL@alpha=0.4"), plan.run_spec(cfg, "yeast", "clean", "CD-GTMLL")
    assert a.resolved_hparams == b.resolved_hparams and a.method != b.method


def test_a_setting_that_changes_the_spec_is_not_shared():
    cfg = loader.load(ROOT / "config/config.yaml")
    spec = lambda *j: plan.run_spec(cfg, *j)  # noqa: E731
    jobs = [("yeast", "clean", "CD-GTMLL"), ("yeast", "clean", "CD-GTMLL@alpha=0.40"),
            ("yeast", "clean", "CD-GTMLL@alpha=0.2"), ("yeast", "R0.50-s0", "CD-GTMLL@alpha=0.4")]
    run_of = plan.shared_runs(jobs, spec)
    # 0.40 parses to the same number; another value or another variant is another run
    assert plan.aliases(run_of) == {("yeast", "clean", "CD-GTMLL@alpha=0.40"): ("yeast", "clean", "CD-GTMLL")}


def test_table_rows_keep_their_own_folder():
    cfg = loader.load(ROOT / "config/config.yaml")
    spec = lambda *j: plan.run_spec(cfg, *j)  # noqa: E731
    jobs = [("yeast", "clean", "No-Curiosity"), ("yeast", "clean", "CD-GTMLL@alpha=0.0")]
    assert plan.aliases(plan.shared_runs(jobs, spec)) == {jobs[1]: jobs[0]}
    # a table row is trained under its own name even when an earlier job has its spec
    assert plan.aliases(plan.shared_runs(jobs, spec, own=[jobs[1]])) == {}
    assert plan.aliases(plan.shared_runs(jobs[::-1], spec, own=[jobs[1]])) == {jobs[0]: jobs[1]}


@pytest.mark.parametrize("name", ["paper.yaml", "mulan.yaml", "quick.yaml"])
def test_shipped_profiles_plan_each_spec_once(name):
    cfg = loader.load(ROOT / "config" / name)
    main, jobs = configured_jobs(cfg)
    run_of = plan.shared_runs(jobs, lambda *j: plan.run_spec(cfg, *j), own=main)
    keys = [plan.result_key(plan.run_spec(cfg, *j)) for j in set(run_of.values())]
    assert len(keys) == len(set(keys))
    assert not set(plan.aliases(run_of)) & set(main)  # the tables' rows are never read from another row's run
