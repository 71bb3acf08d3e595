"""Config files as Snakemake reads them: the Snakefile reads its config files again with the
YAML 1.2 loader (:mod:`cdgtmll.config.yaml12`), so an unquoted ``1e-3`` is a number and a key
set twice is an error naming the file, the key and both lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT


def test_snakemake_reads_yaml12_floats_and_names_duplicate_keys(tmp_path, mirror):
    repo = tmp_path / "repo"
    repo.mkdir()
    for item in ("Snakefile", "workflow", "config", "environment.yml"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / item)
    quick = (repo / "config" / "quick.yaml").read_text()
    assert "lr_backbone: 2.0e-3," in quick
    (repo / "config" / "faults.yaml").write_text(quick.replace("lr_backbone: 2.0e-3,", "lr_backbone: 1e-3,"))
    lines = quick.splitlines()
    at = lines.index("  seeds: [0, 1, 2]")
    (repo / "config" / "dup.yaml").write_text("\n".join(lines[: at + 1] + ["  seeds: [0]"] + lines[at + 1 :]) + "\n")
    env = {
        **os.environ,
        "CDGTMLL_DATA_MIRROR": str(mirror),
        "PYTHONPATH": str(ROOT / "src"),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp/cdgtmll-cache"),
        "MPLCONFIGDIR": str(tmp_path / "mpl"),
    }

    def dry_run(configfile: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "snakemake", "-n", "--configfile", configfile, "--config", "name=faults", "--", "all"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    ok = dry_run("config/faults.yaml")  # YAML 1.1 read '1e-3' as a string: "is not of type 'number'"
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "This was a dry-run" in ok.stdout + ok.stderr
    dup = dry_run("config/dup.yaml")
    assert dup.returncode != 0
    assert (
        f"config/dup.yaml: config error at 'experiments.seeds': duplicate key 'seeds' at line {at + 2} (first set at line {at + 1})"
    ) in dup.stdout + dup.stderr, dup.stderr[-2000:]
