"""Synthetic data in the Extreme Classification Repository's bag-of-words format, at the
published shapes of its data sets (helper of ``bench_xmc_scale.py``).

Format (the one :func:`cdgtmll.data.xmc.read_xmc_data` reads, as in the repository's
``*_train.txt`` / ``*_test.txt``)::

    N F L
    l1,l2,... f:v f:v ...

0-based label and feature indices, features of a row in ascending index order, no blank
rows (every row has >= 1 label and >= 1 feature).

Published shapes (:data:`SHAPES`)
---------------------------------
Rows, features, labels and average labels per row are the Extreme Classification
Repository's table (Bhatia et al., http://manikvarma.org/downloads/XC/XMLRepository.html;
also the registry entries of ``cdgtmll.data.registry``): AmazonCat-13K 1,186,239 train /
306,782 test rows, 203,882 features, 13,330 labels, 5.04 labels/row (448.57 rows/label);
Wiki10-31K 14,146 / 6,616 rows, 101,938 features, 30,938 labels, 18.64 labels/row (8.52
rows/label). The repository table gives no average of non-zero features per row. That
comes from the "Data Statistics" table of PECOS (amzn/pecos, ``examples/spmm/README.md``),
which lists the same N, D and L for the training matrices: nnz(X) = 84,415,397 for
AmazonCat-13K (71.16 per row) and 9,526,572 for Wiki10-31K (673.44 per row); its nnz(Y)
(5,979,439 and 263,705) give the same 5.04 and 18.64 labels per row as the repository table.

Distributions (all seeded, ``numpy.random.default_rng``)
--------------------------------------------------------
* Labels: a power law, P(label of frequency rank r) proportional to ``(r + 1)^-a``
  (``label_exponent``, default 1.0, i.e. Zipf), ranks randomly assigned to label ids.
  Labels per row: ``1 + Poisson(lambda)``, drawn with replacement and de-duplicated per
  row; ``lambda`` is calibrated on a pilot sample so that the mean after de-duplication
  is the published average.
* Features: ``topic_share`` (30%) of a row's tokens are "topic" features of its labels
  (each label owns ``TOPIC_FEATURES`` random feature ids; a token picks one of the row's
  labels and one of its features), so that the labels can be learnt from the features;
  the rest follow a Zipf law over a random ranking of the feature ids (word
  frequencies). Tokens per row: log-normal (sigma 0.7) around a scale calibrated, like
  lambda, so that the mean number of *distinct* features per row is the published one.
  Values: positive term weights (log-normal, 6 significant digits), independent of the
  index.

Speed and memory: rows are drawn and written in chunks of ``chunk_rows`` (vectorised
numpy; the text of a chunk is one ``b"".join`` over pre-formatted pieces), so memory is
O(chunk) and independent of N.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

TOPIC_FEATURES = 10
N_VALUES = 4096  # distinct feature values (pre-formatted)
CHUNK_TOKENS = 1.5e6  # drawn feature tokens per written chunk (memory: ~0.5 GB of pieces)


@dataclasses.dataclass(frozen=True)
class Shape:
    """A data set's published shape (see the module docstring for the sources)."""

    name: str  # registry name (cdgtmll.data.registry)
    n_train: int
    n_test: int
    n_features: int
    n_labels: int
    labels_per_row: float
    nnz_per_row: float

    def scaled(self, rows: float = 1.0, dims: float = 1.0) -> Shape:
        """Rows scaled by ``rows``, features and labels by ``dims`` (averages kept, capped
        by the scaled dimensions)."""
        if rows == 1.0 and dims == 1.0:
            return self
        n_f = max(20, int(round(self.n_features * dims)))
        n_l = max(10, int(round(self.n_labels * dims)))
        return dataclasses.replace(
            self, n_train=max(20, int(round(self.n_train * rows))), n_test=max(10, int(round(self.n_test * rows))),
            n_features=n_f, n_labels=n_l, labels_per_row=min(self.labels_per_row, n_l / 4),
            nnz_per_row=min(self.nnz_per_row, n_f / 4))


