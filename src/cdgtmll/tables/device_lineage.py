"""Which kinds of machine the runs behind the tables ran on.

Every run records its CPU (and GPU) in ``provenance.json`` (:func:`cdgtmll.lineage.provenance.device_info`);
:func:`cdgtmll.tables.collect.collect` copies the kind of machine into ``all_runs.csv`` (``device``,
:func:`cdgtmll.lineage.provenance.run_machine`: ``A, then B`` for a run resumed from its
checkpoint on another kind of machine). The same seed, config and data give identical
numbers on the same kind of machine only: torch picks its CPU kernels by vendor and instruction
set (dropout's masks, for one: :func:`cdgtmll.lineage.provenance.cpu_model`), and GPUs of
different models round differently. :func:`device_lineage` summarises it for ``profile.json``,
:func:`device_footnote` says it under every table when the runs come from more than one kind,
and ``cdgtmll audit`` warns of it (:mod:`cdgtmll.lineage.audit`). Neither is an error: a cluster
may hold several kinds of node.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

#: the column of all_runs.csv that this module reads
COLUMN = "device"


def device_lineage(runs: pd.DataFrame) -> dict[str, Any]:
    """``{"devices": {kind: n runs}, "unrecorded_runs": n, "runs": n}`` over the runs (one row per
    metrics file)."""
    if "metrics_path" in runs:
        runs = runs.drop_duplicates("metrics_path")
    kinds = runs[COLUMN] if COLUMN in runs else pd.Series([None] * len(runs), index=runs.index, dtype=object)
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
