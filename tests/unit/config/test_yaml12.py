"""The config files' YAML loader: YAML 1.2 core-schema floats, SafeLoader otherwise, and
duplicate keys as errors naming the key, its path and both lines."""

import math

import pytest
import yaml

from cdgtmll.config import yaml12


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-3", 0.001),
        ("1E+5", 100000.0),
        (".5", 0.5),
        ("-.5", -0.5),
        ("-2.0e10", -2.0e10),
        ("1e3", 1000.0),
        ("+1.5e3", 1500.0),
        ("1.", 1.0),
        (".inf", math.inf),
        ("-.inf", -math.inf),
        ("+.INF", math.inf),
    ],
)
def test_yaml12_floats_are_numbers(text, value):
    got = yaml12.load(f"x: {text}")["x"]
    assert isinstance(got, float) and got == value


def test_nan_and_the_yaml11_difference():
    assert math.isnan(yaml12.load("x: .nan")["x"])
    assert yaml.safe_load("lr_backbone: 1e-3") == {"lr_backbone": "1e-3"}  # what PyYAML (YAML 1.1) reads
    assert yaml12.load("lr_backbone: 1e-3") == {"lr_backbone": 0.001}


@pytest.mark.parametrize(
    "text",
    [
        "1",
        "-7",
        "0x1F",
        "017",
        "1_000",
        "1:30",
        "yes",
        "No",
        "on",
        "true",
        "null",
        "~",
        "2001-12-14",
        "1.2.3",
        "1e",
        "e3",
        "1_000.5",
        "1:30.5",
        "1.0e-3",
        "'1e-3'",
        '"1e3"',
        "abc",
        "CD-GTMLL@alpha=0.4",
        "[1, 2.5, x]",
        "{a: 1}",
        "2001-12-14t21:59:43.10-05:00",
    ],
)
def test_everything_else_as_safe_loader(text):
    assert yaml12.load(f"x: {text}") == yaml.safe_load(f"x: {text}")


def test_duplicate_key_names_key_path_and_both_lines():
    text = "name: a\ntraining:\n  default:\n    epochs: 3\n    lr_head: 0.1\n    epochs: 4\n"
    with pytest.raises(yaml12.DuplicateKeyError) as ei:
        yaml12.load(text)
    e = ei.value
    assert (e.key, e.path, e.line, e.first_line) == ("epochs", "training.default.epochs", 6, 4)
    assert str(e).startswith("found duplicate key 'epochs' (at 'training.default.epochs'), at line 6 (first set at line 4)")


def test_duplicate_key_in_flow_mapping_in_a_list_and_at_top_level():
    with pytest.raises(yaml12.DuplicateKeyError) as ei:
        yaml12.load("x: 1\nl:\n  - {k: 1}\n  - {k: 1, k: 2}\n")
    assert ei.value.path == "l[1].k"
    assert ei.value.where() == "at line 4, column 12 (first set at line 4, column 6)"
    with pytest.raises(
        yaml12.DuplicateKeyError,
        match=r"found duplicate key 'name' \(at 'name'\), at line 3 "
        r"\(first set at line 1\)",
    ):
        yaml12.load("name: a\nseed: 1\nname: b\n")
    # the same key in two mappings, or a key a `<<` merge brought in, is not a duplicate
    assert yaml12.load("a: {k: 1}\nb: {k: 2}\n") == {"a": {"k": 1}, "b": {"k": 2}}
    assert yaml12.load("b: &x {y: 1, z: 1}\nc:\n  <<: *x\n  y: 2\n")["c"] == {"y": 2, "z": 1}


def test_method_override_values_are_yaml12_too():
    from cdgtmll.config.plan import split_method

    assert split_method("BCE@lr_head=1e-3") == ("BCE", {"lr_head": 0.001})  # PyYAML 1.1: the string '1e-3'
