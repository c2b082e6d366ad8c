"""``comrope`` -- ComRoPE: rotations ``exp(sum_a p_a A_a)`` of learned skew-symmetric generators that commute.

Paper: Yu et al., "ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized by Trainable Commuting Angle
Matrices" (CVPR 2025; reference code Longin-Yu/ComRoPE). Site: q, k. Parameter ``weight`` of shape
(depth, nH, Dh/b, b, b), one block per block of channels, and with ``form="ld"`` ``axis_scales`` (depth, 1, ndim,
Dh/b). Rotations (depth, nH, P + N, Dh/b, b, b) as :mod:`vitpe.pe.generator_rope` builds them.

* ``form="ap"`` (axis-partitioned): the blocks are split between the axes, each block turned by one axis only --
  generators on disjoint blocks commute.
* ``form="ld"`` (linearly dependent; default): one learned block ``S`` per block, each axis scaling it,
  ``A_a = theta_a S`` -- multiples of one matrix commute.

With commuting generators ``R(p)^T R(r) = R(r - p)``: the score depends on the offset alone, as RoPE's does.
``S = F - F^T`` with ``F`` ~ N(0, ``init_std``^2) (default 1), LD's axis scales N(0, 1). Options ``form``,
``block_size`` (default 8), ``init_std``, and ``shift``, ``jitter``, ``rescale`` (coordinate augmentation).

Cost: because the generators commute, ``R(p) = prod_a exp(p_a A_a)``, so the exponentials are taken per distinct
coordinate of each axis -- g_h + g_w of them on a g_h x g_w grid instead of g_h * g_w -- and multiplied per cell (LD);
with AP each block has one axis, so its exponentials are only that axis's and no product is needed. A closed form
through one eigendecomposition per block is not used: the eigenvectors' gradient is unstable where eigenvalues meet, as
a skew block's pairs +-i lambda do at lambda = 0.
"""

from __future__ import annotations

from functools import reduce

import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.generator_rope import GeneratorRope, skew
from vitpe.pe.registry import register


@register("comrope")
class ComRoPE(GeneratorRope):
    """ComRoPE: commuting learned generators. Options: ``form`` (``ap``: each block turned by one axis; ``ld``: one
    block per block scaled by each axis; default ``ld``), ``block_size`` (default 8), ``init_std`` (default 1),
    ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    def __init__(self, form: str = "ld", block_size: int = 8, init_std: float = 1.0, shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None, **common: Unpack[CommonArgs]) -> None:
        super().__init__(block_size, init_std, shift, jitter, rescale, **common)
        if form not in ("ap", "ld"):
            raise ValueError(f"comrope: form must be 'ap' (axis-partitioned) or 'ld' (linearly dependent), "
                             f"got {form!r}")
        self.form = form
        ndim, b = len(self.grid), self.block_size
        self.weight = nn.Parameter(torch.randn(self.depth, self.heads, self.blocks, b, b) * self.init_std)
        if form == "ld":
            self.axis_scales = nn.Parameter(torch.randn(self.depth, 1, ndim, self.blocks))  # theta_a per block
        else:
            if self.blocks % ndim:
                raise ValueError(f"comrope: form 'ap' splits the {self.blocks} blocks of {b} channels between "
                                 f"{ndim} axes; choose a block_size that makes them divisible by {ndim}")
            axis_of_block = torch.zeros(ndim, self.blocks)  # (ndim, Dh/b): 1 where an axis turns a block
            for axis in range(ndim):
                axis_of_block[axis, self.blocks_of_axis(axis)] = 1.0
            self.register_buffer("axis_of_block", axis_of_block, persistent=False)

    def generators(self) -> torch.Tensor:
        S = skew(self.weight)[:, :, None]  # (depth, nH, 1, Dh/b, b, b)
        scales = self.axis_scales if self.form == "ld" else self.axis_of_block  # (..., ndim, Dh/b)
        return S * scales[..., None, None]  # (depth, nH, ndim, Dh/b, b, b)

    def rotations(self, positions: torch.Tensor) -> torch.Tensor:
        """``R(p) = prod_a exp(p_a A_a)`` at ``positions`` (N, ndim): (depth, nH, N, Dh/b, b, b), an exponential per
        distinct coordinate of an axis (the generators commute, so the order of the product does not matter)."""
        A = self.generators()  # (depth, nH, ndim, Dh/b, b, b)
        per_axis = []
        for axis in range(positions.shape[1]):
            if positions.is_meta:  # shapes only: no values to find the distinct ones of
                values, cell_value = positions[:, axis], torch.arange(len(positions), device=positions.device)
            else:
                values, cell_value = torch.unique(positions[:, axis], return_inverse=True)  # (g,), (N,)
            blocks = self.blocks_of_axis(axis)
            exponent = values[:, None, None, None] * A[:, :, axis, None, blocks]  # (depth, nH, g, blocks, b, b)
            per_axis.append(torch.linalg.matrix_exp(exponent.contiguous())[:, :, cell_value])  # (.., N, blocks, b, b)
        if self.form == "ap":
            return torch.cat(per_axis, dim=3)  # each axis turned its own blocks: (depth, nH, N, Dh/b, b, b)
        return reduce(torch.matmul, per_axis)  # (depth, nH, N, Dh/b, b, b)

    def blocks_of_axis(self, axis: int) -> slice:
        """The blocks that ``axis`` turns: all of them (LD), or its own contiguous share (AP)."""
        if self.form == "ld":
            return slice(None)
        share = self.blocks // len(self.grid)
        return slice(axis * share, (axis + 1) * share)
