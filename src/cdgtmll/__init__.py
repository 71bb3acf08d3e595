"""cdgtmll: reproducible benchmark pipeline for long-tail multi-label learning (CD-GTMLL)."""

__version__ = "0.1.0"
