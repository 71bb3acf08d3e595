"""The one spelling of a training-data *variant* and of a *setting*, for the whole pipeline.

Variant: one training-data variant, i.e. one draw with one sampling seed
    ``clean``, or ``<kind><value:.2f>-s<sampling seed>`` with kind ``R`` (R-variant, App. E.3:
    the severity, the share of tail training positives removed), ``N`` (label noise, Sec. 5.3:
    the rate) or ``O`` (occluded training images, Sec. 5.3: the level gamma); e.g.
    ``R0.50-s0``, ``N0.10-s2``, ``O0.30-s0`` (:func:`variant_id`, :func:`noise_id`,
    :func:`occlusion_id`; :func:`split_variant` reads any of them). Spelled so in: the run
    folders ``results/runs/<dataset>/<variant>/<method>/seed<k>/``, the R-variant files
    ``results/data/<dataset>/variants/<variant>.{npz,json}``, the Snakemake wildcard
    ``variant``, ``provenance.json`` (``config.variant``), the ``variant`` column of
    ``all_runs.csv``, the figures' ``.sources.json`` and ``cdgtmll audit``.

Setting: the pool of a variant's sampling seeds, what a table cell or a claim is about
    ``clean``, or ``<kind>@<value:.2f>`` with the same kinds: ``R@0.50``, ``N@0.10``,
    ``O@0.30`` (:func:`variant_setting` of any of its variants, :func:`setting_id`;
    :func:`parse_setting` reads one). Spelled so in: the ``setting`` column of
    ``all_runs.csv`` and ``metrics_full.{csv,md,html}``, the ``--summary-json`` keys and the
    ``dvc metrics`` files ``results/metrics/<dataset>/<setting>/<method>.json``, the tables'
    footnotes, the ``setting`` column and the claim ids of the packaged ``paper_claims.csv``
    and of ``claims_check.*``, and ``cdgtmll audit``. A claim may also name ``R@*`` (any
    severity: a figure claim whose severity the paper does not state).

Labels for readers, not names: Table 2's column headers print a setting ``R@0.50`` as the paper
does (``Yeast-R @50%``, the header ``cdgtmll audit --cell`` takes), and figure titles spell a
variant out in words (``Yeast-R, 50% tail positives removed (sampling seed 0)``).

Older spelling: claims files written before settings had one spelling named the label-noise and
occlusion settings ``noise@0.30`` / ``occlusion@0.30``;
:func:`cdgtmll.claims.compare.canonical_setting` still reads them (a ``--claims`` file of the
claims check), and nothing else does.
"""

from __future__ import annotations

from cdgtmll.config.schema import ConfigError

CLEAN = "clean"


#: kinds of training variant: id prefix -> the number in the id (R-variants App. E.3;
#: label noise and occlusion Sec. 5.3). Ids are ``<kind><value:.2f>-s<seed>``.
VARIANT_KINDS = {"R": "severity", "N": "rate", "O": "gamma"}


def _variant_name(kind: str, value: float, seed: int) -> str:
    return f"{kind}{float(value):.2f}-s{int(seed)}"


def _parse_kind(variant: str, kind: str) -> tuple[float, int] | None:
    """``<kind>0.40-s1`` -> (0.40, 1); None for another kind or the clean data."""
    if variant == CLEAN or not variant.startswith(kind):
        return None
    try:
        value, seed = variant[1:].split("-s")
        return float(value), int(seed)
    except ValueError:
        raise ConfigError(f"variant '{variant}': expected '{CLEAN}' or '{kind}<{VARIANT_KINDS[kind]}>-s<seed>'") from None


def variant_id(severity: float, sampling_seed: int) -> str:
    """Wildcard value of an R-variant, e.g. ``R0.40-s1``."""
    return _variant_name("R", severity, sampling_seed)


def noise_id(rate: float, seed: int) -> str:
    """Label-noise variant, e.g. ``N0.10-s0``."""
    return _variant_name("N", rate, seed)


def occlusion_id(gamma: float, seed: int) -> str:
    """Occluded-training-images variant, e.g. ``O0.30-s0``."""
    return _variant_name("O", gamma, seed)


def parse_variant(variant: str) -> tuple[float, int] | None:
    """Inverse of :func:`variant_id`; ``None`` for the clean data and other kinds."""
    return _parse_kind(variant, "R")


def parse_noise(variant: str) -> tuple[float, int] | None:
    """``N0.10-s0`` -> (0.10, 0); None for other variants."""
    return _parse_kind(variant, "N")


def parse_occlusion(variant: str) -> tuple[float, int] | None:
    """``O0.10-s0`` -> (0.10, 0) (occluded training images, Sec. 5.3); None for other variants."""
    return _parse_kind(variant, "O")


def split_variant(variant: str) -> tuple[str, float, int] | None:
    """``R0.40-s1`` -> ``('R', 0.40, 1)`` (kind, value, sampling seed) for a variant of any
    kind; None for the clean data; ConfigError for an unknown id."""
    if variant == CLEAN:
        return None
    for kind in VARIANT_KINDS:
        parsed = _parse_kind(variant, kind)
        if parsed is not None:
            return kind, parsed[0], parsed[1]
    raise ConfigError(f"variant '{variant}': unknown kind")


def setting_id(kind: str, value: float) -> str:
    """The setting that pools the sampling seeds of ``<kind><value>-s<k>``: ``('R', 0.5)`` ->
    ``'R@0.50'``, ``('N', 0.1)`` -> ``'N@0.10'``."""
    if kind not in VARIANT_KINDS:
        raise ConfigError(f"setting kind '{kind}': expected one of {', '.join(VARIANT_KINDS)}")
    return f"{kind}@{float(value):.2f}"


def parse_setting(setting: str) -> tuple[str, float] | None:
    """Inverse of :func:`setting_id`: ``'R@0.50'`` -> ``('R', 0.5)``; None for ``clean`` and
    anything else (``R@*``)."""
    kind, at, value = str(setting).partition("@")
    if not at or kind not in VARIANT_KINDS:
        return None
    try:
        return kind, float(value)
    except ValueError:
        return None


def variant_setting(variant: str) -> str:
    """The setting a variant belongs to: 'clean', 'R@0.40' (R-variant severity), 'N@0.10'
    (label noise) or 'O@0.10' (occlusion), each pooled over its sampling seeds."""
    parsed = split_variant(variant)
    return CLEAN if parsed is None else setting_id(parsed[0], parsed[1])
