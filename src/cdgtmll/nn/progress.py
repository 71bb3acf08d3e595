"""Progress of a training job: one line per epoch in the job's log, one line per seed in
the log and on the terminal.

What is written where (``cdgtmll.train`` under the ``train`` rule, whose shell sends the
job's stderr to ``logs/train/<dataset>/<variant>/<method>.log`` and leaves its stdout to
Snakemake, i.e. the terminal, or the job's Slurm log under the Slurm profile):

* per epoch, log only (``--progress``; written by :func:`cdgtmll.nn.trainer.train`)::

      [epoch] yeast/clean/BCE seed 0 epoch 12/100: loss 0.31202, val mAP 0.6018, 0.12 s, ETA 11 s

  ``loss`` is the epoch's mean objective and ``val mAP`` the trainer's validation mAP
  (the ``train_log.csv`` columns ``loss`` and ``val_mAP``; ``val P@1`` is added when the
  trainer logs it, i.e. for sparse label matrices); the seconds are the wall time of the
  epoch (training, validation, checkpoint) and the ETA is the remaining epochs times the
  mean wall time of the epochs run so far in this process. A method that trains a second
  model in the same seed (LSFA's head retraining) names it: ``... seed 0 LSFA/stage3
  epoch 3/100: ...``; a stage outside the trainer may add one line of its own
  (:meth:`RunProgress.note`; LSFA's feature generator: epochs run, best monitor loss,
  seconds). A run resumed from a checkpoint says so first (``resuming after epoch
  37/100 (checkpoint)``).
* per seed, log and terminal (always; :meth:`RunProgress.seed_done`)::

      [run] yeast/clean/BCE seed 1 (2 of 3) done: 100 epochs, fit 13.9 s, val mAP 0.6120; job ETA 14 s

  for every method, sklearn ones included (they have no epoch count). ``val mAP`` is
  Eq. (E.8) on the validation split of the stored predictions
  (:func:`cdgtmll.metrics.definitions.mean_average_precision`); top-K predictions (large label
  spaces) give ``val P@1`` instead. ``job ETA``: remaining seeds times the mean wall time
  of the seeds trained so far in this process. A seed that is already up to date says
  ``up to date, skipped``; a failing seed says ``FAILED: <error>`` before the traceback.

Nothing here touches a random number generator or a tensor: the lines only format values
the trainer and ``cdgtmll.train`` have already computed, so progress output never changes a
metric. This module imports neither torch nor numpy (``cdgtmll.train`` stays torch-free
for classical methods).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO


def fmt_seconds(s: float) -> str:
    """``0.12 s``, ``14.2 s``, ``4m05s``, ``1h02m``."""
    if not math.isfinite(s):
        return "?"
    if s < 100:
        return f"{s:.2f} s" if s < 1 else f"{s:.1f} s"
    m = int(round(s)) // 60
    if m < 60:
        return f"{m}m{int(round(s)) % 60:02d}s"
    return f"{m // 60}h{m % 60:02d}m"


def _num(v: Any, digits: int = 4) -> str:
    try:
        return f"{float(v):.{digits}f}"
    except (TypeError, ValueError):
        return "?"


def same_file(a: TextIO, b: TextIO) -> bool:
    """Whether two streams write to the same open file (a terminal, or ``> log 2>&1``);
    False when either has no file descriptor (e.g. a test's captured stream)."""
    try:
        return os.path.sameopenfile(a.fileno(), b.fileno())
    except (AttributeError, OSError, ValueError):
        return False


@dataclass
class _Stage:
    """One ``train()`` call within a seed."""

    name: str
    epochs: int
    start_epoch: int
    ran: int = 0
    wall: float = 0.0
    last: dict[str, Any] = field(default_factory=dict)


class RunProgress:
    """Progress lines of one job (one dataset/variant/method, all its seeds).

    ``label`` names the job (``yeast/clean/BCE``); ``seeds`` is the job's seed list.
    ``epochs=True`` writes the per-epoch lines. Every line goes to ``log`` (default:
    ``sys.stderr`` at the time of writing); the per-seed lines also go to ``terminal``
    unless it is None or the same file as ``log``.

    The trainer uses :meth:`train_started` / :meth:`epoch_done` (it receives this object
    as ``RunContext.progress``; ``progress=True`` makes it build a plain one, see
    :func:`epoch_reporter`); ``cdgtmll.train`` the ``seed_*`` methods.
    """

    def __init__(self, label: str, seeds: list[int] | tuple[int, ...] = (), *, epochs: bool = True,
                 log: TextIO | None = None, terminal: TextIO | None = None) -> None:
        self.label = label
        self.seeds = list(seeds)
        self.epochs = bool(epochs)
        self._log = log
        self.terminal = terminal
        self.seed: int | None = None
        self.stages: list[_Stage] = []
        self._seed_walls: list[float] = []
        self._seed_t0: float | None = None
        self._job_t0 = time.perf_counter()

    # ------------------------------------------------------------------ output
    @property
    def log(self) -> TextIO:
        return self._log if self._log is not None else sys.stderr

    def _write(self, line: str, terminal: bool = False) -> None:
        log = self.log
        log.write(line + "\n")
        log.flush()
        if terminal and self.terminal is not None and self.terminal is not log and not same_file(self.terminal, log):
            self.terminal.write(line + "\n")
            self.terminal.flush()

    def _who(self, seed: int | None = None) -> str:
        seed = self.seed if seed is None else seed
        return self.label if seed is None else f"{self.label} seed {seed}"

    def _position(self, seed: int) -> str:
        if seed in self.seeds and len(self.seeds) > 1:
            return f" ({self.seeds.index(seed) + 1} of {len(self.seeds)})"
        return ""

    # ------------------------------------------------------------------ trainer side
    def train_started(self, name: str, start_epoch: int, epochs: int) -> None:
        """A ``train()`` call begins at ``start_epoch`` (> 1 after a resume) of ``epochs``."""
        self.stages.append(_Stage(str(name), int(epochs), int(start_epoch)))
        if not self.epochs:
            return
        if start_epoch > epochs:
            self._write(f"[epoch] {self._who()}{self._stage_tag()}: all {epochs} epochs in the checkpoint")
        elif start_epoch > 1:
            self._write(f"[epoch] {self._who()}{self._stage_tag()}: resuming after epoch {start_epoch - 1}/{epochs} "
                        "(checkpoint)")

    def _stage_tag(self) -> str:
        return f" {self.stages[-1].name}" if len(self.stages) > 1 else ""

    def epoch_done(self, row: Mapping[str, Any], seconds: float) -> None:
        """Epoch ``row['epoch']`` of the current ``train()`` call is done (checkpoint and
        ``train_log.csv`` written); ``row`` is its ``train_log.csv`` row, ``seconds``
        its wall time."""
        st = self.stages[-1]
        st.ran += 1
        st.wall += float(seconds)
        st.last = dict(row)
        if not self.epochs:
            return
        epoch = int(row["epoch"])
        eta = (st.epochs - epoch) * st.wall / st.ran
        parts = [f"loss {_num(row.get('loss'), 5)}", f"val mAP {_num(row.get('val_mAP'))}"]
        if "val_p@1" in row:
            parts.append(f"val P@1 {_num(row['val_p@1'])}")
        parts += [fmt_seconds(seconds), f"ETA {fmt_seconds(eta)}"]
        self._write(f"[epoch] {self._who()}{self._stage_tag()} epoch {epoch}/{st.epochs}: {', '.join(parts)}")

    def note(self, text: str) -> None:
        """A log line (with the per-epoch lines) for a stage that is not a ``train()``
        call, e.g. LSFA's feature generator."""
        if self.epochs:
            self._write(f"[epoch] {self._who()} {text}")

    # ------------------------------------------------------------------ run side
    def seed_started(self, seed: int) -> None:
        self.seed = int(seed)
        self.stages = []
        self._seed_t0 = time.perf_counter()

    def seed_skipped(self, seed: int) -> None:
        self._write(f"[run] {self._who(seed)}{self._position(seed)}: up to date, skipped", terminal=True)

    def seed_failed(self, seed: int, exc: BaseException) -> None:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        self._write(f"[run] {self._who(seed)}{self._position(seed)} FAILED: {type(exc).__name__}: {msg}",
                    terminal=True)

    def epochs_summary(self) -> str | None:
        """``100 epochs``, ``100 + 30 epochs``, ``epochs 38-100 (resumed)``; None without
        a ``train()`` call in this seed (sklearn methods)."""
        if not self.stages:
            return None
        parts, resumed = [], False
        for st in self.stages:
            if st.start_epoch > 1:
                resumed = True
                parts.append(f"{st.start_epoch}-{st.epochs}" if st.ran else f"{st.epochs} (checkpoint)")
            else:
                parts.append(str(st.ran))
        text = " + ".join(parts)
        return f"epochs {text} (resumed)" if resumed else f"{text} epochs"

    def seed_done(self, seed: int, fit_seconds: float, scores: Mapping[str, float]) -> str:
        """The per-seed line (log and terminal); returns it. ``scores``: e.g.
        ``{'val mAP': 0.61}``."""
        wall = time.perf_counter() - (self._seed_t0 if self._seed_t0 is not None else self._job_t0)
        self._seed_walls.append(wall)
        parts = []
        ep = self.epochs_summary()
        if ep:
            parts.append(ep)
        parts.append(f"fit {fmt_seconds(fit_seconds)}")
        parts += [f"{k} {_num(v)}" for k, v in scores.items()]
        line = f"[run] {self._who(seed)}{self._position(seed)} done: {', '.join(parts)}"
        left = len(self.seeds) - 1 - self.seeds.index(seed) if seed in self.seeds else 0
        if left > 0:
            mean = sum(self._seed_walls) / len(self._seed_walls)
            line += f"; job ETA {fmt_seconds(left * mean)}"
        elif len(self.seeds) > 1:
            line += f"; job done in {fmt_seconds(time.perf_counter() - self._job_t0)}"
        self._write(line, terminal=True)
        return line


def epoch_reporter(progress: Any, name: str, seed: int) -> RunProgress | None:
    """What the trainer reports epochs to: ``RunContext.progress`` itself when it is a
    :class:`RunProgress`, a new one labelled ``<name>`` (per-epoch lines on stderr) when
    it is True, else None."""
    if isinstance(progress, RunProgress):
        return progress
    if progress:
        rep = RunProgress(str(name), [seed])
        rep.seed_started(seed)
        return rep
    return None
