"""Methods: the interface and the registry (:mod:`.base`), what planning knows of each method
without importing it (:mod:`.catalog`, :mod:`.requirements`), and one module or package per
method family. A built-in method is registered when its module is imported, which
:func:`cdgtmll.methods.base.get` and :func:`~cdgtmll.methods.base.available` do on first use
(through :func:`load_builtins`); importing this package imports none of them.
"""

import importlib

from cdgtmll.methods import base

#: the modules that define the built-in methods (each registers its methods when imported)
BUILTIN_MODULES = (
    "cdgtmll.methods.classic", "cdgtmll.methods.neural", "cdgtmll.methods.cdgtmll.model",
    "cdgtmll.methods.loss_methods", "cdgtmll.methods.two_step", "cdgtmll.methods.lcifs",
    "cdgtmll.methods.xmc.baselines", "cdgtmll.methods.xmc.peers", "cdgtmll.methods.architectures.common",
    "cdgtmll.methods.architectures.label_graph", "cdgtmll.methods.architectures.attention",
    "cdgtmll.methods.mlcnc", "cdgtmll.methods.data_side.balancemix", "cdgtmll.methods.data_side.mlbote",
    "cdgtmll.methods.data_side.lsfa",
)


def load_builtins(name: str | None = None) -> None:
    """Import every built-in method module (a no-op once they are imported). With ``name``, only
    the module that defines that method when the method catalog of this source tree is cached
    (:mod:`.catalog`; ``make venv`` caches it): a training job then imports its own method and
    not the others (scikit-learn alone is about 1.1 s of CPU per process). Every module is
    imported when the catalog is not cached or does not name ``name``."""
    if name is not None:
        from cdgtmll.methods.catalog import cached_module

        mod = cached_module(name)
        if mod is not None:
            importlib.import_module(mod)
            if name in base.registered():
                return
    for mod in BUILTIN_MODULES:
        importlib.import_module(mod)


base.set_builtin_loader(load_builtins)
