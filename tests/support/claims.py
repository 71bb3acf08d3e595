"""A claim record as the claims check reads one (``cdgtmll.claims.paper``'s columns), for tests."""

from __future__ import annotations

import math


def claim_record(**kw) -> dict:
    """A claim on Yeast's clean split, global mode, with no paper value; ``kw`` overrides any field
    (kind, metric, method, other_method, comparator, ...)."""
    base = {"claim_id": "x", "location": "", "line": 1, "quote": "", "kind": "value", "dataset": "yeast",
            "setting": "clean", "metric": "rare_f1", "method": "CD-GTMLL", "other_method": "",
            "paper_value": math.nan, "paper_value_hi": math.nan, "comparator": "=", "mode": "global",
            "in_comment": False, "notes": ""}
    base.update(kw)
    return base
