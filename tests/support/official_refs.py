"""Reference values from the baselines' official code, for ``tests/unit/nn/test_losses_official.py`` and
``tests/unit/methods/test_methods_official.py``.

The official repositories cannot be installed here (no internet; most are not packages), so
the functions below are their code ported verbatim (only imports, ``.cuda()`` calls and file
loading replaced by arguments; every such change is marked ``# port:``). Each is run once on
a fixed small input and the results are stored in ``tests/fixtures/official/<name>.json``;
the tests compare this project's implementation with those numbers. Regenerate with::

    PYTHONPATH=src python -m tests.support.official_refs

Sources (repository, file, commit as stored in the public code index we read them from):

* DBL: wutong16/DistributionBalancedLoss ``mllt/models/losses/resample_loss.py``,
  commit 2567764a4bf5263e357c13e851d27cabf74170f6 (``ResampleLoss`` with
  ``reweight_func='rebalance'``, ``focal``, ``logit_reg``), configs
  ``configs/voc/LT_resnet50_pfc_DB.py`` and ``configs/coco/LT_resnet50_pfc_DB.py`` (same
  commit). Its ``binary_cross_entropy`` comes from ``cross_entropy_loss.py`` of the same
  package (mmdetection v1's: ``F.binary_cross_entropy_with_logits(pred, label, weight,
  reduction='none')`` then ``weight_reduce_loss``), not in the index; ported as mmdetection
  v1 has it.
* ETU: mwydmuch/xCOLUMNs ``experiments/utils.py`` (``count_labels``, ``labels_priors``),
  commit 8472bdcea353bb599933dd6fb5d6578db54d442e, and ``xcolumns/weighted_prediction.py``
  (``predict_optmizing_macro_recall``, ``predict_weighted_per_instance`` dense numpy path),
  commit ac69f9ebe7071ca51776833ccaa6eebc81e1146e; the experiment script
  ``experiments/run_neurips_2023_bca_experiment.py`` (commit
  0e0cea7952a8944dd6457da9f7e8b286bf1ba4ee) calls ``labels_priors(train_y_true)``.
* LSFA: stxupengyu/LSFA ``transfer/transfer_model.py`` (``FeatsVAE``), commit
  cd21f09de97cd1f3a5de9f18735112ed4cae4088, and ``transfer/generator.py`` (``generate``:
  ``vae_model.relu(vae_model.bn1(vae_model.generator(concat_feats)))`` in eval mode), same
  commit.
* MLC-NC: t1neo666/AAAI25_MLC-NC ``src_files/loss_functions/featurelabelloss.py``
  (``FeatureLabelLoss``), commit 0b8ca16f866511c5798a99109f4fc0c4a47b3630.
* Focal: facebookresearch/fvcore ``fvcore/nn/focal_loss.py`` (``sigmoid_focal_loss``),
  commit 1c553507c68ee46d171ce81e31a71f232f3ff42d (torchvision 0.29.1's
  ``torchvision/ops/focal_loss.py`` is the same computation).
"""

# ruff: noqa: B006, UP008  (the official code as written: dict defaults, super(Class, self))
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import normal

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "official"


# ============================================================================ DBL (verbatim port)


def weight_reduce_loss(loss, weight=None, reduction="mean", avg_factor=None):  # mmdetection v1
    if weight is not None:
        loss = loss * weight
    if avg_factor is None:
        loss = loss.mean() if reduction == "mean" else (loss.sum() if reduction == "sum" else loss)
    elif reduction == "mean":
        loss = loss.sum() / avg_factor
    return loss


def binary_cross_entropy(pred, label, weight=None, reduction="mean", avg_factor=None):  # mmdetection v1
    if weight is not None:
        weight = weight.float()
    loss = F.binary_cross_entropy_with_logits(pred, label.float(), weight, reduction="none")
    loss = weight_reduce_loss(loss, reduction=reduction, avg_factor=avg_factor)
    return loss


