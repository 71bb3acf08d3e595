"""Run specs for tests that train without planning a config (``from tests.support.specs import
clean_spec``): :class:`cdgtmll.config.run_spec.RunSpec` of a clean run on the CPU with the
default profile's split and tail settings (``data``, ``r_variants``; the tests' tail fraction
0.2), the method as its own registered method, and no hyper-parameters unless given."""

from __future__ import annotations

from typing import Any

from cdgtmll.config.run_spec import RunSpec


def clean_spec(dataset: str, method: str, *, seeds=(0,), training: dict | None = None, **fields: Any) -> RunSpec:
    """The run spec of ``method`` on the clean variant of ``dataset``; ``fields`` override or add
    any other field (``hparams``, ``resolved_hparams``, ``registered_method``, ``variant``, ...)."""
    spec: dict[str, Any] = {
        "dataset": dataset, "variant": "clean", "method": method, "registered_method": method,
        "hparams": {}, "training": dict(training or {}), "seeds": tuple(seeds), "device": "cpu",
        "data": {"val_fraction": 0.1, "split_seed": 0}, "r_variants": {"tail_fraction": 0.2, "tie_seed": 0},
    }
    spec.update(fields)
    return RunSpec(**spec)
