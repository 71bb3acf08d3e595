"""One spelling of a variant and of a setting everywhere (:mod:`cdgtmll.variants.naming`).

A variant (``R0.50-s0``, ``N0.10-s0``, ``O0.30-s0``) is one training-data variant, one sampling
seed; a setting (``R@0.50``, ``N@0.10``, ``O@0.30``) pools a variant's sampling seeds. The tables
(``all_runs.csv``, ``metrics_full.*``, the ``dvc metrics`` files), the claims (the packaged
``paper_claims.csv`` and the checker's reading of the runs) and the audit all spell a setting
the way :func:`cdgtmll.variants.naming.variant_setting` does.
"""

from __future__ import annotations

import csv
import json
import re

import pytest

from cdgtmll.claims import compare
from cdgtmll.claims.paper import read_claims
from cdgtmll.tables import build, collect, layout
from cdgtmll.variants import naming

VARIANTS = ("clean", "R0.50-s0", "R0.50-s1", "N0.10-s0", "N0.10-s1", "O0.30-s0")
SETTINGS = {"clean", "R@0.50", "N@0.10", "O@0.30"}
#: a setting as the claims may name it: one of the tables' settings, or R@* (any severity)
CLAIM_SETTING = re.compile(r"clean|[RNO]@\d\.\d\d|R@\*")


def test_variant_and_setting_names():
    assert [naming.variant_setting(v) for v in VARIANTS] == ["clean", "R@0.50", "R@0.50", "N@0.10", "N@0.10", "O@0.30"]
    assert naming.variant_id(0.5, 1) == "R0.50-s1" and naming.noise_id(0.1, 0) == "N0.10-s0"
    assert naming.occlusion_id(0.3, 2) == "O0.30-s2"
    assert naming.split_variant("N0.10-s1") == ("N", 0.1, 1) and naming.split_variant("clean") is None
    for kind, value in (("R", 0.5), ("N", 0.1), ("O", 0.3)):
        assert naming.parse_setting(naming.setting_id(kind, value)) == (kind, value)
    assert naming.parse_setting("clean") is None and naming.parse_setting("R@*") is None
    assert naming.parse_setting("noise@0.10") is None  # the older claims spelling is not a setting
    assert layout.severity_label("R@0.50") == "@50%"  # Table 2's header for the setting


def _metrics(root, variant, method, seed, value):
    d = root / "yeast" / variant / method / f"seed{seed}"
    d.mkdir(parents=True)
    block = {m: value for m in collect.METRICS}
    (d / "metrics.json").write_text(json.dumps({"global@0.5": block, "adaptive": block}))
    return d / "metrics.json"


@pytest.fixture()
def tables_run(tmp_path):
    paths = [_metrics(tmp_path / "runs", v, m, s, 0.4 + 0.01 * s + (0.1 if m == "CD-GTMLL" else 0))
             for v in VARIANTS for m in ("BCE", "CD-GTMLL") for s in (0, 1)]
    out = tmp_path / "tables"
    assert build.main(["--metrics", *map(str, paths), "--methods", "BCE", "CD-GTMLL", "--out", str(out),
                       "--summary-dir", str(tmp_path / "metrics"), "--summary-json", str(tmp_path / "m.json")]) == 0
    return tmp_path, out


def test_tables_spell_settings_one_way(tables_run):
    tmp, out = tables_run
    runs = list(csv.DictReader(open(out / "all_runs.csv", newline="")))
    assert {r["variant"] for r in runs} == set(VARIANTS)
    assert all(r["setting"] == naming.variant_setting(r["variant"]) for r in runs)
    full = list(csv.DictReader(open(out / "metrics_full.csv", newline="")))
    assert {r["setting"] for r in full} == SETTINGS
    md_settings = {line.split("|")[3].strip() for line in (out / "metrics_full.md").read_text().splitlines()
                   if line.startswith("| global") or line.startswith("| adaptive")}
    assert md_settings == SETTINGS
    html = (out / "metrics_full.html").read_text()
    assert all(f">{s}<" in html for s in SETTINGS) and "noise@" not in html and "occlusion@" not in html
    # dvc metrics files: results/metrics/<dataset>/<setting>/<method>.json; --summary-json keys
    assert {p.name for p in (tmp / "metrics" / "yeast").iterdir()} == SETTINGS
    assert {k.split("/")[2] for k in json.loads((tmp / "m.json").read_text())} == SETTINGS
    # the Table 2 cell of R@0.50 pools both sampling seeds
    t2 = {r["method"]: r for r in csv.DictReader(open(out / "table2_configured.csv", newline=""))}
    assert t2["BCE"]["Yeast-R @50% n"] == "4"


def test_claims_read_the_runs_with_the_tables_settings(tables_run):
    import pandas as pd

    _, out = tables_run
    all_runs = pd.read_csv(out / "all_runs.csv")
    runs = compare.normalise_runs(all_runs)
    assert list(runs["setting"]) == list(all_runs["setting"])  # the claims check reads the tables' names
    for v in VARIANTS:
        assert compare.variant_setting(v)[0] == naming.variant_setting(v)
    assert compare.variant_setting("R0.50-s1") == ("R@0.50", 1) and compare.variant_setting("clean") == ("clean", -1)
    # the older claims spelling (a --claims file written before) reads as the one spelling
    assert compare.canonical_setting("noise@0.1") == "N@0.10" and compare.canonical_setting("occlusion@0.30") == "O@0.30"
    assert compare.canonical_setting("N@0.1") == "N@0.10" and compare.canonical_setting("R@*") == "R@*"


def test_packaged_claims_spell_settings_as_the_tables():
    claims = read_claims()
    settings = set(claims["setting"])
    assert all(CLAIM_SETTING.fullmatch(s) for s in settings), sorted(settings)
    assert all(compare.canonical_setting(s) == s for s in settings)
    assert {"N@0.30", "O@0.30", "R@0.50", "clean"} <= settings
    # a claim id that ends in a setting spells it as its setting column does
    for cid, setting in zip(claims["claim_id"], claims["setting"]):
        last = str(cid).rsplit(":", 1)[-1]
        if "@" in last and last[0] in "RNO" and not last.startswith("R@*"):
            assert last == setting, (cid, setting)
    # every setting the packaged claims name for a corruption is one a variant of the tables has
    for s in settings - {"clean", "R@*"}:
        kind, value = naming.parse_setting(s)
        variant = {"R": naming.variant_id, "N": naming.noise_id, "O": naming.occlusion_id}[kind](value, 0)
        assert naming.variant_setting(variant) == s
