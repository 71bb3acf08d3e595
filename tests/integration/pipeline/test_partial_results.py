"""Results as they arrive. The shipped quick profile (one seed, 30 epochs: scale
only) runs in a copy of the checkout under a real Snakemake with the shipped workflow profile
(its logger plugin starts :func:`cdgtmll.tables.partial.refresh_soon` after each evaluated run);
while it runs, ``results/partial/`` is polled. Partial tables must appear, saying ``k of n runs
done`` with ``k < n``, before the last training job ends; the finished run removes them; and
the final tables equal, byte for byte, the tables the same runs give when the table jobs run again
in a run that shows no partial ones (no evaluate job: no refresh)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.workflow import copy_repo, run_snakemake, snakemake_env

pytestmark = pytest.mark.slow

SCALE = {"experiments": {"seeds": [0]}, "training": {"default": {"epochs": 30}}}
CONFIGS = ["--configfile", "config/quick.yaml", "config/scale.yaml"]
BANNER = re.compile(r"partial: (\d+) of (\d+) runs done")
#: Table 1 (its own runs: Yeast's clean split) and metrics_full (every run of the profile)
WATCHED = {"table1": Path("results/partial/tables/table1_standard.md"),
           "metrics_full": Path("results/partial/tables/metrics_full.md")}


def _train_ends(repo: Path) -> dict[tuple[str, str], float]:
    """End time of each training job of the run, from Snakemake's output metadata (one record per
    output file; a job's records share its rule and job hash)."""
    ends: dict[tuple[str, str], float] = {}
    for f in (repo / ".snakemake/metadata").rglob("*"):
        if f.is_file():
            rec = json.loads(f.read_text())
            if rec.get("rule") in ("train", "train_more"):
                key = (rec["rule"], str(rec["job_hash"]))
                ends[key] = max(ends.get(key, 0.0), float(rec["endtime"]))
    return ends


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory, mirror):
    repo = copy_repo(tmp_path_factory.mktemp("partial") / "repo")
    (repo / "config/scale.yaml").write_text(yaml.safe_dump(SCALE))
    env = dict(snakemake_env(mirror), CDGTMLL_PARTIAL_INTERVAL_S="0")
    log = (repo.parent / "run.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "all", "--cores", "2", *CONFIGS], cwd=repo, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    seen: dict[str, list[tuple[float, int, int]]] = {name: [] for name in WATCHED}  # (time, k, n) of each seen
    deadline = time.time() + 900
    while proc.poll() is None and time.time() < deadline:
        for name, rel in WATCHED.items():
            try:
                m = BANNER.search((repo / rel).read_text())
            except OSError:
                m = None
            if m and (not seen[name] or (int(m[1]), int(m[2])) != seen[name][-1][1:]):
                seen[name].append((time.time(), int(m[1]), int(m[2])))
        time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    log.close()
    out = (repo.parent / "run.log").read_text()
    assert proc.returncode == 0, out[-4000:]
    return repo, env, seen, out


def test_partial_tables_say_k_of_n_before_the_last_training_job_ends(partial_run):
    repo, _, seen, out = partial_run
    last_train_end = max(_train_ends(repo).values())
    for name, views in seen.items():
        assert views, f"no partial {name} was seen while the run went on\n" + out[-3000:]
        t, k, n = views[0]
        assert 0 < k <= n and t < last_train_end, (name, views, last_train_end)
        # the counts only grow, and never past the runs planned
        assert [v[1] for v in views] == sorted(v[1] for v in views) and all(v[2] == n for v in views), views
    # Table 1's runs train first (priority): its first complete partial table comes while the other
    # runs still train, and every run's table (metrics_full) said so with runs pending (k < n, cells …)
    table1 = next(v for v in seen["table1"] if v[1] == v[2])
    assert table1[0] < last_train_end, (seen["table1"], last_train_end)
    t, k, n = seen["metrics_full"][0]
    assert k < n, seen["metrics_full"]
    # the progress line and the partial tables' trigger ran in the plugin of the shipped profile
    assert "steps done" in out and "left" in out
    # the finished run leaves only final tables
    assert not (repo / "results/partial/tables").exists()
    assert not (repo / "results/partial/plan.json").exists()


def test_final_tables_equal_a_run_that_showed_no_partial_ones(partial_run):
    repo, env, _, _ = partial_run
    tables = repo / "results/tables"
    first = {p.relative_to(tables): p.read_bytes() for p in sorted(tables.rglob("*")) if p.is_file()}
    res = run_snakemake(repo, env, "all", "--cores", "2", *CONFIGS, "--forcerun", "tables", "metrics_summary")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not (repo / "results/partial/tables").exists()  # no evaluate job ran: nothing partial was shown
    again = {p.relative_to(tables): p.read_bytes() for p in sorted(tables.rglob("*")) if p.is_file()}
    assert set(again) == set(first)
    differ = sorted(str(p) for p in first if first[p] != again[p])
    assert differ == [], differ
