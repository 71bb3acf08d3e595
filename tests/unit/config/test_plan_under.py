"""``studies.<study>.under``: a study runs under the default reading (App. E.1 as
written) and under each listed reading. The plan expands it into ``<setting>@<reading>`` jobs
(:func:`cdgtmll.config.plan.study_methods`), shares the runs that are another job's run spec
(:func:`cdgtmll.config.plan.shared_runs`), and the config check names a bad reading by its key."""

from __future__ import annotations

import copy

import pytest
import yaml

from cdgtmll.config import loader, plan, schema
from cdgtmll.config.names import name_problem
from cdgtmll.figures.studies.runs import AS_WRITTEN, split_reading
from tests.support.paths import ROOT

SEP, VEC = "player_backbones=separate", "divergence_form=vector"


@pytest.fixture(scope="module")
def raw_cfg():
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def _cfg(raw_cfg, **studies):
    cfg = copy.deepcopy(raw_cfg)
    for study, under in studies.items():
        cfg["studies"][study]["under"] = under
    return loader.validate(cfg)


def _err(cfg) -> str:
    with pytest.raises(schema.ConfigError) as ei:
        loader.validate(cfg)
    return str(ei.value)


def test_default_profile_runs_players_ablation_and_diagnostics_under_two_readings():
    cfg = loader.load(ROOT / "config/config.yaml")
    jobs = plan.study_jobs(cfg)
    sweep = [f"CD-GTMLL@n_players={n}" for n in range(1, 9)]
    assert [m for _, _, m in jobs["players"]] == sweep + [f"{m},{SEP}" for m in sweep] + [f"{m},{VEC}" for m in sweep]
    ablation = ["No-Curiosity", "Single-Predictor", "No-Overlap", "No-Disagreement", "CD-GTMLL"]
    assert [m for _, _, m in jobs["ablation"]] == ablation + [f"{m}@{SEP}" for m in ablation] + [f"{m}@{VEC}" for m in ablation]
    assert jobs["diagnostics"] == [("yeast", "R0.50-s0", m) for m in ("CD-GTMLL", f"CD-GTMLL@{SEP}", f"CD-GTMLL@{VEC}")]
    for js in jobs.values():  # every name is a valid folder and wildcard value
        assert all(name_problem(m, "method-entry") is None for _, _, m in js)
    # an alias under a reading is the alias' method with its hyper-parameters and the reading's
    assert plan.resolve_method(cfg, f"No-Curiosity@{SEP}") == ("CD-GTMLL", {"alpha": 0.0, "player_backbones": "separate"})
    assert plan.resolve_method(cfg, f"CD-GTMLL@n_players=5,{VEC}") == ("CD-GTMLL", {"n_players": 5,
                                                                                    "divergence_form": "vector"})
    hp = plan.method_hparams(cfg, "yeast", f"Single-Predictor@{SEP}")
    assert hp["n_players"] == 1 and hp["player_backbones"] == "separate" and hp["alpha"] == 0.4
    # studies without under are as before
    assert [m for _, _, m in jobs["alpha"]] == [f"CD-GTMLL@alpha={a}" for a in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)]


def test_runs_with_the_same_spec_under_a_reading_are_trained_once():
    cfg = loader.load(ROOT / "config/config.yaml")
    main = [(d, v, m) for d in cfg["experiments"]["datasets"] for v in plan.variants(cfg, d)
            for m in cfg["experiments"]["methods"]]
    studies = [j for js in plan.study_jobs(cfg).values() for j in js]
    jobs = [j for j in dict.fromkeys(main + studies) if not plan.not_runnable(cfg, j[0], j[2])]
    run_of = plan.shared_runs(jobs, lambda *j: plan.run_spec(cfg, *j), own=main)
    al = plan.aliases(run_of)
    y = lambda m: ("yeast", "clean", m)  # noqa: E731
    for r in (SEP, VEC):  # N = 3 is CD-GTMLL's default, N = 1 Single-Predictor: under each reading too
        assert al[y(f"CD-GTMLL@n_players=3,{r}")] == y(f"CD-GTMLL@{r}")
        assert al[y(f"CD-GTMLL@n_players=1,{r}")] == y(f"Single-Predictor@{r}")
        assert y(f"CD-GTMLL@{r}") not in al and y(f"No-Curiosity@{r}") not in al
    # the readings study's CD-GTMLL@<reading> is the ablation's full model under it: one job
    assert y(f"CD-GTMLL@{SEP}") in plan.study_jobs(cfg)["readings"]
    keys = [plan.result_key(plan.run_spec(cfg, *j)) for j in set(run_of.values())]
    assert len(keys) == len(set(keys))
    # 22 runs more than without under: 6 + 6 sweep points, 4 + 4 ablations, 2 diagnostics
    cfg0 = loader.load(ROOT / "config/config.yaml")
    for study in ("players", "ablation", "diagnostics"):
        del cfg0["studies"][study]["under"]
    studies0 = [j for js in plan.study_jobs(cfg0).values() for j in js]
    jobs0 = [j for j in dict.fromkeys(main + studies0) if not plan.not_runnable(cfg0, j[0], j[2])]
    run_of0 = plan.shared_runs(jobs0, lambda *j: plan.run_spec(cfg0, *j), own=main)
    assert len(set(run_of.values())) - len(set(run_of0.values())) == 22


