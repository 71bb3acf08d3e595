"""Which datasets can be had here (cdgtmll.data.availability): reasons before any job, and the
record a failed prepare leaves for the next plan."""

from __future__ import annotations

import os

import pytest

from cdgtmll.data import acquire
from cdgtmll.data.availability import (
    download_note,
    failure_path,
    offline_reason,
    recorded_failure,
    write_failure,
)
from cdgtmll.data.registry import DatasetSpec, RemoteFile, get_spec


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)


def _spec(urls=("https://example.org/a.arff",), manual=None) -> DatasetSpec:
    files = (RemoteFile("a-train.arff", urls=urls, role="train", manual=manual),
             RemoteFile("a-test.arff", urls=urls, role="test", manual=manual))
    return DatasetSpec(name="a", display_name="A", kind="tabular", format="mulan-arff", n_labels=2,
                       files=files, n_train=None, n_test=None, loader=None)


def test_mediamill_without_a_mirror_is_a_reason_naming_the_file_and_how_to_get_it(tmp_path):
    reason = offline_reason(get_spec("mediamill"), tmp_path / "raw", None, allow_download=True)
    assert reason is not None
    assert reason.startswith("dataset mediamill cannot be obtained here: mediamill-train.arff")
    assert "no mirror configured" in reason and "mediamill.rar" in reason
    assert "(and 2 more of its 3 files)" in reason


def test_files_in_the_mirror_or_the_raw_cache_are_at_hand(tmp_path):
    spec = _spec(urls=())
    mirror = tmp_path / "mirror"
    (mirror / "a").mkdir(parents=True)
    (mirror / "a" / "a-train.arff").write_text("x")
    reason = offline_reason(spec, tmp_path / "raw", mirror, allow_download=False)
    assert reason is not None and "a-test.arff not in the mirror" in reason and "more" not in reason
    raw = tmp_path / "raw" / "a"
    raw.mkdir(parents=True)
    (raw / "a-test.arff").write_text("x")
    # a file in the raw folder without acquisition's record is not a cached copy
    assert offline_reason(spec, tmp_path / "raw", mirror, allow_download=False) is not None
    (raw / "a-test.arff.source.json").write_text("{}")
    assert offline_reason(spec, tmp_path / "raw", mirror, allow_download=False) is None


def test_the_environment_mirror_wins_as_in_acquisition(tmp_path, monkeypatch):
    spec = _spec(urls=())
    mirror = tmp_path / "env-mirror" / "a"
    mirror.mkdir(parents=True)
    for f in spec.files:
        (mirror / f.name).write_text("x")
    monkeypatch.setenv(acquire.MIRROR_ENV, str(mirror.parent))
    assert offline_reason(spec, tmp_path / "raw", tmp_path / "elsewhere", allow_download=False) is None


def test_a_download_is_a_note_while_allowed_and_a_reason_when_off(tmp_path):
    spec = _spec()
    assert offline_reason(spec, tmp_path, None, allow_download=True) is None
    assert download_note(spec, tmp_path, None) == "dataset a: 2 of its 2 raw files will be downloaded (a-train.arff, a-test.arff)"
    reason = offline_reason(spec, tmp_path, None, allow_download=False)
    assert reason is not None and "downloads are off (data.allow_download: false)" in reason


def test_yeast_is_at_hand_from_its_packaged_copy(tmp_path):
    # river==0.26.1 (requirements.lock) ships Yeast: no mirror, no download needed
    assert offline_reason(get_spec("yeast"), tmp_path, None, allow_download=False) is None


def test_a_failure_record_holds_while_nothing_it_depended_on_changed(tmp_path):
    src = tmp_path / "a-train.arff"
    src.write_text("@relation a\n")
    out = tmp_path / "results" / "data" / "a" / "processed.npz"
    kw = {"dataset_config": {"train": str(src)}, "code": "c0", "sources": [str(src)]}
    assert recorded_failure(out, **kw) is None
    write_failure(out, "a", "a-train.arff line 3: malformed ARFF\nmore detail", log="logs/prepare/a.log", **kw)
    assert failure_path(out).is_file()
    reason = recorded_failure(out, **kw)
    assert reason == (f"prepare_dataset failed: a-train.arff line 3: malformed ARFF (log: logs/prepare/a.log); "
                      f"fix the data and run again (record: {failure_path(out)})")
    # the prepare code, the dataset's config, or a source file changed: tried again
    assert recorded_failure(out, **{**kw, "code": "c1"}) is None
    assert recorded_failure(out, **{**kw, "dataset_config": {"train": "other"}}) is None
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert recorded_failure(out, **kw) is None
