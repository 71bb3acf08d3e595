"""Training-data variants: each builds a copy of a processed dataset whose training split
is changed, plus a bookkeeping JSON, from the command line
``python -m cdgtmll.variants.<kind> --in PROCESSED.npz ... --out OUT.npz --bookkeeping OUT.json``
(:func:`cdgtmll.variants.common.variant_main`):

* :mod:`cdgtmll.variants.r_variant` -- rare-focused "R" variants (App. E.3): tail-label
  positives down-sampled, variant id ``R<severity>-s<seed>``;
* :mod:`cdgtmll.variants.noise` -- label noise "Noise-rho" (Sec. 5.3): ``N<rate>-s<seed>``;
* :mod:`cdgtmll.variants.occlusion` -- occluded training images "Occ-gamma" (Sec. 5.3):
  ``O<gamma>-s<seed>``.

Nothing is imported here, so ``python -m cdgtmll.variants.noise`` loads only what noise needs.
"""
