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

#: Where a default comes from (``HParam.source``), in one of four forms
#: (``tests/unit/methods/test_hparam_sources.py``):
#:
#: * ``paper <cite> [<where>]``: the value the method's own paper gives (CD-GTMLL's: the reproduced paper);
#: * ``official code <owner/repo> <file>[@<commit>]``: the default of the method's released code;
#: * ``ours: <why>``: a choice of this project (a reading, a scale for the tabular backbone, plumbing);
#: * ``unverified: <what the docs say>``: where neither could be established.
#:
#: Sources are documentation: they are not part of a run spec (``cdgtmll.config.plan.run_spec``
#: records ``MethodSpec.resolved``, values only).
E1 = "paper App. E.1/E.2 (Yeast)"
READING = "ours: a reading the paper leaves open, first value the default (docs/methods.md)"


def _code(repo: str, file: str, commit: str = "") -> str:
    """``official code <repo> <file>[@<commit>]``: a default read in a method's released code."""
    return f"official code {repo} {file}" + (f"@{commit}" if commit else "")


ASL_TRAIN = _code("Alibaba-MIIL/ASL", "train.py", "126c95364433cff894f8d73146fbbd526bb7d179")
ASL_SRC = f"{ASL_TRAIN} (AsymmetricLoss(gamma_neg=4, gamma_pos=0, clip=0.05))"
_DBL_COMMIT = "2567764a4bf5263e357c13e851d27cabf74170f6"
#: the DB config of VOC (``map_param``, ``logit_reg``, ``focal``); COCO's mu and lambda come through
#: the config's ``dataset_overrides``
DBL_SRC = _code("wutong16/DistributionBalancedLoss", "configs/voc/LT_resnet50_pfc_DB.py", _DBL_COMMIT)
FOCAL_SRC = "paper Lin et al., ICCV 2017 (the RetinaNet setting)"
CB_SRC = "unverified: the cb loss's default (notes on Cui et al., CVPR 2019: beta in {0.9 .. 0.9999})"
LDAM_SRC = _code("kaidic/LDAM-DRW", "losses.py", "3193f05c1e6e8c4798c5419e97c5a479d991e3e9") + " (LDAMLoss max_m=0.5, s=30)"
LOGITADJ_SRC = "paper (Menon et al., ICLR 2021)"
#: the attention heads' sizes, scaled down next to the 2 x 512 MLP backbone (the official value follows)
SCALED = "ours: scaled to the 2x512 MLP backbone, official"
#: attention memory of the tabular rows: h(x) in chunks (:class:`cdgtmll.methods.architectures.common.FeatureTokens`)
TOKENS = "ours: h(x) split into 8 chunk tokens (the original attends to the CNN's spatial tokens)"
_MLCNC = "t1neo666/AAAI25_MLC-NC"
_MLCNC_COMMIT = "0b8ca16f866511c5798a99109f4fc0c4a47b3630"
MLCNC_TRAIN = _code(_MLCNC, "train.py", _MLCNC_COMMIT)
MLCNC_HEAD = _code(_MLCNC, "src_files/attention/attention.py", _MLCNC_COMMIT)
_LSFA = "stxupengyu/LSFA"
LSFA_MAIN = _code(_LSFA, "main.py", "681536605ba731506528527200701d13ffbab1ab")
#: LSFA's generator runs on CPU: a larger batch and step than the official VAE's
LSFA_CPU = "ours: CPU cost; official main.py"
_MLBOTE = "T-zeyuteng/MLBOTE"
MLBOTE_MAIN = _code(_MLBOTE, "MLBOTE_main.py", "6946525c3c786a3b3ff9e3bea07f0f3692eace6b")
MLBOTE_CLASS = _code(_MLBOTE, "MLBOTE_class.py", "ddb6ca1909c52944f34cf5f64ae34f6272b6f981")
_MLGCN_COMMIT = "311f521031b91c59a8bd65a1afe3e6cf9a97916a"
CTRAN_CONFIG = _code("QData/C-Tran", "config_args.py", "6a10502a551eac3f2bbe5fd696eb8745e13b7558")
MLDEC_HEAD = _code("Alibaba-MIIL/ML_Decoder", "src_files/ml_decoder/ml_decoder.py", "0ad326a0a73aa7e8046c7547f7ec666bf0eb2a61")
#: LCIFS is reconstructed (no paper text or code was available): its solver's settings are ours
LCIFS_OURS = "ours: the reconstruction's setting, not tuned (the CD-GTMLL paper reports none; docs/methods.md LCIFS)"
NO_ENCODER = "ours: None, no pretrained text encoder offline (the row is not run)"
XCOLUMNS = _code("mwydmuch/xCOLUMNs", "experiments/utils.py", "8472bdcea353bb599933dd6fb5d6578db54d442e")
LIBMULTILABEL = _code("ASUS-AICS/LibMultiLabel", "docs/examples/plot_linear_quickstart.py",
                      "00db7e031e971b06298ac390bda880aab8f6ef76") + " (train_1vsrest(y, x, ''))"
