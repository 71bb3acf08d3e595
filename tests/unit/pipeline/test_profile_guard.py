"""A results folder knows its profile (src/cdgtmll/pipeline/profile_guard.py). The run through
Snakemake (a quick run, then another profile's into the same folder) is
tests/integration/faults/test_profile_guard_run.py."""

from __future__ import annotations

import datetime as dt
import json
import shlex

import pytest

from cdgtmll.pipeline.profile_guard import (
    MARKER,
    TABLES_RECORD,
    MarkerError,
    ProfileMismatch,
    Recorded,
    check,
    is_dry_run,
    mismatch_message,
    read_recorded,
    write_marker,
)


def test_the_marker_round_trips_and_records_name_files_and_time(tmp_path):
    when = dt.datetime(2026, 11, 28, 9, 30, tzinfo=dt.UTC)
    path = write_marker(tmp_path, "quick", ["config/quick.yaml"], now=when)
    assert path == tmp_path / MARKER
    assert json.loads(path.read_text()) == {"name": "quick", "configfiles": ["config/quick.yaml"],
                                            "started": when.isoformat(timespec="seconds")}
    rec = read_recorded(tmp_path)
    assert rec == Recorded("quick", ("config/quick.yaml",), when.isoformat(timespec="seconds"), MARKER)
    # no temporaries left beside it (an atomic write)
    assert [p.name for p in path.parent.iterdir()] == ["profile.json"]


def test_no_record_is_none_and_the_tables_record_stands_in_for_a_missing_marker(tmp_path):
    assert read_recorded(tmp_path) is None
    tables = tmp_path / TABLES_RECORD
    tables.parent.mkdir(parents=True)
    tables.write_text(json.dumps({"profile": "paper", "configfiles": ["config/paper.yaml"], "commits": []}))
    assert read_recorded(tmp_path) == Recorded("paper", ("config/paper.yaml",), "", TABLES_RECORD)
    # the marker wins over the tables' record
    write_marker(tmp_path, "quick", ["config/quick.yaml"])
    assert read_recorded(tmp_path).name == "quick"


def test_an_unreadable_tables_record_counts_as_absent(tmp_path):
    tables = tmp_path / TABLES_RECORD
    tables.parent.mkdir(parents=True)
    tables.write_text("{not json")
    assert read_recorded(tmp_path) is None


@pytest.mark.parametrize("text, field", [("{oops", "JSON"), (json.dumps({"name": ""}), "'name'"),
                                         (json.dumps([1]), "'name'"),
                                         (json.dumps({"name": "q", "configfiles": "a.yaml"}), "'configfiles'")])
def test_a_broken_marker_is_an_error_naming_the_file_and_field(tmp_path, text, field):
    marker = tmp_path / MARKER
    marker.parent.mkdir(parents=True)
    marker.write_text(text)
    with pytest.raises(MarkerError) as e:
        read_recorded(tmp_path)
    assert str(marker) in str(e.value) and field in str(e.value)


def test_the_same_profile_passes_whatever_its_settings(tmp_path):
    write_marker(tmp_path, "default", ["config/config.yaml"])
    # a --config override or a DVC settings layer keeps the config's name
    assert check(tmp_path, "default", ["config/config.yaml"], environ={}) is None
    assert check(tmp_path, "default", ["config/other-copy.yaml"], environ={}) is None
    assert check(tmp_path / "empty", "anything", ["x.yaml"], environ={}) is None  # nothing recorded


def test_another_profile_stops_naming_both_and_each_way_forward(tmp_path):
    write_marker(tmp_path, "quick", ["config/quick.yaml"])
    with pytest.raises(ProfileMismatch) as e:
        check(tmp_path, "default", ["config/config.yaml"], environ={})
    msg = str(e.value)
    assert '"quick"' in msg and '"default"' in msg and MARKER in msg
    lines = [ln.strip() for ln in msg.splitlines()]
    # go on with the recorded profile
    assert "snakemake all --cores all --configfile config/quick.yaml" in lines
    assert "make all CONFIG=config/quick.yaml" in lines
    # or start the other one afresh, the old folders moved aside
    assert "mv results results.quick && mv figures figures.quick" in lines
    assert "snakemake all --cores all --configfile config/config.yaml" in lines
    assert "make all CONFIG=config/config.yaml" in lines
    assert lines.index("make all CONFIG=config/quick.yaml") < lines.index("mv results results.quick && mv figures "
                                                                          "figures.quick")


def test_under_dvc_another_profile_warns_instead(tmp_path):
    write_marker(tmp_path, "quick", ["config/quick.yaml"])
    warning = check(tmp_path, "default", ["config/config.yaml"], environ={"DVC_STAGE": "pipeline"})
    assert warning and '"quick"' in warning and "DVC" in warning


def test_hostile_names_and_paths_are_quoted_for_the_terminal_and_the_shell():
    name = "evil\n$(rm -rf ~) 'x'"
    rec = Recorded(name, ("config/my profile.yaml", "config/b.yaml"), "", MARKER)
    msg = mismatch_message(rec, "default", ["config/config.yaml"])
    assert "\\n$(rm -rf ~)" in msg  # the newline is escaped: the name stays on its line
    # two config files: snakemake takes both; make's CONFIG takes one, so no make line for it
    assert f"snakemake all --cores all --configfile {shlex.quote('config/my profile.yaml')} config/b.yaml" in msg
    assert "make all CONFIG='config/my profile.yaml'" not in msg
    # the folder it is moved aside to: a plain name, whatever the profile's
    moved = next(ln.strip() for ln in msg.splitlines() if ln.strip().startswith("mv results"))
    assert shlex.split(moved)[2].startswith("results.evil_") and "$" not in moved and "\n" not in moved
    assert mismatch_message(rec, name, ["x.yaml"]) is None


@pytest.mark.parametrize("argv, dry", [
    (["snakemake", "-n", "all"], True),
    (["snakemake", "all", "--dry-run"], True),
    (["snakemake", "--dryrun"], True),
    (["/x/snakemake/__main__.py", "-np", "--cores", "2"], True),
    (["snakemake", "--cores", "all", "all"], False),
    (["snakemake", "-c1", "--configfile", "config/quick.yaml"], False),
    (["snakemake", "-p", "--notemp"], False),
])
def test_a_dry_run_is_read_from_the_command_line(argv, dry):
    assert is_dry_run(argv) is dry
