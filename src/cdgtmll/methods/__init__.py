"""Methods: the interface and the registry (:mod:`.base`), each method's declaration (:mod:`.spec`,
the built-ins' in :mod:`.builtin`), what a method needs from this machine (:mod:`.requirements`),
and one module or package per method family. A method's class is imported only when a run is
built (:func:`cdgtmll.methods.base.get`); importing this package imports none of them.
"""