class ResampleLoss(nn.Module):
    """``ResampleLoss`` of the official DB code; ``use_sigmoid=True`` path only."""

    def __init__(self, use_sigmoid=False, reduction="mean", loss_weight=1.0, partial=False,
                 focal=dict(focal=True, balance_param=2.0, gamma=2),
                 CB_loss=dict(CB_beta=0.9, CB_mode="average_w"),
                 map_param=dict(alpha=10.0, beta=0.2, gamma=0.1),
                 logit_reg=dict(neg_scale=5.0, init_bias=0.1),
                 reweight_func=None, weight_norm=None,
                 class_freq=None, neg_class_freq=None):  # port: arrays instead of freq_file
        super(ResampleLoss, self).__init__()
        assert (use_sigmoid is True) or (partial is False)
        self.use_sigmoid = use_sigmoid
        self.partial = partial
        self.loss_weight = loss_weight
        self.reduction = reduction
        self.cls_criterion = binary_cross_entropy  # port: use_sigmoid=True, partial=False
        self.reweight_func = reweight_func
        self.weight_norm = weight_norm
        self.focal = focal["focal"]
        self.gamma = focal["gamma"]
        self.balance_param = focal["balance_param"]
        self.map_alpha = map_param["alpha"]
        self.map_beta = map_param["beta"]
        self.map_gamma = map_param["gamma"]
        self.CB_beta = CB_loss["CB_beta"]
        self.CB_mode = CB_loss["CB_mode"]
        self.class_freq = torch.from_numpy(np.asarray(class_freq)).float()  # port: no .cuda()
        self.neg_class_freq = torch.from_numpy(np.asarray(neg_class_freq)).float()  # port: no .cuda()
        self.num_classes = self.class_freq.shape[0]
        self.train_num = self.class_freq[0] + self.neg_class_freq[0]
        self.logit_reg = logit_reg
        self.neg_scale = logit_reg["neg_scale"] if "neg_scale" in logit_reg else 1.0
        init_bias = logit_reg["init_bias"] if "init_bias" in logit_reg else 0.0
        self.init_bias = - torch.log(self.train_num / self.class_freq - 1) * init_bias / self.neg_scale
        self.freq_inv = torch.ones(self.class_freq.shape) / self.class_freq  # port: no .cuda()
        self.propotion_inv = self.train_num / self.class_freq

    def forward(self, cls_score, label, weight=None, avg_factor=None, reduction_override=None, **kwargs):
        assert reduction_override in (None, "none", "mean", "sum")
        reduction = reduction_override if reduction_override else self.reduction
        weight = self.reweight_functions(label)
        cls_score, weight = self.logit_reg_functions(label.float(), cls_score, weight)
        if self.focal:
            logpt = - self.cls_criterion(cls_score.clone(), label, weight=None, reduction="none",
                                         avg_factor=avg_factor)
            pt = torch.exp(logpt)
            loss = self.cls_criterion(cls_score, label.float(), weight=weight, reduction="none")
            loss = ((1 - pt) ** self.gamma) * loss
            loss = self.balance_param * loss
        else:
            loss = self.cls_criterion(cls_score, label.float(), weight, reduction=reduction)
        loss = self.loss_weight * loss
        return loss

    def reweight_functions(self, label):
        if self.reweight_func is None:
            return None
        elif self.reweight_func in "rebalance":  # port: 'inv'/'CB' branches not used by DB
            weight = self.rebalance_weight(label.float())
        else:
            return None
        return weight

    def logit_reg_functions(self, labels, logits, weight=None):
        if not self.logit_reg:
            return logits, weight
        if "init_bias" in self.logit_reg:
            logits += self.init_bias
        if "neg_scale" in self.logit_reg:
            logits = logits * (1 - labels) * self.neg_scale + logits * labels
            weight = weight / self.neg_scale * (1 - labels) + weight * labels
        return logits, weight

    def rebalance_weight(self, gt_labels):
        repeat_rate = torch.sum(gt_labels.float() * self.freq_inv, dim=1, keepdim=True)
        pos_weight = self.freq_inv.clone().detach().unsqueeze(0) / repeat_rate
        weight = torch.sigmoid(self.map_beta * (pos_weight - self.map_gamma)) + self.map_alpha
        return weight


