r"""CD-GTMLL's per-pair terms (Eq. 6): Bernoulli divergences between a player and its peers,
and the fused autograd functions of the overlap-pair curiosity and the per-label
log-likelihood sums. Values and closed-form gradients are tested against autograd in
``tests/unit/methods/test_cdgtmll.py``; the model that uses them is :mod:`cdgtmll.methods.cdgtmll.model`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cdgtmll.nn import device_sync

DIVERGENCES = ("jsd", "kl")
#: below this many elements the curiosity terms use torch's ``softplus``/``log1p`` kernels (the
#: direct form of the formulas): there the fast forms' extra passes cost more in per-op overhead
#: than the scalar loop they avoid (Yeast's 14 labels: 256 x 11 singly-covered pairs)
FAST_MIN_ELEMENTS = 32768


#: above this logit ``sigmoid(-z)`` leaves float32's normal range (it underflows past 87.3)
_LOG_SIGMOID_SAFE = 80.0


def neg_softplus_value(z: torch.Tensor, sn: torch.Tensor, z_max: torch.Tensor | None = None) -> torch.Tensor:
    """``-softplus(z) = log(sigmoid(-z))`` from ``sn = sigmoid(-z)`` in one more pass, for
    the *values* of the log-likelihood sums only (their gradients are closed-form and do not
    read it). Absolute error at most about 1.2e-7 (float32's epsilon: ``sigmoid(-z) = 1 / (1 +
    e^z)`` rounds ``1 + e^z`` for ``z << 0``) plus two ulps of the value, the size of the
    rounding of the batch sums it enters; where ``sigmoid(-z)`` would leave the normal range
    (``z > 80``; ``z_max`` if the caller has it) the entries are ``-softplus(z)`` exactly.

    One pass where the Goldberg form of softplus (``max(z, 0) + log1p(exp(-|z|))`` from
    ``exp``/``log``, used here before) took 12; torch's ``F.softplus`` runs a scalar loop on
    this project's CPUs (torch 2.14, AVX-512: about 10 ns per element against under 1 ns for
    ``exp``/``log``/``sigmoid``)."""
    out = torch.log(sn)
    # on the CPU the test skips the pass when no entry is that large; elsewhere reading it would
    # wait for the device, and the pass gives the same values (entries <= 80 keep ``out``)
    if not device_sync.host_reads_free(z.device) or bool(
            (z.max() if z_max is None else z_max.max()) > _LOG_SIGMOID_SAFE):
        big = z > _LOG_SIGMOID_SAFE
        out = torch.where(big, -F.softplus(z.masked_fill(~big, 0.0)), out)
    return out


def _neg_entropy_logit(z: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """p log p + (1-p) log(1-p) for p = sigmoid(z), via log(1-p) = logsigmoid(-z)."""
    return F.logsigmoid(-z) + p * z


def _neg_entropy(q: torch.Tensor) -> torch.Tensor:
    return q * torch.log(q) + (1 - q) * torch.log1p(-q)


def bernoulli_jsd(z: torch.Tensor, q: torch.Tensor, p: torch.Tensor | None = None) -> torch.Tensor:
    """Element-wise JSD(Bern(sigmoid(z)) || Bern(q)) in nats, in [0, log 2].

    ``JSD = H(m) - (H(p) + H(q)) / 2`` with ``m = (p + q) / 2``; ``q`` must lie in
    (0, 1) (callers clip it to [eps, 1-eps]); ``p = sigmoid(z)`` may be passed if known.
    """
    p = torch.sigmoid(z) if p is None else p
    m = 0.5 * (p + q)
    return 0.5 * (_neg_entropy_logit(z, p) + _neg_entropy(q)) - _neg_entropy(m)


def bernoulli_kl(z: torch.Tensor, q: torch.Tensor, p: torch.Tensor | None = None) -> torch.Tensor:
    """Element-wise KL(Bern(sigmoid(z)) || Bern(q)) in nats; ``q`` in (0, 1)."""
    p = torch.sigmoid(z) if p is None else p
    return _neg_entropy_logit(z, p) - p * torch.log(q) - (1 - p) * torch.log1p(-q)


DIVERGENCE_FNS = {"jsd": bernoulli_jsd, "kl": bernoulli_kl}


class _OverlapCuriosity(torch.autograd.Function):
    """Curiosity terms of the overlap pairs from one pass over their logits ``z`` [B, |O|]:
    per-pair batch sums of the Bernoulli log-likelihood (as :class:`_LogLikColumns`) and
    ``sum D(sigmoid(z), q)`` against the detached peers ``q`` (logits ``zq``).

    Values equal ``DIVERGENCE_FNS[kind](z, q).sum()`` and the log-likelihood sums; the
    gradient w.r.t. ``z`` is closed-form, computed in the forward pass:
    ``dJSD/dz = p(1-p)(z - logit(m))/2`` (``m = (p+q)/2``), ``dKL/dz = p(1-p)(z - zq)``,
    ``dll/dz = y - p``. Only ``z`` receives a gradient. ``p`` = ``sigmoid(z)`` may be passed
    when the caller has it (the fusion needs it too).

    Complements without ``log1p`` (a scalar loop here, as ``F.softplus``: :func:`neg_softplus_value`): ``1 - q =
    sigmoid(-zq)`` and ``1 - m = ((1 - p) + (1 - q)) / 2`` from ``sigmoid(-z)``, each exact to
    an ulp, then ``log``. Against the direct ``log1p`` form values and gradients agree to
    float32 tolerance (tested); 2.3x faster on Delicious' 392 overlap pairs. Below
    :data:`FAST_MIN_ELEMENTS` the direct form is used.
    """

    @staticmethod
    def forward(ctx, z, y, q, zq, kind, p=None):  # noqa: D102
        p = torch.sigmoid(z) if p is None else p
        fast = z.numel() >= FAST_MIN_ELEMENTS
        pc = torch.sigmoid(-z) if fast else None  # 1 - p
        # -softplus(z) = log(1 - p): values only (the gradients below do not read it)
        sp_sum = (-neg_softplus_value(z, pc).sum(0)) if fast else F.softplus(z).sum(0)
        ll = (y * z).sum(0) - sp_sum
        # -H(p) = p z - softplus(z);  -H(q) = q zq + log(1-q)
        neg_h_p = torch.sum(p * z) - sp_sum.sum()
        qc = torch.sigmoid(-zq) if fast else None  # 1 - q
        l1q = torch.log(qc) if fast else torch.log1p(-q)
        if kind == "jsd":
            m = torch.lerp(p, q, 0.5)
            l1m = torch.log(torch.lerp(pc, qc, 0.5)) if fast else torch.log1p(-m)  # log(1 - m)
            logit_m = torch.log(m).sub_(l1m)
            neg_h_q = torch.sum(q * zq) + l1q.sum()
            div = 0.5 * (neg_h_p + neg_h_q) - (torch.sum(m * logit_m) + l1m.sum())
            dp = (z - logit_m).mul_(0.5)
        else:
            div = neg_h_p - torch.sum(p * zq) - l1q.sum()
            dp = z - zq
        ctx.save_for_backward(y - p, dp.mul_(p).mul_(1 - p))
        return ll, div

    @staticmethod
    def backward(ctx, g_ll, g_div):  # noqa: D102
        r, d_div = ctx.saved_tensors
        return torch.addcmul(r * g_ll, d_div, g_div), None, None, None, None, None


class _LogLikColumns(torch.autograd.Function):
    """Per-label (column) batch sums of the Bernoulli log-likelihood of ``sigmoid(z)``:
    ``ll[k] = sum_b y log s + (1-y) log(1-s) = sum_b y z - softplus(z)``, and ``llc``,
    the same sums with ``s`` clipped to ``[sigmoid(-hi), sigmoid(hi)]`` (= ``z`` clamped
    to ``[-hi, hi]``), whose gradient is 0 on the clipped entries. Clipped entries are
    rare and handled sparsely (columns found by a column-wise min/max) on the CPU; on a device
    where finding them would wait for it (``nonzero``; :mod:`cdgtmll.nn.device_sync`) the
    correction is one dense masked pass instead (same sums up to their rounding). Gradient:
    ``(y - s) * (g_ll + g_llc * unclipped)``, what autograd gives for BCE-with-logits on
    ``z`` and on ``clamp(z)``, in two element-wise passes.
    """

    @staticmethod
    def forward(ctx, z, y, hi):  # noqa: D102
        s = torch.sigmoid(z)
        z_min, z_max = z.amin(0), z.amax(0)
        if z.numel() >= FAST_MIN_ELEMENTS:  # values only: the gradient does not read them
            ll = torch.addcmul(neg_softplus_value(z, torch.sigmoid(-z), z_max), y, z).sum(0)
        else:
            ll = (y * z).sum(0) - F.softplus(z).sum(0)
        if not device_sync.host_reads_free(z.device):  # no data-dependent shapes (nonzero waits for the device)
            clipped = z.abs() > hi
            zc = z.clamp(-hi, hi)
            delta = (y * zc - F.softplus(zc)) - (y * z - F.softplus(z))
            ctx.save_for_backward(y - s, clipped)
            ctx.idx = None
            return ll, ll + torch.where(clipped, delta, 0.0).sum(0)
        llc = ll.clone()
        cols = torch.logical_or(z_min < -hi, z_max > hi).nonzero().flatten()
        idx = None
        if cols.numel():
            zsub = z.index_select(1, cols)
            rows, j = (zsub.abs() > hi).nonzero(as_tuple=True)
            idx = (rows, cols[j])
            zs, ys = z[idx], y[idx]
            zc = zs.clamp(-hi, hi)
            llc.index_add_(0, idx[1], (ys * zc - F.softplus(zc)) - (ys * zs - F.softplus(zs)))
        ctx.save_for_backward(y - s)
        ctx.idx = idx
        return ll, llc

    @staticmethod
    def backward(ctx, g_ll, g_llc):  # noqa: D102
        r, *clipped = ctx.saved_tensors
        if clipped:  # the forward's dense form: g_llc only where z was not clipped
            return r * (g_ll + g_llc * clipped[0].logical_not()), None, None
        grad = r * (g_ll + g_llc)
        if ctx.idx is not None:
            idx = ctx.idx
            grad[idx] -= r[idx] * g_llc[idx[1]]
        return grad, None, None
