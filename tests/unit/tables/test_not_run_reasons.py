"""The tables' ``n.r.`` footnotes say why a column or row is missing: a dataset not in the
profile's experiments.datasets (with the shipped profiles that have it and whether its data can
be had here, from the dataset registry), a row of the paper's table not in the profile's
methods (with the profiles that have it), a severity not configured, or configured but not run;
a configured method that cannot run keeps its ``not run: <reason>`` (``†``) footnote."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cdgtmll.data import registry
from cdgtmll.tables import build
from cdgtmll.tables.collect import METRICS

QUICK = ("BR-LogReg", "BCE", "CD-GTMLL")


def _runs(root, variants=("clean", "R0.40-s0"), methods=QUICK, dataset="yeast"):
    paths = []
    for variant in variants:
        for i, method in enumerate(methods):
            for seed in (0, 1):
                d = root / dataset / variant / method / f"seed{seed}"
                d.mkdir(parents=True)
                block = {m: 0.4 + 0.05 * i + 0.01 * seed for m in METRICS}
                (d / "metrics.json").write_text(json.dumps({"global@0.5": block, "adaptive": block}))
                paths.append(str(d / "metrics.json"))
    return paths


def _profiles(tmp_path):
    """Two shipped-profile files: 'big' runs VOC, Mediamill and the XMC set with every Table-1
    row; 'small' runs Yeast with three rows."""
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "big.yaml").write_text(
        "name: big\nexperiments:\n  datasets: [voc2007, yeast, mediamill, eurlex-4k]\n"
        "  methods: [BCE, PE, SRB, CD-GTMLL]\n  r_variants: true\n"
        "r_variants:\n  severities: {yeast: [0.4, 0.5], mediamill: [0.4, 0.5]}\n")
    (cfg / "small.yaml").write_text(
        "name: small\nexperiments:\n  datasets: [yeast]\n  methods: [BR-LogReg, BCE, CD-GTMLL]\n"
        "  r_variants: false\nr_variants:\n  severities: {yeast: [0.4]}\n")
    (cfg / "not-a-profile.yaml").write_text("just: a mapping\n")
    return cfg


def _notes(md: str) -> list[str]:
    return [line.split(". ", 1)[1] for line in md.splitlines() if line[:1].isdigit() and ". " in line]


def test_shipped_profiles_are_read_from_the_config_folder(tmp_path):
    from cdgtmll.tables.footnotes import shipped_profiles

    got = {p.name: p for p in shipped_profiles(_profiles(tmp_path))}
    assert set(got) == {"big", "small"}  # a file without an experiments block is no profile
    assert got["big"].datasets == ("voc2007", "yeast", "mediamill", "eurlex-4k")
    assert got["big"].path == "config/big.yaml" and got["big"].severities["yeast"] == (0.4, 0.5)
    assert got["small"].severities == {}  # experiments.r_variants: false


def test_nr_footnotes_name_the_reason_and_the_profiles(tmp_path, monkeypatch):
    """Quick-like run (Yeast only, three rows, profile 'small'): every n.r. column and the paper's
    rows left out carry their reason and the profiles that have them."""
    out = tmp_path / "tables"
    build.main(["--metrics", *_runs(tmp_path / "runs"), "--methods", *QUICK, "XR-Linear", "--out", str(out),
                "--datasets", "yeast=Yeast", "--severities", "yeast=0.4", "--profile", "small",
                "--profile-file", "config/small.yaml", "--profiles-dir", str(_profiles(tmp_path)),
                "--not-run", "yeast|XR-Linear|needs libpecos"])
    t1 = _notes((out / "table1_standard.md").read_text())
    # the summary line is kept
    assert "n.r. = not run in this configuration: COCO, Mediamill, Pascal VOC. No value is copied from the paper." in t1
    voc = next(n for n in t1 if n.startswith("n.r. Pascal VOC:"))
    assert "not in experiments.datasets of this profile (small)" in voc
    assert "in experiments.datasets of profile big (config/big.yaml)" in voc
    assert "data labels, images: by download from its official URLs or from a dataset mirror" in voc
    coco = next(n for n in t1 if n.startswith("n.r. COCO:"))
    assert "in experiments.datasets of no shipped profile (config/*.yaml)" in coco
    assert "data annotations, images: by download from its official URLs or from a dataset mirror" in coco
    mm = next(n for n in t1 if n.startswith("n.r. Mediamill:"))
    assert "profile big (config/big.yaml)" in mm and "no download URL" in mm
    # (b) the paper's rows not in the profile's methods, with the profiles that run them
    rows = next(n for n in t1 if n.startswith("n.r. rows of the paper's Table 1, not shown"))
    assert "not in experiments.methods of this profile (small)" in rows
    assert "PE, SRB (in profile big (config/big.yaml))" in rows
    assert "DBL, LSFA" in rows and "(in no shipped profile (config/*.yaml))" in rows
    # (c) a configured method that cannot run keeps its reason
    assert "† XR-Linear: not run: needs libpecos" in t1
    # Table 3: notes grouped by reason (Eurlex-4K is in profile big, the other two in none)
    t3 = _notes((out / "table3_xmc.md").read_text())
    assert any(n.startswith("n.r. Eurlex-4K: not in experiments.datasets of this profile (small); in "
                            "experiments.datasets of profile big (config/big.yaml); data ")
               for n in t3), t3
    assert any(n.startswith("n.r. Wiki10-31K, AmazonCat-13K: not in experiments.datasets of this profile (small); "
                            "in experiments.datasets of no shipped profile") for n in t3), t3
    # Table 2: Yeast ran at 0.40 only; 0.50 is another profile's severity
    t2 = _notes((out / "table2_rare.md").read_text())
    sev = next(n for n in t2 if n.startswith("n.r. in Yeast-R @50%"))
    assert "severity 0.50 not in r_variants.severities of this profile (small) (0.40)" in sev
    assert "configured in profile big (config/big.yaml)" in sev
    # the HTML pages carry the same footnotes
    assert "not in experiments.datasets of this profile (small)" in (out / "table1_standard.html").read_text()


def test_nr_footnotes_of_a_dataset_in_the_profile_without_runs(tmp_path, monkeypatch):
    """A configured dataset and a configured row without runs: in the profile, but no run given."""
    monkeypatch.delenv("CDGTMLL_DATA_MIRROR", raising=False)
    out = tmp_path / "tables"
    build.main(["--metrics", *_runs(tmp_path / "runs", variants=("clean",)), "--methods", *QUICK, "Focal",
                "--out", str(out), "--datasets", "yeast=Yeast", "mediamill=Mediamill",
                "--severities", "yeast=", "--severities", "mediamill=", "--profile", "small",
                "--profiles-dir", str(_profiles(tmp_path))])
    t1 = _notes((out / "table1_configured.md").read_text())
    mm = next(n for n in t1 if n.startswith("n.r. Mediamill:"))
    assert mm.startswith("n.r. Mediamill: in experiments.datasets of this profile (small), but no run of it")
    assert "no download URL" in mm
    assert any(n.startswith("n.r. for Focal in Yeast: in experiments.methods of this profile (small), but no run")
               for n in t1), t1
    t2 = _notes((out / "table2_configured.md").read_text())
    assert any("no R-variant configured for the dataset in this profile (small)" in n
               and "R-variants of Yeast-R, Mediamill-R configured in profile big (config/big.yaml)" in n
               for n in t2), t2


def test_the_shipped_profiles_are_named_by_default(tmp_path, monkeypatch):
    """Without --profiles-dir the checkout's config/*.yaml are read: VOC, COCO and the XMC sets
    are in config/paper.yaml only."""
    monkeypatch.delenv("CDGTMLL_DATA_MIRROR", raising=False)
    out = tmp_path / "tables"
    build.main(["--metrics", *_runs(tmp_path / "runs"), "--methods", *QUICK, "--out", str(out),
                "--datasets", "yeast=Yeast", "--severities", "yeast=0.4", "--profile", "quick"])
    notes = _notes((out / "table1_standard.md").read_text())
    coco = next((n for n in notes if n.startswith("n.r. ") and "COCO" in n.split(":")[0]), "")  # VOC may share it
    assert "not in experiments.datasets of this profile (quick); in experiments.datasets of profile" in coco, notes

    from cdgtmll.tables.footnotes import shipped_profiles

    names = {p.path: p for p in shipped_profiles()}
    assert "config/paper.yaml" in names and "coco2014" in names["config/paper.yaml"].datasets
    holders = [p.label for p in shipped_profiles() if "coco2014" in p.datasets]
    assert f"in experiments.datasets of profile{'s' if len(holders) > 1 else ''} {', '.join(holders)}; " \
           "data " in coco


@pytest.mark.parametrize("files, want", [
    ((registry.RemoteFile("a.txt", urls=("https://example.org/a.txt",), role="train"),),
     "data train: by download from its official URLs or from a dataset mirror"),
    ((registry.RemoteFile("a.txt", manual="by hand", role="train"),),
     "data train: no download URL: from a dataset mirror only, put there by hand"),
    ((registry.RemoteFile("l.txt", manual="by hand", role="labels"), registry.RemoteFile("b.txt", urls=("https://x/b",),
                                                                                        role="images-test")),
     "data labels: no download URL: from a dataset mirror only, put there by hand (docs/datasets.md); "
     "images: by download from its official URLs or from a dataset mirror"),
])
def test_data_availability_follows_what_the_registry_records(monkeypatch, files, want):
    """Where a dataset's data comes from is read off its registry entry (URLs, packaged copies,
    files by hand), not from a list of datasets, and not from what this machine's mirror holds:
    the same table on every machine."""
    from cdgtmll.tables.footnotes import data_availability

    spec = replace(registry.REGISTRY["enron"], name="fake", mirror_folder=None, files=files, packaged=())
    monkeypatch.setitem(registry.REGISTRY, "fake", spec)
    assert data_availability("fake").startswith(want)
    monkeypatch.setenv("CDGTMLL_DATA_MIRROR", "/nonexistent")
    assert data_availability("fake").startswith(want)
    assert "not in the dataset registry" in data_availability("no-such-dataset")


def test_data_availability_names_the_packaged_copy():
    """Yeast: the packaged copy the registry records (pinned in the lock)."""
    from cdgtmll.tables.footnotes import data_availability

    copy = registry.REGISTRY["yeast"].packaged[0]
    assert f"packaged copy {copy.distribution}=={copy.version}" in data_availability("yeast")
