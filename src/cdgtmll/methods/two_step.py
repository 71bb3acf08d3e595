r"""Two-step plug-in baselines for the F-measure: PE and SRB.

Both rows are "estimate, then threshold", on the BCE row's model and trainer (MLP
backbone + one linear head over all L labels, :func:`cdgtmll.nn.trainer.train`, the
same trainer hyper-parameters):

1. **Class-probability estimation.** Minimise a *strongly proper composite* loss
   :math:`\ell(y', z)`, :math:`y' = 2y - 1 \in \{-1, +1\}`, per label; its link
   :math:`\psi^{-1}` maps the minimiser of the conditional risk
   :math:`\eta\,\ell(+1, z) + (1-\eta)\,\ell(-1, z)` back to :math:`\eta = P(y=1|x)`.
   ``predict_proba`` returns :math:`\psi^{-1}(z)`, a calibrated probability, so
   mAP and the global-threshold rows are computed on probabilities.
2. **Threshold tuning on the validation split** (the held-out sample of both
   papers), maximising each target F-measure directly, at the end of ``fit``. Both
   rules are tuned, on the same validation scores:

   * **macro** rule: one threshold per label,
     :func:`cdgtmll.metrics.thresholds.tune_thresholds` (exact search, per-label F1) -- the
     plug-in rule for Macro-F1 and Rare-F1 (both are means of per-label F1);
   * **micro** rule: one threshold shared by all labels,
     :func:`cdgtmll.metrics.thresholds.tune_global_threshold` (exact search, pooled micro-F1) --
     the plug-in rule for Micro-F1.

   Both papers show this is the right form of the optimum: macro-averaged
   metrics decompose over labels (a threshold per label), micro-averaged ones are
   optimised by thresholding every label's marginal at one common value
   (Koyejo et al. 2015, Sec. 4; the multilabel results of both papers). So each F1
   column is scored with the rule for its own metric: both threshold sets
   (:meth:`decision_thresholds_by_rule`) are saved in ``predictions.npz``
   (``method_thresholds_micro``, ``method_thresholds_macro``; also in
   :meth:`extra_outputs`), and evaluation (:mod:`cdgtmll.metrics.evaluate_run`) computes the
   row's ``method`` block as Micro-F1 at the shared threshold, Macro-F1 and Rare-F1 at
   the per-label thresholds, recording the rule per column.
   ``target`` ('macro' default, or 'micro') only selects which of the two sets
   :meth:`decision_thresholds` returns (the row's single decision rule outside the
   per-metric evaluation; saved as ``method_thresholds``); it does not change the
   scores or the tables. Decision rule: ``p >= tau`` (as :func:`cdgtmll.metrics.definitions.binarize`).

PE -- plug-in estimator
-----------------------
Koyejo, Natarajan, Ravikumar, Dhillon, "Consistent Multilabel Classification",
NeurIPS 2015: step 1 is regularised **logistic** regression (``BCE``, the project's
:class:`cdgtmll.nn.losses.bce.BCELoss`, link :math:`\sigma(z)`); step 2 as above. Step 1 is
*exactly* the BCE row (same model, loss, seed handling, hence the same
probabilities on the same seed); PE differs from BCE only by its decision rule, so its
threshold-free metrics (mAP, P@k) equal BCE's by construction (the tables footnote this,
and the claims check reports a paper that prints them different as a paper
inconsistency).

SRB -- surrogate regret bounds
------------------------------
Kotlowski, Dembczynski, "Surrogate regret bounds for generalized classification
performance metrics", Machine Learning 106 (2017) (conference version ACML 2015): the
regret of the thresholded estimate for a linear-fractional metric (F-measure) is
bounded by :math:`C\sqrt{(2/\lambda)\,\mathrm{Reg}_\ell}` for any
:math:`\lambda`-strongly proper composite surrogate :math:`\ell`; thresholds are tuned
on held-out data. The row's difference from PE is the surrogate, a hyper-parameter
``surrogate`` (the logistic case would coincide with PE, so it is not offered):

* ``'squared'`` (default): :math:`\ell(y', z) = (1 - y'z)^2`, minimiser
  :math:`z^* = 2\eta - 1`, link :math:`p = \psi^{-1}(z) = \mathrm{clip}((1+z)/2, 0, 1)`,
  :math:`\lambda = 8` (conditional regret :math:`4(p-\eta)^2` for :math:`z \in [-1,1]`);
* ``'exponential'``: :math:`\ell(y', z) = e^{-y'z}`, minimiser
  :math:`z^* = \tfrac12\log\frac{\eta}{1-\eta}`, link :math:`p = 1/(1+e^{-2z})`,
  :math:`\lambda = 4`.

For a target :math:`y \in [0, 1]` both losses are the convex combination
:math:`y\,\ell(+1, z) + (1-y)\,\ell(-1, z)` (the conditional risk; for binary targets
this is :math:`\ell(y', z)` exactly). Reduction: :func:`cdgtmll.nn.losses.common.reduce` (sum
over labels, mean over the batch), as for every loss of the project.

Differences from the papers
---------------------------
* Class-probability model: both papers analyse / run linear (or kernel) models; here
  the project's MLP backbone + linear head, trained by the shared trainer (AdamW with
  weight decay, cosine decay, global-norm clipping 5) rather than to an exact
  regularised-ERM optimum.
* Data split: the papers split the training sample in two; here step 1 uses the
  train split and step 2 the project's validation split (the same split every row
  tunes its thresholds on).
* Squared link: a linear head can output :math:`|z| > 1`; the link clips such outputs
  to exactly 0 or 1 (the paper's :math:`\psi^{-1}` restricted to [0, 1]), which makes
  ties in the ranking (visible in mAP) where a logistic link would not.
* Exponential loss overflow guard: for :math:`u = -y'z > 30`,
  :math:`e^{u}` is replaced by its first-order extension
  :math:`e^{30}(1 + u - 30)` (same value and gradient at 30, convex, finite), so a
  grossly mis-scored element gives a large finite gradient (then clipped by the
  trainer) instead of ``inf``/``nan``. For :math:`|z| \le 30` the loss is exact; the
  minimiser of the conditional risk (:math:`|z^*| \le 15` for
  :math:`\eta \in [10^{-13}, 1 - 10^{-13}]`) is unaffected.
* Thresholds are searched over the distinct validation scores (exact) with ties
  broken towards the largest threshold; a label without validation positives keeps
  0.5 (macro); see :mod:`cdgtmll.metrics.evaluation`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from cdgtmll.methods.base import FitData, RunContext, register
from cdgtmll.methods.neural import LinearHeadTask, NeuralMethod
from cdgtmll.metrics import definitions, thresholds
from cdgtmll.nn.losses.common import check_shapes, reduce
from cdgtmll.nn.losses.registry import build_loss

TARGETS = ("macro", "micro")
#: the plug-in rule that scores each F1 column (Koyejo et al. 2015): shared threshold for
#: micro-averaged F1, per-label thresholds for the per-label means
METRIC_RULES = {"micro_f1": "micro", "macro_f1": "macro", "rare_f1": "macro"}

#: exponent above which the exponential loss continues linearly (overflow guard)
EXP_LINEAR_ABOVE = 30.0


# ---------------------------------------------------------------------------- surrogates


class SquaredProperLoss(nn.Module):
    r"""Squared loss as a proper composite loss: :math:`\ell(y', z) = (1 - y'z)^2`,
    link :math:`\psi^{-1}(z) = \mathrm{clip}((1+z)/2, 0, 1)` (8-strongly proper).

    Element-wise, for a target :math:`y \in [0,1]`:
    :math:`y(1-z)^2 + (1-y)(1+z)^2`. Signature and reduction as every loss of
    :mod:`cdgtmll.nn.losses` (``(logits, targets) -> scalar``, sum over labels, mean over
    the batch)."""

    name = "squared"

    def __init__(self, label_counts: np.ndarray | None = None, n_train: int | None = None) -> None:
        super().__init__()

    @staticmethod
    def elementwise(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return targets * (1.0 - logits) ** 2 + (1.0 - targets) * (1.0 + logits) ** 2

    @staticmethod
    def link(logits: torch.Tensor) -> torch.Tensor:
        return ((1.0 + logits) * 0.5).clamp(0.0, 1.0)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_shapes(logits, targets)
        return reduce(self.elementwise(logits, targets))


def _exp_guarded(u: torch.Tensor) -> torch.Tensor:
    """``exp(u)`` for ``u <= c``, ``exp(c) * (1 + u - c)`` above (C^1, convex, finite)."""
    c = EXP_LINEAR_ABOVE
    inside = u <= c
    # exp of a safe input (u where inside, 0 elsewhere): finite values and gradients everywhere
    return torch.where(inside, torch.exp(torch.where(inside, u, torch.zeros_like(u))), math.exp(c) * (1.0 + (u - c)))


class ExponentialProperLoss(nn.Module):
    r"""Exponential loss as a proper composite loss: :math:`\ell(y', z) = e^{-y'z}`,
    link :math:`\psi^{-1}(z) = 1/(1+e^{-2z})` (4-strongly proper).

    Element-wise, for :math:`y \in [0,1]`: :math:`y e^{-z} + (1-y) e^{z}`, each
    exponential continued linearly above exponent 30 (module docstring)."""

    name = "exponential"

    def __init__(self, label_counts: np.ndarray | None = None, n_train: int | None = None) -> None:
        super().__init__()

    @staticmethod
    def elementwise(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return targets * _exp_guarded(-logits) + (1.0 - targets) * _exp_guarded(logits)

    @staticmethod
    def link(logits: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(2.0 * logits)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        check_shapes(logits, targets)
        return reduce(self.elementwise(logits, targets))


SURROGATES: dict[str, type[nn.Module]] = {"squared": SquaredProperLoss, "exponential": ExponentialProperLoss}


# ---------------------------------------------------------------------------- methods


class PlugInMethod(LinearHeadTask, NeuralMethod):
    """Common two-step machinery: subclasses supply ``make_criterion`` and ``link``."""

    def __init__(
        self,
        *,
        target: str,
        **trainer: Any,
    ) -> None:
        super().__init__(**trainer)
        if target not in TARGETS:
            raise ValueError(f"method '{self.name}': target must be one of {list(TARGETS)}, got {target!r}")
        self.target = target
        self._criterion: nn.Module | None = None
        self.thresholds: np.ndarray | None = None
        self.rule_thresholds: dict[str, np.ndarray] = {}
        self._val_report: dict[str, Any] = {}

    # -- step 1 hooks ------------------------------------------------------------------
    def make_criterion(self, data: FitData) -> nn.Module:
        raise NotImplementedError

    def link(self, logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def link_name(self) -> str:
        raise NotImplementedError

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        if data.X_val is None or data.Y_val is None or np.shape(data.Y_val)[0] == 0:
            raise ValueError(f"method '{self.name}': step 2 tunes thresholds on the validation split, which is empty")
        self._criterion = self.make_criterion(data)
        self.thresholds = None
        self.rule_thresholds = {}

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return self.link(model(x))

    # -- step 2 ------------------------------------------------------------------------
    def fit(self, data: FitData, ctx: RunContext) -> PlugInMethod:
        super().fit(data, ctx)
        S_val = self.predict_proba(data.X_val)
        Y_val = data.Y_val
        per_label = np.asarray(thresholds.tune_thresholds(Y_val, S_val), dtype=np.float64)
        shared = float(thresholds.tune_global_threshold(Y_val, S_val))
        self.rule_thresholds = {"macro": per_label, "micro": np.full(data.n_labels, shared)}
        self.thresholds = self.rule_thresholds[self.target].copy()
        micro = definitions.f1_from_counts(*definitions.thresholded_counts(Y_val, S_val, self.rule_thresholds["micro"]))
        macro = definitions.f1_from_counts(*definitions.thresholded_counts(Y_val, S_val, per_label))
        at_half = definitions.f1_from_counts(*definitions.thresholded_counts(Y_val, S_val, 0.5))
        self._val_report = {  # each metric at its own rule (validation, all labels)
            "val_microF1_tuned": float(micro.micro),
            "val_macroF1_tuned": float(macro.macro),
            "val_microF1_at_0.5": float(at_half.micro),
            "val_macroF1_at_0.5": float(at_half.macro),
        }
        return self

    def decision_thresholds(self) -> np.ndarray | None:
        """The ``target`` rule's thresholds (``[L]``); evaluation scores each F1 column
        with its own rule from :meth:`extra_outputs` (module docstring)."""
        return None if self.thresholds is None else self.thresholds.copy()

    def decision_thresholds_by_rule(self) -> dict[str, np.ndarray] | None:
        """Both plug-in rules (module docstring): ``micro`` (shared) and ``macro`` (per label)."""
        return {k: v.copy() for k, v in self.rule_thresholds.items()} or None

    def extra_outputs(self) -> dict[str, Any]:
        if self.thresholds is None:
            return {}
        return {
            "two_step": {
                "target": self.target,
                "link": self.link_name(),
                "thresholds": [float(t) for t in self.thresholds],
                "shared_threshold": float(self.rule_thresholds["micro"][0]),
                "per_label_thresholds": [float(t) for t in self.rule_thresholds["macro"]],
                "metric_rules": dict(METRIC_RULES),
                **self._val_report,
            },
            "hparams": self.hparams(),
        }


@register("PE")
class PEMethod(PlugInMethod):
    """Plug-in estimator (Koyejo et al., NeurIPS 2015): logistic loss (BCE), link
    sigmoid, then validation-tuned F1 thresholds: one shared threshold (micro rule, for
    Micro-F1) and one per label (macro rule, for Macro-/Rare-F1); ``target`` picks the set
    :meth:`decision_thresholds` returns. See the module docstring."""

    def make_criterion(self, data: FitData) -> nn.Module:
        return build_loss("bce", data.counts, data.n_train)

    def link(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(logits)

    def link_name(self) -> str:
        return "sigmoid(z)"


@register("SRB")
class SRBMethod(PlugInMethod):
    """Surrogate-regret-bound plug-in (Kotlowski & Dembczynski, MLJ 2017): a strongly
    proper composite surrogate other than logistic (``surrogate``: 'squared' default,
    or 'exponential'), its inverse link to probabilities, then validation-tuned F1
    thresholds. See the module docstring."""

    _LINK_NAMES = {"squared": "clip((1+z)/2, 0, 1)", "exponential": "1/(1+exp(-2z))"}

    def __init__(
        self,
        *,
        target: str,
        surrogate: str,
        **trainer: Any,
    ) -> None:
        super().__init__(target=target, **trainer)
        if surrogate not in SURROGATES:
            raise ValueError(
                f"method '{self.name}': surrogate must be one of {sorted(SURROGATES)} "
                f"(strongly proper composite; logistic is the PE row), got {surrogate!r}"
            )
        self.surrogate = surrogate
        self._link: Callable[[torch.Tensor], torch.Tensor] = SURROGATES[surrogate].link

    def make_criterion(self, data: FitData) -> nn.Module:
        return SURROGATES[self.surrogate](data.counts, data.n_train)

    def link(self, logits: torch.Tensor) -> torch.Tensor:
        return self._link(logits)

    def link_name(self) -> str:
        return self._LINK_NAMES[self.surrogate]

    def extra_outputs(self) -> dict[str, Any]:
        out = super().extra_outputs()
        if out:
            out["two_step"]["surrogate"] = self.surrogate
        return out


__all__ = [
    "EXP_LINEAR_ABOVE",
    "ExponentialProperLoss",
    "METRIC_RULES",
    "PEMethod",
    "PlugInMethod",
    "SRBMethod",
    "SURROGATES",
    "SquaredProperLoss",
]