def test_one_mapping_is_one_reading_and_sweeps_put_it_last(raw_cfg):
    cfg = _cfg(raw_cfg, alpha={"player_backbones": "separate", "divergence_form": "vector"})
    assert plan.study_under(cfg, "alpha") == [f"{SEP},{VEC}"]
    ms = plan.study_methods(cfg, "alpha")
    assert len(ms) == 12 and ms[7] == f"CD-GTMLL@alpha=0.2,{SEP},{VEC}"
    # the figures split the reading off again
    assert split_reading(ms[7], [f"{SEP},{VEC}"]) == ("CD-GTMLL@alpha=0.2", f"{SEP},{VEC}")
    assert split_reading(f"No-Curiosity@{SEP}", [SEP, VEC]) == ("No-Curiosity", SEP)
    assert split_reading("CD-GTMLL@n_players=3", [SEP]) == ("CD-GTMLL@n_players=3", AS_WRITTEN)
    cfg = _cfg(raw_cfg, diagnostics=[{"rho": 0.1}, {"payoff_weights": "rarity"}])
    assert plan.study_methods(cfg, "diagnostics") == ["CD-GTMLL", "CD-GTMLL@rho=0.1", "CD-GTMLL@payoff_weights=rarity"]


@pytest.mark.parametrize(("study", "under", "where", "says"), [
    ("players", [{"player_backbone": "separate"}], "studies.players.under[0].player_backbone",
     "'player_backbone' is not a hyper-parameter of 'CD-GTMLL'"),
    ("players", [{"player_backbones": "separate"}, {"divergence_form": "vectors"}],
     "studies.players.under[1].divergence_form", "expected one of"),
    ("players", {"n_players": 4}, "studies.players.under.n_players", "sweeps 'n_players' itself"),
    ("alpha", [{"alpha": 0.1}], "studies.alpha.under[0].alpha", "sweeps 'alpha' itself"),
    ("ablation", [{"alpha": 0.2}], "studies.ablation.under[0].alpha", "'No-Curiosity' sets 'alpha' itself"),
    ("diagnostics", [{SEP.split("=")[0]: "separate"}, {"player_backbones": "separate"}],
     "studies.diagnostics.under[1]", "listed twice"),
])
def test_a_bad_reading_is_named_by_its_key(raw_cfg, study, under, where, says):
    cfg = copy.deepcopy(raw_cfg)
    cfg["studies"][study]["under"] = under
    msg = _err(cfg)
    # named like every other config error: the file (validate's default source 'config') first
    assert msg.startswith(f"config: config error at '{where}'") and says in msg, msg


def test_a_reading_must_be_a_hyper_parameter_of_every_method_of_the_study(raw_cfg):
    cfg = copy.deepcopy(raw_cfg)
    cfg["studies"]["ablation"]["methods"] = ["BCE", "CD-GTMLL"]
    cfg["studies"]["ablation"]["under"] = {"player_backbones": "separate"}
    msg = _err(cfg)
    assert "studies.ablation.under.player_backbones" in msg and "'BCE'" in msg, msg


@pytest.mark.parametrize("under", [[], ["player_backbones=separate"], [{}], {"player_backbones": ["a"]}])
def test_under_has_the_schemas_shape(raw_cfg, under):
    cfg = copy.deepcopy(raw_cfg)
    cfg["studies"]["players"]["under"] = under
    assert "studies.players.under" in _err(cfg)


def test_only_the_four_studies_take_under(raw_cfg):
    cfg = copy.deepcopy(raw_cfg)
    cfg["studies"]["noise"]["under"] = {"player_backbones": "separate"}
    assert "studies.noise" in _err(cfg)
    assert set(plan.UNDER_STUDIES) == {s for s, d in schema.schema_document()["properties"]["studies"]["properties"].items()
                                       if "under" in d["properties"]}


def test_mulan_profile_runs_the_n_sweep_and_diagnostics_under_the_readings():
    cfg = loader.load(ROOT / "config/mulan.yaml")
    jobs = plan.study_jobs(cfg)
    under = plan.study_under(cfg, "players")
    assert under == [SEP, VEC] and plan.study_under(cfg, "diagnostics") == [SEP, VEC]
    assert ("enron", "clean", f"CD-GTMLL@n_players=4,{SEP}") in jobs["players"]
    assert ("enron", "clean", f"CD-GTMLL@{VEC}") in jobs["diagnostics"]


def test_under_datasets_restricts_the_readings_to_some_of_the_studys_datasets(raw_cfg):
    cfg = copy.deepcopy(raw_cfg)
    cfg["studies"]["players"].update(dataset=["yeast", "enron"], under=[{"player_backbones": "separate"}],
                                     under_datasets=["enron"])
    cfg = loader.validate(cfg)
    jobs = plan.study_jobs(cfg)["players"]
    assert [m for d, _, m in jobs if d == "yeast"] == [f"CD-GTMLL@n_players={n}" for n in range(1, 9)]
    assert len([m for d, _, m in jobs if d == "enron"]) == 16
    cfg["studies"]["players"]["under_datasets"] = ["bibtex"]
    assert "studies.players.under_datasets[0]" in _err(cfg)
    del cfg["studies"]["players"]["under"]
    cfg["studies"]["players"]["under_datasets"] = ["enron"]
    assert "studies.players.under_datasets" in _err(cfg)
