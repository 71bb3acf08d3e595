"""Names of training variants: ``clean`` and ``<kind><value:.2f>-s<seed>`` for R-variants
(App. E.3), label noise and occlusion (Sec. 5.3), and the table setting each belongs to."""

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


def variant_setting(variant: str) -> str:
    """The table setting a variant belongs to: 'clean', 'R@0.40' (pooled over sampling
    seeds), 'N@0.10' (label noise) or 'O@0.10' (occlusion)."""
    if variant == CLEAN:
        return CLEAN
    for kind in VARIANT_KINDS:
        parsed = _parse_kind(variant, kind)
        if parsed is not None:
            return f"{kind}@{parsed[0]:.2f}"
    raise ConfigError(f"variant '{variant}': unknown kind")
