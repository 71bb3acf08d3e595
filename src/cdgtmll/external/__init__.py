"""External XMC libraries, each run in a virtual environment of its own.

* :mod:`cdgtmll.external.envs` – the environments (``.venv/xmc/<name>``, built by
  mk/xmc-envs.mk from ``requirements-<name>.lock``) and why one cannot be used;
* :mod:`cdgtmll.external.client` – starts a library's worker and talks to it;
* :mod:`cdgtmll.methods.xmc.external` – :class:`ExternalMethod`, the registered methods' base;
* ``worker_protocol.py`` and ``<name>_worker.py`` – run *inside* the library's environment
  (numpy, scipy and the library only; they never import ``cdgtmll``).
"""