def dbl_reference() -> dict:
    g = torch.Generator().manual_seed(23)
    class_freq = np.array([12, 40, 150, 600, 3, 900], dtype=np.float64)
    train_num = 1000.0
    logits = 3.0 * torch.randn(7, 6, generator=g)  # float32, as the official training runs
    labels = (torch.rand(7, 6, generator=g) < 0.4).float()
    labels[:, 2] = 1.0  # every instance has a positive ...
    labels[6] = 0.0  # ... but the last (official weight: r = inf, a + 1)
    out = {"class_freq": class_freq.tolist(), "train_num": train_num, "logits": logits.tolist(),
           "labels": labels.tolist(), "configs": {}}
    # official DB configs (configs/{voc,coco}/LT_resnet50_pfc_DB.py)
    for name, mu, lam in (("voc", 0.3, 5.0), ("coco", 0.2, 2.0)):
        loss = ResampleLoss(use_sigmoid=True, reweight_func="rebalance",
                            focal=dict(focal=True, balance_param=2.0, gamma=2),
                            logit_reg=dict(init_bias=0.05, neg_scale=lam),
                            map_param=dict(alpha=0.1, beta=10.0, gamma=mu), loss_weight=1.0,
                            class_freq=class_freq, neg_class_freq=train_num - class_freq)
        elem = loss(logits.clone(), labels)
        out["configs"][name] = {"smooth_mu": mu, "lam": lam, "init_bias": loss.init_bias.tolist(),
                                "rebalance_weight": loss.rebalance_weight(labels).tolist(),
                                "elementwise": elem.tolist()}
    return out


# ============================================================================ ETU (verbatim port)


def count_labels(Y):
    counts = np.ravel(Y.sum(axis=0))
    return counts


def labels_priors(Y):
    counts = count_labels(Y)
    priors = counts / Y.shape[0]
    return priors


def _predict_weighted_per_instance_dense(y_proba, k, th=0.0, a=None, b=None, dtype=None):
    n, m = y_proba.shape
    y_pred = np.zeros_like(y_proba, dtype=dtype)  # port: xcolumns.utils.zeros_like, numpy case
    gains = y_proba
    if a is not None:
        gains = gains * a
    if b is not None:
        gains = gains + b
    if k > 0:
        top_k = np.argpartition(-gains, k, axis=1)[:, :k]
        y_pred[np.arange(n)[:, None], top_k] = 1
    else:
        y_pred[gains >= th] = 1
    return y_pred


def predict_optmizing_macro_recall(y_proba, k, priors, epsilon=1e-6, return_meta=False):
    if priors.shape[0] != y_proba.shape[1]:
        raise ValueError("priors must be of shape (y_proba[1],)")
    weights = 1.0 / (priors + epsilon)
    return _predict_weighted_per_instance_dense(y_proba, k, a=weights)  # port: dense numpy dispatch


def etu_reference() -> dict:
    rng = np.random.default_rng(23)
    Y_train = (rng.uniform(size=(300, 8)) < np.array([0.5, 0.3, 0.1, 0.05, 0.02, 0.01, 0.003, 0.0])).astype(np.float64)
    y_proba = rng.uniform(size=(20, 8))
    priors = labels_priors(Y_train)
    k = 3
    return {"Y_train_counts": count_labels(Y_train).tolist(), "n_train": int(Y_train.shape[0]), "k": k,
            "y_proba": y_proba.tolist(), "priors": priors.tolist(), "weights": (1.0 / (priors + 1e-6)).tolist(),
            "y_pred": predict_optmizing_macro_recall(y_proba, k, priors).tolist()}


