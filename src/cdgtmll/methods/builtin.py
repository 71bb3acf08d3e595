"""The built-in methods, declared once (:class:`cdgtmll.methods.spec.MethodSpec`): what each
method's class is called with, what planning and validation know of it, without importing it.

The order is the figures' (:mod:`cdgtmll.figures.style`: a method's colour, marker and hatch follow
from its position): the proposed method, then the methods most often drawn together (the
robustness study's BCE, ASL, MLC-NC and the reference BR-LogReg), then the paper's table order
(config/config.yaml), then the XMC reference rows of config/paper.yaml. A new method goes at the
end, which keeps every other method's style.

A loss-head method's loss hyper-parameters are declared here with the method's defaults
(``gamma_neg: 4.0`` for ASL); those left :data:`~cdgtmll.methods.spec.UNSET` keep the loss's own
default (:mod:`cdgtmll.nn.losses`) and enter the run spec only when configured.
"""

from __future__ import annotations

from cdgtmll.methods.spec import UNSET, HParam, MethodSpec

#: where a default comes from (``HParam.source``)
E1 = "paper App. E.1/E.2 (Yeast)"
READING = "ours: a reading the paper leaves open, first value the default (docs/methods.md)"
LOSS_DEFAULT = "the loss's own default (cdgtmll.nn.losses; cdgtmll.methods.loss_methods names its paper)"
ASL_SRC = "official training scripts (Ridnik et al., ICCV 2021)"
DBL_SRC = "paper's VOC values (Wu et al., ECCV 2020); COCO's via dataset_overrides"
FOCAL_SRC = "paper: the RetinaNet setting (Lin et al., ICCV 2017)"
CB_SRC = "paper (Cui et al., CVPR 2019)"
LDAM_SRC = "paper (Cao et al., NeurIPS 2019)"
LOGITADJ_SRC = "paper (Menon et al., ICLR 2021)"

