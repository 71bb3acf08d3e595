"""Trace a table cell or a figure back to its inputs and re-verify every recorded hash.

``cdgtmll audit results/tables/table1_standard.md --cell CD-GTMLL "Yeast Rare-F1"``
``cdgtmll audit figures/pr_tail.pdf``

The chain, for each run behind the artifact::

    table/figure  --sources.json-->  metrics.json (sha256)
    metrics.json  --inputs-->        predictions.npz, provenance.json, clean processed data (sha256)
    provenance    --inputs-->        processed data / R-variant (sha256), run spec (config sha256),
                                     seed, git commit + dirty flag, packages, device
    processed     --meta-->          raw source files (sha256 verified at acquisition);
                                     image datasets: the image listing (path + size of
                                     every image) and the ResNet-50 weights file

Every hash is recomputed from the file on disk. A missing or modified file makes the
audit fail (exit 1) and names the file, the expected and the actual hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdgtmll.config import config_hash
from cdgtmll.io import read_json, sha256_file


@dataclass
class AuditReport:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    checked: int = 0
    #: within one audit each file is hashed and each image listing computed once (a table's
    #: runs share their data files)
    _sha256: dict[Path, str] = field(default_factory=dict, repr=False)
    _listings: dict[Path, tuple[str, str] | None] = field(default_factory=dict, repr=False)

    def say(self, text: str, indent: int = 0) -> None:
        self.lines.append("  " * indent + text)

    def verify(self, path: str | Path, expected: str | None, what: str, indent: int) -> bool:
        path = Path(path)
        if not path.exists():
            self.problems.append(f"MISSING {what}: {path}")
            self.say(f"MISSING  {what}: {path}", indent)
            return False
        if expected is None:
            self.say(f"(no recorded hash) {what}: {path}", indent)
            return True
        key = path.resolve()
        if key not in self._sha256:
            self._sha256[key] = sha256_file(path)
        actual = self._sha256[key]
        self.checked += 1
        if actual != expected:
            self.problems.append(f"MODIFIED {what}: {path} (recorded sha256 {expected}, on disk {actual})")
            self.say(f"MODIFIED {what}: {path}\n" + "  " * (indent + 2) +
                     f"recorded {expected}\n" + "  " * (indent + 2) + f"on disk  {actual}", indent)
            return False
        self.say(f"ok       {what}: {path} sha256 {actual[:16]}…", indent)
        return True


def _sources_file(artifact: Path) -> Path:
    cand = artifact.with_suffix(".sources.json")
    if not cand.exists():
        raise FileNotFoundError(f"{artifact}: no lineage record {cand.name} beside it "
                                "(tables and figures written by the pipeline have one)")
    return cand


def audit_run_metrics(rep: AuditReport, metrics_path: Path, expected: str | None, indent: int = 1) -> None:
    if not rep.verify(metrics_path, expected, "metrics", indent):
        return
    m = read_json(metrics_path)
    inputs = m.get("inputs", {})
    for role in ("predictions", "provenance", "clean_data"):
        if role in inputs:
            rep.verify(inputs[role]["path"], inputs[role]["sha256"], role, indent + 1)
        else:
            rep.problems.append(f"{metrics_path}: field 'inputs.{role}' missing")
    prov_path = Path(inputs.get("provenance", {}).get("path", metrics_path.parent / "provenance.json"))
    if prov_path.exists():
        audit_provenance(rep, prov_path, indent + 1)


def audit_provenance(rep: AuditReport, prov_path: Path, indent: int) -> None:
    prov = read_json(prov_path)
    git = prov.get("git", {})
    spec = prov.get("config", {})
    rep.say(f"run      {spec.get('dataset')}/{spec.get('variant')}/{spec.get('method')} seed {prov.get('seed')}",
            indent)
    rep.say(f"code     commit {git.get('commit')} dirty={git.get('dirty')} "
            f"source sha256 {str(prov.get('code_sha256'))[:16]}…", indent + 1)
    recomputed = config_hash(spec)
    if recomputed != prov.get("config_sha256"):
        rep.problems.append(f"MODIFIED run spec in {prov_path}: config_sha256 {prov.get('config_sha256')} "
                            f"!= sha256 of the recorded spec {recomputed}")
    rep.say(f"config   sha256 {prov.get('config_sha256')} hparams {json.dumps(spec.get('hparams'), sort_keys=True)}",
            indent + 1)
    rep.say(f"training {json.dumps(spec.get('training'), sort_keys=True)}", indent + 1)
    pk = prov.get("packages", {})
    rep.say("packages " + ", ".join(f"{k}={v}" for k, v in pk.items() if v), indent + 1)
    dev = prov.get("device", {})
    rep.say(f"device   {dev.get('requested')} on {dev.get('platform')} "
            f"(cuda: {dev.get('cuda_device', 'none')}), {prov.get('started')} -> {prov.get('finished')}", indent + 1)
    for role, rec in prov.get("inputs", {}).items():
        if rep.verify(rec["path"], rec["sha256"], f"input {role}", indent + 1) and role == "data":
            audit_images(rep, Path(rec["path"]), indent + 1)
    bb = prov.get("backbone")
    if bb:
        rep.say(f"backbone {bb.get('backbone')}: {'frozen' if bb.get('frozen') else 'fine-tuned end to end'}, "
                f"weights sha256 {bb.get('weights_sha256')}, amp {bb.get('amp')}", indent + 1)
        if bb.get("weights_file"):
            rep.verify(bb["weights_file"], bb.get("weights_sha256"), "backbone weights", indent + 1)
    for src in prov.get("data_sources") or []:
        origin = src.get("origin")
        rep.say(f"raw      {src.get('file')} from {src.get('source')} {origin} sha256 "
                f"{str(src.get('sha256'))[:16]}… verified={src.get('verified')}", indent + 1)


def audit_images(rep: AuditReport, data_path: Path, indent: int) -> None:
    """For an image dataset (row ids + image paths), re-compute the listing fingerprint
    (relative path and size of every image) recorded when it was prepared."""
    key = data_path.resolve()
    if key not in rep._listings:
        rep._listings[key] = _image_listing_check(data_path)
    result = rep._listings[key]
    if result is None:  # not an image dataset
        return
    problem, line = result
    rep.checked += 1
    if problem:
        rep.problems.append(problem)
    rep.say(line, indent)


def _image_listing_check(data_path: Path) -> tuple[str, str] | None:
    """``(problem or '', report line)`` for an image dataset's listing; None otherwise."""
    import numpy as np

    from cdgtmll.data.images import X_KIND, listing_sha256

    with np.load(data_path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
    recorded = (meta.get("image_source") or {}).get("listing_sha256")
    if meta.get("x_kind") != X_KIND or not recorded:
        return None
    root = Path(meta["image_root"])
    missing = next((p for p in meta["image_paths"] if not (root / p).is_file()), None)
    if missing is not None:
        return f"MISSING image: {root / missing}", f"MISSING  image: {root / missing}"
    actual = listing_sha256(root, meta["image_paths"])
    if actual != recorded:
        return (f"MODIFIED images under {root}: listing sha256 (path + size of {len(meta['image_paths'])} "
                f"images) recorded {recorded}, on disk {actual}",
                f"MODIFIED images under {root}: listing recorded {recorded}, on disk {actual}")
    return "", f"ok       images: {len(meta['image_paths'])} under {root}, listing sha256 {actual[:16]}…"


def audit(artifact: str | Path, cell: tuple[str, str] | None = None) -> AuditReport:
    artifact = Path(artifact)
    rep = AuditReport()
    sources = read_json(_sources_file(artifact))
    rep.say(f"artifact {artifact}")
    if "cells" in sources:  # a table
        cells: dict[str, Any] = sources["cells"]
        if cell is not None:
            key = f"{cell[0]} | {cell[1]}"
            if key not in cells:
                raise KeyError(f"{artifact}: no cell '{key}'; cells with runs: {', '.join(sorted(cells))}")
            cells = {key: cells[key]}
        for key, runs in cells.items():
            rep.say(f"cell     {key}: {len(runs)} run(s)", 1)
            for r in runs:
                audit_run_metrics(rep, Path(r["path"]), r["sha256"], 2)
    else:  # a figure
        for method, runs in sources.get("runs", {}).items():
            rep.say(f"method   {method}: {len(runs)} run(s)", 1)
            for r in runs:
                pred = Path(r["path"])
                if rep.verify(pred, r["sha256"], "predictions", 2):
                    prov = pred.parent / "provenance.json"
                    if prov.exists():
                        audit_provenance(rep, prov, 3)
                    else:
                        rep.problems.append(f"MISSING provenance: {prov}")
    rep.say(f"verified {rep.checked} hashes; {len(rep.problems)} problem(s)")
    return rep
