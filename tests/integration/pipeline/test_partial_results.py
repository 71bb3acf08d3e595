"""Issue 41, item 1: results as they arrive. The shipped quick profile (one seed, 30 epochs: scale
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
TABLE = Path("results/partial/tables/table1_standard.md")


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
    env = dict(snakemake_env(mirror), CDGTMLL_PARTIAL_MIN_INTERVAL_S="0")
    log = (repo.parent / "run.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "all", "--cores", "2", *CONFIGS], cwd=repo, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    seen: list[tuple[float, int, int]] = []  # (time, k, n) of each partial Table 1 seen
    deadline = time.time() + 900
    while proc.poll() is None and time.time() < deadline:
        try:
            m = BANNER.search((repo / TABLE).read_text())
        except OSError:
            m = None
        if m and (not seen or (int(m[1]), int(m[2])) != seen[-1][1:]):
            seen.append((time.time(), int(m[1]), int(m[2])))
        time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    log.close()
    out = (repo.parent / "run.log").read_text()
    assert proc.returncode == 0, out[-4000:]
    return repo, env, seen, out


def test_partial_tables_say_k_of_n_before_the_last_training_job_ends(partial_run):
    repo, _, seen, out = partial_run
    assert seen, "no partial Table 1 was seen while the run went on\n" + out[-3000:]
    # the run starts with a refresh (0 of n: every cell pending, resumed runs show what they have)
    t, k, n = next((s for s in seen if s[1] > 0), seen[-1])
    assert 0 < k < n, seen
    ends = sorted(_train_ends(repo).values())
    assert len(ends) > n  # Table 1's runs and Table 2's (R-variants): more training jobs than Table 1 has runs
    assert t < ends[-1], (t, ends)
    # the counts only grow, and never past the runs planned
    assert [s[1] for s in seen] == sorted(s[1] for s in seen) and all(s[2] == n for s in seen)
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
