"""Occluded-image training variants "Occ-gamma" (paper Sec. 5.3, "Robustness to Noisy
Labels and Occlusions"): "paste a random k x k black patch covering gamma in {10%, 20%,
30%} of the pixels ... All models are trained from scratch on the corrupted set and
evaluated on the clean test split".

The variant is a copy of an image dataset (``X`` = row ids, :mod:`cdgtmll.images.datasets`)
whose meta says which training images are occluded and how:
``meta['occlusion'] = {gamma, seed, split: 'train'}``. Pixels are never written: the
patch is pasted when an image is decoded (:func:`cdgtmll.images.trainer_input.occlude_image`),
by the fine-tuning input pipeline and by frozen-feature extraction alike. Row ``r``'s
patch has side ``k = round(sqrt(gamma * H * W))`` (clipped to ``min(H, W)``) on the
image at its own resolution, and a top-left corner drawn uniformly from
``SeedSequence([seed, r])``: fixed for the whole run (the "corrupted set"), independent
of epochs and workers. Only the training split is occluded; validation and test images
stay clean. Labels are unchanged.

Variant id: ``O<gamma:.2f>-s<seed>`` (e.g. ``O0.10-s0``).

CLI::

    python -m cdgtmll.variants.occlusion --in PROCESSED.npz --gamma 0.1 --seed 0 \\
        --out OUT.npz --bookkeeping OUT.json
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from cdgtmll.data.processed import ProcessedData
from cdgtmll.images.datasets import X_KIND, is_image_rows
from cdgtmll.variants.common import variant_main
from cdgtmll.variants.naming import occlusion_id

VARIANT_KIND = "O"
PAPER_SECTION = "Sec. 5.3 (Robustness to Noisy Labels and Occlusions)"


def variant_id(gamma: float, seed: int) -> str:
    return occlusion_id(gamma, seed)


def apply_to_dataset(data: ProcessedData, gamma: float, seed: int) -> tuple[ProcessedData, dict[str, Any]]:
    """The occluded-training-images variant of image dataset ``data`` and its bookkeeping."""
    if not is_image_rows(data):
        raise ValueError(
            f"{data.name}: occlusion needs an image dataset (meta x_kind '{X_KIND}', as written by "
            f"cdgtmll.data.prepare), got x_kind {data.meta.get('x_kind')!r}"
        )
    if "variant" in data.meta or "occlusion" in data.meta:
        raise ValueError(f"{data.name}: already a variant; apply occlusion to the base dataset")
    g = float(gamma)
    if not (math.isfinite(g) and 0.0 < g <= 1.0):
        raise ValueError(f"gamma must be in (0, 1], got {gamma!r}")
    if isinstance(seed, bool) or int(seed) != seed or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    occ = {"gamma": g, "seed": int(seed), "split": "train"}
    spec = {"kind": VARIANT_KIND, **occ, "variant_id": variant_id(g, seed), "base_name": data.name,
            "paper_section": PAPER_SECTION}
    out = data.with_labels(data.Y, VARIANT_KIND, spec)
    out.meta["occlusion"] = occ
    book = {
        **spec,
        "dataset": data.name,
        "n_occluded_images": int(data.splits["train"].size),
        "n_clean_images": int(data.splits["val"].size + data.splits["test"].size),
        "patch": "k x k black (0) square, k = round(sqrt(gamma * H * W)) clipped to min(H, W), on the decoded "
        "image at its own resolution before augmentation; top-left corner uniform, torch generator seeded "
        "with numpy SeedSequence([seed, row id]) (cdgtmll.images.trainer_input.occlude_image)",
    }
    return out, book


def main(argv: Sequence[str] | None = None) -> int:
    def add_arguments(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--gamma", type=float, required=True, help="occluded fraction of the pixels, in (0, 1]")
        ap.add_argument("--seed", type=int, required=True, help="patch position seed")

    return variant_main(argv, prog="python -m cdgtmll.variants.occlusion", description=__doc__.split("\n")[0],
                        add_arguments=add_arguments, apply=lambda data, a: apply_to_dataset(data, a.gamma, a.seed))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
