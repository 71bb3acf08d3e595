"""Workarounds that exist only to make processes cheaper or to patch a dependency, one module
each. Every module says what it works around (with the upstream issue or pull request and the
version it was written against), its measured gain, and its guard: a check that falls back to
the dependency's own behaviour when the dependency changes, tested in tests/unit/runtime/.
``benchmarks/bench_runtime_workarounds.py`` measures each against its fallback, side by side
(docs/benchmarks.md, "Run-time workarounds").

* :mod:`cdgtmll.runtime.snakemake_timer`: one pending re-evaluation timer in Snakemake 9.27.1's
  scheduler (snakemake/snakemake#3804), applied by the Snakefile;
* :mod:`cdgtmll.runtime.openmp`: ``OMP_WAIT_POLICY=PASSIVE`` for every job of the workflow
  (pytorch/pytorch#80777), exported by the Snakefile;
* :mod:`cdgtmll.runtime.torch_determinism` and :mod:`cdgtmll.runtime.torch_optim`: deterministic
  algorithms and torch's optimizers without importing the compiler stack (torch 2.14.1;
  pytorch/pytorch#165950, #127325), used by the trainer (:mod:`cdgtmll.nn.trainer`).

The guard they share is :func:`cdgtmll.runtime.guard.source_is`. Nothing here imports a
``cdgtmll`` module outside this package; the rest of the package imports these modules
where it applies them.
"""
