"""Methods: the interface and the registry (:mod:`.base`), what planning knows of each method
without importing it (:mod:`.catalog`, :mod:`.requirements`), and one module or package per
method family. A built-in method is registered when its module is imported, which
:func:`cdgtmll.methods.base.get` and :func:`~cdgtmll.methods.base.available` do on first use
(through :func:`.catalog.load_builtins`); importing this package imports none of them.
"""

from cdgtmll.methods import base, catalog

base.set_builtin_loader(catalog.load_builtins)
