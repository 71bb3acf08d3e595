"""Acquisition: sha256 verification, source order, atomicity, provenance; registry hashes."""

from __future__ import annotations

import hashlib
import http.server
import json
import socket
import threading
from pathlib import Path

import pytest

from cdgtmll.data import acquire
from cdgtmll.data.acquire import (
    AcquisitionError,
    ChecksumError,
    UnverifiedWarning,
    fetch,
    locate_packaged,
    resolve_mirror,
)
from cdgtmll.data.registry import (
    REGISTRY,
    RIVER_YEAST,
    DatasetSpec,
    RemoteFile,
    get_spec,
    spec_from_config,
)
from tests.support.mirror import mirror_file, mirror_path, packaged_yeast_mirror

BODY = b"".join(b"row %05d,0.125,1\n" % i for i in range(4000))  # ~68 KB, > one read on some paths
SHA = hashlib.sha256(BODY).hexdigest()


# --------------------------------------------------------------------------- local HTTP server
class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}
    hits: list = []

    def do_GET(self):  # noqa: N802
        self.hits.append(self.path)
        route = self.routes.get(self.path)
        if route is None:
            self.send_error(404, "Not Found")
            return
        body, length = route
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length if length is not None else len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def log_message(self, *args):  # keep test output quiet
        pass


