"""What the project's Snakefile sets up when Snakemake parses it, read from the parsed workflow
in the Snakemake process itself (``snakemake --list-rules``: the Snakefile and its rule files
are parsed, no job runs): the scheduler workaround (cdgtmll/runtime/snakemake_timer.py), the
environment its jobs inherit (cdgtmll/runtime/openmp.py, cdgtmll/pipeline/env.py), the wildcard constraints of the checked
name patterns (cdgtmll/config/names.py), the code identity every package command's rule holds
as a param (cdgtmll/lineage/code.py), and the training rules' command lines. That a real job gets
the environment is checked on the tiny pipeline's provenance (test_pipeline_e2e.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from cdgtmll.config.names import DATASET_WILDCARD, METHOD_WILDCARD
from cdgtmll.lineage.code import identity
from cdgtmll.pipeline.env import GPUS_BY_REQUEST_ENV, JOB_GPUS_ENV
from tests.support.workflow import succeeded, workflow_only

pytestmark = pytest.mark.slow

# Runs Snakemake's command line in this process and, when it exits, prints what the parse left:
# whether the scheduler is patched, the environment, every rule's shell command, params, resources
# and outputs (with whether each output pattern produces the sample paths the test sends).
PROBE = r"""
import atexit, json, os, sys
from snakemake.cli import main
from snakemake.scheduling.job_scheduler import JobScheduler
from snakemake.workflow import Workflow
from cdgtmll.runtime.snakemake_timer import _schedule_reevaluation_once

probe = json.loads(sys.argv[1])
if probe["changed_scheduler"]:  # a Snakemake whose scheduler is not the source the workaround was written for
    JobScheduler._schedule_reevalutation = lambda self: None
seen, init = [], Workflow.__init__
def keep(self, *args, **kwargs):
    init(self, *args, **kwargs)
    seen.append(self)
Workflow.__init__ = keep

def report():
    rules = {}
    for r in seen[0].rules:
        outs = []
        for o in r.output:
            names = sorted(o.get_wildcard_names())
            fills = probe["fills"]
            if set(names) <= set(fills) and {"dataset", "method"} & set(names):
                made = {}
                for key in ("dataset", "method"):
                    for value in probe["names"][key] + probe["names"]["hostile"] if key in names else []:
                        path = o.apply_wildcards({**fills, key: value})
                        made[f"{key}={value}"] = r.is_producer(path)
                outs.append(made)
        params = {k: (v if isinstance(v, str) else "<callable>" if callable(v) else repr(v)) for k, v in r.params.items()}
        rules[r.name] = {"shell": r.shellcmd, "params": params, "gpu": "gpu" in r.resources, "outputs": outs}
    print("PROBE=" + json.dumps({
        "patched": JobScheduler._schedule_reevalutation is _schedule_reevaluation_once,
        "env": {k: os.environ.get(k) for k in probe["env"]},
        "constraints": {k: str(v) for k, v in seen[0].modifier.wildcard_constraints.items()},
        "rules": rules}))
atexit.register(report)
sys.argv[1:] = ["--list-rules", "--configfile", "config/config.yaml"]
main()
"""
VALID = {"dataset": ["yeast", "my_data-2"], "method": ["BCE", "CD-GTMLL@alpha=0.7,n_players=5"]}
HOSTILE = ["a b", "..", "Bad/Alias", "ye\nast", "a..b"]
FILLS = {"dataset": "yeast", "method": "BCE", "variant": "clean", "seed": "0"}


def _probe(root, env, changed_scheduler=False) -> tuple[dict, str]:
    probe = {"changed_scheduler": changed_scheduler, "fills": FILLS, "names": {**VALID, "hostile": HOSTILE},
             "env": ["OMP_WAIT_POLICY", GPUS_BY_REQUEST_ENV]}
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(probe)], cwd=root, env=env, capture_output=True,
                         text=True, timeout=600)
    out = succeeded(res)
    (line,) = [x for x in out.splitlines() if x.startswith("PROBE=")]
    return json.loads(line[len("PROBE="):]), out


@pytest.fixture(scope="module")
def parsed(tmp_path_factory, mirror):
    root, env = workflow_only(tmp_path_factory.mktemp("snakefile") / "wf", mirror, configs=True)
    env.pop("OMP_WAIT_POLICY", None)  # as a user's shell
    return _probe(root, env), (root, env)


def test_the_snakefile_applies_the_scheduler_workaround_and_says_so_when_it_cannot(parsed):
    (probe, out), (root, env) = parsed
    assert probe["patched"] is True
    assert "not the version cdgtmll's timer workaround was written for" not in out
    changed, out = _probe(root, env, changed_scheduler=True)
    assert changed["patched"] is False
    assert "Snakemake's scheduler is not the version cdgtmll's timer workaround was written for: left as it is." in out


def test_jobs_inherit_passive_openmp_waits_and_whether_gpus_come_by_request(parsed):
    (probe, _), _ = parsed
    # the shipped profile is a local run: GPUs do not come by request
    assert probe["env"] == {"OMP_WAIT_POLICY": "PASSIVE", GPUS_BY_REQUEST_ENV: "0"}


def test_the_training_rules_give_their_job_its_gpu_and_stream_progress_to_the_terminal(parsed):
    """Each rule that starts ``python -m cdgtmll.train`` has a gpu resource and puts it in the
    job's environment; the per-seed lines go to stdout (Snakemake's terminal), the rest to the log."""
    (probe, _), _ = parsed
    train = {name: r for name, r in probe["rules"].items() if "python -m cdgtmll.train " in (r["shell"] or "")}
    assert {"train", "train_more"} <= set(train)
    for name, r in train.items():
        assert r["gpu"] and f"{JOB_GPUS_ENV}={{resources.gpu}} " in r["shell"], name
        assert r["shell"].rstrip().endswith("--progress 2> {log}"), name


def test_the_wildcards_are_held_to_the_checked_name_patterns(parsed):
    """The global constraints are the config check's patterns; every output pattern with a dataset
    or method wildcard makes the paths of accepted names and none of a name that would break a path."""
    (probe, _), _ = parsed
    assert probe["constraints"]["dataset"] == DATASET_WILDCARD and probe["constraints"]["method"] == METHOD_WILDCARD
    checked = 0
    for made in (o for r in probe["rules"].values() for o in r["outputs"]):
        for wildcard in ("dataset", "method"):
            valid = {made[f"{wildcard}={n}"] for n in VALID[wildcard] if f"{wildcard}={n}" in made}
            if valid != {True}:  # a rule whose other wildcards take other values than the sample's
                assert valid <= {False}, made
                continue
            checked += 1
            assert not any(made[f"{wildcard}={n}"] for n in HOSTILE), made
    assert checked >= 5


def test_every_rule_that_runs_package_code_holds_its_code_identity(parsed):
    """A rule whose command runs ``python -m cdgtmll...`` has the sha256 of that code as its
    ``code`` param (a training rule: a function of the job, its method's modules added), so an
    edit re-runs exactly the jobs whose code changed."""
    (probe, _), _ = parsed
    runs = {name: list(dict.fromkeys(re.findall(r"python -m (cdgtmll[\w.]*)", r["shell"] or "")))
            for name, r in probe["rules"].items()}
    runs = {name: mods for name, mods in runs.items() if mods}
    assert len(runs) >= 5
    for name, mods in runs.items():
        code = probe["rules"][name]["params"].get("code")
        if mods == ["cdgtmll.train"]:
            assert code == "<callable>", name
        else:
            assert code == identity(mods)["sha256"], (name, mods)
