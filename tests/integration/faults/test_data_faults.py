"""Fault catalogue, data side: no stale data, no silent bad input.

* an edited source file (custom dataset / mirror file) is re-copied, re-prepared and logged;
  it is an input of the prepare rule, so Snakemake re-runs everything downstream;
* a broken custom ARFF fails with an error naming the file; the fixed file is then used;
* ``cdgtmll audit`` re-hashes the raw copies behind a run;
* acquisition says where a file really came from (packaged fallback, downloads disabled);
* MULAN ARFF label names with escapes inside quotes match their XML names;

all on small files in the exact MULAN format, generated here.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np
import pytest
import yaml

from cdgtmll.data import acquire
from cdgtmll.data.acquire import ChecksumError, fetch, locate_packaged
from cdgtmll.data.prepare import main as prepare_main
from cdgtmll.data.prepare import prepare
from cdgtmll.data.processed import ProcessedData
from cdgtmll.data.registry import RIVER_YEAST, get_spec, spec_from_config
from tests.support.specs import clean_spec
from tests.support.workflow import workflow_only

# the catalogue's UserWarnings (unverified files, labels without positives) are expected
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TOY = {"format": "mulan-arff", "train": "toy-train.arff", "test": "toy-test.arff", "n_labels": 3}


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _arff(path: Path, n: int, seed: int, labels=("l1", "l2", "l3"), d: int = 4, extra: str = "") -> Path:
    """A small dense MULAN ARFF: ``d`` numeric features, then the ``{0,1}`` labels
    (``labels`` are written as given, i.e. already quoted/escaped where needed)."""
    rng = np.random.default_rng(seed)
    lines = [f"@relation 'toy: -C -{len(labels)}'", ""]
    lines += [f"@attribute f{j} numeric" for j in range(d)]
    lines += [f"@attribute {lab} {{0,1}}" for lab in labels]
    lines += ["", "@data"]
    for i in range(n):
        y = (rng.random(len(labels)) < 0.4).astype(int)
        y[i % len(labels)] = 1
        lines.append(",".join(f"{v:.4f}" for v in rng.normal(size=d)) + "," + ",".join(map(str, y)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def _toy_mirror(root: Path, name: str = "toy") -> Path:
    mirror = root / "mirror"
    _arff(mirror / name / "toy-train.arff", 40, 0)
    _arff(mirror / name / "toy-test.arff", 20, 1)
    return mirror


def _flip_last_label(p: Path) -> None:
    lines = p.read_text().splitlines()
    lines[-1] = lines[-1][:-1] + ("0" if lines[-1].endswith("1") else "1")
    p.write_text("\n".join(lines) + "\n")


def _cli(tmp_path: Path, mirror: Path, cfg: dict, capsys, name: str = "toy", out: str = "toy.npz") -> tuple[int, str]:
    rc = prepare_main(["--dataset", name, "--raw-dir", str(tmp_path / "raw"), "--out", str(tmp_path / out),
                       "--mirror", str(mirror), "--no-download", "--dataset-config", json.dumps(cfg),
                       "--min-split-rows", "1"])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


# --------------------------------------------------------------------------- 1. changed inputs
@pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")
def test_broken_custom_arff_fails_clearly_then_the_fixed_file_is_used(tmp_path, capsys, no_env_mirror):
    mirror = _toy_mirror(tmp_path)
    train = mirror / "toy" / "toy-train.arff"
    good = train.read_text()
    train.write_text(good + "0.1,0.2,0.3\n")  # a row with 3 of 7 values
    rc, log = _cli(tmp_path, mirror, TOY, capsys)
    assert rc == 2
    assert "malformed ARFF at line 52" in log and "toy-train.arff" in log
    assert str(train) in log  # the error names the source the raw copy came from
    assert not (tmp_path / "toy.npz").exists()  # nothing written

    train.write_text(good)  # fixed; the broken raw copy is still in raw/toy/
    rc, log = _cli(tmp_path, mirror, TOY, capsys)
    assert rc == 0, log
    assert f"source {train} changed" in log and "re-copying" in log
    d = ProcessedData.load(tmp_path / "toy.npz")
    rec = {f["file"]: f for f in d.meta["source_files"]}["toy-train.arff"]
    assert rec["sha256"] == _sha(train) == _sha(tmp_path / "raw" / "toy" / "toy-train.arff")
    assert d.X.shape == (60, 4) and d.n_labels == 3


@pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")
def test_edited_source_without_sha256_is_recopied_and_logged(tmp_path, capsys, no_env_mirror):
    mirror = _toy_mirror(tmp_path)
    train = mirror / "toy" / "toy-train.arff"
    rc, log = _cli(tmp_path, mirror, TOY, capsys)
    assert rc == 0, log
    before = ProcessedData.load(tmp_path / "toy.npz")
    old = _sha(train)
    _flip_last_label(train)  # an edit Snakemake's old DAG and the old cache both ignored
    new = _sha(train)
    rc, log = _cli(tmp_path, mirror, TOY, capsys)
    assert rc == 0, log
    assert f"source {train} changed: sha256 {old} -> {new}; re-copying" in log
    after = ProcessedData.load(tmp_path / "toy.npz")
    assert not np.array_equal(before.Y, after.Y)
    assert np.array_equal(after.Y[39], 1 - before.Y[39]) or (after.Y[39] != before.Y[39]).sum() == 1
    assert {f["file"]: f["sha256"] for f in after.meta["source_files"]}["toy-train.arff"] == new
    # unchanged source: the cached copy is reused (and says so), nothing re-copied
    rc, log = _cli(tmp_path, mirror, TOY, capsys)
    assert rc == 0 and "re-copying" not in log
    assert {f["source"] for f in ProcessedData.load(tmp_path / "toy.npz").meta["source_files"]} == {"cached"}


def test_edited_source_with_known_sha256_fails_loudly(tmp_path, no_env_mirror):
    mirror = _toy_mirror(tmp_path)
    train = mirror / "toy" / "toy-train.arff"
    cfg = dict(TOY, sha256={"train": _sha(train), "test": _sha(mirror / "toy" / "toy-test.arff")})
    spec = spec_from_config("toy", cfg)
    res = fetch(spec, "train", tmp_path / "raw", mirror=mirror, allow_download=False)
    assert res.source == "mirror" and res.verified
    _flip_last_label(train)
    with pytest.raises(ChecksumError, match=f"from mirror {train}: sha256 mismatch"):
        fetch(spec, "train", tmp_path / "raw", mirror=mirror, allow_download=False)
    assert _sha(tmp_path / "raw" / "toy-train.arff") == cfg["sha256"]["train"]  # cache intact


def test_prepare_rule_inputs_are_the_local_source_files(tmp_path, no_env_mirror):
    from cdgtmll.data.acquire import local_inputs

    mirror = _toy_mirror(tmp_path)
    spec = spec_from_config("toy", TOY)
    assert local_inputs(spec, mirror, True) == [str(mirror / "toy" / "toy-train.arff"),
                                                str(mirror / "toy" / "toy-test.arff")]
    # a file:// URL is a local file: an input (when downloads are allowed, as acquisition uses it)
    (mirror / "toy" / "toy-test.arff").rename(tmp_path / "elsewhere.arff")
    cfg = dict(TOY, urls={"test": [(tmp_path / "elsewhere.arff").as_uri()]})
    assert local_inputs(spec_from_config("toy", cfg), mirror, True) == [
        str(mirror / "toy" / "toy-train.arff"), str(tmp_path / "elsewhere.arff")]
    assert local_inputs(spec_from_config("toy", cfg), mirror, False) == [str(mirror / "toy" / "toy-train.arff")]
    # absent mirror: a remote-only dataset has no inputs; Yeast's packaged copy (pinned sha256) is none
    assert local_inputs(get_spec("enron"), tmp_path / "nowhere", True) == []
    assert local_inputs(get_spec("yeast"), None, True) == []


SMK_CONFIG = {
    "name": "faults",
    "data": {"mirror": None, "allow_download": False, "custom": {"toy": TOY}},
    "experiments": {"datasets": ["toy"], "methods": ["BR-LogReg"], "seeds": [0], "r_variants": False},
    "r_variants": {"severities": {}},
    "training": {"default": {"epochs": 1}},
    "methods": {"BR-LogReg": {"C": 1.0}},
}


@pytest.mark.slow
def test_snakemake_reruns_prepare_when_a_source_file_changes(tmp_path):
    """Through the rules: an edited mirror file changes prepare_dataset's data identity (the
    sha256 of its unpinned sources, a param: cdgtmll.data.acquire.content_identity), so prepare
    and everything after it re-run; a file copied again with the same bytes does not, whatever
    Snakemake's checksum limit (as after `cp`, `dvc pull` or a re-made mirror: when the sources
    were inputs by path, Snakemake's default 1 MB limit re-ran the whole DAG)."""
    mirror = _toy_mirror(tmp_path)
    train = mirror / "toy" / "toy-train.arff"
    train.write_text(train.read_text() + "0.1,0.2,0.3\n")
    repo, env = workflow_only(tmp_path / "repo", mirror)
    (repo / "config" / "faults.yaml").write_text(yaml.safe_dump(SMK_CONFIG))
    target = "results/data/toy/processed.npz"

    def smk(*args):
        return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile",
                               "config/faults.yaml", *args, "--", target],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=300)

    r = smk()
    log = (repo / "logs/prepare/toy.log").read_text()
    assert r.returncode != 0 and "malformed ARFF at line 52" in log and str(train) in log
    assert not (repo / target).exists()
    _arff(train, 30000, 0)  # good, and above Snakemake's default --max-checksum-file-size (1 MB)
    assert train.stat().st_size > 1_000_000
    r = smk()
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Using workflow specific profile profiles/default" in r.stdout + r.stderr
    rec = {f["file"]: f for f in ProcessedData.load(repo / target).meta["source_files"]}
    assert rec["toy-train.arff"]["sha256"] == _sha(train)
    r = smk("-n")
    assert "Nothing to be done" in r.stdout + r.stderr  # the source inputs cause no spurious re-run

    data = train.read_bytes()
    train.unlink()
    train.write_bytes(data)  # copied again: the same bytes, newer than the outputs
    t = (repo / target).stat().st_mtime + 2
    os.utime(train, (t, t))
    r = smk("-n")
    assert "Nothing to be done" in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]
    r = smk("-n", "--max-checksum-file-size", "1MB")  # Snakemake's default limit: the data is known by content
    assert "Nothing to be done" in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]

    old = _sha(train)
    _flip_last_label(train)
    os.utime(train, (t + 2, t + 2))
    r = smk("-n")
    out = r.stdout + r.stderr
    assert "prepare_dataset" in out and "params have changed since last execution" in out.lower(), out[-2000:]
    r = smk()
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    log = (repo / "logs/prepare/toy.log").read_text()
    assert f"source {train} changed: sha256 {old} -> {_sha(train)}; re-copying" in log
    rec = {f["file"]: f for f in ProcessedData.load(repo / target).meta["source_files"]}
    assert rec["toy-train.arff"]["sha256"] == _sha(train)