@pytest.fixture()
def server(monkeypatch):
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("NO_PROXY", "*")
    corrupt = bytearray(BODY)
    corrupt[1000] ^= 0xFF
    routes = {
        "/good.csv": (BODY, None),
        "/corrupt.csv": (bytes(corrupt), None),  # same size, wrong bytes
        "/truncated.csv": (BODY[:30000], len(BODY)),  # Content-Length promises more than is sent
        "/short.csv": (BODY[:30000], None),  # honest but shorter body: sha mismatch
    }
    handler = type("H", (_Handler,), {"routes": routes, "hits": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield base, handler.hits
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def no_env_mirror(monkeypatch):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)


def _spec(*urls: str, sha: str | None = SHA, size: int | None = None, name: str = "data.csv") -> DatasetSpec:
    return DatasetSpec(
        name="toy", display_name="Toy", kind="tabular", format="mulan-arff", n_labels=1,
        files=(RemoteFile(name=name, urls=tuple(urls), sha256=sha, size=size, role="train"),),
        n_train=None, n_test=None, loader=None,
    )


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --------------------------------------------------------------------------- URL source
def test_good_url_is_fetched_verified_and_recorded(server, tmp_path, no_env_mirror):
    base, hits = server
    spec = _spec(f"{base}/good.csv")
    res = fetch(spec, "data.csv", tmp_path / "raw")
    assert res.source == "url" and res.origin == f"{base}/good.csv"
    assert res.sha256 == SHA and res.verified and res.size == len(BODY)
    assert res.path.read_bytes() == BODY
    prov = json.loads((tmp_path / "raw" / "data.csv.source.json").read_text())
    assert prov["source"] == "url" and prov["sha256"] == SHA and prov["size"] == len(BODY)
    assert prov["origin"] == f"{base}/good.csv" and prov["verified"] is True and prov["time"]
    assert _leftovers(tmp_path / "raw") == ["data.csv", "data.csv.source.json"]
    # the processed data's record names the raw copy, which `cdgtmll audit` re-hashes
    assert res.record()["path"] == str(tmp_path / "raw" / "data.csv") and res.record()["sha256"] == SHA
    assert res.notes == ("no mirror configured; downloaded " + f"{base}/good.csv",)


def test_corrupted_download_raises_with_both_hashes_and_leaves_nothing(server, tmp_path, no_env_mirror):
    base, _ = server
    spec = _spec(f"{base}/corrupt.csv", f"{base}/good.csv")
    with pytest.raises(ChecksumError) as ei:
        fetch(spec, "data.csv", tmp_path / "raw")
    msg = str(ei.value)
    bad = bytearray(BODY)
    bad[1000] ^= 0xFF
    assert SHA in msg and hashlib.sha256(bad).hexdigest() in msg
    assert "data.csv" in msg and f"{base}/corrupt.csv" in msg
    assert _leftovers(tmp_path / "raw") == []  # no target, no temp file, no provenance


def test_truncated_download_content_length(server, tmp_path, no_env_mirror):
    base, _ = server
    with pytest.raises(ChecksumError, match=rf"truncated: expected {len(BODY)} bytes.*received 30000 bytes"):
        fetch(_spec(f"{base}/truncated.csv"), "data.csv", tmp_path / "raw")
    assert _leftovers(tmp_path / "raw") == []


def test_truncated_download_without_content_length_hint_fails_sha(server, tmp_path, no_env_mirror):
    base, _ = server
    with pytest.raises(ChecksumError, match=f"expected {SHA}, actual {hashlib.sha256(BODY[:30000]).hexdigest()}"):
        fetch(_spec(f"{base}/short.csv"), "data.csv", tmp_path / "raw")
    assert _leftovers(tmp_path / "raw") == []


def test_unknown_sha_with_known_size_detects_short_file(server, tmp_path, no_env_mirror):
    base, _ = server
    with pytest.raises(ChecksumError, match=f"expected {len(BODY)} bytes, received 30000"):
        fetch(_spec(f"{base}/short.csv", sha=None, size=len(BODY)), "data.csv", tmp_path / "raw")
    assert _leftovers(tmp_path / "raw") == []


def test_404_falls_through_to_next_url(server, tmp_path, no_env_mirror):
    base, hits = server
    res = fetch(_spec(f"{base}/missing.csv", f"{base}/good.csv"), "data.csv", tmp_path / "raw")
    assert res.source == "url" and res.origin == f"{base}/good.csv" and res.verified
    assert hits == ["/missing.csv", "/good.csv"]


def test_all_sources_fail_lists_every_source(server, tmp_path, no_env_mirror):
    base, _ = server
    dead = f"http://127.0.0.1:{_closed_port()}/data.csv"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with pytest.raises(AcquisitionError) as ei:
        fetch(_spec(f"{base}/missing.csv", dead), "data.csv", tmp_path / "raw", mirror=mirror, timeout=5)
    msg = str(ei.value)
    assert f"{base}/missing.csv: HTTP 404" in msg
    assert dead in msg and ("Connection refused" in msg or "URLError" in msg)
    assert f"mirror {mirror / 'toy' / 'data.csv'}: not found" in msg
    assert _leftovers(tmp_path / "raw") == []


def test_downloads_disabled(server, tmp_path, no_env_mirror):
    base, hits = server
    with pytest.raises(AcquisitionError, match="skipped \\(downloads disabled\\)"):
        fetch(_spec(f"{base}/good.csv"), "data.csv", tmp_path / "raw", allow_download=False)
    assert hits == []


def test_unknown_sha_records_hash_and_warns(server, tmp_path, no_env_mirror):
    base, hits = server
    spec = _spec(f"{base}/good.csv", sha=None)
    with pytest.warns(UnverifiedWarning, match="NOT verified"):
        res = fetch(spec, "data.csv", tmp_path / "raw")
    assert res.sha256 == SHA and res.verified is False
    prov = json.loads((tmp_path / "raw" / "data.csv.source.json").read_text())
    assert prov["verified"] is False and prov["sha256"] == SHA
    # reused from cache by the recorded hash, still reported unverified
    with pytest.warns(UnverifiedWarning):
        again = fetch(spec, "data.csv", tmp_path / "raw")
    assert again.source == "cached" and again.verified is False and len(hits) == 1


# --------------------------------------------------------------------------- other sources
def test_mirror_takes_precedence_over_url(server, tmp_path, no_env_mirror):
    base, hits = server
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "data.csv").write_bytes(BODY)
    res = fetch(_spec(f"{base}/good.csv"), "data.csv", tmp_path / "raw", mirror=mirror)
    assert res.source == "mirror" and res.origin == str(mirror / "toy" / "data.csv") and res.verified
    assert hits == []


