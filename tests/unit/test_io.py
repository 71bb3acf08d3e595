"""The artifact readers of :mod:`cdgtmll.io` and their users: a truncated or edited file is
named, called corrupt, attributed to the rule that writes it with the command that rebuilds
it, and (where the pipeline reads it) deleted so that the next ``snakemake`` run re-makes it.
A table's ``.sources.json`` appears only together with the table."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from cdgtmll import io
from cdgtmll.io import CorruptArtifactError, load_npz, read_json


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _assert_message(exc: CorruptArtifactError, path: Path, producer: str, removed: bool) -> None:
    msg = str(exc)
    assert str(path) in msg and "corrupt" in msg, msg
    assert producer in msg, msg
    assert "snakemake --cores all all --configfile" in msg and "make all" in msg, msg
    assert ("it has been deleted, so the next snakemake run re-runs the job that writes it" in msg) is removed, msg
    assert path.exists() is not removed


def test_read_json_names_corrupt_file_and_deletes_it_when_asked(tmp_path):
    m = tmp_path / "seed0" / "metrics.json"
    m.parent.mkdir()
    m.write_text(json.dumps({"mAP": 0.5, "adaptive": {"rare_f1": 0.1}}))
    assert read_json(m)["mAP"] == 0.5
    _truncate(m)
    with pytest.raises(CorruptArtifactError) as kept:
        read_json(m)
    _assert_message(kept.value, m, "rule evaluate: python -m cdgtmll.metrics.evaluate_run", removed=False)
    assert "delete it and rebuild it" in str(kept.value) and "JSONDecodeError" in str(kept.value)
    with pytest.raises(CorruptArtifactError) as gone:
        read_json(m, remove=True)
    _assert_message(gone.value, m, "rule evaluate", removed=True)
    assert isinstance(gone.value, ValueError)  # old `except ValueError` handlers still catch it
    with pytest.raises(FileNotFoundError):  # missing is not corrupt
        read_json(m)


def test_read_json_not_utf8_and_explicit_producer(tmp_path):
    p = tmp_path / "thing.json"
    p.write_bytes(b"\xff\xfe{")
    with pytest.raises(CorruptArtifactError) as exc:
        read_json(p, producer="rule x: python -m x")
    assert "rule x: python -m x" in str(exc.value) and str(p) in str(exc.value)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_load_npz_reads_every_array_now_and_names_a_damaged_file(tmp_path, damage):
    p = tmp_path / "predictions.npz"
    with open(p, "wb") as fh:
        np.savez(fh, val=np.arange(4000, dtype=np.float32), test=np.ones(4000, np.float32))
    z = load_npz(p)
    assert set(z) == {"val", "test"} and z["val"][3] == 3
    assert set(load_npz(p, keys=("test",))) == {"test"}
    with pytest.raises(KeyError, match="'meta'"):
        load_npz(p, keys=("meta",))
    if damage == "truncate":
        _truncate(p)
    else:  # one byte inside the first array: the zip member's CRC no longer matches
        data = bytearray(p.read_bytes())
        data[2000] ^= 0xFF
        p.write_bytes(bytes(data))
    with pytest.raises(CorruptArtifactError) as exc:
        load_npz(p, remove=True)
    _assert_message(exc.value, p, "rule train: python -m cdgtmll.train", removed=True)


def test_producer_of_names_the_rules():
    assert io.producer_of("results/data/yeast/processed.npz").startswith("rule prepare_dataset")
    assert io.producer_of("results/runs/y/clean/BCE/seed0/provenance.json").startswith("rule train")
    assert io.producer_of("results/tables/table1_standard.sources.json").startswith("rule tables")
    assert io.producer_of("x/other.json") is None


# --------------------------------------------------------------------------- the readers


def _run_dir(tmp_path: Path) -> tuple[Path, Path]:
    from cdgtmll.data.processed import ProcessedData
    from tests.support.mirror import yeast_arrays

    X, Y = yeast_arrays(300)
    splits = {"train": np.arange(0, 200), "val": np.arange(200, 250), "test": np.arange(250, 300)}
    clean = tmp_path / "processed.npz"
    ProcessedData("yeast", X, Y, [f"Class{k + 1}" for k in range(Y.shape[1])], splits, {}).save(clean)
    seed = tmp_path / "runs" / "yeast" / "clean" / "BCE" / "seed0"
    seed.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with open(seed / "predictions.npz", "wb") as fh:
        np.savez(
            fh,
            val=rng.random((50, Y.shape[1]), dtype=np.float32),
            test=rng.random((50, Y.shape[1]), dtype=np.float32),
            idx_val=splits["val"],
            idx_test=splits["test"],
        )
    (seed / "provenance.json").write_text(json.dumps({"config": {}}))
    return clean, seed


def test_evaluate_names_and_deletes_a_truncated_predictions_file(tmp_path, capsys):
    from cdgtmll.metrics import evaluate_run

    clean, seed = _run_dir(tmp_path)
    args = ["--clean", str(clean), "--rundir", str(seed.parent), "--seeds", "0"]
    assert evaluate_run.main(args) == 0
    assert (seed / "metrics.json").is_file()
    pred = seed / "predictions.npz"
    _truncate(pred)
    capsys.readouterr()
    assert evaluate_run.main(args) == 1  # was: zipfile.BadZipFile: File is not a zip file
    err = capsys.readouterr().err
    assert f"[evaluate] ERROR corrupt file {pred}: cannot be read (BadZipFile" in err, err
    assert "it has been deleted, so the next snakemake run re-runs the job that writes it (rule train: python -m cdgtmll.train)" in err, err
    assert not pred.exists()


def test_evaluate_names_a_corrupt_provenance_and_clean_data(tmp_path, capsys):
    from cdgtmll.metrics import evaluate_run

    clean, seed = _run_dir(tmp_path)
    args = ["--clean", str(clean), "--rundir", str(seed.parent), "--seeds", "0"]
    (seed / "provenance.json").write_text('{"config": ')
    assert evaluate_run.main(args) == 1
    err = capsys.readouterr().err
    assert f"corrupt file {seed / 'provenance.json'}" in err and "rule train" in err, err
    _truncate(clean, 0.3)
    assert evaluate_run.main(args) == 1
    err = capsys.readouterr().err
    assert f"corrupt file {clean}" in err and "rule prepare_dataset: python -m cdgtmll.data.prepare" in err, err
    assert not clean.exists()


def _metrics(tmp_path: Path) -> list[Path]:
    block = {"mAP": 0.5, "micro_f1": 0.4, "macro_f1": 0.3, "rare_f1": 0.2, "p@1": None, "p@3": None, "p@5": None}
    paths = []
    for seed in (0, 1):
        p = tmp_path / "runs" / "yeast" / "clean" / "BCE" / f"seed{seed}" / "metrics.json"
        p.parent.mkdir(parents=True)
        p.write_text(json.dumps({"global@0.5": block, "adaptive": block}))
        paths.append(p)
    return paths


def test_tables_name_a_truncated_metrics_file_and_write_no_sources(tmp_path):
    from cdgtmll.tables import build

    paths = _metrics(tmp_path)
    out = tmp_path / "tables"
    argv = ["--metrics", *map(str, paths), "--methods", "BCE", "--out", str(out)]
    assert build.main(argv) == 0
    sources = sorted(out.glob("*.sources.json"))
    assert len(sources) == 12 and all((out / f"{s.name[: -len('.sources.json')]}.csv").is_file() for s in sources)
    assert not list(tmp_path.glob(".tables.*"))  # the staging folder is gone
    for f in out.iterdir():
        f.unlink()
    _truncate(paths[1])
    with pytest.raises(CorruptArtifactError) as exc:  # was: a bare JSONDecodeError
        build.main(argv)
    _assert_message(exc.value, paths[1], "rule evaluate: python -m cdgtmll.metrics.evaluate_run", removed=True)
    assert not list(out.iterdir()) and not list(tmp_path.glob(".tables.*"))


def test_a_failure_while_writing_leaves_no_sources_file(tmp_path, monkeypatch):
    """A table and its .sources.json appear together: a failure after some tables were written
    leaves none of this run's files (was: the earlier tables and their sidecars)."""
    from cdgtmll.tables import build

    paths = _metrics(tmp_path)
    out = tmp_path / "tables"
    real, calls = build.write_table, []

    def flaky(*a, **k):
        calls.append(a[2])
        if len(calls) == 5:
            raise RuntimeError("disk gone")
        return real(*a, **k)

    monkeypatch.setattr(build, "write_table", flaky)
    with pytest.raises(RuntimeError, match="disk gone"):
        build.main(["--metrics", *map(str, paths), "--methods", "BCE", "--out", str(out)])
    assert not list(out.glob("*")) and not list(tmp_path.glob(".tables.*"))


