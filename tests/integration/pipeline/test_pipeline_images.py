"""End to end on an image dataset: VOC2007 in the official devkit layout (the real label
files from the mirror, generated JPEGs: the ``voc_mirror`` fixture, conftest.py) through the
same Snakemake rules, frozen mode (random init, tiny images): prepare -> frozen ResNet-50
features -> R-variant -> train -> evaluate -> tables. Fine-tuning end to end:
test_pipeline_finetune.py (a file of its own, so that pytest-xdist runs the two on different
workers)."""

import csv
import json

import numpy as np
import pytest
import yaml

from tests.support.workflow import copy_repo, run_snakemake, snakemake_env

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "voc-tiny",
    "data": {"mirror": None, "allow_download": False},
    "experiments": {"datasets": ["voc2007"], "methods": ["BCE"], "seeds": [0]},
    "r_variants": {"sampling_seeds": [0], "severities": {"voc2007": [0.5]}},
    "training": {"default": {"epochs": 2},
                 "voc2007": {"backbone": "resnet50", "epochs": 2, "batch_size": 512, "hidden_dim": 64}},
    "image_backbone": {"mode": "frozen", "pretrained": False, "image_size": 32, "batch_size": 256},
    "methods": {},
}


def test_voc_through_the_rules(tmp_path, voc_mirror):
    img_mirror = voc_mirror
    repo = copy_repo(tmp_path / "repo")
    (repo / "config/voc.yaml").write_text(yaml.safe_dump(CONFIG))
    res = run_snakemake(repo, snakemake_env(img_mirror), "--cores", "2", "all", "--configfile", "config/voc.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    feats = np.load(repo / "results/data/voc2007/features.npz", allow_pickle=False)
    meta = json.loads(str(feats["meta"]))
    assert feats["X"].shape == (9963, 2048) and meta["backbone_frozen"] is True
    assert meta["backbone_weights_sha256"] == "random init" and meta["image_size"] == 32
    book = json.loads((repo / "results/data/voc2007/variants/R0.50-s0.json").read_text())
    assert len(book["tail_labels"]) == 4  # floor(0.2 * 20)
    m = json.loads((repo / "results/runs/voc2007/clean/BCE/seed0/metrics.json").read_text())
    assert len(m["tail_labels"]) == 4 and 0.0 <= m["adaptive"]["mAP"] <= 1.0
    rows = {r["method"]: r for r in csv.DictReader(open(repo / "results/tables/table1_standard.csv"))}
    assert rows["BCE"]["Pascal VOC mAP n"] == "1" and rows["BCE"]["Yeast Micro-F1 n"] == "0"
    t2 = {r["method"]: r for r in csv.DictReader(open(repo / "results/tables/table2_rare.csv"))}
    assert t2["BCE"]["Pascal VOC-R @50% n"] == "1"
    assert "Pascal VOC: ResNet-50 frozen" in (repo / "results/tables/table1_standard.md").read_text()
