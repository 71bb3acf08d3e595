"""The typed run spec (:class:`cdgtmll.config.run_spec.RunSpec`): its JSON form is byte for byte
the dict planning wrote before it was typed (so no job's ``--spec``, spec hash or identity
changes), it round-trips, and a spec that is not one is refused naming the field and the source
(the train job's ``--spec``, a recorded ``provenance.json``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cdgtmll.config import loader, plan
from cdgtmll.config.run_spec import RunSpec, RunSpecError
from cdgtmll.io import config_hash
from tests.support.paths import ROOT

PROFILES = ("config/quick.yaml", "config/config.yaml")


def dict_form(config: dict, dataset: str, variant: str, method: str) -> dict:
    """The run spec as the untyped planner built it (the dict ``run_spec`` returned), from the
    same planning functions: the reference the typed spec's JSON form must equal."""
    spec = {
        "dataset": dataset,
        "variant": variant,
        "method": method,
        "registered_method": plan.resolve_method(config, method)[0],
        "hparams": plan.method_hparams(config, dataset, method),
        "resolved_hparams": json.loads(json.dumps(plan._resolved_hparams(config, dataset, method))),
        "training": plan.method_protocol(config, dataset, method),
        "seeds": plan.fit_seeds(config, method),
        "device": config["experiments"].get("device", "auto"),
        "data": {k: config["data"][k] for k in ("val_fraction", "split_seed")},
        "r_variants": {k: config["r_variants"][k] for k in ("tail_fraction", "tie_seed")},
        "plugins": list(config.get("plugins", [])),
    }
    if plan.is_image_dataset(config, dataset):
        spec["image_backbone"] = dict(config.get("image_backbone", {}))
    if plan.is_deterministic(config, method):
        spec["deterministic"] = True
    return spec


def planned_jobs(config: dict) -> list[tuple[str, str, str]]:
    """Every (dataset, variant, method) job of a profile: the tables' and the studies' (common.smk ALL_JOBS)."""
    main = [(d, v, m) for d in config["experiments"]["datasets"] for v in plan.variants(config, d)
            for m in config["experiments"]["methods"]]
    return list(dict.fromkeys(main + [j for js in plan.study_jobs(config).values() for j in js]))


@pytest.fixture(scope="module", params=PROFILES)
def profile(request):
    config = loader.load(ROOT / request.param)
    return request.param, config, planned_jobs(config)


def test_json_form_is_the_dict_planning_wrote_byte_for_byte(profile):
    """Every job of the profile: ``--spec`` text (json.dumps, keys sorted) and sha256 of the typed
    spec equal those of the dict form; the jobs built on another run with their ``base_run``."""
    name, config, jobs = profile
    assert len(jobs) > 5, name
    built = 0
    for job in jobs:
        spec, old = plan.run_spec(config, *job), dict_form(config, *job)
        assert spec.to_dict() == old and list(spec.to_dict()) == list(old), job
        assert spec.to_json() == json.dumps(old, sort_keys=True), job
        assert spec.sha256() == config_hash(old), job
        if plan.base_method(config, job[2]) is not None:
            base = plan.base_job(config, jobs, *job)
            entry = plan.base_run(config, spec, base, config["experiments"]["seeds"])
            typed = dataclasses.replace(spec, base_run=entry)
            assert typed.to_json() == json.dumps({**old, "base_run": entry}, sort_keys=True), job
            assert typed.sha256() == config_hash({**old, "base_run": entry}), job
            built += 1
    assert name == "config/quick.yaml" or built > 0  # the default profile plans PE, ETU and LSFA on BCE


def test_round_trip_through_json_and_the_recorded_dict(profile):
    name, config, jobs = profile
    for job in jobs:
        spec = plan.run_spec(config, *job)
        again = RunSpec.from_json(spec.to_json(), "--spec")
        assert again == spec and again.to_json() == spec.to_json(), job
        assert RunSpec.from_dict(json.loads(spec.to_json()), "provenance.json") == spec, job


def test_the_spec_is_frozen_and_its_dict_is_a_copy():
    config = loader.load(ROOT / "config/quick.yaml")
    spec = plan.run_spec(config, "yeast", "clean", "BCE")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seeds = (9,)
    d = spec.to_dict()
    d["training"]["epochs"] = -1
    d["seeds"].append(9)
    assert spec.training.get("epochs") != -1 and 9 not in spec.seeds


