"""Validation split carved from the official training split.

The paper tunes label-adaptive thresholds "on the validation split" (App. E) and keeps
the official test split untouched, so the validation rows are carved from the official
*train* rows only. The carve uses iterative stratification (Sechidis, Tsoumakas &
Vlahavas, "On the Stratification of Multi-Label Data", ECML PKDD 2011, LNCS 6913,
pp. 145-158), as implemented by ``iterstrat.ml_stratifiers.MultilabelStratifiedShuffleSplit``
(Trent Kyono / iterative-stratification): labels are processed rarest first and each
example goes to the subset that most lacks that label, so a label's positives are divided
across fit/val in close to the requested ratio.

Default ``fraction=0.1`` (10 % of the training rows become validation). The stratification
is a heuristic, not a guarantee; measured on the mirrored MULAN sets (``tests/unit/data/test_splits.py``):

* Yeast (seeds 0-9): val holds 151-160 of 1500 rows (iterstrat does not hit the size
  exactly); every label (21-1128 train positives) has positives on both sides; each label's
  val positives are within 1.4 of ``fraction`` x its train positives.
* Enron (seeds 0-9): labels with 2-4 train positives sometimes land on one side only;
  every label with >= 5 positives is on both sides.
* Delicious (983 labels): frequent labels deviate more (up to ~57 of ~5000 positives).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

DEFAULT_FRACTION = 0.1
DEFAULT_SEED = 0
#: the fewest rows a split (train = fit rows, val, test) may have (``data.min_split_rows``).
#: Below it a metric is decided by a handful of rows: on a 1-row test split every label with a
#: positive has AP 1.0 whatever the scores, so mAP and Rare-F1 read 1.0; with 10 rows one row
#: still moves a per-label F1 by up to 10 points, so 10 is a floor, not a target. Every
#: shipped dataset is far above it (smallest split: Yeast's and Enron's validation, ~110-160 rows).
DEFAULT_MIN_SPLIT_ROWS = 10
METHOD = "iterative-stratification (Sechidis et al. 2011), iterstrat MultilabelStratifiedShuffleSplit"


def carve_validation(Y_train, fraction: float = DEFAULT_FRACTION, seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Split the official training rows into ``(fit_rows, val_rows)``.

    Indices are relative to the rows of ``Y_train`` (0..n-1), sorted, int64, disjoint and
    together covering every row. Deterministic for a given ``seed``.
    """
    from iterstrat.ml_stratifiers import MultilabelStratifiedShuffleSplit

    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction}")
    Y = Y_train.toarray() if sp.issparse(Y_train) else np.asarray(Y_train)
    if Y.ndim != 2:
        raise ValueError(f"Y_train must be 2-D [n, L], got shape {Y.shape}")
    n = Y.shape[0]
    n_val = int(round(fraction * n))
    if n_val < 1 or n_val >= n:
        raise ValueError(f"validation fraction {fraction} of {n} training rows leaves an empty side")
    splitter = MultilabelStratifiedShuffleSplit(n_splits=1, test_size=fraction, random_state=seed)
    fit, val = next(splitter.split(np.zeros((n, 1)), Y.astype(np.int64, copy=False)))
    return np.sort(fit).astype(np.int64), np.sort(val).astype(np.int64)


def check_split_sizes(dataset: str, sizes: dict[str, tuple[int, str]], min_rows: int) -> None:
    """Raise ``ValueError`` naming every split with fewer than ``min_rows`` rows.

    ``sizes`` maps a split name to ``(rows, where the rows come from)``, e.g.
    ``{'test': (1, 'results/raw/mine/test.arff')}``."""
    small = [f"split '{s}' has {n} row{'s' if n != 1 else ''} ({how})" for s, (n, how) in sizes.items() if n < min_rows]
    if small:
        raise ValueError(
            f"dataset '{dataset}': {'; '.join(small)}: fewer than data.min_split_rows = {min_rows}. Metrics on so few "
            "rows are decided by single rows (a 1-row test split scores mAP 1.0 whatever the scores); add rows, "
            "raise data.val_fraction for a small validation split, or lower data.min_split_rows"
        )
