"""Neural methods on the shared backbone and trainer: the common base class, the
loss-based "backbone + one linear head" family, and BCE.

Every neural method shares the trainer hyper-parameters (App. E.1/E.2, Yeast values
as defaults, declared in :data:`cdgtmll.methods.spec.TRAINER_DEFAULTS`): ``epochs=100``, ``batch_size=256``, ``lr_backbone=2e-3`` (eta_0),
``lr_head=None`` (eta_head; ``None`` = eta_0, the paper gives no tabular eta_head),
``weight_decay=1e-4`` (AdamW), ``grad_clip=5.0`` (global norm), ``hidden_dim=512``
(d'), ``select_epoch='last'`` (which epoch's weights predict: ``last``, the
paper's protocol, or ``best_val``, the epoch with the best validation mAP, a reading of ours;
:func:`cdgtmll.nn.trainer.epoch_selection`, docs/methods.md "Epoch selection"), ``optimizer_impl='auto'`` (AdamW's update:
``auto``, by device: torch's per-tensor path on CPU, its multi-tensor path on CUDA; or explicitly
``for_loop``, ``foreach`` or ``fused``: faster, different rounding;
:data:`cdgtmll.nn.trainer.OPTIMIZER_IMPLS`), ``allow_tf32=False`` and ``cudnn_benchmark='auto'``
(CUDA only: :func:`cdgtmll.nn.trainer.run_numerics`; what a run used is ``self.numerics``, written
into its provenance). ``RunContext.epochs`` / ``.batch_size`` override
``epochs`` / ``batch_size`` when set. After ``fit``, ``epoch_selection`` is the record of the
kept epoch (rule, epoch, its validation mAP; written into each run's provenance).

Backbone (which one: :mod:`cdgtmll.nn.backbones.selection`, from the dataset's training
protocol, read from ``ctx.extra['training']``): the MLP
(:class:`cdgtmll.nn.backbones.mlp.MLPBackbone`), or the TF-IDF linear backbone
(:class:`cdgtmll.nn.backbones.tfidf.SparseLinearBackbone`, ``d' = hidden_dim``) when the
protocol says ``backbone: tfidf-linear`` or names none and X is ``scipy.sparse``; sparse X is
then never densified. On an image dataset fine-tuned end to end (``FitData.images`` set; the
protocol says ``backbone: resnet50`` and ``image_backbone.mode: finetune``) the backbone is the
ResNet-50 (:func:`cdgtmll.nn.backbones.resnet.build_finetune_backbone`, d' = 2048, App. E.2)
and the row-id columns become :class:`~cdgtmll.images.trainer_input.ImageInput` batches of
augmented images; heads, losses and the trainer are unchanged. ``hidden_dim`` is then
unused. The backbone's record (weights file and sha256, AMP dtype, and the DataLoader
processes that decoded the images, ``image_backbone.workers`` as the train rule passes it
(:func:`cdgtmll.images.trainer_input.workers_setting`, not part of the run spec) resolved by
:func:`cdgtmll.images.trainer_input.resolve_workers`) is ``self.backbone_info`` and goes into
each run's provenance.

Adding a loss-based baseline is one line once its loss is in :mod:`cdgtmll.nn.losses`::

    ASLMethod = register_loss_method("ASL")

beside its spec (:mod:`cdgtmll.methods.builtin`: ``fixed={"loss": "asl"}``, the trainer's
hyper-parameters and the loss's, with the method's defaults).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch
from torch import nn

from cdgtmll.images.trainer_input import ImageInput, resolve_workers, workers_setting
from cdgtmll.methods.base import FitData, Method, RunContext, register, spec_of
from cdgtmll.methods.spec import TRAINER_DEFAULTS, TRAINER_WHEN_SET, UNSET, MethodSpec, trainer_hparams
from cdgtmll.nn.backbones.mlp import MLPBackbone
from cdgtmll.nn.backbones.selection import RESNET50, TFIDF_LINEAR, backbone_kind, build_backbone
from cdgtmll.nn.losses.registry import build_loss, loss_class
from cdgtmll.nn.trainer import (
    TrainConfig,
    TrainTask,
    clip_summary,
    epoch_selection,
    predict_in_chunks,
    read_grad_norms,
    resolve_device,
    run_numerics,
    train,
)


class NeuralMethod(Method, TrainTask):
    """Base class: a :class:`Method` trained by :func:`cdgtmll.nn.trainer.train`.

    Subclasses implement ``build_model``, ``param_groups``, ``training_step`` and
    ``predict`` (see :class:`TrainTask`), and may override :meth:`prepare` to derive
    state from the training data before the model is built.
    """

    def __init__(
        self,
        *,
        epochs: int,
        batch_size: int,
        lr_backbone: float,
        lr_head: float | None,
        weight_decay: float,
        grad_clip: float | None,
        hidden_dim: int,
        select_epoch: str,
        optimizer_impl: str,
        allow_tf32: bool,
        cudnn_benchmark: str | bool,
    ) -> None:
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.lr_backbone = float(lr_backbone)
        self.lr_head = None if lr_head is None else float(lr_head)
        self.weight_decay = float(weight_decay)
        self.grad_clip = None if grad_clip is None else float(grad_clip)
        self.hidden_dim = int(hidden_dim)
        self.select_epoch = str(select_epoch)
        self.optimizer_impl = str(optimizer_impl)
        self.allow_tf32 = allow_tf32
        self.cudnn_benchmark = cudnn_benchmark
        TrainConfig(select_epoch=self.select_epoch, optimizer_impl=self.optimizer_impl, allow_tf32=allow_tf32,
                    cudnn_benchmark=cudnn_benchmark)  # validates them
        self.numerics: dict[str, Any] | None = None  # set by fit (trainer.run_numerics)
        self.epoch_selection: dict[str, Any] | None = None  # set by fit
        self.grad_clip_summary: dict[str, Any] | None = None  # set by fit: did the clip act (trainer.clip_summary)
        self.model: nn.Module | None = None
        self.train_log: list[dict[str, Any]] = []
        self.device = torch.device("cpu")
        self._backbone_kind: str | None = None  # training protocol's 'backbone' (set in fit)
        self._sparse_input = False
        self._images: Any = None  # ImageSource when fine-tuning on images (set in fit)
        self._image_cfg: dict[str, Any] = {}
        self._loader_workers: dict[str, Any] | None = None  # resolve_workers' record (set in fit)
        self.backbone_info: dict[str, Any] | None = None

    # -- configuration ---------------------------------------------------------------
    def hparams(self) -> dict[str, Any]:
        """The hyper-parameter values this instance trains with (part of the checkpoint
        fingerprint and of ``method_outputs.json``), derived from its spec: every hyper-parameter
        the spec declares that the instance keeps under its own name (a loss's keywords are kept
        in ``loss_hparams``: :class:`LossHeadMethod` adds them), the trainer's
        :data:`~cdgtmll.methods.spec.TRAINER_WHEN_SET` only when not their default."""
        declared = self.spec.all_hparams() if getattr(self, "spec", None) is not None else trainer_hparams()
        out: dict[str, Any] = {}
        for k, h in declared.items():
            value = getattr(self, k, UNSET)
            if value is UNSET or callable(value) or (k in TRAINER_WHEN_SET and value == h.default):
                continue
            out[k] = value
        return out

    def train_config(self, ctx: RunContext) -> TrainConfig:
        return TrainConfig(
            epochs=ctx.epochs if ctx.epochs is not None else self.epochs,
            batch_size=ctx.batch_size if ctx.batch_size is not None else self.batch_size,
            lr_backbone=self.lr_backbone,
            lr_head=self.lr_head,
            weight_decay=self.weight_decay,
            grad_clip=self.grad_clip,
            select_epoch=self.select_epoch,
            optimizer_impl=self.optimizer_impl,
            allow_tf32=self.allow_tf32,
            cudnn_benchmark=self.cudnn_benchmark,
        )

    def fingerprint(self) -> dict[str, Any]:
        fp = {"method": self.name or type(self).__name__, "hparams": self.hparams()}
        if getattr(self, "_sparse_input", False):  # only then, so MLP checkpoints keep their fingerprint
            fp["backbone"] = TFIDF_LINEAR
        if self._images is not None:
            fp["backbone"] = {"resnet50-finetune": self._image_cfg, "weights_sha256": self._weights_sha256()}
        return fp

    def _weights_sha256(self) -> str:
        from cdgtmll.nn.backbones.resnet import RANDOM_INIT, find_weights, weights_sha256

        if not self._image_cfg.get("pretrained", True):
            return RANDOM_INIT
        return weights_sha256(find_weights(self._image_cfg.get("weights")))

    def _image_input(self, X: Any, train: bool, seed: int = 0) -> ImageInput:
        c = self._image_cfg
        if self._loader_workers is None:  # once per fit: the job's CPUs do not change
            self._loader_workers = resolve_workers(workers_setting())
        return self._images.input(X, train=train, image_size=int(c.get("image_size", 448)), seed=seed,
                                  workers=self._loader_workers["workers"], eval_batch_size=int(c.get("batch_size", 64)))

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        """Hook: derive data-dependent state (label statistics, partition) before training."""

    def backbone(self, X_train: Any) -> nn.Module:
        kind = backbone_kind(X_train, self._backbone_kind, self.name)
        bb = build_backbone(kind, X_train, self.hidden_dim, self._image_cfg, self.device)
        if kind == RESNET50:
            # the DataLoader processes this job ran (image_backbone.workers resolved): provenance
            self.backbone_info = {**bb.info, "loader_workers": self._loader_workers}
        return bb

    def wants_sparse_input(self, X_train: Any) -> bool:
        """Trainer hook: keep a CSR X sparse (TF-IDF linear backbone)."""
        return bool(getattr(self, "_sparse_input", False))

    # -- Method interface --------------------------------------------------------------
    def fit(self, data: FitData, ctx: RunContext) -> NeuralMethod:
        self._backbone_kind = ((ctx.extra or {}).get("training") or {}).get("backbone")
        self._images = getattr(data, "images", None)
        self._loader_workers = None
        self.device = resolve_device(ctx.device)
        X_train, X_val = data.X_train, data.X_val
        kind = backbone_kind(X_train, self._backbone_kind, self.name, images=self._images is not None)
        if self._images is not None:
            self._image_cfg = dict((ctx.extra or {}).get("image_backbone") or {})
            X_train = self._image_input(data.X_train, train=True, seed=ctx.seed)
            if data.X_val is not None:
                X_val = self._image_input(data.X_val, train=False)
        self._sparse_input = kind == TFIDF_LINEAR
        self.prepare(data, ctx)
        cfg = self.train_config(ctx)
        self.numerics = run_numerics(cfg, self.device, isinstance(X_train, ImageInput))  # what train applies
        base = (ctx.extra or {}).get("base_run")
        if base and base.get("dir") and self.builds_on is not None:
            self.model, self.train_log = self._read_base_run(base, X_train, data.Y_train, X_val, data.Y_val, cfg, ctx)
        else:
            self.model, self.train_log = train(self, X_train, data.Y_train, X_val, data.Y_val, cfg, ctx,
                                               self.fingerprint())
        self.epoch_selection = epoch_selection(self.train_log, cfg.select_epoch)
        self.grad_clip_summary = clip_summary(read_grad_norms(ctx.workdir), cfg.grad_clip, self.train_log)
        return self

    #: set by fit when the first stage was read from a base run (:meth:`_read_base_run`): what was read
    base_record: dict[str, Any] | None = None

    def base_fingerprint(self) -> dict[str, Any]:
        """The fingerprint the base method (``builds_on``) trained with this method's trainer
        hyper-parameters computes: its name and ``hparams()``, and this fit's backbone entries."""
        from cdgtmll.methods.base import build

        other = build(self.builds_on, {k: v for k, v in self.hparams().items() if k in TRAINER_DEFAULTS})
        return {**self.fingerprint(), "method": other.name or type(other).__name__, "hparams": other.hparams()}

    def _read_base_run(self, base: dict[str, Any], X_train: Any, Y_train: Any, X_val: Any, Y_val: Any,
                       cfg: TrainConfig, ctx: RunContext) -> tuple[nn.Module, list[dict[str, Any]]]:
        """The first stage from the base run's seed folder ``base['dir']`` instead of training it:
        the model the trainer returned there, with the random number generators as they were when
        that training ended, so that everything after it (thresholds, ETU's rule, LSFA's stages
        2-3) computes what it computes after training the model itself. The checkpoint must be the
        model this fit would train (:func:`cdgtmll.nn.checkpoint.base_checkpoint`); its log rows
        and gradient norms are copied into ``ctx.workdir`` as the trainer would have written them."""
        import shutil
        from dataclasses import asdict
        from pathlib import Path

        import scipy.sparse as sp

        from cdgtmll.io import atomic_path
        from cdgtmll.nn.checkpoint import TRAIN_LOG, base_checkpoint, restore_final_model, run_fingerprint, write_log
        from cdgtmll.nn.sparse import as_csr32
        from cdgtmll.nn.trainer import GRAD_NORMS, as_float32, seed_everything

        keep_sparse = sp.issparse(X_train) and self.wants_sparse_input(X_train)

        def held(X: Any, labels: bool = False) -> Any:  # an array as the trainer holds it (trainer._train)
            if X is None or isinstance(X, ImageInput):
                return X
            if sp.issparse(X) and (labels or keep_sparse):
                return as_csr32(X)
            return as_float32(X)

        has_val = X_val is not None and Y_val is not None and np.shape(Y_val)[0] > 0
        arrays = (held(X_train), held(Y_train, True), held(X_val) if has_val else None,
                  held(Y_val, True) if has_val else None)
        fp = run_fingerprint(self.base_fingerprint(), asdict(cfg), ctx.seed, arrays)
        src = Path(base["dir"])
        state, self.base_record = base_checkpoint(src, base["spec_sha256"], fp, base.get("code_sha256"))
        self.base_record = {"method": self.builds_on, **self.base_record}
        seed_everything(ctx.seed)
        model = self.build_model(arrays[0], arrays[1]).to(self.device)
        rows = restore_final_model(state, model, self, cfg.select_epoch)
        workdir = Path(ctx.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        write_log(workdir / TRAIN_LOG, rows)
        if (src / GRAD_NORMS).is_file():
            with atomic_path(workdir / GRAD_NORMS, suffix=".npy") as tmp:
                shutil.copyfile(src / GRAD_NORMS, tmp)
        return model, rows

    def predict_proba(self, X: Any) -> np.ndarray:
        if self.model is None:
            raise RuntimeError(f"{self.name}: predict_proba before fit")
        self.model.eval()
        if self._images is not None and not isinstance(X, ImageInput):
            X = self._image_input(X, train=False)
        return predict_in_chunks(lambda x: self.predict(self.model, x), X, self.device,
                                 sparse_ok=getattr(self, "_sparse_input", False)).astype(np.float64)


class LinearHeadNet(nn.Module):
    """backbone -> Linear(d', L) logits; ``criterion`` (the loss module) rides along so
    that its buffers move with the model and are checkpointed."""

    def __init__(self, backbone: MLPBackbone, n_labels: int, criterion: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.out_dim, n_labels)
        self.criterion = criterion

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


class LinearHeadTask:
    """Mixin for a :class:`NeuralMethod` that is "backbone + one linear head trained on
    ``self._criterion``" (set in ``prepare``): model, parameter groups and training step."""

    _criterion: nn.Module | None

    def build_model(self, X_train: np.ndarray, Y_train: np.ndarray) -> nn.Module:
        return LinearHeadNet(self.backbone(X_train), Y_train.shape[1], self._criterion)

    def param_groups(self, model: nn.Module) -> dict[str, list[nn.Parameter]]:
        return {
            "backbone": list(model.backbone.parameters()),
            "head": list(model.head.parameters()) + list(model.criterion.parameters()),
        }

    def training_step(self, model, xb, yb, progress):
        return model.criterion(model(xb), yb), {}


class LossHeadMethod(LinearHeadTask, NeuralMethod):
    """Backbone + one linear head over all L labels, trained on a registered loss.

    The loss is the spec's ``fixed["loss"]`` (:func:`register_loss_method`, or a subclass's
    ``loss_name``). Keyword arguments besides the trainer's are the loss's hyper-parameters,
    validated against its constructor; those the spec gives a default default to it (ASL's
    ``gamma_neg=4``), the others to the loss's own. Prediction: ``sigmoid(logits)``.
    """

    loss_name: str = ""

    def __init__(self, **hparams: Any) -> None:
        super().__init__(**{k: v for k, v in hparams.items() if k in TRAINER_DEFAULTS})
        loss_hparams = {k: v for k, v in hparams.items() if k not in TRAINER_DEFAULTS}
        try:
            loss_cls = loss_class(self.loss_name)
        except KeyError as exc:
            raise KeyError(f"{type(self).__name__}: {exc.args[0]}") from None
        allowed = set(inspect.signature(loss_cls.__init__).parameters) - {
            "self",
            "label_counts",
            "n_train",
        }
        unknown = sorted(set(loss_hparams) - allowed)
        if unknown:
            raise ValueError(
                f"method '{self.name}': unknown hyper-parameter(s) {unknown}; "
                f"allowed: {sorted(set(super().hparams()) | allowed)}"
            )
        declared = {k: h.default for k, h in self.spec.hparams.items() if k in allowed and h.default is not UNSET}
        self.loss_hparams = {**declared, **loss_hparams}
        self._criterion: nn.Module | None = None

    def hparams(self) -> dict[str, Any]:
        return {**super().hparams(), "loss": self.loss_name, **self.loss_hparams}

    def prepare(self, data: FitData, ctx: RunContext) -> None:
        self._criterion = build_loss(self.loss_name, data.counts, data.n_train, **self.loss_hparams)

    def predict(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(model(x))


def register_loss_method(method: str | MethodSpec) -> type[LossHeadMethod]:
    """The class of a method that is backbone + linear head trained with the loss its spec names
    (``fixed["loss"]``, from :mod:`cdgtmll.nn.losses`), registered: ``method`` is a built-in's
    name (its spec is :mod:`cdgtmll.methods.builtin`'s) or a plugin's spec, whose ``impl`` names
    the module and the class name the class gets (the module that calls this assigns it there)."""
    spec = method if isinstance(method, MethodSpec) else spec_of(method)
    loss_name = spec.fixed["loss"]
    cls = type(
        spec.class_name,
        (LossHeadMethod,),
        {
            "loss_name": loss_name,
            "__module__": spec.module,
            "__qualname__": spec.class_name,
            "__doc__": f"Backbone + linear head trained with the '{loss_name}' loss.",
        },
    )
    return register(spec)(cls)


BCEMethod = register_loss_method("BCE")