def test_corrupted_mirror_file_raises_and_leaves_nothing(server, tmp_path, no_env_mirror):
    base, hits = server
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "data.csv").write_bytes(BODY[:-1] + b"X")
    with pytest.raises(ChecksumError, match=f"from mirror .*expected {SHA}"):
        fetch(_spec(f"{base}/good.csv"), "data.csv", tmp_path / "raw", mirror=mirror)
    assert _leftovers(tmp_path / "raw") == [] and hits == []


def test_env_var_overrides_config_mirror(server, tmp_path, monkeypatch):
    base, hits = server
    env_m, cfg_m = tmp_path / "env_mirror", tmp_path / "cfg_mirror"
    for m in (env_m, cfg_m):
        (m / "toy").mkdir(parents=True)
        (m / "toy" / "data.csv").write_bytes(BODY)
    monkeypatch.setenv(acquire.MIRROR_ENV, str(env_m))
    assert resolve_mirror(str(cfg_m)) == env_m
    res = fetch(_spec(f"{base}/good.csv"), "data.csv", tmp_path / "raw", mirror=cfg_m)
    assert res.source == "mirror" and res.origin == str(env_m / "toy" / "data.csv")
    monkeypatch.delenv(acquire.MIRROR_ENV)
    assert resolve_mirror(str(cfg_m)) == cfg_m and resolve_mirror(None) is None
    monkeypatch.setenv(acquire.MIRROR_ENV, "")
    assert resolve_mirror(str(cfg_m)) == cfg_m  # empty = unset


def test_cached_file_is_reused(server, tmp_path, no_env_mirror):
    base, hits = server
    spec = _spec(f"{base}/good.csv")
    first = fetch(spec, "data.csv", tmp_path / "raw")
    second = fetch(spec, "data.csv", tmp_path / "raw")
    assert second.source == "cached" and second.verified and second.original_source == "url"
    assert second.origin == first.origin and hits == ["/good.csv"]
    # a cached file with the wrong content is replaced, not trusted
    first.path.write_bytes(b"stale")
    third = fetch(spec, "data.csv", tmp_path / "raw")
    assert third.source == "url" and third.path.read_bytes() == BODY
    assert f"{first.path}: cached copy has sha256 {hashlib.sha256(b'stale').hexdigest()}, expected {SHA}; " \
        "re-acquiring" in third.notes


def test_packaged_river_copy_used_without_mirror(tmp_path, monkeypatch):
    if locate_packaged(RIVER_YEAST) is None:
        pytest.skip("river==0.26.1 not installed: no packaged yeast.csv.gz")
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)
    spec = get_spec("yeast")
    res = fetch(spec, "yeast-train.arff", tmp_path / "raw", mirror=None, allow_download=False)
    assert res.source == "packaged" and res.verified
    assert res.path == tmp_path / "raw" / "yeast.csv.gz"
    assert res.sha256 == RIVER_YEAST.sha256 == "2969cb4bab877a27adcbe17871fa0b378a1e54b98816cd6106b542ee450a1c09"
    assert res.origin.endswith("river/datasets/yeast.csv.gz")
    assert fetch(spec, "yeast-test.arff", tmp_path / "raw", allow_download=False).source == "cached"
    assert fetch(spec, RIVER_YEAST, tmp_path / "raw2").source == "packaged"


def test_nested_voc_label_file_from_mirror(mirror, tmp_path, monkeypatch):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)
    spec = get_spec("voc2007")
    f = spec.file("ImageSets/Main/aeroplane_trainval.txt")
    mirror_file(mirror, f"voc2007/{f.name}")
    res = fetch(spec, f, tmp_path / "raw", mirror=mirror, allow_download=False)
    assert res.source == "mirror" and res.verified and res.sha256 == f.sha256
    assert (tmp_path / "raw" / "ImageSets" / "Main" / "aeroplane_trainval.txt.source.json").is_file()


def test_packaged_copy_not_preferred_over_mirror(mirror, tmp_path, monkeypatch):
    monkeypatch.delenv(acquire.MIRROR_ENV, raising=False)
    res = fetch(get_spec("yeast"), "yeast-train.arff", tmp_path / "raw", mirror=mirror, allow_download=False)
    assert res.source == "mirror" and res.path.name == "yeast-train.arff" and res.verified


