"""``peg`` -- CPVT's conditional position encoding generator: a depthwise convolution over the token grid.

Paper: Chu et al., "Conditional Positional Encodings for Vision Transformers" (ICLR 2023). Site: tokens, but a
*function* of the tokens rather than a table. Parameters: one depthwise ``k x k`` convolution (``Conv1d`` on 1D grids)
with bias, zero padding, in ``proj``; tokens keep their shape (B, P + N, D).

Before block ``before_block`` (default 1, i.e. right after the first block, where CPVT puts it) the grid tokens
(B, N, D) are laid out as (B, D, gh, gw), convolved, and added back residually; prefix tokens are untouched. The zero
padding lets tokens near the border infer where they are, so it works at any grid in either resize mode.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vitpe.pe.base import CommonArgs, PositionEncoding, Unpack
from vitpe.pe.grid import Grid
from vitpe.pe.registry import register


@register("peg")
class PositionEncodingGenerator(PositionEncoding):
    """CPVT PEG. Options: ``kernel_size`` (odd, default 3), ``before_block`` (default: 1, after the first block as
    CPVT places it; 0 in a model of one block)."""

    site = "tokens"
    layered = True  # the block it acts before

    def __init__(self, kernel_size: int = 3, before_block: int | None = None, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if before_block is None:
            before_block = min(1, self.depth - 1)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"peg kernel_size must be a positive odd number, got {kernel_size}")
        if not 0 <= before_block < self.depth:
            raise ValueError(f"peg before_block must be in [0, depth={self.depth}), got {before_block}")
        self.before_block = before_block
        conv = nn.Conv1d if len(self.grid) == 1 else nn.Conv2d
        self.proj = conv(self.dim, self.dim, kernel_size, padding=kernel_size // 2, groups=self.dim)

    def no_weight_decay(self) -> set[str]:
        return {"proj.bias"}  # the conv kernel is an ordinary weight; CPVT decays it

    def _prepare(self, grid: Grid) -> Grid:
        return grid

    def add_to_tokens(self, x: torch.Tensor, state: Grid, layer: int) -> torch.Tensor:
        if layer != self.before_block:
            return x
        self.check_tokens(x.shape[1], self.num_prefix_tokens + math.prod(state), "x")
        prefix, tokens = x[:, : self.num_prefix_tokens], x[:, self.num_prefix_tokens:]  # (B, P, D), (B, N, D)
        feature_map = tokens.transpose(1, 2).reshape(x.shape[0], self.dim, *state)  # (B, D, *grid)
        tokens = tokens + self.proj(feature_map).flatten(2).transpose(1, 2)  # (B, N, D)
        return torch.cat((prefix, tokens), dim=1)  # (B, P + N, D)
