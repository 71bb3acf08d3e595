"""Methods: the interface and the registry (:mod:`.base`), what planning knows of each method
without importing it (:mod:`.catalog`, :mod:`.requirements`), and one module or package per
method family. A built-in method is registered when its module is imported, which
:func:`cdgtmll.methods.base.get` and :func:`~cdgtmll.methods.base.available` do on first use
(through :func:`.catalog.load_builtins`); importing this package imports none of them, nor
:mod:`.catalog` itself, so that ``python -m cdgtmll.methods.catalog`` (``make venv``) runs that
module once, as ``__main__``, without runpy's warning about a module imported before it runs.
"""

from cdgtmll.methods import base


def load_builtin_methods(name: str | None = None) -> None:
    """The registry's loader of built-in methods: :func:`cdgtmll.methods.catalog.load_builtins`,
    imported on first use."""
    from cdgtmll.methods.catalog import load_builtins

    load_builtins(name)


base.set_builtin_loader(load_builtin_methods)
