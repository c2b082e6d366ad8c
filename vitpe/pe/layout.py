"""Memory order of the attention's stacked projections, kept through the qk-site hooks and their gradients.

The attention views its qkv Linear's output (B, T, 3 D) as ``qkv`` (3, B, nH, T, Dh): a permutation, no copy. Autograd's
backward of ``qkv.unbind(0)`` stacks the three gradients into a *contiguous* (3, B, nH, T, Dh) tensor, which the
Linear's backward then has to copy back into (B, T, 3 D) order -- one extra pass over 3 B T D floats per layer (timm's
attention pays it too). Unbinding along the memory order instead makes that stack land in the Linear's order. (The
fused rotation of :mod:`vitpe.pe.rotary` writes its output and gradient in this order too, by its own means.)
"""

from __future__ import annotations

import torch


def memory_order(x: torch.Tensor) -> list[int]:
    """The dimensions of ``x`` from outermost to innermost in memory (largest stride first; ties keep their order)."""
    return sorted(range(x.dim()), key=lambda d: -x.stride(d))


def _inverse(order: list[int]) -> list[int]:
    """The permutation that undoes ``order``."""
    return sorted(range(len(order)), key=order.__getitem__)


def unbind_in_memory_order(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``x.unbind(0)``, with the backward's stacked gradient laid out in ``x``'s memory order instead of contiguous."""
    order = memory_order(x)
    rest = [d for d in order if d != 0]  # the pieces' dimensions, outermost first (as dims of x)
    back = _inverse([d - 1 for d in rest])  # from memory order to the pieces' logical order
    return tuple(piece.permute(back) for piece in x.permute(order).unbind(order.index(0)))
