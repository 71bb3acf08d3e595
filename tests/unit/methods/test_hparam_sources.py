"""Every built-in hyper-parameter says where its default comes from (``HParam.source``).

The four forms (:mod:`cdgtmll.methods.builtin`): ``paper <cite> <where>``, ``official code
<owner/repo> <file>[@<commit>]``, ``ours: <why>`` and ``unverified: <what the docs say>``. A
source is documentation only: it never enters a run spec. Where docs/methods.md ("Every
default: the paper's words, or a reading of ours") names a CD-GTMLL or trainer default's
origin, the spec says the same.
"""

from __future__ import annotations

import dataclasses
import re

from cdgtmll.methods.builtin import BUILTIN
from cdgtmll.methods.spec import TRAINER_DEFAULTS, HParam
from tests.support.paths import ROOT

FORMS = (
    re.compile(r"paper \S.*"),
    # owner/repo, a file path with an extension, optionally @ a full commit, optionally a note
    re.compile(r"official code [\w.-]+/[\w.-]+ [\w./-]+\.\w+(@[0-9a-f]{40})?( .+|; .+)?"),
    re.compile(r"ours: \S.*"),
    re.compile(r"unverified: \S.*"),
)


def _all() -> list[tuple[str, str, HParam]]:
    return [(spec.name, key, hp) for spec in BUILTIN for key, hp in spec.all_hparams().items()]


def test_every_builtin_hparam_has_a_source_of_an_allowed_form():
    bad = [f"{name}.{key}: {hp.source!r}" for name, key, hp in _all()
           if not any(form.fullmatch(hp.source) for form in FORMS)]
    assert not bad, "sources not of the form paper / official code / ours: / unverified::\n" + "\n".join(bad)


def test_the_forms_reject_a_bare_or_vague_source():
    for source in ("", "ours", "paper", "official code", "official training scripts (Ridnik et al., ICCV 2021)",
                   "official code Alibaba-MIIL/ASL", "official code Alibaba-MIIL/ASL train.py@126c953",
                   "the loss's own default (cdgtmll.nn.losses)", "unverified:"):
        assert not any(form.fullmatch(source) for form in FORMS), source


def test_sources_are_not_part_of_the_run_spec():
    """``MethodSpec.resolved`` (the run spec's ``resolved_hparams``) is the same whatever the sources say."""
    training = dict(TRAINER_DEFAULTS)
    for spec in BUILTIN:
        blank = dataclasses.replace(spec, hparams={k: dataclasses.replace(h, source="x") for k, h in spec.hparams.items()})
        assert blank.resolved({}, training) == spec.resolved({}, training), spec.name


def _docs_default_origins() -> dict[str, str]:
    """``{key: "paper" | "reading"}`` of the CD-GTMLL and ``training.*`` rows of docs/methods.md's
    table "Every default: the paper's words, or a reading of ours" (its source column)."""
    text = (ROOT / "docs/methods.md").read_text(encoding="utf-8")
    section = text.split("## Every default", 1)[1].split("\n## ", 1)[0]
    origins = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not (cells[0].startswith("CD-GTMLL") or cells[0].startswith("`training.*.")):
            continue
        kind = "paper" if cells[2].startswith("paper") else "reading" if cells[2].startswith("reading") else None
        for key in re.findall(r"`([^`]+)`", cells[0]):
            origins[key.removeprefix("training.*.")] = kind
    return origins


def test_docs_table_of_defaults_agrees_with_the_sources():
    origins = _docs_default_origins()
    spec = next(s for s in BUILTIN if s.name == "CD-GTMLL").all_hparams()
    checked = {k: v for k, v in origins.items() if k in spec and v is not None}
    # the table covers the trainer's defaults and the CD-GTMLL keys it names
    assert {"n_players", "clip_scope", "payoff_weights", "select_epoch", "lr_head", "epochs"} <= set(checked)
    prefix = {"paper": "paper ", "reading": "ours: "}
    bad = [f"{k}: docs say {v}, spec says {spec[k].source!r}" for k, v in sorted(checked.items())
           if not spec[k].source.startswith(prefix[v])]
    assert not bad, "\n".join(bad)

