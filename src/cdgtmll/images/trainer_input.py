"""End-to-end image input for the shared trainer: ResNet-50 fine-tuned on the pixels
(App. E.2 "Images (VOC/COCO): backbone ResNet-50 (ImageNet init), d' = 2048; heads are
linear"; Sec. 5.1 "Image datasets use standard random crop-flip augmentation").

How image rows reach the trainer
--------------------------------
An image dataset's ``X`` is a column of row ids (:mod:`cdgtmll.images.datasets`). With
``image_backbone.mode: finetune`` a neural method wraps the row ids of each split in an
:class:`ImageInput` (via :class:`ImageSource`, built by ``cdgtmll.train`` from the
processed file's meta) and hands that to :func:`cdgtmll.nn.trainer.train` in place of
a feature matrix. The trainer asks it for batches (:meth:`ImageInput.iter_batches`):
the epoch's seeded permutation cut into batches (the same ``randperm`` the tabular path
gathers with), or the batches a task draws itself (``TrainTask.epoch_batches``, e.g.
MLC-NC's class-aware sampler). One ``torch.utils.data.DataLoader`` per input serves every
pass: ``workers`` decoding processes kept alive between epochs (the epoch travels in each
sample's key), its own generator (the global torch RNG, which dropout uses, is never
drawn from, so a run is bit-identical with any number of workers; tested), pinned memory
and non-blocking copies on CUDA, ``channels_last`` on CUDA.

Transforms
----------
* training rows: ``RandomResizedCrop(image_size)`` -> ``RandomHorizontalFlip`` ->
  ``ToTensor`` -> ``Normalize(ImageNet)`` (:func:`cdgtmll.images.ops.train_transform`,
  torchvision defaults: scale (0.08, 1), ratio (3/4, 4/3), p = 0.5);
* validation / test rows and prediction: ``Resize(image_size)`` -> ``CenterCrop`` ->
  ``ToTensor`` -> ``Normalize`` (:func:`cdgtmll.images.ops.eval_transform`).

The workers stop at uint8 tensors; ``ToTensor -> Normalize`` is applied to the batch on
the training device (:func:`cdgtmll.images.ops.to_normalized`: the same operations, so
the same values, with 4x fewer bytes through pinned memory and less CPU work per image).

Reproducibility: the random crop and flip of row ``r`` in epoch ``e`` are drawn from a
torch RNG seeded with ``SeedSequence([seed, e, r])`` inside ``torch.random.fork_rng``, so
an augmented batch does not depend on the number of workers, on which worker decoded
it, or on a resume (same seed, same data -> bit-identical batches; tested with 0 and 2
workers).

Occlusion (Sec. 5.3 "Occ-gamma")
--------------------------------
"paste a random k x k black patch covering gamma of the pixels ... trained from scratch
on the corrupted set": the corrupted set is fixed, so row ``r``'s patch is drawn once
from ``SeedSequence([occlusion_seed, r])`` (not per epoch), on the decoded image at its
own resolution (``k = round(sqrt(gamma * H * W))``, :func:`cdgtmll.images.ops.occlude`),
before augmentation. Only the training split is occluded; validation and test images
stay clean. The same function is used by the frozen-feature path
(:mod:`cdgtmll.images.features`), so an ``O<gamma>-s<seed>`` variant means the same images
in both modes.

The ResNet-50 these batches feed, fine-tuned end to end with its mixed precision and BatchNorm
policy: :class:`cdgtmll.nn.backbones.resnet.FineTuneBackbone`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cdgtmll.images.ops import eval_transform, load_image, occlude, to_normalized, train_transform


def _seed_of(*entropy: int) -> int:
    """A 63-bit torch seed from integers (``numpy.random.SeedSequence``)."""
    state = np.random.SeedSequence([int(e) for e in entropy]).generate_state(1, np.uint64)[0]
    return int(state) & 0x7FFF_FFFF_FFFF_FFFF


def occlude_image(img: Any, gamma: float, seed: int, row: int) -> Any:
    """PIL image ``img`` with its fixed occlusion patch for row ``row`` (module docstring)."""
    from torchvision.transforms.functional import pil_to_tensor, to_pil_image

    if not gamma:
        return img
    g = torch.Generator().manual_seed(_seed_of(seed, row))
    return to_pil_image(occlude(pil_to_tensor(img), float(gamma), g))


@dataclass(frozen=True)
class Occlusion:
    """Occlusion of the training split: fraction ``gamma`` of the pixels, patch seed ``seed``."""

    gamma: float
    seed: int = 0

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Occlusion | None:
        occ = meta.get("occlusion")
        return None if not occ else cls(float(occ["gamma"]), int(occ["seed"]))


class _Rows(torch.utils.data.Dataset):
    """``(uint8 image tensor, position)`` for keys ``(epoch, position)`` of an
    :class:`ImageInput` (the epoch travels in the key, so persistent workers need no
    per-epoch state)."""

    def __init__(self, inp: ImageInput) -> None:
        self.files = inp.files
        self.rows = inp.rows
        self.train = inp.train
        self.seed = inp.seed
        self.occlusion = inp.occlusion
        size = inp.image_size
        self.transform = train_transform(size, normalize=False) if inp.train else eval_transform(size, normalize=False)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, key: tuple[int, int]) -> tuple[torch.Tensor, int]:
        epoch, pos = key
        img = load_image(self.files[pos])
        row = int(self.rows[pos])
        if self.occlusion is not None:
            img = occlude_image(img, self.occlusion.gamma, self.occlusion.seed, row)
        if not self.train:
            return self.transform(img), pos
        # the transforms draw from the CPU generator: it alone is seeded (and restored after).
        # torch.manual_seed would also re-seed CUDA's generator, which drives the model's own
        # randomness in this process (workers 0), and, before CUDA is initialised, format a
        # Python stack for each of CUDA, XPU and MTIA: 0.34 ms per training image at a 40-frame
        # stack, against 0.005 ms (torch 2.14 on this project's 2-core machine, 2026-11-27)
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(_seed_of(self.seed, epoch, row))
            return self.transform(img), pos


class _Plan(torch.utils.data.Sampler):
    """Batch sampler replayed by a persistent DataLoader: the batches of the current pass,
    as lists of ``(epoch, position)`` keys (set before each pass)."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int]]] = []

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