# --------------------------------------------------------------------------- 2. audit re-hashes raw
def _audited_run(tmp_path: Path, data_path: Path, data_sources: list) -> Path:
    """A figure whose lineage is one run trained on ``data_path``; returns the figure."""
    from cdgtmll.io import config_hash, sha256_file, write_json
    from cdgtmll.lineage.code import identity

    run = tmp_path / "runs" / "toy" / "clean" / "M" / "seed0"
    run.mkdir(parents=True)
    pred = run / "predictions.npz"
    np.savez(pred, test=np.zeros((20, 3)))
    spec = clean_spec("toy", "M").to_dict()
    write_json(run / "provenance.json", {
        "config": spec, "config_sha256": config_hash(spec), "seed": 0,
        "code": identity(["cdgtmll.train"]),  # recorded as a training job records it (cdgtmll.lineage.code)
        "inputs": {"data": {"path": str(data_path), "sha256": sha256_file(data_path)}},
        "data_sources": data_sources,
    })
    fig = tmp_path / "fig.pdf"
    fig.write_bytes(b"%PDF")
    write_json(tmp_path / "fig.sources.json", {"runs": {"M": [{"path": str(pred), "sha256": sha256_file(pred)}]}})
    return fig


@pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")
def test_audit_rehashes_raw_files(tmp_path, no_env_mirror):
    from cdgtmll.lineage.audit import audit

    mirror = _toy_mirror(tmp_path)
    raw = tmp_path / "raw"
    data_path = tmp_path / "data" / "toy.npz"
    d = prepare("toy", raw, data_path, mirror=mirror, allow_download=False, dataset_config=TOY, min_split_rows=1)
    fig = _audited_run(tmp_path, data_path, d.meta["source_files"])
    rep = audit(fig)
    assert rep.problems == [], rep.lines
    raw_train = raw / "toy" / "toy-train.arff"
    assert any(str(raw_train) in line and line.lstrip().startswith("ok") for line in rep.lines), rep.lines
    recorded = _sha(raw_train)
    with open(raw_train, "ab") as fh:
        fh.write(b"\n")
    rep = audit(fig)
    assert len(rep.problems) == 1, rep.lines
    assert str(raw_train) in rep.problems[0] and "MODIFIED" in rep.problems[0]
    assert recorded in rep.problems[0] and _sha(raw_train) in rep.problems[0]
    assert rep.lines[-1].endswith("1 problem(s)")


