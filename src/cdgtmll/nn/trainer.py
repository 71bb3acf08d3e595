"""The one training loop every neural method shares (App. E.1 "Optimization").

Division of labour
------------------
A method supplies a :class:`TrainTask`: the model (backbone + heads, built from the
training rows), its parameter groups, and ``training_step(model, xb, yb, progress)``
returning ``(objective_to_minimise, {name: scalar tensor to log})``. The trainer owns
everything else, identically for BCE, the other loss-based baselines and CD-GTMLL:

* seeding (python / numpy / torch from ``ctx.seed``), a seeded ``torch.Generator`` for
  the per-epoch shuffle, deterministic algorithms on CPU
  (:func:`cdgtmll.runtime.torch_determinism.set_deterministic`, restored on exit), so the same seed gives bit-identical predictions on CPU;
* torch's TF32 and cuDNN autotuner flags, set on every run from the config and restored on exit
  (:func:`run_numerics`: TF32 off unless ``allow_tf32``; ``cudnn_benchmark`` on for image inputs
  unless configured); they act on CUDA only;
* no DataLoader: the (tabular) training arrays live on the device as tensors and a
  batch is an index gather from the epoch's seeded ``randperm``; a task may re-lay the
  target columns once (:meth:`TrainTask.train_targets`);
* AdamW (decoupled weight decay 1e-4 on every parameter, biases and fusion logits
  included: PyTorch's default, the paper names no exclusions; the implementation by device,
  :func:`resolve_optimizer_impl`) with param groups ``backbone`` (eta_0), ``head``
  (eta_head) and ``fusion`` (eta_0, E.1), each with a per-step cosine decay from its
  base rate to 0 over all ``epochs * ceil(n / B)`` steps (no warm-up; the last partial
  batch of an epoch is kept);
* per batch: ``zero_grad -> objective.backward() -> task.clip_gradients(max_norm=5)
  -> optimiser.step() -> scheduler.step() -> task.after_optimizer_step()``; the
  default clipping is the global norm over all parameters (App. E.1), a task may
  clip per parameter block instead (CD-GTMLL does, see its docstring); the steps
  (:func:`run_steps`) read no tensor on the host where that waits for the device (CUDA), and
  logged Python scalars reach it as fill kernels (:func:`step_scalar`), so a CUDA step never
  waits for the host (:mod:`cdgtmll.nn.device_sync`; tests/unit/nn/test_step_sync.py checks it on
  the CPU, tests/cuda/test_cuda_sync.py under ``torch.cuda.set_sync_debug_mode("error")``);
* one row per epoch in ``ctx.workdir/train_log.csv``: ``epoch``, ``loss`` (mean
  objective over the epoch's samples), the task's terms (same weighting),
  ``lr_backbone`` / ``lr_head`` (rates of the epoch's first step), ``grad_norm_max`` and
  ``clipped_steps`` (below, "Is the clip engaged?"), ``val_mAP`` (macro
  AP over the labels with a validation positive, = scikit-learn's per-label
  ``average_precision_score``, vectorised), ``val_microF1``
  (threshold 0.5, ``p > 0.5``), the task's ``epoch_end`` columns, ``epoch_time``
  (seconds of the training loop only), ``val_time`` and ``machine`` (the kind of machine
  that trained the epoch, :func:`cdgtmll.lineage.provenance.device_kind`: a run resumed on
  another kind of machine keeps both in its log);
* divergence stops training at once: a non-finite loss or gradient norm (the norm that
  clipping computes anyway) raises :class:`TrainingDiverged` at that step, naming the
  epoch, the step, the non-finite loss term(s) and the learning rates; nothing is
  written for the diverging epoch (the last finite checkpoint, if any, stays). On CPU
  (and on the float16 GradScaler path, which syncs every step anyway) the values are read
  at every step; on CUDA no host sync is added per step: the step's values are kept on
  the device and polled through pinned memory every 0.25 s and read after the epoch's
  existing sync (training stops within about 0.25 s, or at the epoch's end, and reports
  the first bad step);
* a checkpoint every ``checkpoint_every`` epochs (default :data:`CHECKPOINT_EVERY`;
  ``ctx.extra["checkpoint_every"]`` overrides it: the training job sets it from
  ``$CDGTMLL_CHECKPOINT_EVERY``), after the last epoch, after any epoch that
  ends :data:`CHECKPOINT_SECONDS` or more after the previous checkpoint, and at the end of the
  epoch during which SIGTERM or SIGINT arrived (:class:`StopSignals`: the checkpoint and log
  are written, then the signal is delivered again to its previous handler, so the process
  stops as it would have; a second signal stops at once, the last checkpoint stays). The
  per-epoch log rows are kept in memory and written with each checkpoint (they are in the
  checkpoint too), and on divergence. ``ctx.workdir/checkpoint.pt`` is written atomically:
  model, optimiser, scheduler, RNG states (torch CPU/CUDA, numpy, python, shuffle
  generator), epoch, log rows so far, the task's extra state, and a fingerprint
  (sha256 of the task's hyper-parameters, the trainer config, the seed, the
  shapes + sha256 of the training/validation arrays and the sha256 of the package's
  source code, so that a checkpoint of other code is never resumed). ``train`` resumes from the
  epoch after a checkpoint with the same fingerprint (a mismatching or unreadable one
  is ignored with a warning and overwritten); since every RNG is restored, an
  interrupted-and-resumed run is bit-identical on CPU to an uninterrupted one (all
  columns but the two timings) whatever the cadence, which only decides how many epochs
  a killed run trains again. A completed run resumes to "nothing left to do";
* progress (``ctx.progress``: a :class:`cdgtmll.nn.progress.RunProgress`, or True for a
  plain one on stderr): after each epoch's checkpoint and log row, one line
  ``[epoch] <job> seed <s> epoch <e>/<E>: loss ..., val mAP ..., <seconds>, ETA ...``
  (format: :mod:`cdgtmll.nn.progress`). It only reads the finished row, so a run with
  progress on gives the same numbers as one without (tested).

Image inputs (end-to-end fine-tuning; :mod:`cdgtmll.images.trainer_input`): ``X_train`` /
``X_val`` may be :class:`~cdgtmll.images.trainer_input.ImageInput` objects instead of arrays.
A batch is then decoded and augmented by a DataLoader over the same seeded ``randperm``
(``ImageInput.iter_batches``), validation and prediction run over eval-transformed
images in order, the fingerprint holds the image list's digest (row ids, relative paths,
file sizes, transform, occlusion) instead of an array hash, and a model whose backbone
autocasts to float16 trains with a ``torch.amp.GradScaler`` (its state is checkpointed;
bfloat16 and float32 need none). ``task.epoch_end`` receives the validation
``ImageInput`` (iterate it with :func:`cdgtmll.images.trainer_input.iter_rows`).

Sparse inputs (XMC; :mod:`cdgtmll.nn.sparse`): a CSR ``X_train`` stays sparse when the
task asks for it (``task.wants_sparse_input(X_train)``, True for a neural method on the
TF-IDF linear backbone); a CSR ``Y`` always stays sparse. Such matrices stay in host
memory and a batch is the CSR row gather of the epoch's ``randperm`` indices, sent to
the device as a sparse COO tensor (X) or a dense float32 block (Y; the task's
``train_targets`` is then applied per batch, which equals the once-per-run re-lay
because it is row-wise, unless the task names its target columns with
``train_target_columns``: the CSR matrix is then re-laid once). Validation and prediction run in row chunks; with a CSR
``Y_val`` the log gets ``val_p@1/3/5`` too and ``val_mAP`` is NaN above
``nn.sparse.DENSE_VAL_MAX_CELLS``. Dense inputs take none of these sparse paths.

Is the clip engaged? (App. E.1: "Gradient clipping (global norm 5) is enabled.") A clip that
never acts cannot make two clipping readings differ, so the log says whether it acted:
``grad_norm_max`` is the epoch's largest pre-clip gradient norm and ``clipped_steps`` the number
of its steps whose pre-clip norm exceeded ``grad_clip`` (0 without clipping). The norm is the
one clipping compares with ``grad_clip``: the global norm that ``task.clip_gradients`` returns
(computed by :func:`~cdgtmll.nn.divergence.grad_norm` when clipping is off), or, for a task that
clips per block, :meth:`TrainTask.clip_statistic` (CD-GTMLL ``clip_scope: block``: the largest
block norm, so a step counts as clipped if any block was). ``torch``'s clip scales by
``max_norm / (norm + 1e-6)`` when that is below 1, i.e. also for a norm within 1e-6 under
``grad_clip``; such a step is not counted. The per-step norms go into a preallocated device
tensor (no host sync per step on CUDA) read once per epoch; on the float16 GradScaler path the
norm is recorded only when clipping is on, and a step the scaler skips (non-finite gradients)
is left out. ``grad_norms.npy`` (float32, one entry per step, NaN where none was recorded) is
written with the log, so that :func:`clip_summary` (steps, clipped steps, max and median
pre-clip norm over the whole run) covers the epochs before a resume too.

Epoch selection (``TrainConfig.select_epoch``; :func:`epoch_selection`): ``last`` returns
the weights after the last epoch; ``best_val`` returns the weights after the epoch with
the highest validation mAP (the log's ``val_mAP``, Eq. E.8; ties: the earliest such
epoch; epochs with a NaN ``val_mAP`` never count). The training itself is the same under
both rules (same updates, same log): only which weights ``train`` returns differs. With
``best_val`` the best epoch's weights (a copy of ``model.state_dict()`` taken when the
epoch's checkpoint is written, i.e. after ``epoch_end``) and its epoch and score are part
of every checkpoint (``best``), so an interrupted and resumed run returns the same weights
as an uninterrupted one; the checkpoint's ``model`` stays the last epoch's (that is what
training resumes from). Without any finite ``val_mAP`` (no validation rows, or an XMC
label space above ``nn.sparse.DENSE_VAL_MAX_CELLS``) ``best_val`` keeps the last epoch and
warns; the selection record says so (``fallback``).

``ctx.extra["_stop_after_epoch"] = k`` (test-only) acts as a signal during epoch ``k``: it
raises :class:`TrainingInterrupted` right after epoch ``k``'s checkpoint and log are written.

The checkpoint and log files (writing, reading, RNG states) live in
:mod:`cdgtmll.nn.checkpoint`; a full disk there raises :class:`cdgtmll.io.DiskFullError`.
"""

