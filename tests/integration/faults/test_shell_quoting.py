"""Config values reach jobs as data, never as shell syntax: a custom dataset whose display name
and notes hold quotes, ``$``, a backtick and a newline goes through the rules unchanged (pasted inside '...' in a shell
command, its JSON would break it). The name is not data: prepare_dataset is
not given it (cdgtmll.data.registry.data_config); the tables job, which prints it, is."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from cdgtmll.data.processed import ProcessedData
from tests.integration.faults.test_data_faults import TOY, _arff
from tests.support.workflow import workflow_only

pytestmark = pytest.mark.slow

NASTY = "Tom's \"copy\" of $HOME `touch pwned` $(touch pwned2)\nsecond line; rm -rf x"


def test_quotes_dollar_backtick_newline_in_a_display_name_stay_data(tmp_path):
    mirror = tmp_path / "mirror"
    _arff(mirror / "toy" / "toy-train.arff", 200, 0)
    _arff(mirror / "toy" / "toy-test.arff", 40, 1)
    repo, env = workflow_only(tmp_path / "repo", mirror)
    cfg = {
        "name": "quoting",
        "data": {"mirror": None, "allow_download": False,
                 "custom": {"toy": dict(TOY, display_name=NASTY, notes=NASTY)}},
        "experiments": {"datasets": ["toy"], "methods": ["BR-LogReg"], "seeds": [0], "r_variants": False},
        "r_variants": {"severities": {}},
        "training": {"default": {"epochs": 1}},
        "methods": {"BR-LogReg": {"C": 1.0}},
    }
    (repo / "config" / "quoting.yaml").write_text(yaml.safe_dump(cfg))
    target = "results/tables/table1_configured.csv"
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "config/quoting.yaml",
                        "--", target], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    header = pd.read_csv(repo / target).columns
    assert f"{NASTY} mAP mean" in header and f"{NASTY} Rare-F1 mean" in header, list(header)
    meta = ProcessedData.load(repo / "results/data/toy/processed.npz").meta
    assert "Tom's" not in json.dumps(meta, default=str)
    assert not (repo / "pwned").exists() and not (repo / "pwned2").exists()
