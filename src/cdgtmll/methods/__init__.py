"""Method registry: every method (classical, neural, two-step) is looked up by name.

Importing this package registers all built-in methods.
"""

from cdgtmll.methods.base import FitData, Method, NotRunnable, RunContext, available, build, register

__all__ = ["FitData", "Method", "NotRunnable", "RunContext", "available", "build", "register"]


def _register_builtin() -> None:  # imported lazily so that a broken optional dep names itself
    import importlib

    for mod in ("cdgtmll.methods.classic", "cdgtmll.methods.neural", "cdgtmll.methods.cdgtmll",
                "cdgtmll.methods.loss_methods", "cdgtmll.methods.two_step",
                "cdgtmll.methods.lcifs", "cdgtmll.methods.xmc", "cdgtmll.methods.xmc_peers",
                "cdgtmll.methods.architectures",
                "cdgtmll.methods.arch_label_graph", "cdgtmll.methods.arch_attention", "cdgtmll.methods.mlcnc",
                "cdgtmll.methods.data_side"):
        importlib.import_module(mod)


_register_builtin()
