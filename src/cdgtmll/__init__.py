"""cdgtmll: reproducible benchmark pipeline for long-tail multi-label learning (CD-GTMLL).

Its version is pyproject.toml's (``importlib.metadata.version("cdgtmll")``): this file is part of every
job's code identity, so a release that changed it would re-run every job.
"""
