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

Modules: :mod:`.balancemix`, :mod:`.mlbote`, :mod:`.lsfa` (one per method, each registers its
method) and :mod:`.common` (the shared BCE row).
"""
