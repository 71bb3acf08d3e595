"""Code identities (src/cdgtmll/lineage/code.py): what a job's code is, and that an edit
changes exactly the identities whose closure holds the edited module; the package hash."""

import hashlib
import sys
import textwrap

import pytest

from cdgtmll.config.loader import load
from cdgtmll.config.plan import run_spec
from cdgtmll.lineage import code, roots
from tests.support.paths import ROOT


@pytest.fixture
def plug(tmp_path, monkeypatch):
    """A throw-away top-level package ``plug_codeid`` on sys.path (what a plugin module is)."""
    pkg = tmp_path / "plug_codeid"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(textwrap.dedent("""
        from plug_codeid import b

        def later():
            import plug_codeid.lazy  # a lazy import is still code the job may run
            import importlib
            importlib.import_module("plug_codeid.by_name")
    """))
    for name in ("b", "c", "lazy", "by_name"):
        (pkg / f"{name}.py").write_text(f"X = {name!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code._top_location.cache_clear()  # another test's plug_codeid lived in another tmp_path
    yield pkg
    for m in [m for m in sys.modules if m.startswith("plug_codeid")]:
        del sys.modules[m]


def test_closure_follows_static_lazy_and_literal_imports_only(plug):
    mods = code.closure(["plug_codeid.a"])
    assert {m for m in mods if m.startswith("plug_codeid")} == {
        "plug_codeid", "plug_codeid.a", "plug_codeid.b", "plug_codeid.lazy", "plug_codeid.by_name"}
    assert "plug_codeid.c" not in mods


def test_identity_changes_with_a_module_in_the_closure_and_only_then(plug, tmp_path, monkeypatch):
    before = code.identity(["plug_codeid.a"])
    (plug / "c.py").write_text("X = 'edited, never imported by a'\n")
    assert code.identity(["plug_codeid.a"])["sha256"] == before["sha256"]
    (plug / "b.py").write_text("X = 'edited'\n")
    after = code.identity(["plug_codeid.a"])
    assert after["sha256"] != before["sha256"]
    assert code.changed_modules(before["modules"], after["modules"]) == ["plug_codeid.b"]
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==1\n")
    monkeypatch.setattr(code, "LOCK_FILE", lock)
    one = code.identity(["plug_codeid.a"])
    lock.write_text("numpy==2\n")
    assert code.identity(["plug_codeid.a"])["sha256"] != one["sha256"]  # the libraries are code too


@pytest.fixture(scope="module")
def paper_specs():
    config = load(ROOT / "config/paper.yaml")
    return {m: run_spec(config, "yeast", "clean", m) for m in config["experiments"]["methods"]}


def test_a_training_job_holds_its_method_and_its_loss_and_no_other(paper_specs):
    bce = code.identity(roots.train_roots(paper_specs["BCE"]))["modules"]
    focal = code.identity(roots.train_roots(paper_specs["Focal"]))["modules"]
    assert "cdgtmll.nn.losses.bce" in bce and "cdgtmll.nn.losses.focal" not in bce
    assert "cdgtmll.nn.losses.focal" in focal and "cdgtmll.nn.losses.bce" not in focal
    assert not any(m.startswith("cdgtmll.methods.cdgtmll") for m in bce)
    assert "cdgtmll.methods.cdgtmll.model" in code.identity(roots.train_roots(paper_specs["CD-GTMLL"]))["modules"]
    # a loss named by a literal in the method's code (PE's step 1 is build_loss("bce", ...))
    assert "cdgtmll.nn.losses.bce" in code.identity(roots.train_roots(paper_specs["PE"]))["modules"]
    shared = set(bce) & set(focal)
    assert {"cdgtmll.train", "cdgtmll.nn.trainer", "cdgtmll.nn.losses.common"} <= shared


@pytest.mark.slow
def test_identity_is_deterministic_and_needs_no_torch(paper_specs):
    import subprocess

    probe = ("import sys, json; from cdgtmll.lineage.code import identity; "
             "print(json.dumps([identity(['cdgtmll.train', 'cdgtmll.methods.neural', 'cdgtmll.nn.losses.bce'])['sha256'], "
             "'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    sha, torch_loaded = __import__("json").loads(out)
    assert sha == code.identity(roots.train_roots(paper_specs["BCE"]))["sha256"]
    assert torch_loaded is False




#: a package's modules in path order, as written below: a folder's files before a sibling file
#: whose name extends the folder's (``a/b.py`` before ``a-b.py`` and ``a.py``), which plain string
#: order would put last
PACKAGE_ORDER = ("__init__.py", "a/__init__.py", "a/b.py", "a-b.py", "a.py", "sub/deep/c.py")


def test_the_package_hash_is_each_modules_path_then_its_bytes_in_path_order(tmp_path):
    pkg = tmp_path / "pkg"
    for i, name in enumerate(reversed(PACKAGE_ORDER)):  # created out of order
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(f"X = {i}\n")
    (pkg / "data.yaml").write_text("not: source\n")
    files = code.package_files(pkg)
    assert [n for n, _ in files] == list(PACKAGE_ORDER)
    expected = hashlib.sha256(b"".join(n.encode() + (pkg / n).read_bytes() for n in PACKAGE_ORDER)).hexdigest()
    assert code.sources_sha256(files) == expected
    (pkg / "a/b.py").write_text("X = 'edited'\n")
    assert code.sources_sha256(code.package_files(pkg)) != expected


def test_the_package_hash_and_a_modules_hash_are_those_of_the_files_on_disk(monkeypatch):
    monkeypatch.setattr(code, "_PACKAGE_SHA256", None)  # computed now, not at the process's first use
    h = hashlib.sha256()  # every .py of the package in Path order: its relative path, then its bytes
    for f in sorted(code.PACKAGE.rglob("*.py")):
        h.update(str(f.relative_to(code.PACKAGE)).encode())
        h.update(f.read_bytes())
    assert code.package_sha256() == h.hexdigest()
    module = code.module_file("cdgtmll.lineage.code")
    assert code.file_sha256(module) == hashlib.sha256(module.read_bytes()).hexdigest()
    assert code.identity(["cdgtmll.lineage.code"])["modules"]["cdgtmll.lineage.code"] == code.file_sha256(module)


def test_recording_provenance_brings_no_registry_into_a_jobs_code():
    """Every job that records provenance imports the package hash's module: that module imports
    no other module of the package, so editing a method's spec or a loss's registry re-runs no
    job that only records provenance (the training jobs' roots: cdgtmll.lineage.roots)."""
    assert set(code.closure(["cdgtmll.lineage.code"])) == {"cdgtmll", "cdgtmll.lineage", "cdgtmll.lineage.code"}
    held = code.closure(["cdgtmll.lineage.provenance"])
    assert "cdgtmll.lineage.code" in held and not any(m.startswith("cdgtmll.methods") for m in held)
