"""End to end on an image dataset fine-tuned end to end: VOC2007 in the official devkit layout
(the ``voc_mirror`` fixture, conftest.py) -> R-variant / occlusion variant on the row ids ->
ResNet-50 fine-tuned end to end (random init, tiny images) -> evaluate -> tables and the
occlusion robustness figure; the audit re-checks the images behind a fine-tuned cell."""

import csv
import json

import numpy as np
import pytest
import yaml

from tests.support.workflow import copy_repo, run_audit, run_snakemake, snakemake_env

pytestmark = pytest.mark.slow

FINETUNE = {
    "name": "voc-finetune-tiny",
    "data": {"mirror": None, "allow_download": False},
    # CD-GTMLL in Table 1 and in the occlusion study: its clean run is shared (trained once), so
    # two fine-tuning jobs (clean, O0.30-s0) instead of three
    "experiments": {"datasets": ["voc2007"], "methods": ["CD-GTMLL", "BR-LogReg"], "seeds": [0]},
    "r_variants": {"sampling_seeds": [0], "severities": {}},
    "training": {"default": {"epochs": 1}, "voc2007": {"backbone": "resnet50", "epochs": 1, "batch_size": 256}},
    "image_backbone": {"mode": "finetune", "pretrained": False, "image_size": 32, "batch_size": 256, "workers": 0},
    "studies": {"occlusion": {"dataset": "voc2007", "levels": [0.3], "methods": ["CD-GTMLL"]}},
    "methods": {},
}


def test_voc_finetuned_end_to_end_with_occlusion(tmp_path, voc_mirror):
    repo = copy_repo(tmp_path / "repo")
    (repo / "config/voc.yaml").write_text(yaml.safe_dump(FINETUNE))
    res = run_snakemake(repo, snakemake_env(voc_mirror), "--cores", "2", "all", "--configfile", "config/voc.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    assert not (repo / "results/data/voc2007/features.npz").exists()  # nothing frozen was extracted
    occ = json.loads((repo / "results/data/voc2007/variants/O0.30-s0.json").read_text())
    assert occ["gamma"] == 0.3 and occ["n_occluded_images"] + occ["n_clean_images"] == 9963
    for variant in ("clean", "O0.30-s0"):
        prov = json.loads((repo / f"results/runs/voc2007/{variant}/CD-GTMLL/seed0/provenance.json").read_text())
        assert prov["backbone"]["frozen"] is False and prov["backbone"]["weights_sha256"] == "random init"
        assert prov["config"]["image_backbone"]["mode"] == "finetune"
        log = list(csv.DictReader(open(repo / f"results/runs/voc2007/{variant}/CD-GTMLL/seed0/train_log.csv")))
        assert len(log) == 1 and np.isfinite(float(log[0]["loss"]))
    # BR-LogReg needs feature vectors: not scheduled, and the table says why
    assert not (repo / "results/runs/voc2007/clean/BR-LogReg").exists()
    t1 = (repo / "results/tables/table1_standard.md").read_text()
    assert "BR-LogReg needs feature vectors" in t1
    assert "Pascal VOC: ResNet-50 fine-tuned end to end." in t1 and "ResNet-50 frozen" not in t1
    rows = {r["method"]: r for r in csv.DictReader(open(repo / "results/tables/table1_standard.csv"))}
    assert rows["CD-GTMLL"]["Pascal VOC mAP n"] == "1"
    assert sorted(p.parent.name for p in repo.glob("results/runs/voc2007/*/*")) == ["O0.30-s0", "clean"]
    fig = list(csv.DictReader(open(repo / "figures/robustness_occlusion.csv")))
    assert any(r.get("method") == "CD-GTMLL" for r in fig), fig[:3]
    # the audit re-checks the image listing behind a fine-tuned cell, and notices a changed image
    env = snakemake_env(voc_mirror)
    ok = run_audit(repo, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Pascal VOC mAP")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok       images: 9963 under" in ok.stdout and "fine-tuned end to end" in ok.stdout
    img = voc_mirror / "voc2007" / "JPEGImages" / "000005.jpg"
    original = img.read_bytes()
    try:
        img.write_bytes(original + b"\0")
        bad = run_audit(repo, env, "results/tables/table1_standard.md", "--cell", "CD-GTMLL", "Pascal VOC mAP")
        assert bad.returncode == 1 and "MODIFIED images under" in bad.stdout + bad.stderr
    finally:
        img.write_bytes(original)  # the module's mirror fixture