@pytest.mark.filterwarnings("ignore::cdgtmll.data.acquire.UnverifiedWarning")
def test_audit_finds_raw_files_of_data_prepared_before_paths_were_recorded(tmp_path, monkeypatch, no_env_mirror):
    from cdgtmll.lineage.audit import audit

    monkeypatch.chdir(tmp_path)
    mirror = _toy_mirror(tmp_path)
    data_path = Path("results/data/toy/processed.npz")
    d = prepare("toy", "results/raw", data_path, mirror=mirror, allow_download=False, dataset_config=TOY, min_split_rows=1)
    sources = [{k: v for k, v in rec.items() if k != "path"} for rec in d.meta["source_files"]]
    fig = _audited_run(tmp_path, data_path, sources)
    assert audit(fig).problems == []
    (tmp_path / "results/raw/toy/toy-test.arff").unlink()
    problems = audit(fig).problems
    assert problems == ["MISSING raw file: results/raw/toy/toy-test.arff"]


def test_audit_checks_the_image_listing_behind_frozen_features(tmp_path):
    from cdgtmll.images.datasets import listing_sha256
    from cdgtmll.lineage.audit import audit

    root = tmp_path / "JPEGImages"
    root.mkdir()
    paths = [f"{i:06d}.jpg" for i in range(3)]
    for p in paths:
        (root / p).write_bytes(b"\xff\xd8 fake jpeg " + p.encode())
    feats = ProcessedData(
        name="img", X=np.zeros((3, 4), np.float32), Y=np.eye(3, dtype=np.uint8), label_names=["a", "b", "c"],
        splits={"train": np.array([0]), "val": np.array([1]), "test": np.array([2])},
        meta={"x_kind": "features", "backbone_frozen": True, "image_root": str(root), "image_paths": paths,
              "image_source": {"kind": "folder", "root": str(root), "listing_sha256": listing_sha256(root, paths)},
              "source_files": []},
    )
    feats.save(tmp_path / "features.npz")
    fig = _audited_run(tmp_path, tmp_path / "features.npz", [])
    rep = audit(fig)
    assert rep.problems == [] and any("ok       images: 3 under" in line for line in rep.lines), rep.lines
    with open(root / paths[1], "ab") as fh:
        fh.write(b"\0")
    rep = audit(fig)
    assert len(rep.problems) == 1 and f"MODIFIED images under {root}" in rep.problems[0]