PECOS = _code("amzn/pecos", "pecos/xmc/base.py") + " (libpecos 1.2.8 default)"
NAPKINXC = _code("mwydmuch/napkinXC", "python/napkinxc/models.py") + " (PLT.__init__, napkinxc 0.7.2)"
#: a library's thread count: one thread keeps its model independent of thread timing
ONE_THREAD = "ours: 1 thread, reproducible (the library's default depends on thread timing)"
TOP_K = "ours: the pipeline's top-K format (all labels when L <= 2000, else 100)"
SKLEARN = "ours: scikit-learn's default"

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
            "clip_scope": HParam("global", {"enum": ["global", "block"]}, "paper App. E.1 (gradient clipping, global norm 5)"),
            "divergence": HParam("jsd", {"enum": ["jsd", "kl"]}, E1),
            "divergence_form": HParam("per_label", {"enum": ["per_label", "vector"]}, READING),
            # 0 disables the EMA
            "ema_decay": HParam(0.99, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, E1),
            # clip [eps, 1 - eps]
            "eps": HParam(1e-06, {"exclusiveMaximum": 0.5, "exclusiveMinimum": 0, "type": "number"},
                          "ours: a value for Assumption 2(i)'s epsilon (the paper gives none)"),
            "head_mass": HParam(0.1, {"exclusiveMaximum": 1, "exclusiveMinimum": 0, "type": "number"},
                                "paper Sec. 3.1 (top 10% cumulative frequency; tail_rule cumulative only)"),
            "n_players": HParam(3, {"minimum": 1, "type": "integer"}, E1),
            "partition_order": HParam("shuffled", {"enum": ["shuffled", "fixed"]},
                                      "paper App. E.1 (iii) (the extra player chosen uniformly at random)"),
            # numpy seeds are >= 0
            "partition_seed": HParam(None, {"minimum": 0, "type": ["integer", "null"]}, "ours: None takes the run seed"),
            "payoff_scale": HParam("mean", {"enum": ["mean", "sum"]}, "paper Theorem 1(3) (M = 1/Z sum_l w_l [...])"),
            "payoff_weights": HParam("uniform", {"enum": ["uniform", "rarity"]}, READING),
            "peer_smoothing": HParam("parameters", {"enum": ["parameters", "predictions"]}, READING),
            "player_backbones": HParam("shared", {"enum": ["shared", "separate"]}, "paper App. E.1 (all players share a single backbone)"),
            "rarity": HParam("prevalence", {"enum": ["prevalence", "count"]}, "paper App. E.3 (freq = (1/M) sum_m y_ml)"),
            # overlap ratio (make_partition)
            "rho": HParam(0.2, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, E1),
            # q of tail_labels; None takes FitData.tail (App. E.3/E.4)
            "tail_fraction": HParam(None, {"maximum": 1, "minimum": 0, "type": ["number", "null"]},
                                    "ours: None takes FitData.tail (App. E.3/E.4's bottom 20%)"),
            "tail_rule": HParam("bottom_fraction", {"enum": ["bottom_fraction", "cumulative"]},
                                "paper App. E.3/E.4 (the bottom 20% of labels)"),
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
            "eps": HParam(UNSET, {"exclusiveMaximum": 1, "exclusiveMinimum": 0, "type": "number"},
                          _code("Alibaba-MIIL/ASL", "src/loss_functions/losses.py") + " (AsymmetricLoss eps=1e-8)"),
            "focal_grad": HParam(UNSET, {"type": "boolean"}, f"{ASL_TRAIN} (disable_torch_grad_focal_loss=True)"),
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
            "class_aware_sampling": HParam(True, {"type": "boolean"}, f"{MLCNC_TRAIN} (ClassAwareSampler)"),
            "d_model": HParam(128, {"minimum": 1, "type": "integer"}, f"{SCALED} 768"),
            "dropout": HParam(0.1, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, f"{MLCNC_HEAD} (attention dropout)"),
            "etf_classifier_trainable": HParam(True, {"type": "boolean"}, f"{MLCNC_TRAIN} (proto.requires_grad = True)"),
            # must also divide d_model (checked in __init__)
            "n_heads": HParam(4, {"minimum": 1, "type": "integer"}, f"{SCALED} 8"),
            # must also divide hidden_dim (checked in __init__)
            "n_tokens": HParam(8, {"minimum": 1, "type": "integer"}, TOKENS),
            "proj_dim": HParam(20, {"minimum": 1, "type": "integer"}, f"{MLCNC_TRAIN} (--d 20)"),
            # temperatures divide logits
            "proto_temperature": HParam(0.5, {"exclusiveMinimum": 0, "type": "number"},
                                        _code(_MLCNC, "src_files/loss_functions/prototypeloss.py", _MLCNC_COMMIT)),
            "tn": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"},
                         _code(_MLCNC, "src_files/loss_functions/twowayloss.py", _MLCNC_COMMIT)),
            "tp": HParam(4.0, {"exclusiveMinimum": 0, "type": "number"},
                         _code(_MLCNC, "src_files/loss_functions/twowayloss.py", _MLCNC_COMMIT)),
            "warmup_epochs": HParam(5, {"minimum": 0, "type": "integer"}, f"{MLCNC_TRAIN} (alignment only while epoch < 5)"),
            "weight_align": HParam(0.5, {"minimum": 0, "type": "number"}, f"{MLCNC_TRAIN} (weight_fla)"),
            # weights of minimised loss terms
            "weight_proto": HParam(0.1, {"minimum": 0, "type": "number"}, f"{MLCNC_TRAIN} (weight_prototype)"),
            "weight_twoway": HParam(1.0, {"minimum": 0, "type": "number"}, f"{MLCNC_TRAIN} (weight_twoway)"),
        },
    ),
    MethodSpec(
        "BR-LogReg", impl="cdgtmll.methods.classic:BinaryRelevanceLogReg",
        description="per-label logistic regression (scikit-learn), standardised features",
        deterministic=True,
        hparams={
            # inverse L2 strength (scikit-learn: > 0)
            "C": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}, SKLEARN),
            # lbfgs iterations
            "max_iter": HParam(1000, {"minimum": 1, "type": "integer"},
                               "ours: an lbfgs iteration cap, 10x scikit-learn's 100 (the docs give no reason)"),
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
            "target": HParam("macro", {"enum": ["macro", "micro"]},
                             "ours: only picks the thresholds decision_thresholds returns; each F1 column uses its own rule"),
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
            "surrogate": HParam("squared", {"enum": ["exponential", "squared"]},
                                "ours: one of the SRB paper's strongly proper surrogates (the docs give no reason for squared)"),
            "target": HParam("macro", {"enum": ["macro", "micro"]},
                             "ours: only picks the thresholds decision_thresholds returns; each F1 column uses its own rule"),
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
            "bias_div_lam": HParam(UNSET, {"type": "boolean"},
                                   _code("wutong16/DistributionBalancedLoss", "mllt/models/losses/resample_loss.py", _DBL_COMMIT)),
            "focal_gamma": HParam(UNSET, {"anyOf": [{"const": 0}, {"minimum": 1, "type": "number"}]}, f"{DBL_SRC} (focal gamma)"),
            "focal_scale": HParam(UNSET, {"exclusiveMinimum": 0, "type": "number"}, f"{DBL_SRC} (focal balance_param)"),
            "kappa": HParam(UNSET, {"minimum": 0, "type": "number"}, f"{DBL_SRC} (logit_reg init_bias)"),
            "lam": HParam(5.0, {"exclusiveMinimum": 0, "type": "number"}, f"{DBL_SRC} (logit_reg neg_scale)"),
            "smooth_a": HParam(UNSET, {"minimum": 0, "type": "number"}, f"{DBL_SRC} (map_param alpha)"),
            "smooth_b": HParam(UNSET, {"minimum": 0, "type": "number"}, f"{DBL_SRC} (map_param beta)"),
            "smooth_mu": HParam(0.3, {"minimum": 0, "type": "number"}, f"{DBL_SRC} (map_param gamma)"),
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
            "calib_epochs": HParam(None, {"minimum": 1, "type": ["integer", "null"]},
                                   "ours: None takes the trainer's epochs (official: early stopping on validation P@k)"),
            "calib_warmup": HParam(5, {"minimum": 0, "type": "integer"}, f"{LSFA_MAIN} (calibration_warmup)"),
            # weight of the synthetic rows' loss
            "calib_weight": HParam(1.0, {"minimum": 0, "type": "number"}, f"{LSFA_MAIN} (calibration_weight)"),
            "gen_batch_size": HParam(256, {"minimum": 1, "type": "integer"}, f"{LSFA_CPU} vae_batch_size=40"),
            "gen_epochs": HParam(100, {"minimum": 1, "type": "integer"}, f"{LSFA_MAIN} (vae_epochs)"),
            "gen_hidden_dim": HParam(512, {"minimum": 1, "type": "integer"},
                                     _code(_LSFA, "transfer/transfer_model.py", "cd21f09de97cd1f3a5de9f18735112ed4cae4088")),
            # Adam step size of the CVAE
            "gen_lr": HParam(0.001, {"exclusiveMinimum": 0, "type": "number"}, f"{LSFA_CPU} vae_learning_rate=1e-4"),
            "gen_patience": HParam(10, {"minimum": 1, "type": "integer"}, f"{LSFA_MAIN} (vae_early_stop_tolerance)"),
            "head_min_count": HParam(50, {"minimum": 1, "type": "integer"}, f"{LSFA_MAIN} (threshold; the official head is n_k > 50)"),
            "kl_weight": HParam(0.005, {"minimum": 0, "type": "number"},
                                _code(_LSFA, "transfer/transfer_train.py", "b7653e47f418a073c3d4baad7efbd918fb629798")),
            "n_synthetic": HParam(10, {"minimum": 1, "type": "integer"}, f"{LSFA_MAIN} (da_number)"),
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
            "mix_alpha": HParam(4.0, {"exclusiveMinimum": 0, "type": "number"},
                                "paper Song et al., AAAI 2024 Eq. 5, App. D/E (Beta(4, 4))"),
            # p > tau -> 1, p < 1 - tau -> 0
            "relabel_tau": HParam(0.975, {"exclusiveMinimum": 0.5, "maximum": 1, "type": "number"},
                                  "paper Song et al., AAAI 2024 Eq. 9, App. D/E"),
            "warmup_epochs": HParam(10, {"minimum": 0, "type": "integer"},
                                    "ours: 10% of 100 epochs, the low end of BalanceMix's 10-25% (5/10/5 of 20/50/40)"),
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
            "cross_threshold": HParam(5.0, {"minimum": 1, "type": "number"}, f"{MLBOTE_MAIN} (th_c)"),
            # compared with IRLbl_k / meanIR > 0
            "interior_ratio": HParam(1.0, {"minimum": 0, "type": "number"}, f"{MLBOTE_MAIN} (ratio_Disjunction)"),
            # neighbour counts
            "k_border": HParam(3, {"minimum": 1, "type": "integer"}, f"{MLBOTE_MAIN} (kb)"),
            "k_weight": HParam(5, {"minimum": 1, "type": "integer"}, f"{MLBOTE_MAIN} (kw)"),
            # compared with ovrIR = (N - n_k) / n_k >= 0
            "ovr_threshold": HParam(10.0, {"minimum": 0, "type": "number"}, f"{MLBOTE_CLASS} (MLBOTE ovrth)"),
            # a count multiplier
            "resample_ratio": HParam(0.01, {"minimum": 0, "type": "number"}, f"{MLBOTE_MAIN} (alpha_s)"),
            # 1 + size_penalty * [0, 1) divides the weights
            "size_penalty": HParam(1.0, {"minimum": 0, "type": "number"}, f"{MLBOTE_CLASS} (MLBOTE Cn)"),
            "standardize": HParam(True, {"type": "boolean"}, "ours: standardised Euclidean distances on tabular features (official: raw)"),
            # g ~ U(0, step_size)
            "step_size": HParam(1.0, {"minimum": 0, "type": "number"}, f"{MLBOTE_CLASS} (fit_resample step_size)"),
        },
    ),
    MethodSpec(
        "CC", impl="cdgtmll.methods.architectures.label_graph:ClassifierChainMethod",
        description="classifier chains (Read 2011) on the MLP backbone: teacher forcing, greedy hard-prediction chain",
        trainer=True, neural=True, supports_images=True, fixed={"loss": "bce"},
        hparams={
            # order="frequency": 1 (checked in __init__)
            "n_chains": HParam(1, {"minimum": 1, "type": "integer"}, "ours: one chain, the CC row (n_chains > 1 is ECC, Read et al. 2011)"),
            "order": HParam("random", {"enum": ["random", "frequency"]},
                            "ours: a seeded random order, as each ECC chain of Read et al. 2011"),
        },
    ),
    MethodSpec(
        "ML-GCN", impl="cdgtmll.methods.architectures.label_graph:MLGCNMethod",
        description="ML-GCN (Chen 2019): 2-layer GCN over the co-occurrence label graph -> per-label classifiers on h(x)",
        trainer=True, neural=True, supports_images=True, fixed={"loss": "bce"},
        hparams={
            "embedding_dim": HParam(300, {"minimum": 1, "type": "integer"}, "paper Chen et al., CVPR 2019 (300-d GloVe label embeddings)"),
            "gcn_hidden": HParam(1024, {"minimum": 1, "type": "integer"}, _code("megvii-research/ML-GCN", "models.py", _MLGCN_COMMIT)),
            # .npy [L, d_e]; None: learnable
            "label_embeddings": HParam(None, {"type": ["string", "null"]}, "ours: None learns the embeddings (no word vectors offline)"),
            # re-weighting of the edges
            "p": HParam(0.25, {"maximum": 1, "minimum": 0, "type": "number"},
                        _code("megvii-research/ML-GCN", "util.py", _MLGCN_COMMIT) + " (gen_A; the paper's Eq. 8 uses 0.2)"),
            # binarises P(L_j | L_i) >= tau
            "tau": HParam(0.4, {"exclusiveMinimum": 0, "maximum": 1, "type": "number"},
                          "paper Chen et al., CVPR 2019 Eq. 7 (tau = 0.4, as the official code)"),
        },
    ),
    MethodSpec(
        "C-Tran", impl="cdgtmll.methods.architectures.attention:CTranMethod",
        description="C-Tran (Lanchantin 2021): transformer over h(x)-tokens + label/state tokens, label mask training",
        trainer=True, neural=True, supports_images=True, fixed={"loss": "bce"},
        hparams={
            "d_model": HParam(128, {"minimum": 1, "type": "integer"}, f"{SCALED} 2048"),
            "dropout": HParam(0.1, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, f"{CTRAN_CONFIG} (--dropout)"),
            "lmt": HParam(True, {"type": "boolean"}, "paper Lanchantin et al., CVPR 2021 Sec. 3 (label mask training)"),
            "loss_labels": HParam("unk", {"enum": ["unk", "all"]}, f"{CTRAN_CONFIG} ('unk' with --use_lmt)"),
            "max_known_fraction": HParam(0.75, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"},
                                         _code("QData/C-Tran", "dataloaders/data_utils.py", "6a10502a551eac3f2bbe5fd696eb8745e13b7558")),
            # must also divide d_model (checked in __init__)
            "n_heads": HParam(4, {"minimum": 1, "type": "integer"}, f"{CTRAN_CONFIG} (--heads)"),
            "n_layers": HParam(2, {"minimum": 1, "type": "integer"}, f"{SCALED} 3"),
            # must also divide hidden_dim (checked in __init__)
            "n_tokens": HParam(8, {"minimum": 1, "type": "integer"}, TOKENS),
        },
    ),
    MethodSpec(
        "ML-Decoder", impl="cdgtmll.methods.architectures.attention:MLDecoderMethod",
        description="ML-Decoder (Ridnik 2023): query cross-attention over h(x)-tokens, no self-attention, group FC, ASL",
        trainer=True, neural=True, supports_images=True,
        hparams={
            "d_model": HParam(128, {"minimum": 1, "type": "integer"}, f"{SCALED} 768"),
            "dim_feedforward": HParam(512, {"minimum": 1, "type": "integer"}, f"{SCALED} 2048"),
            "dropout": HParam(0.1, {"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, MLDEC_HEAD),
            "learnable_queries": HParam(False, {"type": "boolean"}, f"{MLDEC_HEAD} (query_embed.requires_grad_(False))"),
            "loss": HParam("asl", {"enum": ["asl", "bce"]},
                           _code("Alibaba-MIIL/ML_Decoder", "train.py", "02db6d5bd61321b16114c107d899adea2b73537d") + " (AsymmetricLoss)"),
            "n_groups": HParam(100, {"minimum": 1, "type": "integer"}, f"{MLDEC_HEAD} (num_of_groups=-1: 100)"),
            # must also divide d_model (checked in __init__)
            "n_heads": HParam(4, {"minimum": 1, "type": "integer"}, f"{SCALED} 8"),
            "n_layers": HParam(1, {"minimum": 1, "type": "integer"}, MLDEC_HEAD),
            # must also divide hidden_dim (checked in __init__)
            "n_tokens": HParam(8, {"minimum": 1, "type": "integer"}, TOKENS),
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
            "alpha": HParam(1.0, {"minimum": 0, "type": "number"}, LCIFS_OURS),
            "beta": HParam(0.1, {"exclusiveMinimum": 0, "type": "number"}, LCIFS_OURS),
            "eps": HParam(1e-08, {"exclusiveMinimum": 0, "type": "number"}, LCIFS_OURS),
            "feature_fraction": HParam(0.5, {"exclusiveMinimum": 0, "maximum": 1, "type": "number"},
                                       "ours: the top of the 10-50% range feature-selection papers report"),
            "gamma": HParam(0.01, {"exclusiveMinimum": 0, "type": "number"}, LCIFS_OURS),
            # 0: the ridge initialisation only
            "max_iter": HParam(50, {"minimum": 0, "type": "integer"}, LCIFS_OURS),
            # None: feature_fraction * d
            "n_features": HParam(None, {"minimum": 1, "type": ["integer", "null"]}, "ours: None keeps ceil(feature_fraction * d)"),
            "tol": HParam(1e-06, {"minimum": 0, "type": "number"}, LCIFS_OURS),
        },
    ),
    MethodSpec(
        "XR-Transformer", impl="cdgtmll.methods.xmc.baselines:XRTransformerMethod",
        description="XR-Transformer: needs a pretrained transformer text encoder (not run)",
        needs_encoder=True,
        hparams={
            "encoder": HParam(None, {"type": ["string", "null"]}, NO_ENCODER),
        },
    ),
    MethodSpec(
        "MatchXML", impl="cdgtmll.methods.xmc.baselines:MatchXMLMethod",
        description="MatchXML: needs a pretrained transformer text encoder (not run)",
        needs_encoder=True,
        hparams={
            "encoder": HParam(None, {"type": ["string", "null"]}, NO_ENCODER),
        },
    ),
    MethodSpec(
        "XR-Linear", impl="cdgtmll.methods.xmc.baselines:XRLinearMethod",
        description="PECOS XR-Linear: PIFA + balanced hierarchical k-means label tree, linear rankers, beam search",
        env="pecos",
        hparams={
            "Cn": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}, PECOS),
            # liblinear costs of positives / negatives
            "Cp": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"}, PECOS),
            "beam_size": HParam(10, {"minimum": 1, "type": "integer"}, PECOS),
            "max_leaf_size": HParam(100, {"minimum": 1, "type": "integer"}, PECOS),
            "normalize": HParam(True, {"type": "boolean"}, "ours: rows l2-normalised, as PECOS's benchmark TF-IDF inputs are"),
            # tree out-degree (1 never merges the codes)
            "nr_splits": HParam(16, {"minimum": 2, "type": "integer"}, PECOS),
            "only_topk": HParam(100, {"minimum": 1, "type": "integer"},
                                "ours: 100 labels per row, the pipeline's top-K format (PECOS default 20)"),
            # PECOS post-processors whose scores lie in [0, 1] (the log-* and noop ones do not,
            # and predict_proba clips to [0, 1])
            "post_processor": HParam("l3-hinge", {"enum": ["sigmoid", "l1-hinge", "l2-hinge", "l3-hinge", "l4-hinge"]}, PECOS),
            # -1: all CPUs
            "threads": HParam(-1, {"anyOf": [{"const": -1}, {"minimum": 1, "type": "integer"}]},
                              f"{PECOS}; -1 = all CPUs, or the job's thread budget when set"),
            # |w| below it is pruned
            "threshold": HParam(0.1, {"minimum": 0, "type": "number"}, PECOS),
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
            "k": HParam(5, {"minimum": 1, "type": "integer"}, "ours: the CD-GTMLL paper names no k (not tuned; it reports P@1/3/5)"),
            # Laplace a of (n_l + a) / (n + 2a)
            "prior_smoothing": HParam(1.0, {"exclusiveMinimum": 0, "type": "number"},
                                      "ours: Laplace a of priors=laplace, the project's former prior"),
            # xcolumns: n_l / n, weights 1/(pi + 1e-6); laplace: below
            "priors": HParam("xcolumns", {"enum": ["xcolumns", "laplace"]},
                             f"{XCOLUMNS} (labels_priors)"),
            "utility": HParam("macro-recall", {"enum": ["macro-recall", "precision"]},
                              "ours: the CD-GTMLL paper does not say which utility its ETU row optimised"),
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
            "arity": HParam(2, {"minimum": 2, "type": "integer"}, NAPKINXC),
            "liblinear_c": HParam(10.0, {"exclusiveMinimum": 0, "type": "number"}, NAPKINXC),
            "liblinear_eps": HParam(0.1, {"exclusiveMinimum": 0, "type": "number"}, NAPKINXC),
            "loss": HParam("log", {"enum": ["log", "l2"]}, NAPKINXC),
            "max_leaves": HParam(100, {"minimum": 1, "type": "integer"}, NAPKINXC),
            # 0: all CPUs (napkinXC; not reproducible), default 1
            "threads": HParam(1, {"minimum": 0, "type": "integer"}, ONE_THREAD),
            # labels scored per row; null: all when L <= 2000, else 100
            "top_k": HParam(None, {"anyOf": [{"type": "null"}, {"minimum": 1, "type": "integer"}]}, TOP_K),
            "weights_threshold": HParam(0.1, {"minimum": 0, "type": "number"}, NAPKINXC),
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
            "options": HParam("", {"type": "string"},
                              LIBMULTILABEL),
            # training threads (> 1: not reproducible)
            "threads": HParam(1, {"minimum": 1, "type": "integer"}, ONE_THREAD),
            # labels scored per row; null: all when L <= 2000, else 100
            "top_k": HParam(None, {"anyOf": [{"type": "null"}, {"minimum": 1, "type": "integer"}]}, TOP_K),
        },
    ),
    MethodSpec(
        "kNN-15", impl="cdgtmll.methods.classic:KNearestNeighbours",
        description="k-nearest neighbours, k=15 (scikit-learn), standardised features",
        deterministic=True,
        hparams={
            "n_neighbors": HParam(15, {"minimum": 1, "type": "integer"}, "ours: k = 15, the row's name (scikit-learn's default is 5)"),
        },
    ),
    MethodSpec(
        "RF-300", impl="cdgtmll.methods.classic:RandomForest",
        description="random forest, 300 trees (scikit-learn), seeded by the run's seed",
        hparams={
            "min_samples_leaf": HParam(1, {"minimum": 1, "type": "integer"}, SKLEARN),
            "n_estimators": HParam(300, {"minimum": 1, "type": "integer"},
                                   "ours: 300 trees, the row's name (scikit-learn's default is 100)"),
        },
    ),
)
