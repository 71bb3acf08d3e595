"""The guard every workaround here shares: apply it only to the upstream code it was written for.

A workaround replaces or bypasses a dependency's function; it is applied only when that
function's source (``inspect.getsource``) has the sha256 recorded for the locked version, so an
upgrade that changes the function falls back to the dependency's own behaviour until someone
measures and re-records it.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from typing import Any


def source_is(fn: Callable[..., Any] | None, sha256: str | None) -> bool:
    """Whether ``fn``'s source has the sha256 ``sha256`` (False when either is missing or the
    source cannot be read, e.g. a built-in or a function defined at a prompt)."""
    if fn is None or sha256 is None:
        return False
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return hashlib.sha256(source.encode()).hexdigest() == sha256
