"""tools/readme_timings.py: the slowest tests are read from pytest's own ``--durations`` block."""

from __future__ import annotations

import importlib.util

from tests.support.paths import ROOT


def _tool():
    spec = importlib.util.spec_from_file_location("readme_timings", ROOT / "tools" / "readme_timings.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# the block as pytest 8 printed it in a `make test` run (2026-11-27), cut to three lines
PYTEST_TAIL = """\
-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html
============================= slowest 25 durations =============================
367.10s call     tests/integration/dvc/test_dvc.py::test_quick_profile_cache_share_restore_and_experiments
234.94s call     tests/integration/pipeline/test_pipeline_images.py::test_voc_finetuned_end_to_end_with_occlusion
1.02s setup    tests/integration/pipeline/test_readme_commands.py::test_readme_command[L21: make all CONFIG=config/quick.yaml]
=========================== short test summary info ============================
FAILED tests/unit/test_io.py::test_x - AssertionError
3 failed, 1007 passed, 15 skipped, 3 warnings in 1213.14s (0:20:13)
"""


def test_slowest_tests_parses_the_durations_block():
    rows = _tool().slowest_tests(PYTEST_TAIL)
    assert [r["seconds"] for r in rows] == [367.10, 234.94, 1.02]
    assert [r["phase"] for r in rows] == ["call", "call", "setup"]
    assert rows[0]["test"] == "tests/integration/dvc/test_dvc.py::test_quick_profile_cache_share_restore_and_experiments"
    assert rows[2]["test"] == ("tests/integration/pipeline/test_readme_commands.py::"
                               "test_readme_command[L21: make all CONFIG=config/quick.yaml]")
    assert _tool().slowest_tests("no durations here\n") == []


def test_every_duration_block_of_durations_0_is_read():
    """``--durations=0`` (what the tool runs, to record every file's seconds) heads the block
    ``slowest durations``, without a count."""
    text = PYTEST_TAIL.replace("= slowest 25 durations =", "=== slowest durations ===")
    assert _tool().slowest_tests(text) == _tool().slowest_tests(PYTEST_TAIL) != []


def test_file_seconds_sum_every_phase_longest_first():
    rows = _tool().slowest_tests(PYTEST_TAIL)
    assert _tool().file_seconds(rows) == {"tests/integration/dvc/test_dvc.py": 367.10,
                                          "tests/integration/pipeline/test_pipeline_images.py": 234.94,
                                          "tests/integration/pipeline/test_readme_commands.py": 1.02}


def test_conftest_orders_files_by_the_recorded_seconds(tmp_path):
    """tests/conftest.py reads what the tool writes: ``files`` when recorded, else the sums of
    ``slowest``; nothing (markers and collection order decide) without a record."""
    import json

    from tests.conftest import recorded_file_seconds

    rows = _tool().slowest_tests(PYTEST_TAIL)
    p = tmp_path / "timings.json"
    p.write_text(json.dumps({"tests": {"slowest": rows}}))
    assert recorded_file_seconds(p) == _tool().file_seconds(rows)
    p.write_text(json.dumps({"tests": {"slowest": rows, "files": {"tests/unit/test_io.py": 9.5}}}))
    assert recorded_file_seconds(p) == {"tests/unit/test_io.py": 9.5}
    p.write_text("{}")
    assert recorded_file_seconds(p) == {} and recorded_file_seconds(tmp_path / "none.json") == {}


def test_the_suite_is_measured_first_and_never_in_a_dirty_checkout(tmp_path, monkeypatch):
    """The suite runs in the checkout: it is measured before the tool writes docs/timings.json
    (a dirty tree fails the suite's audit tests), and refused when the checkout is dirty."""
    import pytest

    tool = _tool()
    order = []
    monkeypatch.setattr(tool, "STORE", tmp_path / "timings.json")
    monkeypatch.setattr(tool, "write_block", lambda block: None)
    monkeypatch.setattr(tool, "render", lambda store: "")
    monkeypatch.setattr(tool, "MEASURE", {k: (lambda tmp, k=k: order.append(k) or {"kind": k}) for k in tool.KINDS})
    monkeypatch.setattr(tool, "git", lambda *args: "")
    assert tool.main(["--only", "quick", "tests", "jobs"]) == 0
    assert order == ["tests", "quick", "jobs"]
    monkeypatch.setattr(tool, "git", lambda *args: " M docs/timings.json" if args[0] == "status" else "abc1234")
    with pytest.raises(SystemExit) as exc:
        tool.main(["--only", "quick", "tests"])
    assert exc.value.code == 2 and order == ["tests", "quick", "jobs"]  # nothing measured


def test_conftest_keeps_its_file_order_under_xdist(monkeypatch):
    """pytest-xdist's loadfile hands out files by their number of tests unless told not to:
    with a record of the files' seconds, tests/conftest.py turns that off so that its own
    order (longest first) is the one the workers take; without a record it leaves xdist's."""
    from types import SimpleNamespace

    import tests.conftest as conftest

    cfg = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    monkeypatch.setattr(conftest, "recorded_file_seconds", lambda: {"tests/unit/test_io.py": 1.0})
    conftest.pytest_configure(cfg)
    assert cfg.option.loadscopereorder is False
    cfg.option.loadscopereorder = True
    monkeypatch.setattr(conftest, "recorded_file_seconds", lambda: {})
    conftest.pytest_configure(cfg)
    assert cfg.option.loadscopereorder is True


def test_the_suite_is_timed_with_the_makefiles_test_command():
    """The recorded suite time is of what `make test` runs: the tool's pytest arguments are the
    Makefile's, and the README and docs/testing.md name the same command."""
    args = " ".join(_tool().TEST_ARGS)
    recipe = (ROOT / "Makefile").read_text().split("\ntest: venv\n", 1)[1].split("\n\n", 1)[0]
    assert f"-m pytest {args}\n" in recipe + "\n", recipe
    for doc in ("README.md", "docs/testing.md"):
        assert f"`make test` runs `pytest {args}`" in (ROOT / doc).read_text(), doc


def test_a_test_moved_to_a_file_the_record_does_not_know_keeps_its_place(tmp_path, monkeypatch):
    """A file split off a recorded one (test_dvc.py's end-to-end tests, each a file of its own)
    is ordered by the recorded seconds of its tests, found by name, not last."""
    import json

    import tests.conftest as conftest
    from tests.conftest import recorded_test_seconds

    rows = _tool().slowest_tests(PYTEST_TAIL)
    p = tmp_path / "timings.json"
    p.write_text(json.dumps({"tests": {"slowest": rows, "files": {"tests/unit/test_io.py": 9.5}}}))
    assert recorded_test_seconds(p) == {"test_quick_profile_cache_share_restore_and_experiments": 367.10,
                                        "test_voc_finetuned_end_to_end_with_occlusion": 234.94,
                                        "test_readme_command[L21: make all CONFIG=config/quick.yaml]": 1.02}

    class Item:
        def __init__(self, nodeid: str):
            self.nodeid, self.path = nodeid, ROOT / nodeid.split("::")[0]

        def add_marker(self, marker):
            pass

        def get_closest_marker(self, name):
            return None

    monkeypatch.setattr(conftest, "recorded_file_seconds", lambda: json.loads(p.read_text())["tests"]["files"])
    monkeypatch.setattr(conftest, "recorded_test_seconds", lambda: recorded_test_seconds(p))
    monkeypatch.setattr(conftest, "recorded_slow_tests", lambda: set())
    items = [Item("tests/unit/test_new.py::test_a"), Item("tests/unit/test_io.py::test_x"),
             Item("tests/integration/dvc/test_dvc_quick.py::test_quick_profile_cache_share_restore_and_experiments")]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid.split("::")[0] for i in items] == ["tests/integration/dvc/test_dvc_quick.py", "tests/unit/test_io.py",
                                                        "tests/unit/test_new.py"]
