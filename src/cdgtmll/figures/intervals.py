"""Error bars over seeds that stay where the quantity can be: the t-interval of a mean over
training seeds cut to the quantity's range (:func:`seed_interval`), and the words that say so in a
figure's note and CSV (:func:`interval_text`). Every study figure and the PR figure draw these."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: confidence level of the error bars of the study figures (:func:`seed_interval`)
CI_LEVEL = 0.95
#: ranges of what the figures average over seeds: a metric or a share as a fraction and in
#: percent, and a difference of two such (a drop, in fractions and in points)
FRACTION, PERCENT = (0.0, 1.0), (0.0, 100.0)
FRACTION_DIFF, POINTS_DIFF = (-1.0, 1.0), (-100.0, 100.0)


def seed_interval(values: Sequence[float], bounds: tuple[float, float] = PERCENT,
                  level: float = CI_LEVEL) -> tuple[float, float]:
    """The error bar of a mean over seeds: the two-sided ``level`` t-interval of the mean,
    ``mean ± t_{(1+level)/2, n-1} s / sqrt(n)`` (``s`` the sample std, ddof 1, of the ``n``
    finite values), intersected with ``bounds``, the range the quantity can take (a metric
    in percent: [0, 100]; a difference of two: [-100, 100]). The intersection keeps the
    interval's coverage: the true mean lies in ``bounds``, so whenever the t-interval holds it
    so does the intersection; the t-interval alone reaches below 0 for a metric whose runs
    include 0 (Enron's Rare-F1: 0, 0 and 9 %), where no mean can be. ``(nan, nan)`` for fewer
    than 2 finite values (no interval from one run). Every study figure draws this bar and
    writes it to its CSV (``*ci_low``, ``*ci_high``)."""
    from scipy import stats

    a = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if a.size < 2:
        return float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size))
    mean = float(a.mean())
    return max(bounds[0], mean - half), min(bounds[1], mean + half)


def interval_text(bounds: tuple[float, float] = PERCENT, level: float = CI_LEVEL, what: str = "bars") -> str:
    """What the error ``what`` (bars, band) are, for a figure's note and its CSV: ``bars: 95%
    t-interval of the mean, cut to [0, 100]`` (the cut keeps the coverage: :func:`seed_interval`)."""
    return f"{what}: {100 * level:g}% t-interval of the mean, cut to [{bounds[0]:g}, {bounds[1]:g}]"
