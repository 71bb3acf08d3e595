"""Data-side baselines: the BCE row (shared MLP backbone + one linear head, BCE, the
shared trainer and its hyper-parameters) with a different *data path*.

* **BalanceMix** -- minority-augmented mixup with label-wise management of the targets
  (the training inputs and targets of each batch change; model, loss and trainer are BCE's).
* **MLBOTE** -- borderline oversampling of the training feature vectors before training
  (BCE is then trained on real + synthetic rows).
* **LSFA** -- BCE, then a feature generator fitted on head labels produces synthetic
  backbone features for tail labels, and the linear head is retrained on real + synthetic
  features with the backbone frozen.

Each method's docstring cites its paper and lists what differs from the original, and
what was reconstructed rather than taken from the paper. Inputs here are tabular feature
vectors (the papers use images, MULAN data and text respectively).

Every random draw is seeded from ``RunContext.seed`` (own ``torch.Generator`` /
``numpy.random.Generator`` objects, never the global RNG outside the shared trainer), so
the same seed gives identical predictions on CPU.

Modules: :mod:`cdgtmll.methods.data_side_balancemix`, :mod:`cdgtmll.methods.data_side_mlbote`,
:mod:`cdgtmll.methods.data_side_lsfa` (one per method) and
:mod:`cdgtmll.methods.data_side_common` (the shared BCE row). Importing this module
registers the three methods; their public names are re-exported here.
"""

from __future__ import annotations

from cdgtmll.methods.data_side_balancemix import (
    GMM_MIN_COUNT,
    BalanceMixMethod,
    class_confidences,
    gmm_clean_probability,
    label_wise_management,
    minority_sampling_probs,
    mix_pair,
    sample_mix_lambda,
)
from cdgtmll.methods.data_side_lsfa import (
    FeatureCVAE,
    LSFAMethod,
    cvae_loss,
    generate_tail_features,
    label_prototypes,
    split_head_tail,
    train_feature_generator,
)
from cdgtmll.methods.data_side_mlbote import (
    CROSS,
    INTERIOR,
    SELF,
    MLBOTEMethod,
    imbalance_ratios,
    mlbote_label_borders,
    mlbote_labels_to_oversample,
    mlbote_oversample,
    mlbote_seed_types,
)

__all__ = [
    "CROSS", "GMM_MIN_COUNT", "INTERIOR", "SELF", "BalanceMixMethod", "FeatureCVAE", "LSFAMethod", "MLBOTEMethod",
    "class_confidences", "cvae_loss", "generate_tail_features", "gmm_clean_probability", "imbalance_ratios",
    "label_prototypes", "label_wise_management", "minority_sampling_probs", "mix_pair", "mlbote_label_borders",
    "mlbote_labels_to_oversample", "mlbote_oversample", "mlbote_seed_types", "sample_mix_lambda",
    "split_head_tail", "train_feature_generator",
]
