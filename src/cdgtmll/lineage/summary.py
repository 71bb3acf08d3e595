"""Which commits and which kinds of machine the runs behind the tables come from.

Both summaries read the same rows (``all_runs.csv``, one row per metrics file once the
threshold modes are folded), feed the same consumers (``profile.json`` and the footnotes of
:mod:`cdgtmll.tables.build`, the claims page of :mod:`cdgtmll.claims.check`) and say the same
kind of thing: whether one number of a table can be traced to one thing anyone can check out
or run on. Hence one module.

**Code.** Every run records the git commit and dirty flag of its checkout and its job's code
identity (:mod:`cdgtmll.lineage.code`) in ``provenance.json``; :func:`cdgtmll.tables.collect.collect`
copies them into ``all_runs.csv`` (``git_commit``, ``git_dirty``, ``code_sha256``). Dirty means
uncommitted changes to code (:mod:`cdgtmll.lineage.worktree`): an edited ``params.yaml`` (as
``dvc exp run -S`` leaves it) or profile is an input of the run, not dirt. Code is an
input of every job, so after an edit the affected runs are made again; runs whose code did not
change keep the commit they were made at. Tables built from several commits are therefore
normal after a commit, but only one clean commit makes every number traceable to code anyone
can check out. :func:`code_lineage` summarises it for ``profile.json``, :func:`code_footnote`
says it under every table when there is more than one commit or a dirty tree, and
``cdgtmll audit`` fails on it unless ``--allow-mixed`` (:mod:`cdgtmll.lineage.audit`).

**Machines.** Every run records its CPU (and GPU) in ``provenance.json``
(:func:`cdgtmll.lineage.provenance.device_info`); :func:`cdgtmll.tables.collect.collect` copies
the kind of machine into ``all_runs.csv`` (``device``, :func:`cdgtmll.lineage.provenance.run_machine`:
``A, then B`` for a run resumed from its checkpoint on another kind of machine). The same seed,
config and data give identical numbers on the same kind of machine only: torch picks its CPU
kernels by vendor and instruction set (dropout's masks, for one:
:func:`cdgtmll.lineage.provenance.cpu_model`), and GPUs of different models round differently.
:func:`device_lineage` summarises it for ``profile.json``, :func:`device_footnote` says it under
every table when the runs come from more than one kind, and ``cdgtmll audit`` warns of it
(:mod:`cdgtmll.lineage.audit`). Neither is an error: a cluster may hold several kinds of node.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

#: columns of all_runs.csv that :func:`code_lineage` reads
CODE_COLUMNS = ("git_commit", "git_dirty", "code_sha256")
#: the column of all_runs.csv that :func:`device_lineage` reads
DEVICE_COLUMN = "device"


def _truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1")


def code_lineage(runs: pd.DataFrame) -> dict[str, Any]:
    """``{"commits": {commit: n runs}, "dirty_runs": n, "dirty_examples": [...], "unrecorded_runs": n,
    "code_identities": n distinct}`` over the runs (one row per metrics file)."""
    if "metrics_path" in runs:
        runs = runs.drop_duplicates("metrics_path")
    for c in CODE_COLUMNS:
        if c not in runs:
            runs = runs.assign(**{c: None})
    commit = runs["git_commit"].where(runs["git_commit"].notna() & (runs["git_commit"].astype(str) != ""), None)
    dirty = runs["git_dirty"].map(_truthy)
    counts = commit.dropna().astype(str).value_counts()
    paths = runs["metrics_path"] if "metrics_path" in runs else pd.Series([""] * len(runs), index=runs.index)
    return {
        "commits": {str(k): int(v) for k, v in sorted(counts.items())},
        "dirty_runs": int(dirty.sum()),
        "dirty_examples": [str(p) for p in paths[dirty].head(3)],
        "unrecorded_runs": int(commit.isna().sum()),
        "code_identities": int(runs["code_sha256"].dropna().astype(str).replace("", None).dropna().nunique()),
        "runs": len(runs),
    }


def is_mixed(lineage: dict[str, Any]) -> bool:
    """More than one commit, or any run from a dirty tree."""
    return len(lineage["commits"]) > 1 or lineage["dirty_runs"] > 0


def code_footnote(lineage: dict[str, Any]) -> str | None:
    """The footnote under every table when its runs come from more than one commit or from a
    working tree with uncommitted changes to code; None otherwise."""
    if not is_mixed(lineage):
        return None
    parts = []
    if len(lineage["commits"]) > 1:
        listed = ", ".join(f"{c[:10]} ({n} run{'s' if n != 1 else ''})" for c, n in lineage["commits"].items())
        parts.append(f"the {lineage['runs']} runs behind these tables come from {len(lineage['commits'])} commits: {listed}")
    if lineage["dirty_runs"]:
        parts.append(f"{lineage['dirty_runs']} of them were made from a working tree with uncommitted changes "
                     f"to code (e.g. {lineage['dirty_examples'][0]})")
    return ("Code lineage: " + "; ".join(parts) + ". `cdgtmll audit TABLE --cell ROW COLUMN` names each run's commit; "
            "for numbers that all trace to one commit, commit and re-run everything (`snakemake --forceall all`).")


def device_lineage(runs: pd.DataFrame) -> dict[str, Any]:
    """``{"devices": {kind: n runs}, "unrecorded_runs": n, "runs": n}`` over the runs (one row per
    metrics file)."""
    if "metrics_path" in runs:
        runs = runs.drop_duplicates("metrics_path")
    kinds = (runs[DEVICE_COLUMN] if DEVICE_COLUMN in runs
             else pd.Series([None] * len(runs), index=runs.index, dtype=object))
    kinds = kinds.where(kinds.notna() & (kinds.astype(str) != ""), None)
    counts = kinds.dropna().astype(str).value_counts()
    return {"devices": {str(k): int(v) for k, v in sorted(counts.items())},
            "unrecorded_runs": int(kinds.isna().sum()), "runs": len(runs)}


def device_footnote(lineage: dict[str, Any]) -> str | None:
    """The footnote under every table when its runs ran on more than one kind of machine; None
    otherwise."""
    if len(lineage["devices"]) < 2:
        return None
    listed = ", ".join(f"{k} ({n} run{'s' if n != 1 else ''})" for k, n in lineage["devices"].items())
    return (f"Device lineage: the {lineage['runs']} runs behind these tables ran on {len(lineage['devices'])} kinds "
            f"of machine: {listed}. The same seed gives the same numbers on the same kind of machine only; "
            "`cdgtmll audit TABLE --cell ROW COLUMN` names each run's machine.")
