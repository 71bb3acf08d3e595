"""`cdgtmll audit --cell` prints the cell's value (as the table shows it) and every run's value
before the lineage, recomputed from the metrics.json files behind the cell, and warns when the
table's CSV differs from them.

The runs are real: a small synthetic dataset (Yeast's shape, named ``yeast`` so that the runs
fill the Yeast columns), trained with :func:`cdgtmll.train.run_seed` and scored by
``cdgtmll.metrics.evaluate_run`` as the pipeline does (BCE on the clean data and on two
R-variants at severity 0.50, sampling seeds 0 and 1; PE, whose global-mode cells come from its
own thresholds), then tabulated by ``cdgtmll.tables.build``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from cdgtmll import cli
from tests.support.specs import clean_spec

SEEDS = (0, 1, 2)
TRAINING = {"backbone": "mlp", "epochs": 3, "batch_size": 64, "hidden_dim": 32}


def _dataset(root: Path):
    from cdgtmll.data.processed import ProcessedData

    rng = np.random.default_rng(0)
    n, d, n_labels = 420, 12, 8
    X = rng.normal(size=(n, d)).astype(np.float32)
    prior = np.linspace(0.1, 0.5, n_labels)
    p = 1 / (1 + np.exp(-(X @ rng.normal(size=(d, n_labels)) + np.log(prior / (1 - prior)))))
    Y = (rng.random((n, n_labels)) < p).astype(np.uint8)
    splits = {"train": np.arange(0, 280), "val": np.arange(280, 350), "test": np.arange(350, 420)}
    data = ProcessedData("yeast", X, Y, [f"Class{k + 1}" for k in range(n_labels)], splits, {})
    path = root / "data" / "yeast" / "processed.npz"
    path.parent.mkdir(parents=True)
    data.save(path)
    return data, path


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """``(root, tables folder, {(variant, method): [metrics.json paths]})``."""
    from cdgtmll import train
    from cdgtmll.labels import tail_labels
    from cdgtmll.metrics import evaluate_run
    from cdgtmll.tables import build
    from cdgtmll.variants.naming import variant_id
    from cdgtmll.variants.r_variant import apply_to_dataset

    root = tmp_path_factory.mktemp("audit_values")
    clean, clean_path = _dataset(root)
    tail = tail_labels(clean.part("train")[1])
    variants = {"clean": (clean, clean_path)}
    for s in (0, 1):
        data, _ = apply_to_dataset(clean, 0.5, s)
        path = root / "data" / "yeast" / "variants" / f"{variant_id(0.5, s)}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        data.save(path)
        variants[variant_id(0.5, s)] = (data, path)
    runs: dict[tuple[str, str], list[Path]] = {}
    plan = [("clean", "BCE", SEEDS), ("R0.50-s0", "BCE", (0, 1)), ("R0.50-s1", "BCE", (0, 1)), ("clean", "PE", (0, 1))]
    mp = pytest.MonkeyPatch()  # one clean commit, whatever the state of this checkout (test_audit_code.py mixes them)
    mp.setattr("cdgtmll.lineage.worktree.git_state", lambda cwd=None: {"commit": "c" * 40, "dirty": False})
    for variant, method, seeds in plan:
        data, path = variants[variant]
        spec = clean_spec("yeast", method, seeds=seeds, variant=variant, training=TRAINING)
        rundir = root / "runs" / "yeast" / variant / method
        for seed in seeds:
            train.run_seed(data, tail, spec, seed, rundir / f"seed{seed}", {"data": path, "clean": clean_path})
        assert evaluate_run.main(["--clean", str(clean_path), "--rundir", str(rundir),
                                  "--seeds", *map(str, seeds)]) == 0
        runs[(variant, method)] = [rundir / f"seed{seed}" / "metrics.json" for seed in seeds]
    mp.undo()
    out = root / "tables"
    paths = [str(p) for ps in runs.values() for p in ps]
    assert build.main(["--metrics", *paths, "--methods", "BCE", "PE", "--out", str(out)]) == 0
    return root, out, runs


def _audit(capsys, monkeypatch, root: Path, *args: str) -> tuple[int, list[str], str]:
    monkeypatch.chdir(root)  # no dvc.lock above the runs: the repository's is not consulted
    rc = cli.main(["audit", *args])
    out = capsys.readouterr()
    return rc, out.out.splitlines(), out.err


def _expected(paths: list[Path], block: str, metric: str, digits: int = 1) -> tuple[list[float], str]:
    values = [json.loads(p.read_text())[block][metric] for p in paths]
    mean, std = float(np.mean(values)), float(np.std(values, ddof=1))
    return values, f"{100 * mean:.{digits}f} ± {100 * std:.{digits}f} (n={len(values)})"


def _csv_cell(table: Path, row: str, column: str) -> tuple[float, float, int]:
    rec = {r["method"]: r for r in csv.DictReader(open(table, newline=""))}[row]
    return float(rec[f"{column} mean"]), float(rec[f"{column} std"]), int(rec[f"{column} n"])


def test_audit_prints_the_cell_and_each_run_before_the_lineage(tables, capsys, monkeypatch):
    root, out, runs = tables
    rc, lines, err = _audit(capsys, monkeypatch, root, str(out / "table1_standard.md"), "--cell", "BCE", "Yeast Micro-F1")
    assert rc == 0, "\n".join(lines) + err
    paths = runs[("clean", "BCE")]
    values, shown = _expected(paths, "global@0.5", "micro_f1")
    value_lines = [i for i, line in enumerate(lines) if line.strip().startswith("value")]
    assert len(value_lines) == 1, "\n".join(lines)
    value_line = value_lines[0]
    assert lines[value_line].strip().startswith(f"value    BCE | Yeast Micro-F1 = {shown}: micro_f1"), lines[value_line]
    assert "global threshold mode" in lines[value_line] and "setting clean" in lines[value_line]
    # the value as the table's Markdown shows it, and the CSV's mean / std / n
    md_row = next(line for line in (out / "table1_standard.md").read_text().splitlines() if line.startswith("| BCE |"))
    assert f" {shown.split(' (n=')[0]} " in md_row.replace("**", " ").replace("<u>", " ").replace("</u>", " ")
    csv_mean, csv_std, csv_n = _csv_cell(out / "table1_standard.csv", "BCE", "Yeast Micro-F1")
    assert csv_mean == pytest.approx(100 * np.mean(values), abs=1e-4) and csv_n == len(values)
    assert csv_std == pytest.approx(100 * np.std(values, ddof=1), abs=1e-4)
    # one line per run: its folder, training seed and the value in its metrics.json
    run_lines = lines[value_line + 1: value_line + 1 + len(paths)]
    for line, path, seed, v in zip(run_lines, paths, SEEDS, values):
        assert line.strip().startswith(f"run      {path.parent}  variant clean (no sampling seed), "
                                       f"training seed {seed}: micro_f1 = {v!r} ({100 * v:.4f}%) [global@0.5]"), line
    assert lines[value_line + 1 + len(paths)].strip().startswith("ok       equals table1_standard.csv: mean "
                                                                  f"{csv_mean:.4f}, std {csv_std:.4f}, n 3")
    # ... and all of it before the lineage
    first_lineage = next(i for i, line in enumerate(lines) if line.strip().startswith(("cell ", "ok       metrics")))
    assert value_line < first_lineage
    assert not any("WARNING" in line for line in lines)


def test_r_variant_cell_pools_sampling_seeds_in_the_tables_threshold_mode(tables, capsys, monkeypatch):
    root, out, runs = tables
    rc, lines, err = _audit(capsys, monkeypatch, root, str(out / "table2_rare_adaptive.csv"), "--cell", "BCE",
                            "Yeast-R @50%")
    assert rc == 0, "\n".join(lines) + err
    paths = runs[("R0.50-s0", "BCE")] + runs[("R0.50-s1", "BCE")]
    values, shown = _expected(paths, "adaptive", "rare_f1")
    text = "\n".join(lines)
    assert f"value    BCE | Yeast-R @50% = {shown}: rare_f1" in text
    assert "adaptive threshold mode, setting R@0.50" in text
    for path, v in zip(paths, values):
        variant, seed = path.parts[-4], path.parent.name[4:]
        assert (f"run      {path.parent}  variant {variant} (sampling seed {variant[-1]}), training seed {seed}: "
                f"rare_f1 = {v!r} ({100 * v:.4f}%) [adaptive]") in text
    assert "ok       equals table2_rare_adaptive.csv" in text


def test_own_threshold_rows_read_the_block_the_table_reads(tables, capsys, monkeypatch):
    """PE is scored by its own thresholds in global mode (its ``method`` block), as in the table."""
    root, out, runs = tables
    paths = runs[("clean", "PE")]
    assert all("method" in json.loads(p.read_text()) for p in paths)
    rc, lines, err = _audit(capsys, monkeypatch, root, str(out / "table1_standard.tex"), "--cell", "PE", "Yeast Rare-F1")
    assert rc == 0, "\n".join(lines) + err
    values, shown = _expected(paths, "method", "rare_f1")
    text = "\n".join(lines)
    assert f"value    PE | Yeast Rare-F1 = {shown}" in text
    assert all(f"rare_f1 = {v!r} ({100 * v:.4f}%) [method]" in text for v in values)
    assert "ok       equals table1_standard.csv" in text


def test_a_csv_that_differs_from_its_sources_fails_the_audit(tables, capsys, monkeypatch, tmp_path):
    """The audit recomputes the cell from its metrics files and fails when the table does not show it:
    a number its sources do not support is what an audit exists to catch."""
    import shutil

    root, out, _ = tables
    copy = tmp_path / "tables"
    shutil.copytree(out, copy)
    table = copy / "table1_standard.csv"
    recs = list(csv.DictReader(open(table, newline="")))
    for r in recs:
        if r["method"] == "BCE":
            r["Yeast Micro-F1 mean"] = str(float(r["Yeast Micro-F1 mean"]) + 1.0)
    with open(table, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(recs[0]))
        w.writeheader()
        w.writerows(recs)
    rc, lines, err = _audit(capsys, monkeypatch, root, str(copy / "table1_standard.md"), "--cell", "BCE", "Yeast Micro-F1")
    mismatch = [line for line in lines if line.strip().startswith("MISMATCH")]
    assert len(mismatch) == 1 and "cell differs from its sources: table1_standard.csv says mean" in mismatch[0]
    assert rc == 1 and "1 problem(s)" in lines[-1] and "BCE | Yeast Micro-F1" in err
    # the other cells of that CSV still agree
    rc, lines, _ = _audit(capsys, monkeypatch, root, str(copy / "table1_standard.md"), "--cell", "BCE", "Yeast Rare-F1")
    assert rc == 0 and not any("MISMATCH" in line or "WARNING" in line for line in lines)


def test_audit_of_the_whole_table_prints_every_cell_value(tables, monkeypatch):
    from cdgtmll.lineage.audit import audit

    root, out, runs = tables
    monkeypatch.chdir(root)
    rep = audit(out / "table1_standard_adaptive.html")
    values = [line.strip() for line in rep.lines if line.strip().startswith("value")]
    sources = json.loads((out / "table1_standard_adaptive.sources.json").read_text())["cells"]
    assert len(values) == len(sources) == 4  # BCE and PE x Yeast Micro-F1, Rare-F1
    assert not rep.problems and not rep.warnings, rep.lines
    v, shown = _expected(runs[("clean", "PE")], "adaptive", "micro_f1")
    assert f"value    PE | Yeast Micro-F1 = {shown}: micro_f1, mean ± sample std over runs, adaptive threshold mode, " \
           "setting clean" in values
    assert not any(math.isnan(x) for x in v)