from __future__ import annotations

import math
import random
import signal
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from cdgtmll.images.trainer_input import ImageInput, iter_rows
from cdgtmll.io import atomic_path, remove_stale_temps
from cdgtmll.lineage.provenance import device_info, device_kind
from cdgtmll.nn import device_sync
from cdgtmll.nn import sparse as sparse_mod
from cdgtmll.nn.backbones.resnet import needs_grad_scaler
from cdgtmll.nn.checkpoint import (
    CHECKPOINT,
    TRAIN_LOG,
    fingerprint_hash,
    load_checkpoint,
    restore_state,
    run_fingerprint,
    save_checkpoint,
    training_state,
    write_log,
)
from cdgtmll.nn.divergence import FiniteWatch, TrainingDiverged, divergence_notes, grad_norm
from cdgtmll.nn.progress import epoch_reporter
from cdgtmll.nn.val_metrics import validation_metrics
from cdgtmll.runtime.torch_determinism import set_deterministic
from cdgtmll.runtime.torch_optim import eager_optimizer_methods, optimizer_step

PREDICT_CHUNK = 8192
#: the rules of ``TrainConfig.select_epoch`` (module docstring, "Epoch selection")
SELECT_EPOCH_RULES = ("last", "best_val")
#: the validation column ``best_val`` maximises
SELECT_METRIC = "val_mAP"
#: per-step pre-clip gradient norms of the whole run (module docstring, "Is the clip engaged?")
GRAD_NORMS = "grad_norms.npy"
#: default checkpoint cadence in epochs (module docstring); ``ctx.extra["checkpoint_every"]``
#: overrides it. Measured on Yeast (BCE, 100 epochs): a checkpoint every epoch was 8% of the
#: fit's CPU and 14% of its wall time; every 10 epochs still about 4% (cProfile, 2026-11-27). A run stopped by
#: SIGTERM/SIGINT checkpoints its current epoch anyway; a killed one (SIGKILL, power) trains at
#: most this many epochs again, or CHECKPOINT_SECONDS of training.
CHECKPOINT_EVERY = 25
#: a checkpoint is also written after an epoch that ends this long after the previous one
CHECKPOINT_SECONDS = 120.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: how AdamW's update is computed (``TrainConfig.optimizer_impl``): ``for_loop`` = torch's
#: per-tensor path (its CPU default), ``foreach`` = its multi-tensor path (its CUDA default: one
#: kernel per operation over all parameters), ``fused`` = ``AdamW(fused=True)``, one kernel per
#: tensor (different rounding: see docs/benchmarks.md "Floor" for its measured effect), ``auto``
#: (the default) = by device (:func:`resolve_optimizer_impl`)
OPTIMIZER_IMPLS = ("auto", "for_loop", "foreach", "fused")
#: what ``optimizer_impl: auto`` takes per device type, and why (recorded in each run's provenance)
AUTO_OPTIMIZER_IMPL = {
    "cuda": ("foreach", "auto on CUDA: torch's multi-tensor AdamW (its CUDA default), a few kernel launches per "
                        "step over all parameter tensors instead of several per tensor"),
    "cpu": ("for_loop", "auto on CPU: torch's per-tensor AdamW (its CPU default); on the default profile's "
                        "CPU models foreach is no faster (same bytes) and fused saves 5-10% of a fit but rounds "
                        "differently, which would change every CPU number (benchmarks/bench_optimizer_impl.py, "
                        "docs/benchmarks.md)"),
}


