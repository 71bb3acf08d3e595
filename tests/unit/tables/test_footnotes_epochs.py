"""The tables' "kept epochs" footnote names the setting each range belongs to,
on real runs: MULAN Yeast prepared from the mirror, BCE with ``select_epoch: best_val`` trained
briefly on the clean data and on its R-variant (severity 0.40) by :func:`cdgtmll.train.run_seed`,
scored by ``cdgtmll.metrics.evaluate_run`` and collected as the tables collect them. Each
expected range is read back from the runs' own ``provenance.json``."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.runs import prepared_yeast, train_and_evaluate
from tests.support.specs import clean_spec

SEEDS = (0, 1)
EPOCHS = 6
HP = {"epochs": EPOCHS, "batch_size": 256, "hidden_dim": 32, "lr_backbone": 2e-2, "select_epoch": "best_val"}
VARIANT = "R0.40-s0"


@pytest.fixture(scope="module")
def yeast_best_val_runs(tmp_path_factory, mirror):
    """metrics.json paths of BCE (best_val) on Yeast clean and Yeast R0.40-s0, and the kept
    epoch of each run as its provenance records it: ``{setting: [epoch, ...]}``."""
    import torch

    from cdgtmll.variants.r_variant import apply_to_dataset

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("epochs_yeast")
    clean, clean_path = prepared_yeast(root, mirror)
    r_data, _ = apply_to_dataset(clean, 0.40, 0)
    r_path = root / "data" / "yeast" / f"{VARIANT}.npz"
    r_data.save(r_path)
    paths, kept = [], {}
    for variant, setting, data, data_path in (("clean", "clean", clean, clean_path),
                                               (VARIANT, "R@0.40", r_data, r_path)):
        rundir = root / "runs" / "yeast" / variant / "BCE"
        spec = clean_spec("yeast", "BCE", seeds=SEEDS, variant=variant, training={"backbone": "mlp"}, hparams=HP)
        train_and_evaluate(data, data_path, clean_path, rundir, spec)
        for seed in SEEDS:
            sel = json.loads((rundir / f"seed{seed}" / "provenance.json").read_text())["epoch_selection"]
            assert sel["rule"] == "best_val"
            kept.setdefault(setting, []).append(int(sel["epoch"]))
            paths.append(rundir / f"seed{seed}" / "metrics.json")
    return paths, kept


def _span(epochs: list[int]) -> str:
    lo, hi = min(epochs), max(epochs)
    return f"{lo} of {EPOCHS}" if lo == hi else f"{lo}-{hi} of {EPOCHS}"


def _kept_part(note: str) -> str:
    assert "kept epochs: " in note, note
    return note.split("kept epochs: ", 1)[1].split(". Per run:", 1)[0]


def test_each_kept_range_names_its_setting(yeast_best_val_runs):
    from cdgtmll.tables.collect import collect, summarise
    from cdgtmll.tables.footnotes import epoch_rule_notes

    paths, kept = yeast_best_val_runs
    summary = summarise(collect(paths))
    (note,) = epoch_rule_notes(summary[summary["mode"] == "global"])
    part = _kept_part(note)
    assert part.startswith("BCE ")
    # '<range> (<setting>, ...)' entries, each range followed by the settings it is the range of
    entries = re.findall(r"(\d+(?:-\d+)? of \d+) \(([^)]*)\)", part[len("BCE "):])
    assert ", ".join(f"{span} ({names})" for span, names in entries) == part[len("BCE "):]
    named = {name: span for span, names in entries for name in names.split(", ")}
    assert named == {f"yeast {setting}": _span(epochs) for setting, epochs in kept.items()}


def test_a_table_names_only_the_settings_it_shows_by_their_column_title(yeast_best_val_runs):
    from cdgtmll.tables.collect import collect, summarise
    from cdgtmll.tables.footnotes import footnotes
    from cdgtmll.tables.layout import build_table, configured_columns

    paths, kept = yeast_best_val_runs
    summary = summarise(collect(paths))
    t1 = build_table(summary, "global", configured_columns(1, [("yeast", "Yeast")], {}), (), ["BCE"], number=1)
    t2 = build_table(summary, "global", configured_columns(2, [("yeast", "Yeast")], {"yeast": [0.40]}), (),
                     ["BCE"], number=2)
    (n1,) = [n for n in footnotes(t1, summary, "global", 0.5) if "kept epochs" in n]
    (n2,) = [n for n in footnotes(t2, summary, "global", 0.5) if "kept epochs" in n]
    assert _kept_part(n1) == f"BCE {_span(kept['clean'])} (Yeast clean)"
    assert _kept_part(n2) == f"BCE {_span(kept['R@0.40'])} (Yeast-R R@0.40)"
