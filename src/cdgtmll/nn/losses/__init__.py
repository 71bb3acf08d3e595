"""Losses of the loss-based methods: one module per loss, a lazy registry
(:mod:`cdgtmll.nn.losses.registry`) and the helpers they share (:mod:`cdgtmll.nn.losses.common`).

One module per loss so that a loss's code is an input of exactly the jobs that train with it
(:mod:`cdgtmll.lineage.code`).
"""