SHAPES = {
    "amazoncat-13k": Shape("amazoncat-13k", 1_186_239, 306_782, 203_882, 13_330, 5.04, 84_415_397 / 1_186_239),
    "wiki10-31k": Shape("wiki10-31k", 14_146, 6_616, 101_938, 30_938, 18.64, 9_526_572 / 14_146),
}


class _Zipf:
    """Inverse-CDF sampler of ``P(rank r) ~ (r + 1)^-a`` over ``n`` ids (ranks randomly permuted)."""

    def __init__(self, n: int, a: float, rng: np.random.Generator) -> None:
        w = np.arange(1, n + 1, dtype=np.float64) ** -a
        self.cdf = np.cumsum(w / w.sum())
        self.cdf[-1] = 1.0
        self.ids = rng.permutation(n).astype(np.int64)

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return self.ids[np.searchsorted(self.cdf, rng.random(size), side="right")]


def _dedupe(rows: np.ndarray, cols: np.ndarray, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique (row, col) pairs, sorted by row then col."""
    key = np.sort(rows * n_cols + cols)  # sort + diff: np.unique's hash path is ~10x slower here
    if key.size:
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    return key // n_cols, key % n_cols


class Generator:
    """Draws rows of one data set; ``draw(n)`` -> (label counts, labels, feature counts,
    features, value ids) of ``n`` rows, rows in order."""

    def __init__(self, shape: Shape, seed: int = 0, label_exponent: float = 1.0, feature_exponent: float = 1.0,
                 topic_share: float = 0.3) -> None:
        self.shape = shape
        self.rng = np.random.default_rng(seed)
        self.labels = _Zipf(shape.n_labels, label_exponent, self.rng)
        self.features = _Zipf(shape.n_features, feature_exponent, self.rng)
        self.topic = self.rng.integers(0, shape.n_features, (shape.n_labels, TOPIC_FEATURES))
        self.topic_share = float(topic_share)
        self.values = np.exp(self.rng.normal(0.0, 0.5, N_VALUES)) * 0.1
        self.sigma = 0.7
        self.lam = max(shape.labels_per_row - 1.0, 0.0)
        self.tokens = shape.nnz_per_row
        self._calibrate()

    def _calibrate(self, pilot_tokens: float = 2e6, rounds: int = 4) -> None:
        """Adjust lambda and the token scale so that the de-duplicated means hit the targets."""
        s = self.shape
        pilot = max(2000, int(pilot_tokens / s.nnz_per_row))
        for _ in range(rounds):
            kc, _, mc, _, _ = self.draw(pilot)
            got_l, got_f = kc.mean(), mc.mean()
            if s.labels_per_row > 1:
                self.lam *= (s.labels_per_row - 1.0) / max(got_l - 1.0, 1e-3)
            self.tokens *= s.nnz_per_row / max(got_f, 1e-3)

    def draw(self, n: int) -> tuple[np.ndarray, ...]:
        rng, s = self.rng, self.shape
        # labels: 1 + Poisson draws, de-duplicated per row
        k = 1 + rng.poisson(self.lam, n)
        lrow = np.repeat(np.arange(n, dtype=np.int64), k)
        lrow, lab = _dedupe(lrow, self.labels.draw(rng, lrow.size), s.n_labels)
        kc = np.bincount(lrow, minlength=n)
        lstart = np.concatenate([[0], np.cumsum(kc)[:-1]])
        # features: log-normal token counts, a topic share from the row's labels
        mu = math.log(self.tokens) - self.sigma**2 / 2
        m = np.maximum(1, np.rint(np.exp(rng.normal(mu, self.sigma, n)))).astype(np.int64)
        frow = np.repeat(np.arange(n, dtype=np.int64), m)
        feat = self.features.draw(rng, frow.size)
        topic = rng.random(frow.size) < self.topic_share
        tr = frow[topic]
        which = lab[lstart[tr] + (rng.random(tr.size) * kc[tr]).astype(np.int64)]
        feat[topic] = self.topic[which, rng.integers(0, TOPIC_FEATURES, tr.size)]
        frow, feat = _dedupe(frow, feat, s.n_features)
        mc = np.bincount(frow, minlength=n)
        vid = rng.integers(0, N_VALUES, feat.size)
        return kc, lab, mc, feat, vid


class _Pieces:
    """Pre-formatted byte pieces: labels (first / ``,l``), `` f:`` and values."""

    def __init__(self, shape: Shape, values: np.ndarray) -> None:
        self.lab_first = np.array([b"%d" % j for j in range(shape.n_labels)], dtype=object)
        self.lab_next = np.array([b",%d" % j for j in range(shape.n_labels)], dtype=object)
        self.feat = np.array([b" %d:" % j for j in range(shape.n_features)], dtype=object)
        self.val = np.array([b"%.6g" % v for v in values], dtype=object)

    def text(self, kc: np.ndarray, lab: np.ndarray, mc: np.ndarray, feat: np.ndarray, vid: np.ndarray) -> bytes:
        n = kc.size
        per_row = kc + 2 * mc + 1
        start = np.concatenate([[0], np.cumsum(per_row)[:-1]])
        out = np.empty(int(per_row.sum()), dtype=object)
        # labels: the first of a row without comma
        lrow = np.repeat(np.arange(n), kc)
        lpos_in_row = np.arange(lab.size) - np.repeat(np.cumsum(kc) - kc, kc)
        lp = start[lrow] + lpos_in_row
        out[lp] = np.where(lpos_in_row == 0, self.lab_first[lab], self.lab_next[lab])
        # features: " f:" then the value
        frow = np.repeat(np.arange(n), mc)
        fpos_in_row = np.arange(feat.size) - np.repeat(np.cumsum(mc) - mc, mc)
        fp = start[frow] + kc[frow] + 2 * fpos_in_row
        out[fp] = self.feat[feat]
        out[fp + 1] = self.val[vid]
        out[start + per_row - 1] = b"\n"
        return b"".join(out.tolist())


def write_split(path: Path, gen: Generator, pieces: _Pieces, n_rows: int, chunk_rows: int | None = None,
                label_counts: np.ndarray | None = None) -> dict[str, Any]:
    """Write ``n_rows`` rows of ``gen`` to ``path`` (header ``N F L``) in chunks of
    ``chunk_rows`` rows (default: about ``CHUNK_TOKENS`` drawn tokens); returns the written
    statistics. ``label_counts`` (int64 [L]) is incremented in place if given."""
    s = gen.shape
    chunk_rows = chunk_rows or max(200, int(CHUNK_TOKENS / gen.tokens))
    n_lab = n_feat = 0
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        fh.write(b"%d %d %d\n" % (n_rows, s.n_features, s.n_labels))
        for a in range(0, n_rows, chunk_rows):
            kc, lab, mc, feat, vid = gen.draw(min(chunk_rows, n_rows - a))
            fh.write(pieces.text(kc, lab, mc, feat, vid))
            n_lab += int(kc.sum())
            n_feat += int(mc.sum())
            if label_counts is not None:
                label_counts += np.bincount(lab, minlength=s.n_labels)
    tmp.replace(path)
    return {"rows": n_rows, "labels_per_row": n_lab / n_rows, "nnz_per_row": n_feat / n_rows,
            "bytes": path.stat().st_size}


def generate(shape: Shape, train_path: Path, test_path: Path, seed: int = 0, chunk_rows: int | None = None,
             **dist: float) -> dict[str, Any]:
    """Write both splits; returns their statistics plus the label-frequency baseline P@k on
    test (every row gets the k most frequent training labels)."""
    gen = Generator(shape, seed=seed, **dist)
    pieces = _Pieces(shape, gen.values)
    tr_counts = np.zeros(shape.n_labels, dtype=np.int64)
    te_counts = np.zeros(shape.n_labels, dtype=np.int64)
    train = write_split(train_path, gen, pieces, shape.n_train, chunk_rows, tr_counts)
    test = write_split(test_path, gen, pieces, shape.n_test, chunk_rows, te_counts)
    top = np.argsort(-tr_counts, kind="stable")[:5]
    base = {f"p@{k}": float(te_counts[top[:k]].sum() / (shape.n_test * k)) for k in (1, 3, 5)}
    return {"train": train, "test": test, "top_label_share": float(tr_counts.max() / shape.n_train),
            "labels_without_train_rows": int((tr_counts == 0).sum()), "frequency_baseline": base}