# --------------------------------------------------------------------------- 3. acquisition messages
def test_packaged_fallback_from_a_wrong_mirror_is_reported(tmp_path, capsys, no_env_mirror):
    if locate_packaged(RIVER_YEAST) is None:
        pytest.skip("river==0.26.1 not installed: no packaged yeast.csv.gz")
    wrong = tmp_path / "not-the-mirror"
    rc = prepare_main(["--dataset", "yeast", "--raw-dir", str(tmp_path / "raw"), "--out", str(tmp_path / "y.npz"),
                       "--mirror", str(wrong), "--no-download"])
    out = capsys.readouterr()
    log = out.out + out.err
    assert rc == 0, log
    assert (f"mirror {wrong}: yeast/yeast-train.arff not found; using the packaged copy from "
            f"river=={RIVER_YEAST.version}") in log
    assert f"(mirror {wrong})" not in log  # does not claim the mirror it did not use
    assert "packaged" in log.strip().splitlines()[-1]
    # the cached packaged copy is reused on the next run, and the log still says why
    rc = prepare_main(["--dataset", "yeast", "--raw-dir", str(tmp_path / "raw"), "--out", str(tmp_path / "y.npz"),
                       "--mirror", str(wrong), "--no-download"])
    log = "".join(capsys.readouterr())
    assert rc == 0 and f"mirror {wrong}: yeast/yeast-train.arff not found" in log and "packaged" in log