class TrainingInterrupted(RuntimeError):
    """Raised by the test-only ``_stop_after_epoch`` knob."""


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (App. E.1/E.2). Yeast: B=256, 100 epochs, eta_0=2e-3.

    ``lr_head=None`` means eta_head = eta_0: the paper gives eta_head only for images
    (3e-4 vs eta_0=1e-4) and XMC (5e-4), not for tabular data.
    """

    epochs: int = 100
    batch_size: int = 256
    lr_backbone: float = 2e-3
    lr_head: float | None = None
    weight_decay: float = 1e-4
    grad_clip: float | None = 5.0
    select_epoch: str = "last"
    optimizer_impl: str = "auto"
    allow_tf32: bool = False
    #: ``auto`` = on for image inputs (fixed-size batches, what cuDNN's autotuner is for), off
    #: otherwise (tabular and sparse models run no convolutions); or True / False
    cudnn_benchmark: str | bool = "auto"

    @property
    def head_lr(self) -> float:
        return self.lr_backbone if self.lr_head is None else float(self.lr_head)

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"epochs and batch_size must be >= 1, got {self.epochs}, {self.batch_size}")
        if self.select_epoch not in SELECT_EPOCH_RULES:
            raise ValueError(f"select_epoch must be one of {SELECT_EPOCH_RULES}, got {self.select_epoch!r}")
        if self.optimizer_impl not in OPTIMIZER_IMPLS:
            raise ValueError(f"optimizer_impl must be one of {OPTIMIZER_IMPLS}, got {self.optimizer_impl!r}")
        if not isinstance(self.allow_tf32, bool):
            raise ValueError(f"allow_tf32 must be true or false, got {self.allow_tf32!r}")
        if self.cudnn_benchmark != "auto" and not isinstance(self.cudnn_benchmark, bool):
            raise ValueError(f"cudnn_benchmark must be one of auto, true, false; got {self.cudnn_benchmark!r}")


class TrainTask:
    """What a method supplies to :func:`train`; override the first four."""

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> nn.Module:
        """Build the model (called after seeding, so its initialisation is seeded)."""
        raise NotImplementedError

    def param_groups(self, model: nn.Module) -> dict[str, list[nn.Parameter]]:
        """``{'backbone': [...], 'head': [...], 'fusion': [...]}`` ('fusion' optional);
        every trainable parameter must appear in exactly one group."""
        raise NotImplementedError

    def training_step(
        self, model: nn.Module, xb: torch.Tensor, yb: torch.Tensor, progress: float
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Forward one batch; return the objective to *minimise* and scalars to log.
        ``yb`` are rows of :meth:`train_targets`; ``progress`` = global step / total
        steps, in [0, 1)."""
        raise NotImplementedError

    def epoch_batches(self, perm: torch.Tensor, batch_size: int) -> list[torch.Tensor] | None:
        """The epoch's batches as index tensors into the training rows; None (default) =
        consecutive ``batch_size`` slices of the seeded permutation ``perm``. A task that
        samples its own batches (MLC-NC's class-aware sampler) returns them here, so that
        the trainer gathers (or, for images, decodes in its workers) exactly those rows.
        Must return ``ceil(len(perm) / batch_size)`` batches (the schedule's step count)."""
        return None

    def train_targets(self, model: nn.Module, Y: torch.Tensor) -> torch.Tensor:
        """Training targets as ``training_step`` receives them (rows gathered per batch);
        a task may re-lay the columns once here instead of per batch. Default: ``Y``."""
        return Y

    def train_target_columns(self, model: nn.Module) -> torch.Tensor | None:
        """When :meth:`train_targets` only selects columns of ``Y`` (repeats allowed), those
        column indices; a sparse ``Y`` is then re-laid once, on the CSR matrix, instead of
        every densified batch going through :meth:`train_targets`. Same values, so the same
        numbers. Default: None."""
        return None

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """Probabilities ``[n, L]`` for a chunk of rows (model in eval mode, no grad)."""
        raise NotImplementedError

    def clip_gradients(self, model: nn.Module, max_norm: float) -> torch.Tensor | None:
        """Default: global-norm clipping over all parameters. Returns the gradient norm
        before clipping (a tensor, not read on the host), which the trainer checks for
        NaN/inf; an override that returns None makes the trainer compute the global norm
        itself (one more pass over the gradients)."""
        cached = getattr(self, "_clip_params", None)
        if cached is None or cached[0] is not model:  # the parameter list, once per model (2.5% of a Yeast fit)
            cached = self._clip_params = (model, list(model.parameters()))
        return nn.utils.clip_grad_norm_(cached[1], max_norm)  # it skips parameters without a gradient

    def clip_statistic(self) -> torch.Tensor | None:
        """The norm the last :meth:`clip_gradients` call compared with ``max_norm``, when that
        is not the global norm it returned (a task that clips per block: the largest block
        norm); None (default): the returned norm. Logged as ``grad_norm_max`` and counted in
        ``clipped_steps``; a device tensor, not read on the host per step."""
        return None

    def after_optimizer_step(self, model: nn.Module) -> None:
        """Hook after every optimiser step (e.g. EMA buffers)."""

    def epoch_end(
        self, model: nn.Module, epoch: int, X_val: torch.Tensor | None, Y_val: torch.Tensor | None, workdir: Path
    ) -> dict[str, float]:
        """Extra per-epoch log columns / artefacts (model in eval mode, no grad)."""
        return {}

    def write_artifacts(self, workdir: Path) -> None:
        """Write the task's per-run files (e.g. per-epoch diagnostics kept by
        :meth:`epoch_end`); called whenever the trainer writes its checkpoint and log."""

    def extra_state(self) -> dict[str, Any]:
        """Task state beyond the model that must survive a resume."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass


# ---------------------------------------------------------------------------- helpers


def resolve_device(device: str | None) -> torch.device:
    """'auto' -> CUDA when available; 'cuda' without CUDA falls back to CPU with a warning."""
    device = (device or "cpu").lower()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        warnings.warn("CUDA requested but not available; training on CPU", stacklevel=3)
        return torch.device("cpu")
    return torch.device(device)


def resolve_optimizer_impl(requested: str, device: torch.device | str) -> tuple[str, str]:
    """``(implementation, reason)`` of AdamW for ``optimizer_impl`` ``requested`` on ``device``:
    an explicit choice as configured, ``auto`` by device type (:data:`AUTO_OPTIMIZER_IMPL`;
    other device types take torch's per-tensor path)."""
    if requested not in OPTIMIZER_IMPLS:
        raise ValueError(f"optimizer_impl must be one of {OPTIMIZER_IMPLS}, got {requested!r}")
    if requested != "auto":
        return requested, f"configured (optimizer_impl: {requested})"
    return AUTO_OPTIMIZER_IMPL.get(torch.device(device).type, AUTO_OPTIMIZER_IMPL["cpu"])


def run_numerics(cfg: TrainConfig, device: torch.device | str, images: bool) -> dict[str, Any]:
    """The settings of a training run that change its numbers in the last bits without being
    hyper-parameters of its method, as :func:`train` applies them (each run's provenance
    ``numerics``; the tables name those that are not the default, :mod:`cdgtmll.tables.footnotes`):
    ``optimizer_impl`` (the AdamW path taken) with ``optimizer_impl_requested`` and
    ``optimizer_impl_reason``; ``allow_tf32`` (TF32 in cuBLAS matmuls and cuDNN convolutions,
    CUDA on Ampere or newer; off by default: the paper's numbers are fp32/bf16);
    ``cudnn_benchmark`` (cuDNN's autotuner, ``auto``: on for image inputs) with
    ``cudnn_benchmark_requested``; ``device`` (its type: on the CPU neither flag acts)."""
    impl, why = resolve_optimizer_impl(cfg.optimizer_impl, device)
    bench = bool(images) if cfg.cudnn_benchmark == "auto" else bool(cfg.cudnn_benchmark)
    return {"optimizer_impl": impl, "optimizer_impl_requested": cfg.optimizer_impl, "optimizer_impl_reason": why,
            "allow_tf32": bool(cfg.allow_tf32), "cudnn_benchmark": bench,
            "cudnn_benchmark_requested": cfg.cudnn_benchmark, "device": torch.device(device).type}


def backend_flags() -> tuple[bool, bool, bool]:
    """``(cuBLAS matmul TF32, cuDNN TF32, cuDNN benchmark)`` as torch has them now."""
    return (bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32),
            bool(torch.backends.cudnn.benchmark))


