"""What a method needs from this machine before it can run, as pure functions of its
hyper-parameters (no torch, nothing built or downloaded): the method classes call them from
``not_runnable_reason`` and ``hparams``, and planning calls them from the methods' specs
(:func:`cdgtmll.methods.base.not_runnable`, :func:`~cdgtmll.methods.base.resolved_hparams`)
without importing the classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdgtmll.external.envs import ExternalEnv


def missing_encoder(encoder: str | None) -> str | None:
    """Why ``encoder`` (a local HuggingFace-format model directory) cannot be used, or None."""
    if encoder is None:
        return ("needs pretrained encoder (set hyper-parameter 'encoder' to a local HuggingFace-format "
                "model directory; none configured)")
    if not Path(encoder).is_dir():
        return f"needs pretrained encoder ('{encoder}' is not a directory)"
    return None


def encoder_reason(encoder: str | None) -> str:
    """Why an encoder-based method (XR-Transformer, MatchXML) does not run here: no usable
    encoder, or, with one, the transformer stage this pipeline does not implement."""
    return missing_encoder(None if encoder is None else str(encoder)) or (
        "transformer stage not implemented in this pipeline (an encoder is configured)")


def env_reason(env_name: str) -> str | None:
    """Why the isolated environment ``.venv/xmc/<env_name>`` cannot be used (not built, or its
    build failed), or None when it is ready. Never builds it (``make xmc-envs`` does)."""
    return ExternalEnv.of(env_name).ensure(build=False)


def env_hparams(env_name: str) -> dict[str, Any]:
    """The environment's entries in a method's resolved hyper-parameters: its folder, its lock
    file and the lock's sha256 (a lock change re-runs the method's jobs) and the library's pin."""
    env = ExternalEnv.of(env_name)
    return {"env": env.display, "env_lock": env.lock.name, "env_lock_sha256": env.lock_sha256(),
            "library": env.pinned()}