def test_downloads_disabled_said_only_when_disabled(tmp_path, no_env_mirror):
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}/toy-train.arff"
    s.close()
    spec = spec_from_config("toy", dict(TOY, urls={"train": [dead]}))
    with pytest.raises(acquire.AcquisitionError) as off:
        fetch(spec, "train", tmp_path / "raw", mirror=tmp_path / "m", allow_download=False)
    assert f"url {dead}: skipped (downloads disabled)" in str(off.value)
    with pytest.raises(acquire.AcquisitionError) as on:
        fetch(spec, "train", tmp_path / "raw", mirror=tmp_path / "m", allow_download=True, timeout=5)
    assert "downloads disabled" not in str(on.value) and f"url {dead}: " in str(on.value)


# --------------------------------------------------------------------------- 4. MULAN names
# (ARFF spelling, XML name): quoted names use backslash escapes (liac-arff's rules);
# unquoted names are taken literally, like Delicious' TAG_m\'usica in both of its files
ESCAPED = [
    (r"'O\'Brien'", "O'Brien"),
    (r'"say \"hi\""', 'say "hi"'),
    (r"'back\\slash'", "back\\slash"),
    (r"'tab\there 50\%'", "tab\there 50%"),
    (r"TAG_m\'usica", r"TAG_m\'usica"),
]


def _mulan_pair(folder: Path, stem: str = "esc") -> None:
    labels = [a for a, _ in ESCAPED]
    _arff(folder / f"{stem}-train.arff", 30, 0, labels=labels)
    _arff(folder / f"{stem}-test.arff", 15, 1, labels=labels)
    xml = ['<?xml version="1.0" encoding="utf-8"?>', '<labels xmlns="http://mulan.sourceforge.net/labels">']
    xml += [f"<label name={quoteattr(n)}></label>" for _, n in ESCAPED]
    (folder / f"{stem}.xml").write_text("\n".join(xml + ["</labels>"]) + "\n", encoding="utf-8")


def test_escaped_label_names_match_the_xml(tmp_path, no_env_mirror):
    from cdgtmll.data.mulan import arff_label_names, read_mulan_arff, read_mulan_xml

    mirror = tmp_path / "mirror"
    _mulan_pair(mirror / "esc")
    names = read_mulan_xml(mirror / "esc" / "esc.xml")
    assert names == [n for _, n in ESCAPED]
    X, Y, _ = read_mulan_arff(mirror / "esc" / "esc-train.arff", names)
    assert X.shape == (30, 4) and Y.shape == (30, 5)
    assert arff_label_names(mirror / "esc" / "esc-train.arff", 5) == names
    cfg = {"format": "mulan-arff", "train": "esc-train.arff", "test": "esc-test.arff", "xml": "esc.xml"}
    with pytest.warns(acquire.UnverifiedWarning):
        d = prepare("esc", tmp_path / "raw", tmp_path / "esc.npz", mirror=mirror, allow_download=False,
                    dataset_config=cfg, min_split_rows=1)
    assert d.label_names == names and ProcessedData.load(tmp_path / "esc.npz").label_names == names


def test_unsupported_escape_in_a_quoted_name_is_a_clear_error(tmp_path):
    from cdgtmll.data.mulan import read_mulan_arff

    p = _arff(tmp_path / "bad.arff", 5, 0, labels=("a", r"'x\qy'"))
    with pytest.raises(ValueError) as ei:
        read_mulan_arff(p, 2)
    msg = str(ei.value)
    assert str(p) in msg and "line 8" in msg and r"'x\qy'" in msg and r"\q" in msg and "expected" in msg