# ============================================================================ LSFA (verbatim port)


class FeatsVAE(nn.Module):
    def __init__(self, args, hidden_dim=512):
        super(FeatsVAE, self).__init__()
        self.input_dim = args.feat_size
        self.latent_dim = args.feat_size
        self.linear = nn.Sequential(
            nn.Linear(self.input_dim + self.input_dim, hidden_dim),
            nn.LeakyReLU())
        self.linear_mu = nn.Sequential(
            nn.Linear(hidden_dim, self.latent_dim),
            nn.ReLU())
        self.linear_logvar = nn.Sequential(
            nn.Linear(hidden_dim, self.latent_dim),
            nn.ReLU())
        self.generator = nn.Sequential(
            nn.Linear(2 * self.latent_dim, hidden_dim),
            nn.LeakyReLU(),
            nn.Linear(hidden_dim, self.input_dim),
        )
        self.bn1 = nn.BatchNorm1d(self.input_dim)
        self.relu = nn.ReLU(inplace=True)
        self.z_dist = normal.Normal(0, 1)
        self.init_weights()

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def init_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                m.weight.data.normal_(0, 0.02)
                m.bias.data.normal_(0, 0.02)

    def forward(self, x, p):
        x = torch.cat((x, p), dim=1)
        x = self.linear(x)
        mu = self.linear_mu(x)
        logvar = self.linear_logvar(x)
        latent_feats = self.reparameterize(mu, logvar)
        concat_feats = torch.cat((latent_feats, p), dim=1)
        recon_feats = self.generator(concat_feats)
        recon_feats = self.relu(self.bn1(recon_feats))
        return mu, logvar, recon_feats


#: seeds of the global RNG before each official call (the test seeds its generator alike)
LSFA_SEEDS = {"init": 0, "train_forward": 1, "eval_forward": 2, "z": 3}


def lsfa_reference() -> dict:
    d, hidden, n = 4, 6, 5
    torch.manual_seed(LSFA_SEEDS["init"])
    vae = FeatsVAE(SimpleNamespace(feat_size=d), hidden_dim=hidden)
    for m in vae.modules():  # larger weights than N(0, 0.02) so that the ReLUs and the BN matter
        if isinstance(m, nn.Linear):
            m.weight.data.mul_(40.0)
            m.bias.data.mul_(40.0)
    state = {k: v.tolist() for k, v in vae.state_dict().items()}
    g = torch.Generator().manual_seed(23)
    x = torch.rand(n, d, generator=g)
    p = torch.rand(n, d, generator=g)
    vae.train()
    torch.manual_seed(LSFA_SEEDS["train_forward"])
    mu, logvar, recon = vae(x, p)
    vae.eval()
    with torch.no_grad():
        torch.manual_seed(LSFA_SEEDS["eval_forward"])
        mu_e, logvar_e, recon_e = vae(x, p)
        # generate(): Z ~ N(0, 1), generator, bn1, relu, eval mode
        torch.manual_seed(LSFA_SEEDS["z"])
        Z = vae.z_dist.sample((n, d))
        gen = vae.relu(vae.bn1(vae.generator(torch.cat((Z, p), dim=1))))
    return {"feat_dim": d, "hidden_dim": hidden, "state_dict": state, "x": x.tolist(), "p": p.tolist(),
            "seeds": LSFA_SEEDS, "train": {"mu": mu.tolist(), "logvar": logvar.tolist(), "recon": recon.tolist()},
            "eval": {"mu": mu_e.tolist(), "logvar": logvar_e.tolist(), "recon": recon_e.tolist()},
            "Z": Z.tolist(), "generated": gen.tolist()}


# ============================================================================ MLC-NC (verbatim port)