def set_backend_flags(flags: tuple[bool, bool, bool]) -> None:
    """Set :func:`backend_flags` (process-wide torch settings; CUDA only acts on them)."""
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = flags


class StopSignals:
    """SIGTERM/SIGINT during training: the first one is noted (``received``) and training
    stops after the current epoch's checkpoint; :meth:`redeliver` then restores the previous
    handlers and raises the signal again, so the process ends as it would have without the
    trainer (SIGTERM: terminated; SIGINT: KeyboardInterrupt). A second signal restores the
    handlers and is delivered at once (stop now; the last checkpoint stays). Handlers are
    installed only in the main thread and only over the default ones (a signal that is
    ignored, or handled by someone else's handler, is left alone)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._prev: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                prev = signal.getsignal(s)
                if prev in (signal.SIG_DFL, signal.default_int_handler):
                    self._prev[s] = signal.signal(s, self._handler)
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            self.restore()
            signal.raise_signal(signum)
            return
        self.received = signum

    def restore(self) -> None:
        for s, h in self._prev.items():
            signal.signal(s, h)
        self._prev = {}

    def __exit__(self, *exc: Any) -> None:
        self.restore()

    def redeliver(self) -> None:
        signum = self.received
        self.restore()
        if signum is not None:
            signal.raise_signal(signum)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def as_float32(X: Any) -> np.ndarray:
    """Dense C-contiguous float32 (sparse inputs are densified: tabular use only)."""
    if sp.issparse(X):
        X = X.toarray()
    return np.ascontiguousarray(np.asarray(X, dtype=np.float32))


def cosine_factor(step: int, total: int) -> float:
    return 0.5 * (1.0 + math.cos(math.pi * min(step, total) / max(total, 1)))


@torch.no_grad()
def predict_in_chunks(fn: Callable[[torch.Tensor], torch.Tensor], X: Any, device: torch.device,
                      sparse_ok: bool = False) -> np.ndarray:
    if sparse_ok and sp.issparse(X):  # sparse backbone: one sparse COO tensor per chunk
        outs = [torch.from_numpy(s) for _, _, s in sparse_mod.predict_sparse_chunks(fn, X, device, PREDICT_CHUNK)]
    else:  # dense rows in chunks, or eval-transformed images in order
        X = X if isinstance(X, ImageInput) else as_float32(X)
        outs = [fn(xb).float().cpu() for xb in iter_rows(X, PREDICT_CHUNK, device)]
    if not outs:
        raise ValueError("predict on zero rows")
    return torch.cat(outs).numpy()


def epoch_selection(rows: list[dict[str, Any]], rule: str) -> dict[str, Any]:
    """Which epoch's weights rule ``rule`` keeps, from the log rows (module docstring,
    "Epoch selection"): ``{"rule", "metric", "epoch", "val_mAP" (of that epoch),
    "epochs_trained", "last_val_mAP"}``, plus ``"fallback"`` (why) when ``best_val`` had no
    finite validation mAP and kept the last epoch. The trainer uses it too, so the record
    and the returned weights agree."""
    if rule not in SELECT_EPOCH_RULES:
        raise ValueError(f"select_epoch must be one of {SELECT_EPOCH_RULES}, got {rule!r}")
    if not rows:
        return {"rule": rule, "metric": SELECT_METRIC, "epoch": None, SELECT_METRIC: None, "epochs_trained": 0,
                "last_val_mAP": None}

    score = _selection_score

    last = rows[-1]
    pick, fallback = last, None
    if rule == "best_val":
        best = None
        for r in rows:  # strictly better only: ties keep the earliest epoch; NaN never wins
            if not math.isnan(score(r)) and (best is None or score(r) > score(best)):
                best = r
        if best is None:
            fallback = f"no finite validation {SELECT_METRIC} in any epoch: the last epoch is kept"
        else:
            pick = best

    def num(v: float) -> float | None:
        return None if math.isnan(v) else v

    out = {"rule": rule, "metric": SELECT_METRIC, "epoch": int(pick["epoch"]), SELECT_METRIC: num(score(pick)),
           "epochs_trained": int(last["epoch"]), "last_val_mAP": num(score(last))}
    if fallback:
        out["fallback"] = fallback
    return out


def _selection_score(r: dict[str, Any]) -> float:
    """A row's ``val_mAP`` as :func:`epoch_selection` reads it: NaN when missing or not finite."""
    try:
        v = float(r.get(SELECT_METRIC, float("nan")))
    except (TypeError, ValueError):
        return float("nan")
    return v if math.isfinite(v) else float("nan")