def _valid() -> dict:
    return json.loads(plan.run_spec(loader.load(ROOT / "config/quick.yaml"), "yeast", "clean", "BCE").to_json())


def test_a_record_without_the_later_optional_fields_still_parses_and_hashes_as_written():
    """A recorded spec without registered_method, resolved_hparams and plugins (and without the
    optional image_backbone, deterministic, base_run) parses; its method is read as the registered
    one, and its JSON form (hence its sha256) is the record's."""
    old = {k: v for k, v in _valid().items() if k not in ("registered_method", "resolved_hparams", "plugins")}
    spec = RunSpec.from_dict(old, "results/runs/yeast/clean/BCE/seed0/provenance.json")
    assert spec.registered_method is None and spec.registered == "BCE" and spec.plugins is None
    assert spec.to_dict() == old and spec.sha256() == config_hash(old)
    assert spec.label == "yeast/clean/BCE"


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(epochs=3), r"run spec from SRC: unknown field 'epochs' \(a run spec has: dataset, variant"),
    (lambda d: d.pop("seeds"), r"run spec from SRC: missing field 'seeds'"),
    (lambda d: d.update(seeds=["0"]), r"field 'seeds': expected a list of integers, got a list \[\"0\"\]"),
    (lambda d: d.update(seeds=[True]), r"field 'seeds': expected a list of integers"),
    (lambda d: d.update(method=""), r"field 'method': expected a non-empty string, got a string \"\""),
    (lambda d: d.update(hparams=[]), r"field 'hparams': expected an object, got a list \[\]"),
    (lambda d: d.update(data={"val_fraction": 0.1}), r"field 'data': expected an object with val_fraction \(number\), "
                                                     r"split_seed \(integer\)"),
    (lambda d: d.update(r_variants={"tail_fraction": "0.2", "tie_seed": 0}), r"field 'r_variants': expected an object"),
    (lambda d: d.update(image_backbone=None), r"field 'image_backbone': expected an object, got null"),
    (lambda d: d.update(deterministic="yes"), r"field 'deterministic': expected a boolean, got a string"),
    (lambda d: d.update(base_run={"method": "BCE", "dir": "results/runs/yeast/clean/BCE"}),
     r"field 'base_run': expected an object \{method, dir, spec_sha256\}"),
    (lambda d: d.update(base_run={"method": "BCE", "dir": None}), r"field 'base_run': expected"),
])
def test_a_spec_that_is_not_one_is_refused_naming_the_field_and_the_source(change, message):
    d = _valid()
    change(d)
    with pytest.raises(RunSpecError, match=message.replace("SRC", "--spec")):
        RunSpec.from_dict(d, "--spec")


def test_not_an_object_and_not_json_are_refused():
    with pytest.raises(RunSpecError, match=r"run spec from a/provenance.json: expected a JSON object, got a list"):
        RunSpec.from_dict([1], "a/provenance.json")
    with pytest.raises(RunSpecError, match=r"run spec from --spec: not JSON"):
        RunSpec.from_json('{"dataset": ', "--spec")


def test_both_base_run_forms_parse():
    d = _valid()
    read = {"method": "BCE", "dir": "results/runs/yeast/clean/BCE", "spec_sha256": "a" * 64}
    own = {"method": "BCE", "dir": None, "reason": "BCE is not run on yeast/clean in this configuration"}
    for entry in (read, own):
        spec = RunSpec.from_dict({**d, "base_run": entry}, "--spec")
        assert spec.base_run == entry and spec.to_dict()["base_run"] == entry


def test_the_train_job_refuses_a_bad_spec_before_reading_any_data(tmp_path):
    """``python -m cdgtmll.train --spec`` with a misspelt field: the error names ``--spec`` and the
    field (an unknown key used to be ignored, and the job trained without the setting)."""
    from cdgtmll import train

    d = _valid()
    d["hparam"] = d.pop("hparams")
    missing = tmp_path / "no-such.npz"
    argv = ["--data", str(missing), "--clean", str(missing), "--spec", json.dumps(d), "--outdir", str(tmp_path)]
    with pytest.raises(RunSpecError, match=r"run spec from --spec: unknown field 'hparam'"):
        train.main(argv)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({k: v for k, v in _valid().items() if k != "device"}))
    with pytest.raises(RunSpecError, match=rf"run spec from --spec @{spec_file}: missing field 'device'"):
        train.main([*argv[:5], f"@{spec_file}", *argv[6:]])
