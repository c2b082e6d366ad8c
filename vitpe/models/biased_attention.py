"""Attention with a learned additive bias on the CPU, faster than SDPA's fallback for a mask that needs a gradient.

``torch.nn.functional.scaled_dot_product_attention`` runs a fused (flash) kernel on the CPU only while the float mask
needs no gradient. A learned bias (``relbias``, ``cpb``) sends it to its math fallback, which materialises the scores
(B, nH, T, T) like any explicit attention but also scales q and k separately and guards its softmax against fully
masked rows (three extra passes over the scores). A bias, unlike a padding mask, never masks a row, so the plain
formula ``softmax(q k^T / sqrt(Dh) + bias) v`` under autograd gives the same result and gradients with fewer passes.
Measured (``BENCHMARKS.md``), that pays at short sequences -- at 65 tokens (32 px, patch 4) it cut ``relbias``'s
training-step overhead over no PE from ~11% to 2.5-4% -- and not at long ones (257 tokens: the same or slower than the
fallback), so it is taken up to :data:`EXPLICIT_UP_TO` tokens. The fused-kernel variant with a recomputed bias
gradient was tried and not adopted (``BENCHMARKS.md``).

Only float32 training on the CPU takes this path, under ``torch.compile`` too (measured there: ``relbias`` +11.9% over
no PE against +15.6% through SDPA, within the runs' noise of each other); everything else (CUDA, whose fused kernels
take a bias gradient; autocast; a bias without gradient) stays with SDPA.
"""

from __future__ import annotations

import torch

EXPLICIT_UP_TO = 128  # tokens; measured: a clear gain at 65, even at 145, none at 257 (1 CPU thread)


def takes_fast_path(q: torch.Tensor, bias: torch.Tensor) -> bool:
    """Whether :func:`biased_attention` replaces SDPA for these inputs (learned float32 bias on the CPU, at most
    :data:`EXPLICIT_UP_TO` tokens)."""
    return (bias.requires_grad and torch.is_grad_enabled() and q.device.type == "cpu" and q.dtype == torch.float32
            and bias.dtype == torch.float32 and q.shape[-2] <= EXPLICIT_UP_TO)


def biased_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``softmax(q k^T / sqrt(Dh) + bias) v`` for q, k, v (B, nH, T, Dh) and a bias (nH, T, T) or (B, nH, T, T), with
    autograd's gradients; the caller takes it where :func:`takes_fast_path` says so, SDPA elsewhere."""
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-1, -2)) + bias  # (B, nH, T, T)
    return torch.matmul(scores.softmax(-1), v)  # (B, nH, T, Dh)
