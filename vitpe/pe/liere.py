"""``liere`` -- LieRE: rotations ``exp(sum_a p_a A_a)`` of free learned skew-symmetric generators, one per axis.

Paper: Ostmeier et al., "LieRE: Lie Rotational Positional Encodings" (ICML 2025). Site: q, k. Parameter ``weight`` of
shape (depth, nH, ndim, Dh/b, b, b): per layer, head and axis, block-diagonal generators ``A_a = F_a - F_a^T``
(:mod:`vitpe.pe.generator_rope`, which builds the rotations, (depth, nH, P + N, Dh/b, b, b), once per forward).
The generators need not commute, so the score ``(R(p) q) . (R(r) k)`` need not depend on ``r - p`` alone: LieRE is not
relative in general (ComRoPE's point). ``F`` starts as N(0, ``init_std``^2), default 1. Options ``block_size``
(default 8; the paper's dense generators are ``block_size`` = head dim), ``init_std``, and ``shift``, ``jitter``,
``rescale`` (coordinate augmentation).
"""

from __future__ import annotations


import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.generator_rope import GeneratorRope, skew
from vitpe.pe.registry import register


@register("liere")
class LieRE(GeneratorRope):
    """LieRE: a learned block-diagonal skew-symmetric generator per axis, layer and head. Options: ``block_size``
    (default 8), ``init_std`` (default 1), ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    def __init__(self, block_size: int = 8, init_std: float = 1.0, shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None, **common: Unpack[CommonArgs]) -> None:
        super().__init__(block_size, init_std, shift, jitter, rescale, **common)
        shape = (self.depth, self.heads, len(self.grid), self.blocks, self.block_size, self.block_size)
        self.weight = nn.Parameter(torch.randn(shape) * self.init_std)

    def generators(self) -> torch.Tensor:
        return skew(self.weight)