BUILTIN: tuple[MethodSpec, ...] = (
    MethodSpec(
        "CD-GTMLL", impl="cdgtmll.methods.cdgtmll.model:CDGTMLL",
        description="CD-GTMLL: N cooperating players on a shared MLP, curiosity + fusion (Alg. 1)",
        trainer=True, neural=True, supports_images=True,
        hparams={
            # curiosity weight in Phi
            "alpha": HParam(0.4, {"minimum": 0, "type": "number"}, E1),
            # disagreement bonus after warm-up
            "beta_max": HParam(0.3, {"minimum": 0, "type": "number"}, E1),
            # fraction of training steps
            "beta_warmup": HParam(0.1, {"maximum": 1, "minimum": 0, "type": "number"}, E1),
            "clip_scope": HParam("global", {"enum": ["global", "block"]}, READING),
            "divergence": HParam("jsd", {"enum": ["jsd", "kl"]}, E1),
            "divergence_form": HParam("per_label", {"enum": ["per_label", "vector"]}, READING),
            # 0 disables the EMA
            "ema_decay": HParam(0.99, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, E1),
            # clip [eps, 1 - eps]
            "eps": HParam(1e-06, {"exclusiveMaximum": 0.5, "exclusiveMinimum": 0, "type": "number"}, E1),
            "head_mass": HParam(0.1, {"exclusiveMaximum": 1, "exclusiveMinimum": 0, "type": "number"}, "ours: tail_rule cumulative"),
            "n_players": HParam(3, {"minimum": 1, "type": "integer"}, E1),
            "partition_order": HParam("shuffled", {"enum": ["shuffled", "fixed"]}, READING),
            # numpy seeds are >= 0
            "partition_seed": HParam(None, {"minimum": 0, "type": ["integer", "null"]}, "ours: None takes the run seed"),
            "payoff_scale": HParam("mean", {"enum": ["mean", "sum"]}, READING),
            "payoff_weights": HParam("uniform", {"enum": ["uniform", "rarity"]}, E1),
            "peer_smoothing": HParam("parameters", {"enum": ["parameters", "predictions"]}, READING),
            "player_backbones": HParam("shared", {"enum": ["shared", "separate"]}, READING),
            "rarity": HParam("prevalence", {"enum": ["prevalence", "count"]}, READING),
            # overlap ratio (make_partition)
            "rho": HParam(0.2, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, E1),
            # q of tail_labels; None takes FitData.tail (App. E.3/E.4)
            "tail_fraction": HParam(None, {"maximum": 1, "minimum": 0, "type": ["number", "null"]}, "ours"),
            "tail_rule": HParam("bottom_fraction", {"enum": ["bottom_fraction", "cumulative"]}, READING),
        },
    ),
    MethodSpec(
        "BCE", impl="cdgtmll.methods.neural:BCEMethod",
        description="MLP backbone (2x512, ReLU) + linear head, binary cross-entropy",
        trainer=True, neural=True, supports_images=True, fixed={"loss": "bce"},
        hparams={},
    ),
    MethodSpec(
        "ASL", impl="cdgtmll.methods.loss_methods:ASLMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head (as BCE); asymmetric loss (Ridnik et al., ICCV 2021): negatives "
            "focused with gamma-=4 on the shifted probability max(p-0.05, 0), positives plain log-loss (gamma+=0)"
        ),
        trainer=True, neural=True, supports_images=True, fixed={"loss": "asl"},
        hparams={
            "clip": HParam(0.05, {"exclusiveMaximum": 1, "minimum": 0, "type": ["number", "null"]}, ASL_SRC),
            "eps": HParam(UNSET, {"exclusiveMaximum": 1, "exclusiveMinimum": 0, "type": "number"}, LOSS_DEFAULT),
            "focal_grad": HParam(UNSET, {"type": "boolean"}, LOSS_DEFAULT),
            "gamma_neg": HParam(4.0, {"minimum": 0, "type": "number"}, ASL_SRC),
            "gamma_pos": HParam(0.0, {"minimum": 0, "type": "number"}, ASL_SRC),
        },
    ),
    MethodSpec(
        "MLC-NC", impl="cdgtmll.methods.mlcnc:MLCNCMethod",
        description=(
            "MLC-NC (Tao 2025): ETF-query cross-attention over h(x)-tokens, ETF alignment + contrastive prototype + Two-Way"
            " loss, class-aware sampler"
        ),
        trainer=True, neural=True, supports_images=True,
        hparams={
            "class_aware_sampling": HParam(True, {"type": "boolean"}),
            "d_model": HParam(128, {"minimum": 1, "type": "integer"}),
            "dropout": HParam(0.1, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}),
            "etf_classifier_trainable": HParam(True, {"type": "boolean"}),
            # must also divide d_model (checked in __init__)
            "n_heads": HParam(4, {"minimum": 1, "type": "integer"}),
            # must also divide hidden_dim (checked in __init__)
            "n_tokens": HParam(8, {"minimum": 1, "type": "integer"}),
            "proj_dim": HParam(20, {"minimum": 1, "type": "integer"}),
            # temperatures divide logits
            "proto_temperature": HParam(0.5, {"exclusiveMinimum": 0, "type": "number"}),
            "tn": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}),
            "tp": HParam(4.0, {"exclusiveMinimum": 0, "type": "number"}),
            "warmup_epochs": HParam(5, {"minimum": 0, "type": "integer"}),
            "weight_align": HParam(0.5, {"minimum": 0, "type": "number"}),
            # weights of minimised loss terms
            "weight_proto": HParam(0.1, {"minimum": 0, "type": "number"}),
            "weight_twoway": HParam(1.0, {"minimum": 0, "type": "number"}),
        },
    ),
    MethodSpec(
        "BR-LogReg", impl="cdgtmll.methods.classic:BinaryRelevanceLogReg",
        description="per-label logistic regression (scikit-learn), standardised features",
        deterministic=True,
        hparams={
            # inverse L2 strength (scikit-learn: > 0)
            "C": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}),
            # lbfgs iterations
            "max_iter": HParam(1000, {"minimum": 1, "type": "integer"}),
        },
    ),
    MethodSpec(
        "PE", impl="cdgtmll.methods.two_step:PEMethod",
        description=(
            "Plug-in estimator (Koyejo et al., NeurIPS 2015): BCE model (same backbone/trainer as BCE), then F1-optimal "
            "thresholds tuned on validation (one shared for Micro-F1, per label for Macro-/Rare-F1)"
        ),
        # the first stage is the BCE row's model (same loss, backbone, trainer and seed): read from BCE's run
        trainer=True, neural=True, supports_images=True, builds_on="BCE",
        hparams={
            "target": HParam("macro", {"enum": ["macro", "micro"]}),
        },
    ),
    MethodSpec(
        "SRB", impl="cdgtmll.methods.two_step:SRBMethod",
        # builds on nothing: step 1 trains a strongly proper surrogate other than the logistic loss,
        # a model of its own, not BCE's
        description=(
            "Surrogate regret bounds (Kotlowski & Dembczynski, MLJ 2017): strongly proper composite surrogate (squared "
            "(1-y'z)^2, link clip((1+z)/2); or exponential, link sigmoid(2z)) on the BCE backbone/trainer, then F1-optimal "
            "thresholds tuned on validation"
        ),
        trainer=True, neural=True, supports_images=True,
        hparams={
            "surrogate": HParam("squared", {"enum": ["exponential", "squared"]}),
            "target": HParam("macro", {"enum": ["macro", "micro"]}),
        },
    ),
    MethodSpec(
        "DBL", impl="cdgtmll.methods.loss_methods:DBLMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head (as BCE); distribution-balanced loss (Wu et al., ECCV 2020): smoothed"
            " re-balancing weights + negative-tolerant regularisation + focal factor; VOC values mu=0.3, lambda=5 (COCO "
            "mu=0.2, lambda=2 via config dataset_overrides)"
        ),
        trainer=True, neural=True, supports_images=True, fixed={"loss": "dbl"},
        hparams={
            "bias_div_lam": HParam(UNSET, {"type": "boolean"}, LOSS_DEFAULT),
            "focal_gamma": HParam(UNSET, {"anyOf": [{"const": 0}, {"minimum": 1, "type": "number"}]}, LOSS_DEFAULT),
            "focal_scale": HParam(UNSET, {"exclusiveMinimum": 0, "type": "number"}, LOSS_DEFAULT),
            "kappa": HParam(UNSET, {"minimum": 0, "type": "number"}, LOSS_DEFAULT),
            "lam": HParam(5.0, {"exclusiveMinimum": 0, "type": "number"}, DBL_SRC),
            "smooth_a": HParam(UNSET, {"minimum": 0, "type": "number"}, LOSS_DEFAULT),
            "smooth_b": HParam(UNSET, {"minimum": 0, "type": "number"}, LOSS_DEFAULT),
            "smooth_mu": HParam(0.3, {"minimum": 0, "type": "number"}, DBL_SRC),
        },
    ),
    MethodSpec(
        # generates feature vectors: needs feature vectors, not images
        "LSFA", impl="cdgtmll.methods.data_side.lsfa:LSFAMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head, BCE (as the BCE row); then LSFA (Xu et al., AAAI 2023): CVAE trained"
            " on head-label features generates 10 features per tail label from its prototype, linear head retrained on "
            "frozen features (real + synthetic)"
        ),
        # the first stage is the BCE row's model (same loss, backbone, trainer and seed): read from BCE's run
        trainer=True, neural=True, builds_on="BCE", fixed={"loss": "bce"},
        hparams={
            # None: the trainer's epochs
            "calib_epochs": HParam(None, {"minimum": 1, "type": ["integer", "null"]}),
            "calib_warmup": HParam(5, {"minimum": 0, "type": "integer"}),
            # weight of the synthetic rows' loss
            "calib_weight": HParam(1.0, {"minimum": 0, "type": "number"}),
            "gen_batch_size": HParam(256, {"minimum": 1, "type": "integer"}),
            "gen_epochs": HParam(100, {"minimum": 1, "type": "integer"}),
            "gen_hidden_dim": HParam(512, {"minimum": 1, "type": "integer"}),
            # Adam step size of the CVAE
            "gen_lr": HParam(0.001, {"exclusiveMinimum": 0, "type": "number"}),
            "gen_patience": HParam(10, {"minimum": 1, "type": "integer"}),
            "head_min_count": HParam(50, {"minimum": 1, "type": "integer"}),
            "kl_weight": HParam(0.005, {"minimum": 0, "type": "number"}),
            "n_synthetic": HParam(10, {"minimum": 1, "type": "integer"}),
        },
    ),
    MethodSpec(
        # mixes input vectors: needs feature vectors, not images
        "BalanceMix", impl="cdgtmll.methods.data_side.balancemix:BalanceMixMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head, BCE (as the BCE row); BalanceMix (Song et al., AAAI 2024): "
            "confidence-based minority sampler mixed with the random batch (lambda=max(l',1-l'), l'~Beta(4,4)), label-wise "
            "GMM clean/re-label(0.975)/ambiguous management after warm-up"
        ),
        trainer=True, neural=True, fixed={"loss": "bce"},
        hparams={
            # Beta(alpha, alpha) needs alpha > 0
            "mix_alpha": HParam(4.0, {"exclusiveMinimum": 0, "type": "number"}),
            # p > tau -> 1, p < 1 - tau -> 0
            "relabel_tau": HParam(0.975, {"exclusiveMinimum": 0.5, "maximum": 1, "type": "number"}),
            "warmup_epochs": HParam(10, {"minimum": 0, "type": "integer"}),
        },
    ),
    MethodSpec(
        # interpolates input vectors: needs feature vectors, not images
        "MLBOTE", impl="cdgtmll.methods.data_side.mlbote:MLBOTEMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head, BCE (as the BCE row); trained on real + MLBOTE synthetic rows (Teng "
            "et al., Pattern Recognit. 2024): self-borderline, cross-borderline and interior seeds, SMOTE interpolation "
            "within label sets"
        ),
        trainer=True, neural=True, fixed={"loss": "bce"},
        hparams={
            # cross-borderline seeds are drawn with probability ~ rho - 1 among rho > cross_threshold
            "cross_threshold": HParam(5.0, {"minimum": 1, "type": "number"}),
            # compared with IRLbl_k / meanIR > 0
            "interior_ratio": HParam(1.0, {"minimum": 0, "type": "number"}),
            # neighbour counts
            "k_border": HParam(3, {"minimum": 1, "type": "integer"}),
            "k_weight": HParam(5, {"minimum": 1, "type": "integer"}),
            # compared with ovrIR = (N - n_k) / n_k >= 0
            "ovr_threshold": HParam(10.0, {"minimum": 0, "type": "number"}),
            # a count multiplier
            "resample_ratio": HParam(0.01, {"minimum": 0, "type": "number"}),
            # 1 + size_penalty * [0, 1) divides the weights
            "size_penalty": HParam(1.0, {"minimum": 0, "type": "number"}),
            "standardize": HParam(True, {"type": "boolean"}),
            # g ~ U(0, step_size)
            "step_size": HParam(1.0, {"minimum": 0, "type": "number"}),
        },
    ),
    MethodSpec(
        "CC", impl="cdgtmll.methods.architectures.label_graph:ClassifierChainMethod",
        description="classifier chains (Read 2011) on the MLP backbone: teacher forcing, greedy hard-prediction chain",
        trainer=True, neural=True, supports_images=True, fixed={"loss": "bce"},
        hparams={
            # order="frequency": 1 (checked in __init__)
            "n_chains": HParam(1, {"minimum": 1, "type": "integer"}),
            "order": HParam("random", {"enum": ["random", "frequency"]}),
        },
    ),
    MethodSpec(
        "ML-GCN", impl="cdgtmll.methods.architectures.label_graph:MLGCNMethod",
        description="ML-GCN (Chen 2019): 2-layer GCN over the co-occurrence label graph -> per-label classifiers on h(x)",
        trainer=True, neural=True, supports_images=True, fixed={"loss": "bce"},
        hparams={
            "embedding_dim": HParam(300, {"minimum": 1, "type": "integer"}),
            "gcn_hidden": HParam(1024, {"minimum": 1, "type": "integer"}),
            # .npy [L, d_e]; None: learnable
            "label_embeddings": HParam(None, {"type": ["string", "null"]}),
            # re-weighting of the edges
            "p": HParam(0.25, {"maximum": 1, "minimum": 0, "type": "number"}),
            # binarises P(L_j | L_i) >= tau
            "tau": HParam(0.4, {"exclusiveMinimum": 0, "maximum": 1, "type": "number"}),
        },
    ),
    MethodSpec(
        "C-Tran", impl="cdgtmll.methods.architectures.attention:CTranMethod",
        description="C-Tran (Lanchantin 2021): transformer over h(x)-tokens + label/state tokens, label mask training",
        trainer=True, neural=True, supports_images=True, fixed={"loss": "bce"},
        hparams={
            "d_model": HParam(128, {"minimum": 1, "type": "integer"}),
            "dropout": HParam(0.1, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}),
            "lmt": HParam(True, {"type": "boolean"}),
            "loss_labels": HParam("unk", {"enum": ["unk", "all"]}),
            "max_known_fraction": HParam(0.75, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}),
            # must also divide d_model (checked in __init__)
            "n_heads": HParam(4, {"minimum": 1, "type": "integer"}),
            "n_layers": HParam(2, {"minimum": 1, "type": "integer"}),
            # must also divide hidden_dim (checked in __init__)
            "n_tokens": HParam(8, {"minimum": 1, "type": "integer"}),
        },
    ),
    MethodSpec(
        "ML-Decoder", impl="cdgtmll.methods.architectures.attention:MLDecoderMethod",
        description="ML-Decoder (Ridnik 2023): query cross-attention over h(x)-tokens, no self-attention, group FC, ASL",
        trainer=True, neural=True, supports_images=True,
        hparams={
            "d_model": HParam(128, {"minimum": 1, "type": "integer"}),
            "dim_feedforward": HParam(512, {"minimum": 1, "type": "integer"}),
            "dropout": HParam(0.1, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}),
            "learnable_queries": HParam(False, {"type": "boolean"}),
            "loss": HParam("asl", {"enum": ["asl", "bce"]}),
            "n_groups": HParam(100, {"minimum": 1, "type": "integer"}),
            # must also divide d_model (checked in __init__)
            "n_heads": HParam(4, {"minimum": 1, "type": "integer"}),
            "n_layers": HParam(1, {"minimum": 1, "type": "integer"}),
            # must also divide hidden_dim (checked in __init__)
            "n_tokens": HParam(8, {"minimum": 1, "type": "integer"}),
        },
    ),
    MethodSpec(
        # selects columns of X: needs a feature matrix, not images
        "LCIFS", impl="cdgtmll.methods.lcifs:LCIFSMethod",
        description=(
            "LCIFS feature selection (l2,1 projection with learned label correlations, reconstructed), then MLP backbone + "
            "linear head + BCE on the selected features"
        ),
        trainer=True, neural=True, fixed={"loss": "bce"},
        hparams={
            # objective weights (lcifs_solve)
            "alpha": HParam(1.0, {"minimum": 0, "type": "number"}),
            "beta": HParam(0.1, {"exclusiveMinimum": 0, "type": "number"}),
            "eps": HParam(1e-08, {"exclusiveMinimum": 0, "type": "number"}),
            "feature_fraction": HParam(0.5, {"exclusiveMinimum": 0, "maximum": 1, "type": "number"}),
            "gamma": HParam(0.01, {"exclusiveMinimum": 0, "type": "number"}),
            # 0: the ridge initialisation only
            "max_iter": HParam(50, {"minimum": 0, "type": "integer"}),
            # None: feature_fraction * d
            "n_features": HParam(None, {"minimum": 1, "type": ["integer", "null"]}),
            "tol": HParam(1e-06, {"minimum": 0, "type": "number"}),
        },
    ),
    MethodSpec(
        "XR-Transformer", impl="cdgtmll.methods.xmc.baselines:XRTransformerMethod",
        description="XR-Transformer: needs a pretrained transformer text encoder (not run)",
        needs_encoder=True,
        hparams={
            "encoder": HParam(None, {"type": ["string", "null"]}),
        },
    ),
    MethodSpec(
        "MatchXML", impl="cdgtmll.methods.xmc.baselines:MatchXMLMethod",
        description="MatchXML: needs a pretrained transformer text encoder (not run)",
        needs_encoder=True,
        hparams={
            "encoder": HParam(None, {"type": ["string", "null"]}),
        },
    ),
    MethodSpec(
        "XR-Linear", impl="cdgtmll.methods.xmc.baselines:XRLinearMethod",
        description="PECOS XR-Linear: PIFA + balanced hierarchical k-means label tree, linear rankers, beam search",
        env="pecos",
        hparams={
            "Cn": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}),
            # liblinear costs of positives / negatives
            "Cp": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}),
            "beam_size": HParam(10, {"minimum": 1, "type": "integer"}),
            "max_leaf_size": HParam(100, {"minimum": 1, "type": "integer"}),
            "normalize": HParam(True, {"type": "boolean"}),
            # tree out-degree (1 never merges the codes)
            "nr_splits": HParam(16, {"minimum": 2, "type": "integer"}),
            "only_topk": HParam(100, {"minimum": 1, "type": "integer"}),
            # PECOS post-processors whose scores lie in [0, 1] (the log-* and noop ones do not,
            # and predict_proba clips to [0, 1])
            "post_processor": HParam("l3-hinge", {"enum": ["sigmoid", "l1-hinge", "l2-hinge", "l3-hinge", "l4-hinge"]}),
            # -1: all CPUs
            "threads": HParam(-1, {"anyOf": [{"const": -1}, {"minimum": 1, "type": "integer"}]}),
            # |w| below it is pruned
            "threshold": HParam(0.1, {"minimum": 0, "type": "number"}),
        },
    ),
    MethodSpec(
        "ETU", impl="cdgtmll.methods.xmc.baselines:ETUMethod",
        description=(
            "ETU inference rule (expected macro-recall@k: top-k of eta/prior) on the BCE model's marginals (MLP backbone + "
            "linear head + BCE)"
        ),
        # the first stage is the BCE row's model (same loss, backbone, trainer and seed): read from BCE's run
        trainer=True, neural=True, supports_images=True, builds_on="BCE", fixed={"loss": "bce"},
        hparams={
            # size of the top-k decision
            "k": HParam(5, {"minimum": 1, "type": "integer"}),
            # Laplace a of (n_l + a) / (n + 2a)
            "prior_smoothing": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}),
            # xcolumns: n_l / n, weights 1/(pi + 1e-6); laplace: below
            "priors": HParam("xcolumns", {"enum": ["xcolumns", "laplace"]}),
            "utility": HParam("macro-recall", {"enum": ["macro-recall", "precision"]}),
        },
    ),
    MethodSpec(
        "Focal", impl="cdgtmll.methods.loss_methods:FocalMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head (as BCE); sigmoid focal loss (Lin et al., ICCV 2017): BCE x "
            "(1-p_t)^2, alpha=0.25"
        ),
        trainer=True, neural=True, supports_images=True, fixed={"loss": "focal"},
        hparams={
            "alpha": HParam(0.25, {"maximum": 1, "minimum": 0, "type": ["number", "null"]}, FOCAL_SRC),
            "gamma": HParam(2.0, {"minimum": 0, "type": "number"}, FOCAL_SRC),
        },
    ),
    MethodSpec(
        "CB", impl="cdgtmll.methods.loss_methods:CBMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head (as BCE); class-balanced sigmoid CE (Cui et al., CVPR 2019): "
            "effective-number weights, beta=0.999, averaged over an instance's positive labels"
        ),
        trainer=True, neural=True, supports_images=True, fixed={"loss": "cb"},
        hparams={
            "beta": HParam(0.999, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, CB_SRC),
        },
    ),
    MethodSpec(
        "LDAM", impl="cdgtmll.methods.loss_methods:LDAMMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head (as BCE); LDAM (Cao et al., NeurIPS 2019), per-label sigmoid form: "
            "margin ~ n_k^(-1/4) (max 0.5) subtracted from positive logits, scale s=30, no DRW"
        ),
        trainer=True, neural=True, supports_images=True, fixed={"loss": "ldam"},
        hparams={
            "max_margin": HParam(0.5, {"minimum": 0, "type": "number"}, LDAM_SRC),
            "s": HParam(30.0, {"exclusiveMinimum": 0, "type": "number"}, LDAM_SRC),
        },
    ),
    MethodSpec(
        "LogitAdj", impl="cdgtmll.methods.loss_methods:LogitAdjMethod",
        description=(
            "MLP backbone (2x512, ReLU) + linear head (as BCE); logit-adjusted loss (Menon et al., ICLR 2021), per-label "
            "sigmoid form: BCE on z + tau*log(pi_k), tau=1; predicts with unadjusted logits"
        ),
        trainer=True, neural=True, supports_images=True, fixed={"loss": "logit_adjust"},
        hparams={
            "tau": HParam(1.0, {"minimum": 0, "type": "number"}, LOGITADJ_SRC),
        },
    ),
    MethodSpec(
        "napkinXC-PLT", impl="cdgtmll.methods.xmc.peers:NapkinXCPLTMethod",
        description=(
            "napkinXC PLT (reference row, not in the paper): hierarchical k-means label tree, per-node logistic regression,"
            " exact top-k tree search"
        ),
        env="napkinxc",
        hparams={
            "arity": HParam(2, {"minimum": 2, "type": "integer"}),
            "liblinear_c": HParam(10.0, {"exclusiveMinimum": 0, "type": "number"}),
            "liblinear_eps": HParam(0.1, {"exclusiveMinimum": 0, "type": "number"}),
            "loss": HParam("log", {"enum": ["log", "l2"]}),
            "max_leaves": HParam(100, {"minimum": 1, "type": "integer"}),
            # 0: all CPUs (napkinXC; not reproducible), default 1
            "threads": HParam(1, {"minimum": 0, "type": "integer"}),
            # labels scored per row; null: all when L <= 2000, else 100
            "top_k": HParam(None, {"anyOf": [{"type": "null"}, {"minimum": 1, "type": "integer"}]}),
            "weights_threshold": HParam(0.1, {"minimum": 0, "type": "number"}),
        },
    ),
    MethodSpec(
        "LibMultiLabel-1vsRest", impl="cdgtmll.methods.xmc.peers:LibMultiLabel1vsRestMethod",
        description=(
            "LibMultiLabel linear one-vs-rest (reference row, not in the paper): one LIBLINEAR L2-loss SVM per label; "
            "scores sigmoid(decision value)"
        ),
        env="libmultilabel",
        hparams={
            # LIBLINEAR option string (LibMultiLabel's; '' = its default -s 1)
            "options": HParam("", {"type": "string"}),
            # training threads (> 1: not reproducible)
            "threads": HParam(1, {"minimum": 1, "type": "integer"}),
            # labels scored per row; null: all when L <= 2000, else 100
            "top_k": HParam(None, {"anyOf": [{"type": "null"}, {"minimum": 1, "type": "integer"}]}),
        },
    ),
    MethodSpec(
        "kNN-15", impl="cdgtmll.methods.classic:KNearestNeighbours",
        description="k-nearest neighbours, k=15 (scikit-learn), standardised features",
        deterministic=True,
        hparams={
            "n_neighbors": HParam(15, {"minimum": 1, "type": "integer"}),
        },
    ),
    MethodSpec(
        "RF-300", impl="cdgtmll.methods.classic:RandomForest",
        description="random forest, 300 trees (scikit-learn), seeded by the run's seed",
        hparams={
            "min_samples_leaf": HParam(1, {"minimum": 1, "type": "integer"}),
            "n_estimators": HParam(300, {"minimum": 1, "type": "integer"}),
        },
    ),
)
