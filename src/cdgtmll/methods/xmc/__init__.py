"""Extreme multi-label methods: the paper's XMC baselines (:mod:`.baselines`) and two XMC
libraries as reference rows (:mod:`.peers`)."""