def test_staged_dir_moves_files_only_on_success(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.csv").write_text("old")
    with io.staged_dir(target, last=(".sources.json",)) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".out.atomic-")
        (tmp / "t.sources.json").write_text("{}")
        (tmp / "t.csv").write_text("new")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "x.json").write_text("1")
        assert not (target / "t.csv").exists()
    assert (target / "t.csv").read_text() == "new" and (target / "sub/x.json").is_file()
    assert (target / "old.csv").is_file() and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_corrupt_checkpoint_is_named_deleted_and_training_starts_over(tmp_path):
    pytest.importorskip("torch")
    from cdgtmll.nn import checkpoint

    p = tmp_path / checkpoint.CHECKPOINT
    checkpoint.save_checkpoint(p, {"fingerprint": "abc", "epoch": 1, "model": {"w": np.zeros(1000)}})
    assert checkpoint.load_checkpoint(p, "abc")["epoch"] == 1
    _truncate(p)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert checkpoint.load_checkpoint(p, "abc") is None
    msg = " ".join(str(x.message) for x in w)
    assert f"ignoring corrupt checkpoint {p}" in msg and "deleted" in msg and "from scratch" in msg, msg
    assert not p.exists()


def test_audit_reports_a_corrupt_lineage_record_without_deleting_it(tmp_path):
    from cdgtmll.lineage import audit

    table = tmp_path / "table1_standard.md"
    table.write_text("x")
    sources = tmp_path / "table1_standard.sources.json"
    sources.write_text('{"table": "table1_st')
    rep = audit.audit(table)
    assert any(p.startswith(f"CORRUPT lineage record: corrupt file {sources}") and "rule tables" in p for p in rep.problems), rep.problems
    assert sources.exists()