def test_packaged_copy_rebuilds_mulans_yeast_files_byte_for_byte():
    """The packaged copy is the full MULAN Yeast: the test helpers rebuild MULAN's three
    files from it (what a clone without the mirror tests on), and each has the registry's
    sha256, i.e. MULAN's bytes; with a mirror, they equal its files."""
    if locate_packaged(RIVER_YEAST) is None:
        pytest.skip("river==0.26.1 not installed: no packaged yeast.csv.gz")
    root, why = packaged_yeast_mirror()
    assert root is not None, why
    for f in get_spec("yeast").files:
        rebuilt = root / "yeast" / f.name
        assert hashlib.sha256(rebuilt.read_bytes()).hexdigest() == f.sha256 and rebuilt.stat().st_size == f.size
        real = mirror_path() / "yeast" / f.name
        if real.is_file():
            assert real.read_bytes() == rebuilt.read_bytes()


# --------------------------------------------------------------------------- registry
def test_registry_hashes_match_mirror_manifest(mirror):
    rows = [line.split("\t") for line in mirror_file(mirror, "MANIFEST.tsv").read_text().splitlines()[1:] if line]
    manifest = {r[0]: (int(r[1]), r[2]) for r in rows}
    checked = 0
    for spec in REGISTRY.values():
        for f in spec.files:
            key = f"{spec.folder}/{f.name}"
            if key in manifest:
                assert (f.size, f.sha256) == manifest[key], key
                checked += 1
    assert checked == len(manifest) == 15 + 42


def test_registry_contents():
    for name in ("yeast", "mediamill", "voc2007", "coco2014", "eurlex-4k", "wiki10-31k", "amazoncat-13k",
                 "enron", "bibtex", "tmc2007-500", "delicious"):
        spec = get_spec(name)
        assert spec.kind in ("tabular", "image", "xmc") and spec.files
        for f in spec.files:
            assert f.sha256 is None or len(f.sha256) == 64
            assert f.urls or f.manual, f"{name}/{f.name}: neither URL nor manual instructions"
            assert f.sha256 is not None or (f.manual and "unknown: not published" in f.manual)
    assert get_spec("yeast").file("train").urls == (
        "https://raw.githubusercontent.com/tsoumakas/mulan/43f6389/data/multi-label/yeast/yeast-train.arff",)
    assert get_spec("coco2014").loader and get_spec("voc2007").loader and get_spec("yeast").loader
    with pytest.raises(KeyError, match="unknown dataset 'nope'; known: .*yeast"):
        get_spec("nope")


def test_spec_from_config_and_errors_name_the_key():
    cfg = {"format": "mulan-arff", "train": "a-train.arff", "test": "a-test.arff", "n_labels": 3,
           "urls": {"train": "http://x/a-train.arff"}, "sha256": {"test": "AB" * 32}}
    spec = spec_from_config("a", cfg)
    assert spec.loader == "cdgtmll.data.mulan.load_spec" and spec.n_labels == 3
    assert spec.file("train").urls == ("http://x/a-train.arff",) and spec.file("test").sha256 == "ab" * 32
    assert get_spec("a", extra={"a": cfg}) == spec
    bad = [
        ({**cfg, "format": "coco-json"}, "data.custom.a.format"),
        ({k: v for k, v in cfg.items() if k != "test"}, "data.custom.a.test"),
        ({**cfg, "xml": "a.xml"}, "data.custom.a.xml"),
        ({**cfg, "n_labels": 0}, "data.custom.a.n_labels"),
        ({**cfg, "sha256": {"train": "zz"}}, "data.custom.a.sha256.train"),
        ({**cfg, "urls": {"xml": ["http://x"]}}, "data.custom.a.urls.xml"),
        ({**cfg, "train": "../etc/passwd"}, "data.custom.a.train"),
        ({**cfg, "bogus": 1}, "data.custom.a.bogus"),
    ]
    for c, key in bad:
        with pytest.raises(ValueError, match=f"config error at '{key}'"):
            spec_from_config("a", c)
