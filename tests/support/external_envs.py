"""The external XMC libraries' environments for tests (``from tests.support.external_envs import ...``).

:func:`require_env` builds ``.venv/xmc/<name>`` of this checkout through its make target
(mk/xmc-envs.mk; a built one is reused: the checkout caches it) and returns it. When it
cannot be built the test is skipped, except under CI (``CI`` set, not ``0``/``false``),
where it fails: CI must run the external methods for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from cdgtmll.external.envs import MAKEFILE, ExternalEnv

_BUILT: dict[str, tuple[ExternalEnv | None, str]] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_env(name: str) -> ExternalEnv:
    """``.venv/xmc/<name>``, built through make when missing (module docstring)."""
    if name not in _BUILT:
        env = ExternalEnv.of(name)
        why = ""
        if not env.ready():
            if shutil.which("make") is None:
                why = "make not found"
            else:
                t0 = time.perf_counter()
                res = subprocess.run(["make", "--no-print-directory", "-f", MAKEFILE, f"{env.display}/.installed"],
                                     cwd=env.root, capture_output=True, text=True, timeout=1200)
                print(f"[external_envs] make {env.display}/.installed: exit {res.returncode} in "
                      f"{time.perf_counter() - t0:.1f} s")
                if not env.ready():
                    why = env.failure() or (res.stdout + res.stderr)[-1500:]
        _BUILT[name] = (env if not why else None, why)
    env, why = _BUILT[name]
    if env is None:
        msg = f"environment .venv/xmc/{name} could not be built: {why}"
        if in_ci():
            pytest.fail(msg)
        pytest.skip(msg)
    return env