#: set by Slurm in a job step to the CPUs of each task (srun/sbatch ``--cpus-per-task``: what the
#: job asked for, its ``cpus_per_task`` resource)
SLURM_CPUS_ENV = "SLURM_CPUS_PER_TASK"


#: ``image_backbone.workers`` as the train rules pass it to a training job (it is not part of the
#: run spec: :data:`cdgtmll.config.plan.RUN_ONLY_IMAGE_KEYS`)
WORKERS_ENV = "CDGTMLL_LOADER_WORKERS"


def workers_setting(environ: Mapping[str, str] | None = None) -> int | str:
    """A training job's ``image_backbone.workers``, from :data:`WORKERS_ENV`: ``auto`` or a
    non-negative integer; 0 (decode in the training process) where it is not set, as in a
    method fitted in-process."""
    raw = (os.environ if environ is None else environ).get(WORKERS_ENV, "")
    if raw in ("", "auto"):
        return "auto" if raw else 0
    if not raw.isdigit():
        raise ValueError(f"{WORKERS_ENV}={raw!r} in the environment: expected a non-negative integer or 'auto' "
                         "(image_backbone.workers)")
    return int(raw)


def resolve_workers(setting: int | str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The DataLoader processes of a job that decodes images (``image_backbone.workers``): an
    integer as given; ``auto``: the CPUs the job was given minus one for the training process,
    at least 0. The CPUs: ``SLURM_CPUS_PER_TASK`` in a Slurm job (``environ``, default this
    process's environment), else the CPUs this process may run on (``os.sched_getaffinity``,
    which a cgroup or ``taskset`` narrows; ``os.cpu_count()`` where the platform has no such
    call). Returns ``{setting, workers, cpus, cpus_from}`` (``cpus`` and ``cpus_from`` None for an
    integer), which the run's provenance records. Results do not depend on the number
    (module docstring, Reproducibility)."""
    env = os.environ if environ is None else environ
    if setting != "auto":
        if isinstance(setting, bool) or not isinstance(setting, int) or setting < 0:
            raise ValueError(f"image_backbone.workers: expected a non-negative integer or 'auto', got {setting!r}")
        return {"setting": setting, "workers": setting, "cpus": None, "cpus_from": None}
    raw = env.get(SLURM_CPUS_ENV)
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{SLURM_CPUS_ENV}={raw!r} in the environment: expected a positive integer "
                             "(the CPUs of the job's task), for image_backbone.workers: auto")
        cpus, source = int(raw), SLURM_CPUS_ENV
    elif hasattr(os, "sched_getaffinity"):
        cpus, source = len(os.sched_getaffinity(0)), "sched_getaffinity"
    else:
        cpus, source = os.cpu_count() or 1, "cpu_count"
    return {"setting": "auto", "workers": max(0, cpus - 1), "cpus": cpus, "cpus_from": source}


class ImageInput:
    """The rows of one split of an image dataset as trainer input (module docstring).

    ``files[i]`` is the image of position ``i``, ``rows[i]`` its row id in the processed
    file (it seeds augmentation and occlusion). ``train`` selects the augmenting
    transform. ``shape`` is ``(n, 1)`` like the row-id column it replaces."""

    def __init__(self, files: Sequence[Path], rows: np.ndarray, relpaths: Sequence[str], *, train: bool,
                 image_size: int, seed: int = 0, workers: int = 0, occlusion: Occlusion | None = None,
                 eval_batch_size: int = 64) -> None:
        if len(files) != len(rows) or len(files) != len(relpaths):
            raise ValueError("ImageInput: files, rows and relpaths must have the same length")
        if image_size < 32:
            raise ValueError(f"image_size {image_size} is too small for ResNet-50 (>= 32)")
        self.files = [Path(f) for f in files]
        self.rows = np.asarray(rows, dtype=np.int64)
        self.relpaths = list(relpaths)
        self.train = bool(train)
        self.image_size = int(image_size)
        self.seed = int(seed)
        self.workers = int(workers)
        self.occlusion = occlusion
        self.eval_batch_size = int(eval_batch_size)
        self._loader: tuple[bool, torch.utils.data.DataLoader, _Plan] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.files), 1)

    def __len__(self) -> int:
        return len(self.files)

    def digest(self) -> list[Any]:
        """Identity of the input for checkpoint fingerprints: row count, sha256 over
        ``"<row>\\t<relpath>\\t<size>\\n"`` of every image, transform and occlusion."""
        h = hashlib.sha256()
        for row, rel, f in zip(self.rows, self.relpaths, self.files):
            h.update(f"{row}\t{rel}\t{f.stat().st_size}\n".encode())
        occ = None if self.occlusion is None else [self.occlusion.gamma, self.occlusion.seed]
        return [len(self.files), h.hexdigest(), "train" if self.train else "eval", self.image_size, occ]

    def __getstate__(self) -> dict[str, Any]:  # the DataLoader (and its workers) never travel
        return {**self.__dict__, "_loader": None}

    def _data_loader(self, cuda: bool) -> tuple[torch.utils.data.DataLoader, _Plan]:
        """One DataLoader per input, its workers kept alive between passes (the start of
        14 workers cost about 0.7 s per epoch on the H200 machine)."""
        if self._loader is None or self._loader[0] != cuda:
            plan = _Plan()
            # a private generator: the loader's base seed (unused: augmentation is seeded per
            # row) is never drawn from the global torch RNG, which the model's dropout uses,
            # so a run is the same with or without (persistent) workers
            dl = torch.utils.data.DataLoader(_Rows(self), batch_sampler=plan, num_workers=self.workers,
                                             pin_memory=cuda, persistent_workers=self.workers > 0,
                                             generator=torch.Generator().manual_seed(0))
            self._loader = (cuda, dl, plan)
        return self._loader[1], self._loader[2]

    def iter_batches(self, order: Any, batch_size: int, epoch: int,
                     device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(positions on device, images [b, 3, S, S] on device)``. ``order`` is a
        permutation of positions cut into batches of ``batch_size``, None (all positions
        in order), or a list of index batches used as given (``batch_size`` ignored).
        A pass must be consumed before the next one starts (one DataLoader per input)."""
        n = len(self.files)
        if isinstance(order, (list, tuple)):
            batches = [np.asarray(torch.as_tensor(b).cpu()).reshape(-1).tolist() for b in order]
        else:
            order_np = np.arange(n) if order is None else order.detach().cpu().numpy()
            batches = [order_np[s : s + batch_size].tolist() for s in range(0, len(order_np), batch_size)]
        cuda = device.type == "cuda"
        loader, plan = self._data_loader(cuda)
        plan.batches = [[(int(epoch), int(p)) for p in b] for b in batches]
        for xb, pos in loader:
            xb = to_normalized(xb.to(device, non_blocking=cuda))
            if cuda:
                xb = xb.contiguous(memory_format=torch.channels_last)
            yield pos.to(device, non_blocking=cuda), xb


def iter_rows(X: Any, chunk: int, device: torch.device) -> Iterator[torch.Tensor]:
    """Input rows in order as model inputs on ``device``: ``chunk``-row slices of a tensor
    or array (moved to ``device``), or the decoded eval-transform images of an
    :class:`ImageInput` in batches of its ``eval_batch_size``."""
    if isinstance(X, ImageInput):
        for _, xb in X.iter_batches(None, X.eval_batch_size, 0, device):
            yield xb
        return
    for s in range(0, X.shape[0], chunk):
        xb = X[s : s + chunk]
        yield (torch.from_numpy(xb) if isinstance(xb, np.ndarray) else xb).to(device)


@dataclass
class ImageSource:
    """Where an image dataset's rows are: ``root / relpaths[row id]``; plus the occlusion
    of its training split (an ``O`` variant)."""

    root: Path
    relpaths: list[str]
    occlusion: Occlusion | None = None

    @classmethod
    def from_data(cls, data: Any) -> ImageSource:
        meta = data.meta
        return cls(Path(meta["image_root"]), list(meta["image_paths"]), Occlusion.from_meta(meta))

    def input(self, X: Any, *, train: bool, image_size: int, seed: int = 0, workers: int = 0,
              eval_batch_size: int = 64) -> ImageInput:
        """:class:`ImageInput` for a row-id column ``X`` (``[n, 1]``); the occlusion
        applies when ``train`` (the training split's rows)."""
        rows = np.asarray(X).reshape(-1).astype(np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self.relpaths)):
            raise ValueError(f"image row id out of range 0..{len(self.relpaths) - 1}")
        rel = [self.relpaths[r] for r in rows]
        return ImageInput([self.root / p for p in rel], rows, rel, train=train, image_size=image_size,
                          seed=seed, workers=workers, occlusion=self.occlusion if train else None,
                          eval_batch_size=eval_batch_size)
