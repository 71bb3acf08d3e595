"""requirements.lock, parsed: its pins and the ones that install on each platform the lock is
for (Linux x86-64, macOS arm64)."""

from __future__ import annotations

import re

from packaging.markers import Marker

from tests.support.paths import ROOT

#: marker environments of the two platforms the lock is for (PEP 508 names)
_COMMON = {"os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "python_version": "3.11", "python_full_version": "3.11.7", "implementation_version": "3.11.7"}
PLATFORMS = {
    "linux-x86_64": {**_COMMON, "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"},
    "macos-arm64": {**_COMMON, "sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64"},
}
#: uv's name of each platform (`--python-platform`); torch 2.14.1's macOS wheels need macOS 14
UV_PLATFORMS = {"linux-x86_64": ("x86_64-manylinux_2_28", {}),
                "macos-arm64": ("aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "14.0"})}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(text: str) -> list[tuple[str, str, str | None]]:
    """(name, version, marker or None) of each `name==version [; marker]` line; comments, `# via`
    annotations and option lines (`-e ...`) are left out."""
    pins = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        spec, _, marker = line.partition(";")
        name, sep, version = spec.strip().partition("==")
        assert sep, f"requirements.lock: {line!r} is not an exact pin (name==version)"
        pins.append((norm(name), version.strip(), marker.strip() or None))
    return pins


def lock_entries() -> list[tuple[str, str, str | None]]:
    return parse_pins((ROOT / "requirements.lock").read_text())


def pins_for(platform: str, entries=None) -> dict[str, str]:
    """The lock's pins that install on `platform` (their marker true there)."""
    env = PLATFORMS[platform]
    out: dict[str, str] = {}
    for name, version, marker in entries if entries is not None else lock_entries():
        if marker is None or Marker(marker).evaluate(env):
            assert name not in out, f"requirements.lock pins {name} twice for {platform}"
            out[name] = version
    return out


def lock_pins() -> dict[str, str]:
    """Every pinned name (any platform) -> version."""
    return {name: version for name, version, _ in lock_entries()}