def _is_new_best(row: dict[str, Any], best: dict[str, Any] | None) -> bool:
    """Whether ``best_val`` moves to ``row``'s epoch: a finite score strictly above the best so
    far (``best``: the earlier epochs' pick), the same choice as :func:`epoch_selection` over all
    rows, without re-reading them every epoch."""
    s = _selection_score(row)
    return not math.isnan(s) and (best is None or s > _selection_score(best))


def _state_copy(model: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of ``model.state_dict()`` (same devices), unaffected by later steps."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ---------------------------------------------------------------------------- trainer


def train(
    task: TrainTask,
    X_train: Any,
    Y_train: Any,
    X_val: Any,
    Y_val: Any,
    cfg: TrainConfig,
    ctx: Any,
    fingerprint: dict[str, Any],
) -> tuple[nn.Module, list[dict[str, Any]]]:
    """Train ``task``'s model; returns ``(model in eval mode, log rows)``.

    ``ctx`` is a :class:`cdgtmll.methods.base.RunContext` (seed, workdir, device,
    progress, extra). ``fingerprint`` identifies the task's configuration (method
    name and hyper-parameters) for checkpoint matching.
    """
    device = resolve_device(getattr(ctx, "device", "cpu"))
    prev_det = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    prev_flags = backend_flags()
    num = run_numerics(cfg, device, isinstance(X_train, ImageInput))
    set_backend_flags((num["allow_tf32"], num["allow_tf32"], num["cudnn_benchmark"]))  # every run, explicitly
    if device.type == "cpu":
        set_deterministic(True)
    try:
        return _train(task, X_train, Y_train, X_val, Y_val, cfg, ctx, fingerprint, device)
    finally:
        set_deterministic(prev_det, warn_only=prev_warn)
        set_backend_flags(prev_flags)


def sparse_train_targets(task: TrainTask, model: nn.Module, Y: Any, device: torch.device | str,
                         once: bool = True) -> sparse_mod.SparseRows:
    """A sparse training ``Y`` as the rows ``training_step`` receives: re-laid once on the CSR
    matrix when the task names its target columns (:meth:`TrainTask.train_target_columns`; XMC:
    no per-batch gather and concat), else (or ``once=False``) each densified batch through
    :meth:`TrainTask.train_targets`. Same values either way."""
    cols = task.train_target_columns(model) if once else None
    if cols is not None:
        return sparse_mod.SparseRows(sp.csr_matrix(Y)[:, cols.cpu().numpy()], device, dense=True)
    return sparse_mod.SparseRows(Y, device, dense=True, transform=lambda y: task.train_targets(model, y))


def _train(task, X_train, Y_train, X_val, Y_val, cfg, ctx, fingerprint, device):
    workdir = Path(ctx.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(workdir)  # temporaries of a killed run (kill -9 between write and rename)
    # sparse X only when the task wants it; sparse Y always stays sparse (nn.sparse)
    keep_sparse = sp.issparse(X_train) and bool(getattr(task, "wants_sparse_input", lambda X: False)(X_train))
    images = isinstance(X_train, ImageInput)
    Xtr = _trainer_input(X_train, keep_sparse)
    Ytr = sparse_mod.as_csr32(Y_train) if sp.issparse(Y_train) else as_float32(Y_train)
    has_val = X_val is not None and Y_val is not None and np.shape(Y_val)[0] > 0
    if has_val and images != isinstance(X_val, ImageInput):
        raise TypeError("X_train and X_val must both be ImageInput or both be arrays")
    Xva = _trainer_input(X_val, keep_sparse) if has_val else None
    Yva = (sparse_mod.as_csr32(Y_val) if sp.issparse(Y_val) else as_float32(Y_val)) if has_val else None

    seed_everything(ctx.seed)
    model = task.build_model(Xtr, Ytr).to(device)
    n, B = Xtr.shape[0], cfg.batch_size
    steps_per_epoch = math.ceil(n / B)
    total_steps = cfg.epochs * steps_per_epoch
    opt, sched = make_optimizer(task, model, cfg, total_steps)
    scaler = torch.amp.GradScaler(device.type) if needs_grad_scaler(model) else None
    gen = torch.Generator().manual_seed(ctx.seed)

    fp = run_fingerprint(fingerprint, asdict(cfg), ctx.seed, (Xtr, Ytr, Xva, Yva))
    fp_hash = fingerprint_hash(fp)
    ckpt_path, log_path = workdir / CHECKPOINT, workdir / TRAIN_LOG
    start_epoch, rows = 1, []
    keep_best = cfg.select_epoch == "best_val"
    best: dict[str, Any] | None = None  # {"epoch", "val_mAP", "model"}: the best_val weights so far
    state = load_checkpoint(ckpt_path, fp_hash)
    if state is not None:
        rows, start_epoch = restore_state(state, model, opt, sched, task, scaler, gen), int(state["epoch"]) + 1
        best = state.get("best")
    step_norms = _restored_norms(workdir, start_epoch - 1, steps_per_epoch)

    X_t = _rows_on(Xtr, device)
    if sp.issparse(Ytr):
        Y_t = sparse_train_targets(task, model, Ytr, device)
    else:
        Y_t = task.train_targets(model, torch.from_numpy(Ytr).to(device))
    Xv_t = _rows_on(Xva, device) if has_val else None
    Yv_t = sparse_mod.rows_on(Yva, device, dense=True) if has_val else None
    extra = getattr(ctx, "extra", None) or {}
    stop_after = extra.get("_stop_after_epoch")
    every = int(extra.get("checkpoint_every") or CHECKPOINT_EVERY)
    if every < 1:
        raise ValueError(f"checkpoint_every must be >= 1 epoch, got {every}")
    ckpt_epoch, ckpt_t = start_epoch - 1, time.perf_counter()
    machine = device_kind(device_info(str(device))) or ""
    lr_names = [g["name"] for g in opt.param_groups]
    watch = FiniteWatch(device, immediate=device_sync.host_reads_free(device) or scaler is not None)
    method_name = str(fingerprint.get("method") or type(task).__name__)
    report = epoch_reporter(getattr(ctx, "progress", False), method_name, ctx.seed)
    if report is not None:
        report.train_started(method_name, start_epoch, cfg.epochs)
    stop = StopSignals()
    try:
        stop.__enter__()
        for epoch in range(start_epoch, cfg.epochs + 1):
            lrs = {name: g["lr"] for name, g in zip(lr_names, opt.param_groups)}
            t0 = time.perf_counter()
            perm = torch.randperm(n, generator=gen).to(device)
            sums = train_epoch(task, model, opt, sched, X_t, Y_t, perm, B, (epoch - 1) * steps_per_epoch, total_steps,
                               cfg.grad_clip, scaler=scaler, epoch=epoch, watch=watch, step_norms=step_norms)
            epoch_time = time.perf_counter() - t0
            row: dict[str, Any] = {"epoch": epoch}
            row.update({k: v / n for k, v in sums.items()})
            row["lr_backbone"] = lrs.get("backbone", float("nan"))
            row["lr_head"] = lrs.get("head", float("nan"))
            row.update(clip_columns(step_norms[-1], cfg.grad_clip))

            t1 = time.perf_counter()
            model.eval()
            with torch.no_grad():
                if has_val and sp.issparse(Yva):
                    row.update(sparse_mod.validation_metrics_sparse(lambda x: task.predict(model, x), Xva, Yva, device))
                elif has_val:
                    S = predict_in_chunks(lambda x: task.predict(model, x), Xva, device, sparse_ok=keep_sparse)
                    row.update(validation_metrics(Yva, S))
                else:
                    row.update({"val_mAP": float("nan"), "val_microF1": float("nan")})
                row.update(task.epoch_end(model, epoch, Xv_t, Yv_t, workdir))
            row["epoch_time"] = epoch_time
            row["val_time"] = time.perf_counter() - t1
            row["machine"] = machine  # rows restored from a checkpoint keep the machine that trained them
            rows.append(row)
            if keep_best and _is_new_best(row, best):  # = epoch_selection(rows, "best_val") picks this epoch
                best = {"epoch": epoch, SELECT_METRIC: row[SELECT_METRIC], "model": _state_copy(model)}

            stopping = stop.received is not None or (stop_after is not None and epoch == int(stop_after))
            if (stopping or epoch == cfg.epochs or epoch % every == 0
                    or time.perf_counter() - ckpt_t >= CHECKPOINT_SECONDS):
                save_checkpoint(ckpt_path, training_state(fp, fp_hash, epoch, model, opt, sched, task, gen, rows,
                                                          scaler, best=best))
                write_log(log_path, rows)
                _write_norms(workdir, step_norms)
                task.write_artifacts(workdir)
                ckpt_epoch, ckpt_t = epoch, time.perf_counter()
            if report is not None:  # reads the row only: no RNG, no tensor touched
                report.epoch_done(row, time.perf_counter() - t0)
            if stop.received is not None:
                stop.redeliver()  # ends the process as the signal would have (SIGINT: KeyboardInterrupt)
                raise TrainingInterrupted(f"stopped after epoch {epoch}: signal {stop.received}")
            if stop_after is not None and epoch == int(stop_after):
                raise TrainingInterrupted(f"stopped after epoch {epoch} (_stop_after_epoch)")
    except TrainingDiverged as e:
        e.method = method_name
        if rows:  # the finished epochs' rows (the checkpoint may be older: its epoch is in the notes)
            write_log(log_path, rows)
            _write_norms(workdir, step_norms[: len(rows)])
            task.write_artifacts(workdir)
        e.notes.extend(divergence_notes(e, Xtr, Ytr, rows, ckpt_path, ckpt_epoch))
        raise
    finally:
        stop.restore()
    if start_epoch > cfg.epochs:  # already complete: make sure the log is there
        write_log(log_path, rows)
        _write_norms(workdir, step_norms)
    if keep_best:
        sel = epoch_selection(rows, "best_val")
        if best is not None:
            if int(best["epoch"]) != sel["epoch"]:  # cannot happen: both come from epoch_selection
                raise RuntimeError(f"best_val: kept weights of epoch {best['epoch']}, selection says {sel['epoch']}")
            model.load_state_dict(best["model"])
        else:
            warnings.warn(f"{method_name} seed {ctx.seed}: select_epoch best_val: {sel.get('fallback')}", stacklevel=3)
    model.eval()
    return model, rows


def _restored_norms(workdir: Path, epochs: int, steps_per_epoch: int) -> list[np.ndarray]:
    """The per-epoch step norms of the ``epochs`` epochs a resumed run restores, from
    ``grad_norms.npy`` (written with every checkpoint, so it holds at least those epochs);
    NaN for the epochs it does not hold (a checkpoint of a run without the file)."""
    if epochs <= 0:
        return []
    flat = read_grad_norms(workdir)
    flat = np.full(0, np.nan) if flat is None else flat.astype(np.float64)
    out = []
    for e in range(epochs):
        part = flat[e * steps_per_epoch : (e + 1) * steps_per_epoch]
        out.append(np.concatenate([part, np.full(steps_per_epoch - part.size, np.nan)]))
    return out


def _write_norms(workdir: Path, step_norms: list[np.ndarray]) -> None:
    """``grad_norms.npy``: the per-step norms of the epochs so far, float32, atomically."""
    flat = np.concatenate(step_norms).astype(np.float32) if step_norms else np.zeros(0, np.float32)
    with atomic_path(Path(workdir) / GRAD_NORMS, suffix=".npy") as tmp, open(tmp, "wb") as fh:
        np.save(fh, flat, allow_pickle=False)


def _trainer_input(X: Any, keep_sparse: bool) -> Any:
    """An input as the trainer holds it: an ImageInput as is, a kept-sparse matrix as
    canonical CSR float32, anything else dense float32."""
    if isinstance(X, ImageInput):
        return X
    if keep_sparse and sp.issparse(X):
        return sparse_mod.as_csr32(X)
    return as_float32(X)


def _rows_on(X: Any, device: torch.device) -> Any:
    """Row-indexable input on ``device``: an ImageInput (decodes per batch), a tensor, or
    ``SparseRows`` for CSR."""
    return X if isinstance(X, ImageInput) else sparse_mod.rows_on(X, device)


def make_optimizer(
    task: TrainTask, model: nn.Module, cfg: TrainConfig, total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """AdamW over the task's param groups (backbone/fusion at eta_0, heads at eta_head)
    and a per-step cosine decay to 0 over ``total_steps``; its implementation is
    ``cfg.optimizer_impl`` resolved for the model's device (:func:`resolve_optimizer_impl`)."""
    groups = task.param_groups(model)
    _check_groups(model, groups)
    eager_optimizer_methods()
    base_lr = {"backbone": cfg.lr_backbone, "head": cfg.head_lr, "fusion": cfg.lr_backbone}
    chosen = resolve_optimizer_impl(cfg.optimizer_impl, next((p.device for p in model.parameters()), "cpu"))[0]
    impl = {"fused": True} if chosen == "fused" else {"foreach": chosen == "foreach"}
    opt = torch.optim.AdamW(
        [{"params": ps, "lr": base_lr[name], "name": name} for name, ps in groups.items() if ps],
        weight_decay=cfg.weight_decay, **impl,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_factor(s, total_steps))
    return opt, sched


def take_rows(T: Any, idx: torch.Tensor) -> Any:
    """Rows ``idx`` of a batch source: ``index_select`` for a dense tensor (the same bytes as
    ``T[idx]``, which takes torch's slower advanced-indexing kernel: a 256-row gather from a
    12,920 x 983 float32 tensor in a Delicious epoch, one thread, about 80-170 against 230-330
    us; docs/benchmarks.md "Floor"), ``T[idx]`` for anything else
    (:class:`~cdgtmll.nn.sparse.SparseRows`)."""
    if isinstance(T, torch.Tensor) and T.layout == torch.strided:
        return T.index_select(0, idx)
    return T[idx]


def train_epoch(
    task: TrainTask,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    sched: Any,
    X_t: torch.Tensor,
    Y_t: torch.Tensor,
    perm: torch.Tensor,
    batch_size: int,
    step0: int,
    total_steps: int,
    grad_clip: float | None,
    scaler: torch.amp.GradScaler | None = None,
    epoch: int = 1,
    watch: FiniteWatch | None = None,
    step_norms: list[np.ndarray] | None = None,
) -> dict[str, float]:
    """One pass over ``perm`` in batches; returns sample-weighted sums of the objective
    (``loss``) and of the task's logged terms. ``X_t`` is a tensor, ``SparseRows`` (row
    gathers) or an :class:`ImageInput` (decoded and augmented batches for ``epoch``).
    With ``scaler`` (float16 autocast) the loss is scaled for backward and the
    gradients unscaled before clipping; a step with inf/NaN gradients is skipped (the
    scaler's job), a non-finite loss is not. A non-finite loss or gradient norm raises
    :class:`TrainingDiverged` (see :class:`FiniteWatch` for when it is noticed; pass
    one ``watch`` for all epochs of a run). ``step_norms``: a list to which the epoch's
    per-step pre-clip norms are appended as one float64 array (module docstring, "Is the
    clip engaged?"; NaN for a step without a recorded norm)."""
    model.train()
    device = perm.device
    names: list[str] = []
    plan = task.epoch_batches(perm, batch_size)
    if plan is None:
        plan = [perm[s : s + batch_size] for s in range(0, perm.numel(), batch_size)]
    elif len(plan) != -(-perm.numel() // batch_size):
        raise ValueError(f"epoch_batches returned {len(plan)} batches, expected {-(-perm.numel() // batch_size)}")
    if isinstance(X_t, ImageInput):  # the loader reads the positions on the host: one read, before the steps
        batches = X_t.iter_batches(_host_plan(plan), batch_size, epoch, device)
    else:
        batches = ((idx, take_rows(X_t, idx)) for idx in plan)
    if watch is None:
        watch = FiniteWatch(device, immediate=device_sync.host_reads_free(device) or scaler is not None)
    watch.start(len(plan))
    norms = torch.full((len(plan),), float("nan"), dtype=torch.float32, device=device)  # pre-clip, per step

    def diverged(found: tuple[int, list[float], float | None]) -> TrainingDiverged:
        b, values, gnorm = found
        g = step0 + b
        lrs = {grp.get("name", str(i)): grp["lr"] for i, grp in enumerate(opt.param_groups)}
        if hasattr(sched, "lr_lambdas") and hasattr(sched, "base_lrs"):  # the rates of step g, not of g + 1
            lrs = {k: base * fn(g) for k, base, fn in zip(lrs, sched.base_lrs, sched.lr_lambdas)}
        return TrainingDiverged(epoch, b + 1, len(plan), g + 1, total_steps, values[0], gnorm,
                                dict(zip(names[1:], values[1:])), lrs)

    acc = run_steps(task, model, opt, sched, batches, Y_t, step0, total_steps, grad_clip, scaler, watch, norms,
                    names, diverged)
    sums = {k: float(v) for k, v in zip(names, acc.double().cpu())}  # the epoch's one read of the sums
    found = watch.finish()
    if found is not None:
        raise diverged(found)
    if step_norms is not None:
        step_norms.append(norms.double().cpu().numpy())
    return sums


def _host_plan(plan: list[torch.Tensor]) -> list[torch.Tensor]:
    """The epoch's batches of positions on the host, read from the device at once (one copy)."""
    if not plan or plan[0].device.type == "cpu":
        return plan
    return list(torch.cat(plan).cpu().split([p.numel() for p in plan]))


def step_scalar(v: Any, device: torch.device) -> torch.Tensor:
    """A logged term as a device tensor without a host-to-device copy: a tensor as it is
    (detached), a Python number as the argument of a fill kernel (``torch.full``: the value
    and dtype ``torch.as_tensor`` gives it, with no copy that waits for the device)."""
    if isinstance(v, torch.Tensor):
        return v.detach()
    if isinstance(v, (bool, int, float)):
        return torch.full((), v, device=device)
    return torch.as_tensor(v, device=device)  # numpy scalars keep their dtype, as before


def run_steps(
    task: TrainTask,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    sched: Any,
    batches: Any,
    Y_t: Any,
    step0: int,
    total_steps: int,
    grad_clip: float | None,
    scaler: torch.amp.GradScaler | None,
    watch: FiniteWatch,
    norms: torch.Tensor,
    names: list[str],
    diverged: Callable[[tuple[int, list[float], float | None]], TrainingDiverged],
) -> torch.Tensor:
    """The steps of one epoch (:func:`train_epoch`): per batch ``zero_grad -> backward -> clip
    -> step -> scheduler -> after_optimizer_step -> watch``; returns the sample-weighted sums
    ``[loss, *terms]`` as one device tensor (``names`` gets their names) and fills ``norms``
    (pre-clip norm per step). Nothing here reads a device value on the host where that read
    waits for the device (:mod:`cdgtmll.nn.device_sync`), except what the GradScaler and an
    ``immediate`` watch do by design."""
    acc = None
    for b, (idx, xb) in enumerate(batches):
        yb = take_rows(Y_t, idx)
        loss, terms = task.training_step(model, xb, yb, (step0 + b) / total_steps)
        if acc is None:
            names[:] = ["loss", *terms]
        vec = torch.stack([loss.detach(), *(step_scalar(v, loss.device) for v in terms.values())])
        opt.zero_grad(set_to_none=True)
        gnorm = clip_norm = None
        if scaler is None:
            loss.backward()
            if grad_clip:
                gnorm = task.clip_gradients(model, grad_clip)
                clip_norm = task.clip_statistic()
            if gnorm is None:  # no clipping, or a clip_gradients that returns no norm
                gnorm = grad_norm(model)
            optimizer_step(opt)
        else:  # the scaler skips steps with inf/NaN gradients itself: only the loss is checked
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            if grad_clip:
                returned = task.clip_gradients(model, grad_clip)
                clip_norm = task.clip_statistic()
                clip_norm = returned if clip_norm is None else clip_norm
            scaler.step(opt)
            scaler.update()
        clip_norm = gnorm if clip_norm is None else clip_norm
        if clip_norm is not None:
            norms[b] = step_scalar(clip_norm, norms.device)  # a device copy: no host sync
        sched.step()
        task.after_optimizer_step(model)
        found = watch.observe(b, loss, vec, gnorm)
        if found is not None:
            raise diverged(found)
        acc = vec * idx.numel() if acc is None else acc + vec * idx.numel()
    return acc


def clip_columns(norms: np.ndarray, grad_clip: float | None) -> dict[str, float | int]:
    """The log's ``grad_norm_max`` (NaN when no finite norm was recorded) and ``clipped_steps``
    (steps with a pre-clip norm above ``grad_clip``; 0 without clipping) of one epoch's norms."""
    fin = np.asarray(norms, dtype=np.float64)
    fin = fin[np.isfinite(fin)]
    return {"grad_norm_max": float(fin.max()) if fin.size else float("nan"),
            "clipped_steps": int((fin > grad_clip).sum()) if grad_clip else 0}


def clip_summary(norms: np.ndarray | None, grad_clip: float | None, rows: list[dict[str, Any]] | None = None
                 ) -> dict[str, Any]:
    """The run's clip record (module docstring, "Is the clip engaged?"): ``grad_clip``,
    ``steps`` (steps with a recorded norm), ``clipped_steps``, ``max`` and ``median`` of the
    pre-clip norms, and ``engaged`` (some step was clipped). ``norms``: the per-step norms of
    the whole run (``grad_norms.npy``); without them (None) only what the log ``rows`` hold:
    ``clipped_steps``, ``max``, and ``median`` None."""
    out: dict[str, Any] = {"grad_clip": grad_clip}
    if norms is not None:
        fin = np.asarray(norms, dtype=np.float64)
        fin = fin[np.isfinite(fin)]
        cols = clip_columns(fin, grad_clip)  # one epoch's rule, over the whole run
        clipped = cols["clipped_steps"]
        out.update(steps=int(fin.size), clipped_steps=clipped, max=cols["grad_norm_max"] if fin.size else None,
                   median=float(np.median(fin)) if fin.size else None)
    else:
        mx = [float(r["grad_norm_max"]) for r in rows or [] if math.isfinite(float(r.get("grad_norm_max", "nan")))]
        clipped = sum(int(float(r.get("clipped_steps", 0))) for r in rows or [])
        out.update(steps=None, clipped_steps=clipped, max=max(mx) if mx else None, median=None)
    out["engaged"] = bool(clipped > 0)
    return out


def read_grad_norms(workdir: str | Path) -> np.ndarray | None:
    """The run's per-step pre-clip norms (``grad_norms.npy``), None if the file is not there."""
    path = Path(workdir) / GRAD_NORMS
    return np.load(path, allow_pickle=False) if path.is_file() else None


def _check_groups(model: nn.Module, groups: dict[str, list[nn.Parameter]]) -> None:
    unknown = set(groups) - {"backbone", "head", "fusion"}
    if unknown:
        raise ValueError(f"unknown parameter group(s) {sorted(unknown)}")
    seen = [id(p) for ps in groups.values() for p in ps]
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    if len(seen) != len(set(seen)) or set(seen) != trainable:
        raise ValueError("param_groups must list every trainable parameter exactly once")