class FeatureLabelLoss(nn.Module):
    def __init__(self):
        super(FeatureLabelLoss, self).__init__()

    def forward(self, features, embeddings, labels):
        features_norm = F.normalize(features, p=2, dim=2).float()
        embeddings_norm = F.normalize(embeddings, p=2, dim=1).float()
        embeddings_norm = embeddings_norm.unsqueeze(0).expand(features.size(0), -1, -1)
        cosine_similarities = torch.bmm(features_norm, embeddings_norm.transpose(1, 2))
        similarities = torch.diagonal(cosine_similarities, dim1=-1, dim2=-2)
        C = embeddings.size(0)
        S_i_c = (1 + similarities) / 2 + 1e-6
        pos_loss = labels * torch.log(S_i_c)
        neg_loss = (1 - labels) * torch.log(1 - (C - 1) / C * torch.abs(1 / (C - 1) + similarities) + 1e-6)
        loss = -(pos_loss + neg_loss).mean()
        return loss


def mlcnc_reference() -> dict:
    g = torch.Generator().manual_seed(23)
    B, K, d = 6, 5, 8
    emb = torch.randn(K, d, generator=g)
    feats = torch.randn(B, K, d, generator=g)
    labels = (torch.rand(B, K, generator=g) < 0.4).float()
    # near the log's argument 0, where adding 1e-6 and clamping at 1e-6 differ most:
    # a positive exactly opposite its prototype (S = 0), a negative on its prototype (a- = 0)
    feats[0, 0], labels[0, 0] = -3.0 * emb[0], 1.0
    feats[1, 1], labels[1, 1] = 2.0 * emb[1], 0.0
    cases = {"generic": (feats, labels)}
    # basis prototypes and features with exact cosines 1 / 0 / -1 (no rounding in float32)
    emb_b = torch.eye(K, d)
    feats_b = torch.zeros(B, K, d)
    labels_b = torch.zeros(B, K)
    for i in range(B):
        for k in range(K):
            sign = (-1.0, 0.0, 1.0)[(i + k) % 3]
            feats_b[i, k, k] = sign * 2.0 if sign else 0.0
            feats_b[i, k, (k + 1) % d] = 0.0 if sign else 1.0
            labels_b[i, k] = float((i * K + k) % 2)
    cases["exact_cosines"] = (feats_b, labels_b)
    out = {}
    for name, (f, y) in cases.items():
        e = emb if name == "generic" else emb_b
        out[name] = {"features": f.tolist(), "embeddings": e.tolist(), "labels": y.tolist(),
                     "loss": float(FeatureLabelLoss()(f, e, y))}
    return out


# ============================================================================ Focal (verbatim port)


def sigmoid_focal_loss(inputs, targets, alpha=-1, gamma=2, reduction="none"):
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss
    if reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    return loss


def focal_reference() -> dict:
    """Moderate logits in float64 (where the reference is accurate), binary targets."""
    g = torch.Generator().manual_seed(23)
    z = 4.0 * torch.randn(6, 5, generator=g, dtype=torch.float64)
    y = (torch.rand(6, 5, generator=g, dtype=torch.float64) < 0.4).double()
    out = {"logits": z.tolist(), "targets": y.tolist(), "cases": []}
    for gamma, alpha in ((2.0, 0.25), (0.5, 0.25), (0.25, -1), (1.5, 0.6)):
        zz = z.clone().requires_grad_(True)
        loss = sigmoid_focal_loss(zz, y, alpha=alpha, gamma=gamma, reduction="none")
        loss.sum(dim=1).mean().backward()  # the project reduction: sum over labels, mean over batch
        out["cases"].append({"gamma": gamma, "alpha": alpha, "elementwise": loss.detach().tolist(),
                             "grad": zz.grad.tolist()})
    return out


BUILDERS = {"dbl": dbl_reference, "etu": etu_reference, "lsfa": lsfa_reference, "mlcnc": mlcnc_reference,
            "focal": focal_reference}


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        path = FIXTURES / f"{name}.json"
        path.write_text(json.dumps(build(), indent=1) + "\n")
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
