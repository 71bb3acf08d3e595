"""Method registry: every method (classical, neural, two-step) is looked up by name.

Importing this package (or any module in it) registers all built-in methods; the interface
and the registry itself live in :mod:`cdgtmll.methods.base`.
"""


def _register_builtin() -> None:  # imported lazily so that a broken optional dep names itself
    import importlib

    for mod in ("cdgtmll.methods.classic", "cdgtmll.methods.neural", "cdgtmll.methods.cdgtmll.model",
                "cdgtmll.methods.loss_methods", "cdgtmll.methods.two_step",
                "cdgtmll.methods.lcifs", "cdgtmll.methods.xmc.baselines", "cdgtmll.methods.xmc.peers",
                "cdgtmll.methods.architectures.common",
                "cdgtmll.methods.architectures.label_graph", "cdgtmll.methods.architectures.attention",
                "cdgtmll.methods.mlcnc", "cdgtmll.methods.data_side.balancemix", "cdgtmll.methods.data_side.mlbote",
                "cdgtmll.methods.data_side.lsfa"):
        importlib.import_module(mod)


_register_builtin()
