"""The command-line tools in ``tools/`` as modules: ``tools/`` is not a package (its scripts run
as ``python tools/NAME.py``), so a tool is loaded from its file."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT

TOOLS = ROOT / "tools"


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` as the module ``<name>`` (loaded once, then from ``sys.modules``)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: dataclasses and pickling look a class's module up
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
