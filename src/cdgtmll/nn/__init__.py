"""Shared neural components: the tabular backbone and the one training loop."""

from cdgtmll.nn.backbone import MLPBackbone, Standardize
from cdgtmll.nn.trainer import (
    TrainConfig,
    TrainingInterrupted,
    TrainTask,
    predict_in_chunks,
    read_log,
    resolve_device,
    train,
    validation_metrics,
)

__all__ = [
    "MLPBackbone",
    "Standardize",
    "TrainConfig",
    "TrainTask",
    "TrainingInterrupted",
    "predict_in_chunks",
    "read_log",
    "resolve_device",
    "train",
    "validation_metrics",
]
