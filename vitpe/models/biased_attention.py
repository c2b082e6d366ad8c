"""Attention with a learned additive bias on the CPU, faster than SDPA's fallback for a mask that needs a gradient.

``torch.nn.functional.scaled_dot_product_attention`` runs a fused (flash) kernel on the CPU only while the float mask
needs no gradient. A learned bias (``relbias``, ``cpb``) sends it to its math fallback, which materialises the scores
(B, nH, T, T) of the whole batch several times over -- scores, biased scores, probabilities, their gradients -- each
one a pass through memory (at 64 px, batch 128, 4 heads: 134 MB a pass), and also scales q and k separately and
guards its softmax against fully masked rows. A bias, unlike a padding mask, never masks a row, so the plain formula
``softmax(q k^T / sqrt(Dh) + bias) v`` gives the same result and gradients.

:class:`_ChunkedBiasedAttention` computes it over the batch in chunks of about :data:`CHUNK_BYTES` of scores, so
every (c, nH, T, T) intermediate of a chunk stays in cache and only the probabilities, kept for the backward, go
through memory (written once, read once). The backward, per chunk:

    dV = P^T dO,   dP = dO V^T,   dS = P * (dP - rowsum(dO * O)),   dQ = dS K / sqrt(Dh),   dK = dS^T Q / sqrt(Dh)

and the bias gradient is ``dS`` summed over the batch (over nothing for a per-sample bias (B, nH, T, T)).

Only float32 eager training on the CPU takes this path (:func:`takes_fast_path`). Under ``torch.compile`` the plain
formula is written out instead (the compiler fuses it; measured there: ``relbias`` +11.9% over no PE against +15.6%
through SDPA, within the runs' noise of each other); CUDA, whose fused kernels take a bias gradient, autocast, and a
bias without gradient stay with SDPA.
"""

from __future__ import annotations

import torch

#: Bytes of (c, nH, T, T) scores per chunk (see :func:`chunk_size`): about what one core's L2 cache holds.
CHUNK_BYTES = 1 << 20


def takes_fast_path(q: torch.Tensor, bias: torch.Tensor) -> bool:
    """Whether :func:`biased_attention` replaces SDPA for these inputs: a learned float32 bias on the CPU, of shape
    (nH, T, T) or (B, nH, T, T) (other broadcasts stay with SDPA)."""
    shaped = bias.dim() in (3, 4) and bias.shape[-3] == q.shape[1] and (bias.dim() == 3 or bias.shape[0] == q.shape[0])
    return (bias.requires_grad and torch.is_grad_enabled() and q.device.type == "cpu" and q.dtype == torch.float32
            and bias.dtype == torch.float32 and shaped)


def chunk_size(batch: int, heads: int, queries: int, keys: int, element_size: int) -> int:
    """Samples per chunk: as many as keep a chunk's scores within :data:`CHUNK_BYTES`, at least one."""
    return max(1, min(batch, CHUNK_BYTES // (heads * queries * keys * element_size)))


class _ChunkedBiasedAttention(torch.autograd.Function):
    """q, k, v (B, nH, T, Dh), bias (nH, T, T) or (B, nH, T, T) -> (B, nH, T, Dh), chunk by chunk along the batch."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        batch, heads, queries, head_dim = q.shape
        step = chunk_size(batch, heads, queries, k.shape[-2], q.element_size())
        scale = head_dim ** -0.5
        bias = bias.contiguous()  # every chunk reads it; the PEs' biases already are (BiasEncoding._prepare)
        out = torch.empty((batch, heads, queries, v.shape[-1]), dtype=q.dtype, device=q.device)
        probs = []  # per chunk (c, nH, T, T): the only intermediates the backward needs
        for start in range(0, batch, step):
            part = slice(start, start + step)
            scores = torch.matmul(q[part] * scale, k[part].transpose(-1, -2))  # (c, nH, T, T)
            scores += bias[part] if bias.dim() == 4 else bias
            p = torch.softmax(scores, dim=-1)
            torch.matmul(p, v[part], out=out[part])  # (c, nH, T, Dh)
            probs.append(p)
        ctx.bias_shape = bias.shape
        ctx.save_for_backward(q, k, v, out, *probs)
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        q, k, v, out, *probs = ctx.saved_tensors
        scale = q.shape[-1] ** -0.5
        grad_q, grad_k, grad_v = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
        per_sample = len(ctx.bias_shape) == 4
        grad_bias = torch.zeros(ctx.bias_shape, dtype=q.dtype, device=q.device)  # ((B,) nH, T, T)
        start = 0
        for p in probs:  # the chunks of the forward, in order; each knows its own length
            part = slice(start, start + p.shape[0])
            start += p.shape[0]
            g = grad_out[part]  # (c, nH, T, Dh)
            torch.matmul(p.transpose(-1, -2), g, out=grad_v[part])
            # dP, (c, nH, T, T); a per-sample bias's gradient is dS itself, so it is built in place there
            grad_scores = torch.matmul(g, v[part].transpose(-1, -2), out=grad_bias[part] if per_sample else None)
            grad_scores -= (g * out[part]).sum(-1, keepdim=True)  # - rowsum(dO * O) = - rowsum(P * dP)
            grad_scores *= p  # dS
            if not per_sample:  # (nH, T, T); a one-sample chunk is added as it is: a reduction over one sample
                # would zero-fill its output and copy it, two passes that cost ~13% of the attention at 64 px
                grad_bias += grad_scores[0] if len(grad_scores) == 1 else grad_scores.sum(0)
            torch.matmul(grad_scores, k[part], out=grad_q[part]).mul_(scale)
            torch.matmul(grad_scores.transpose(-1, -2), q[part], out=grad_k[part]).mul_(scale)
        return grad_q, grad_k, grad_v, grad_bias


def plain_biased_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The same formula on the whole batch at once, under autograd: what ``torch.compile`` fuses."""
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-1, -2)) + bias  # (B, nH, T, T)
    return torch.matmul(scores.softmax(-1), v)  # (B, nH, T, Dh)


def biased_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``softmax(q k^T / sqrt(Dh) + bias) v`` for q, k, v (B, nH, T, Dh) and a bias (nH, T, T) or (B, nH, T, T), with
    its gradients; the caller takes it where :func:`takes_fast_path` says so, SDPA elsewhere."""
    if torch.compiler.is_compiling():
        return plain_biased_attention(q, k, v, bias)
    return _ChunkedBiasedAttention.apply(q, k, v, bias)
