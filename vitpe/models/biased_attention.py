"""Attention with a learned additive bias on the CPU, faster than SDPA's fallback for a mask that needs a gradient.

``torch.nn.functional.scaled_dot_product_attention`` runs a fused (flash) kernel on the CPU only while the float mask
needs no gradient. A learned bias (``relbias``, ``cpb``) sends it to its math fallback, which materialises the scores
(B, nH, T, T) of the whole batch several times over -- scores, biased scores, probabilities, their gradients -- each
one a pass through memory (at 64 px, batch 128, 4 heads: 134 MB a pass), and also scales q and k separately and
guards its softmax against fully masked rows. A bias, unlike a padding mask, never masks a row, so the plain formula
``softmax(q k^T / sqrt(Dh) + bias) v`` gives the same result and gradients.

:func:`_attend` computes it over the batch in chunks of about :data:`CHUNK_BYTES` of scores, so
every (c, nH, T, T) intermediate of a chunk stays in cache and only the probabilities, kept for the backward, go
through memory (written once, read once). The backward, per chunk:

    dV = P^T dO,   dP = dO V^T,   dS = P * (dP - rowsum(dO * O)),   dQ = dS K / sqrt(Dh),   dK = dS^T Q / sqrt(Dh)

and the bias gradient is ``dS`` summed over the batch (over nothing for a per-sample bias (B, nH, T, T)).

Forward and backward are registered custom operators (``torch.ops.vitpe.chunked_biased_attention`` and its
``_backward``) with their shapes and gradient formula, so ``torch.compile`` calls the same kernels as opaque ones
inside its graph, without a break. Compiled, the plain whole-batch formula that inductor fuses had cost ``relbias``
+26% over no PE in a training step at the CPU recipe's 64 px; through the custom op, +2.9%
(BENCHMARKS.md, "Where the time goes").

Only float32 training on the CPU takes this path (:func:`takes_fast_path`); CUDA, whose fused kernels take a bias
gradient, autocast, and a bias without gradient stay with SDPA.
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


@torch.library.custom_op("vitpe::chunked_biased_attention", mutates_args=())
def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k, v (B, nH, T, Dh), bias (nH, T, T) or (B, nH, T, T) -> output (B, nH, T, Dh) and the probabilities
    (B, nH, T, T) the backward needs, chunk by chunk along the batch."""
    batch, heads, queries, head_dim = q.shape
    step = chunk_size(batch, heads, queries, k.shape[-2], q.element_size())
    scale = head_dim ** -0.5
    bias = bias.contiguous()  # every chunk reads it; the PEs' biases already are (BiasEncoding._prepare)
    out = torch.empty((batch, heads, queries, v.shape[-1]), dtype=q.dtype, device=q.device)
    probs = torch.empty((batch, heads, queries, k.shape[-2]), dtype=q.dtype, device=q.device)
    for start in range(0, batch, step):
        part = slice(start, start + step)
        scores = torch.matmul(q[part] * scale, k[part].transpose(-1, -2))  # (c, nH, T, T)
        scores += bias[part] if bias.dim() == 4 else bias
        torch.softmax(scores, -1, out=probs[part])
        torch.matmul(probs[part], v[part], out=out[part])  # (c, nH, T, Dh)
    return out, probs


@_attend.register_fake
def _attend_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    return q.new_empty((*q.shape[:-1], v.shape[-1])), q.new_empty((*q.shape[:-1], k.shape[-2]))


@torch.library.custom_op("vitpe::chunked_biased_attention_backward", mutates_args=())
def _attend_backward(grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                     probs: torch.Tensor, per_sample: bool
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of q, k, v and of the bias ((B,) nH, T, T; ``per_sample`` says which), chunk by chunk as forward."""
    batch, heads, queries, head_dim = q.shape
    step = chunk_size(batch, heads, queries, k.shape[-2], q.element_size())
    scale = head_dim ** -0.5
    grad_q, grad_k, grad_v = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    grad_bias = torch.zeros(probs.shape if per_sample else probs.shape[1:], dtype=q.dtype, device=q.device)
    for start in range(0, batch, step):
        part = slice(start, start + step)
        p, g = probs[part], grad_out[part]  # (c, nH, T, T), (c, nH, T, Dh)
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


@_attend_backward.register_fake
def _attend_backward_shapes(grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            out: torch.Tensor, probs: torch.Tensor, per_sample: bool
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    grad_bias = probs.new_empty(probs.shape if per_sample else probs.shape[1:])  # ((B,) nH, T, T)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), grad_bias


def _save_for_backward(ctx, inputs: tuple, output: tuple) -> None:
    q, k, v, bias = inputs
    ctx.per_sample = bias.dim() == 4
    ctx.save_for_backward(q, k, v, *output)


def _backward(ctx, grad_out: torch.Tensor, grad_probs: torch.Tensor | None):
    return _attend_backward(grad_out, *ctx.saved_tensors, ctx.per_sample)


_attend.register_autograd(_backward, setup_context=_save_for_backward)


def plain_biased_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The same formula on the whole batch at once, under autograd (a reference for the A/B scripts)."""
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-1, -2)) + bias  # (B, nH, T, T)
    return torch.matmul(scores.softmax(-1), v)  # (B, nH, T, Dh)


def biased_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``softmax(q k^T / sqrt(Dh) + bias) v`` for q, k, v (B, nH, T, Dh) and a bias (nH, T, T) or (B, nH, T, T), with
    its gradients; the caller takes it where :func:`takes_fast_path` says so, SDPA elsewhere."""
    return _attend(q, k, v, bias)[0]
