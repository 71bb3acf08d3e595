"""Loss-based baselines: the shared MLP backbone + one linear head (the BCE row's
model, trainer and hyper-parameters), trained with a different loss from
:mod:`cdgtmll.nn.losses`. Only the loss differs between these rows and BCE; prediction
is ``sigmoid(logits)`` of the *unshifted* logits for every row.

Rows and papers (formulas, defaults and the differences from each paper are in the
docstring of the loss class named in brackets):

* **ASL** [``asl``, :class:`cdgtmll.nn.losses.asl.AsymmetricLoss`] -- Ridnik, Ben-Baruch,
  Zamir, Noy, Friedman, Protter, Zelnik-Manor, "Asymmetric Loss For Multi-Label
  Classification", ICCV 2021. Defaults of every official training script:
  ``gamma_neg=4``, ``gamma_pos=0``, ``clip=0.05`` (eps 1e-8, detached focusing weights).
* **DBL** [``dbl``, :class:`cdgtmll.nn.losses.dbl.DistributionBalancedLoss`] -- Wu, Huang,
  Zhang, Lin, Wang, "Distribution-Balanced Loss for Multi-Label Classification in
  Long-Tailed Datasets", ECCV 2020. Defaults are the paper's VOC values
  (``smooth_mu=0.3``, ``lam=5``; a=0.1, b=10, kappa=0.05, focal gamma 2 x 2). The
  COCO values ``smooth_mu=0.2``, ``lam=2`` are *not* defaults: they come through the
  config's ``dataset_overrides.<coco dataset>.DBL: {smooth_mu: 0.2, lam: 2.0}``.
* **Focal** [``focal``, :class:`cdgtmll.nn.losses.focal.FocalLoss`] -- Lin, Goyal, Girshick,
  He, Dollar, "Focal Loss for Dense Object Detection", ICCV 2017: ``gamma=2``,
  ``alpha=0.25`` (the RetinaNet setting).
* **CB** [``cb``, :class:`cdgtmll.nn.losses.cb.ClassBalancedLoss`] -- Cui, Jia, Lin, Song,
  Belongie, "Class-Balanced Loss Based on Effective Number of Samples", CVPR 2019:
  sigmoid CE weighted by the effective number, ``beta=0.999``; multi-label use
  averages the weights of an instance's positive labels.
* **LDAM** [``ldam``, :class:`cdgtmll.nn.losses.ldam.LDAMLoss`] -- Cao, Wei, Gaidon,
  Arechiga, Ma, "Learning Imbalanced Datasets with Label-Distribution-Aware Margin
  Loss", NeurIPS 2019: margin ``Delta_k ~ n_k^{-1/4}``, largest ``max_margin=0.5``,
  scale ``s=30``, per-label sigmoid form, no DRW schedule.
* **LogitAdj** [``logit_adjust``, :class:`cdgtmll.nn.losses.logit_adjust.LogitAdjustedLoss`] --
  Menon, Jayasumana, Rawat, Jain, Veit, Kumar, "Long-tail learning via logit
  adjustment", ICLR 2021: trains on ``z + tau*log(pi_k)``, ``tau=1``, per-label
  sigmoid form; predicts with the unadjusted logits.

Common differences from the papers: all of them are applied here to the project's
feature-vector backbone (MLP 2x512 for tabular data) instead of the papers' CNNs; one
reduction for every loss (sum over labels, mean over the batch); the trainer (AdamW,
cosine decay, global-norm clipping 5, epochs/batch size of the dataset's protocol) is
the BCE row's, not each paper's schedule. Loss hyper-parameters are keyword arguments
of the method (``methods.<row>`` in config); unknown keys raise and name themselves.
"""

from __future__ import annotations

from cdgtmll.methods.neural import register_loss_method

ASLMethod = register_loss_method("ASL")
DBLMethod = register_loss_method("DBL")
FocalMethod = register_loss_method("Focal")
CBMethod = register_loss_method("CB")
LDAMMethod = register_loss_method("LDAM")
LogitAdjMethod = register_loss_method("LogitAdj")

__all__ = ["ASLMethod", "DBLMethod", "FocalMethod", "CBMethod", "LDAMMethod", "LogitAdjMethod"]
