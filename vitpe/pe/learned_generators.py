"""``liere`` and ``comrope`` -- rotary PEs whose rotation is the exponential of learned skew-symmetric generators.

Papers: Ostmeier et al., "LieRE: Lie Rotational Positional Encodings" (ICML 2025); Yu et al., "ComRoPE: Scalable and
Robust Rotary Position Embedding Parameterized by Trainable Commuting Angle Matrices" (CVPR 2025; reference code
Longin-Yu/ComRoPE). Site: q, k. Parameters per layer and head; a rotation per grid cell, of shape
(depth, nH, P + N, Dh/b, b, b), is built once per forward.

A cell at position ``p`` (ndim coordinates) rotates q and k by ``R(p) = exp(sum_a p_a A_a)``, with ``A_a`` skew-symmetric
(so ``R(p)`` is orthogonal) and block-diagonal: Dh/b blocks of ``b x b`` (``block_size``, default 8; b = 2 with fixed
generators is RoPE). The forms differ in their generators:

* ``liere``: each axis its own learned blocks ``A_a = F_a - F_a^T``. They need not commute, so the score
  ``(R(p) q) . (R(r) k)`` need not depend on ``r - p`` alone: LieRE is not relative in general.
* ``comrope`` with ``form="ap"`` (axis-partitioned): the blocks are split between the axes, each block turned by one
  axis only -- generators on disjoint blocks commute. ``form="ld"`` (linearly dependent): one learned block ``S`` per
  block, each axis scaling it, ``A_a = theta_a S`` -- multiples of one matrix commute. With commuting generators
  ``R(p)^T R(r) = R(r - p)``: the score depends on the offset alone, as RoPE's does.

Positions are in units of the reference grid's side (``p / g_ref`` per axis, the reference grid spanning [0, 1)), as
in ComRoPE's code, so that the generators' scale does not depend on the training grid. Generators start as
``F ~ N(0, init_std^2)`` (default 1; LD's axis scales ``N(0, 1)``). Prefix tokens are not rotated.
Resize: positions squeezed into the reference range (``interpolate``) or continued (``extrapolate``). Options
``shift``, ``jitter``, ``rescale``: DINOv3's coordinate augmentation in training (:mod:`vitpe.pe.coord_augment`).

Cost: a matrix exponential per (layer, head, cell, block) in every training step, and a ``b x b`` product per channel
block of q and k. For commuting generators, a closed form would do with one eigendecomposition per block instead
(not done here: at b = 8 the exponential is not what a step's time goes to; BENCHMARKS.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vitpe.pe.base import PositionEncoding, pad_prefix
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.grid import Grid
from vitpe.pe.option_checks import non_negative_number
from vitpe.pe.registry import register
from vitpe.pe.sites import _autocast_off

#: A generator RoPE's per-forward state: each layer's rotations, (nH, P + N, Dh/b, b, b).
GeneratorState = tuple[torch.Tensor, ...]


def skew(matrices: torch.Tensor) -> torch.Tensor:
    """``F - F^T`` over the last two dimensions: a skew-symmetric matrix from any square one."""
    return matrices - matrices.transpose(-1, -2)


def rotate_blocks(x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    """``x`` (..., nH, T, Dh) with each block of ``b`` channels multiplied by its matrix in ``rotations``
    (nH, T, Dh/b, b, b); same shape as ``x``."""
    blocks = x.reshape(*x.shape[:-1], rotations.shape[-3], rotations.shape[-1])  # (..., nH, T, Dh/b, b)
    turned = (rotations.to(x.dtype) @ blocks.unsqueeze(-1)).squeeze(-1)  # (..., nH, T, Dh/b, b)
    return turned.flatten(-2)  # (..., nH, T, Dh)


class GeneratorRope(PositionEncoding):
    """q,k site: ``R(p) = exp(sum_a p_a A_a)`` with block-diagonal skew-symmetric generators from :meth:`generators`,
    shape (depth, nH, ndim, Dh/b, b, b)."""

    site = "qk"

    def __init__(self, block_size: int = 8, init_std: float = 1.0, shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None, **common: Any) -> None:
        super().__init__(**common)
        if not isinstance(block_size, int) or block_size < 2 or self.head_dim % block_size:
            raise ValueError(f"{self.name}: block_size must be a whole number >= 2 dividing the head dim "
                             f"({self.head_dim}), got {block_size!r}")
        self.block_size = block_size
        self.blocks = self.head_dim // block_size
        self.init_std = non_negative_number(init_std, f"{self.name}: init_std")
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)

    def generators(self) -> torch.Tensor:
        raise NotImplementedError

    def rotations(self, positions: torch.Tensor) -> torch.Tensor:
        """``R(p)`` at ``positions`` (N, ndim) in reference-side units: (depth, nH, N, Dh/b, b, b)."""
        A = self.generators()  # (depth, nH, ndim, Dh/b, b, b)
        exponent = torch.einsum("na,lhakij->lhnkij", positions, A)  # (depth, nH, N, Dh/b, b, b)
        return torch.linalg.matrix_exp(exponent.contiguous())  # (torch's matrix_exp fails on some strided inputs)

    def _prepare(self, grid: Grid) -> GeneratorState:
        with _autocast_off(self.device):
            side = torch.tensor(self.grid, dtype=torch.float32, device=self.device)
            rotations = self.rotations(self.positions_at(grid) / side).float()  # (depth, nH, N, Dh/b, b, b)
        eye = torch.eye(self.block_size, device=self.device).expand(*rotations.shape[:2], self.num_prefix_tokens,
                                                                    self.blocks, -1, -1)
        return tuple(torch.cat([eye, rotations], dim=2).unbind(0))  # depth x (nH, P + N, Dh/b, b, b)

    def rotate(self, x: torch.Tensor, state: GeneratorState, layer: int) -> torch.Tensor:
        self.check_layer(layer)
        self.check_tokens(x.shape[-2], state[layer].shape[-4], "x")
        return rotate_blocks(x, state[layer])


@register("liere")
class LieRE(GeneratorRope):
    """LieRE: a learned block-diagonal skew-symmetric generator per axis, layer and head. Options: ``block_size``
    (default 8), ``init_std`` (default 1), ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    def __init__(self, block_size: int = 8, init_std: float = 1.0, shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None, **common: Any) -> None:
        super().__init__(block_size, init_std, shift, jitter, rescale, **common)
        shape = (self.depth, self.heads, len(self.grid), self.blocks, self.block_size, self.block_size)
        self.weight = nn.Parameter(torch.randn(shape) * self.init_std)

    def generators(self) -> torch.Tensor:
        return skew(self.weight)


@register("comrope")
class ComRoPE(GeneratorRope):
    """ComRoPE: commuting learned generators. Options: ``form`` (``ap``: each block turned by one axis; ``ld``: one
    block per block scaled by each axis; default ``ld``), ``block_size`` (default 8), ``init_std`` (default 1),
    ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    def __init__(self, form: str = "ld", block_size: int = 8, init_std: float = 1.0, shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None, **common: Any) -> None:
        super().__init__(block_size, init_std, shift, jitter, rescale, **common)
        if form not in ("ap", "ld"):
            raise ValueError(f"comrope: form must be 'ap' (axis-partitioned) or 'ld' (linearly dependent), got {form!r}")
        self.form = form
        ndim, b = len(self.grid), self.block_size
        self.weight = nn.Parameter(torch.randn(self.depth, self.heads, self.blocks, b, b) * self.init_std)
        if form == "ld":
            self.axis_scales = nn.Parameter(torch.randn(self.depth, 1, ndim, self.blocks))  # theta_a per block
        else:
            if self.blocks % ndim:
                raise ValueError(f"comrope: form 'ap' splits the {self.blocks} blocks of {b} channels between "
                                 f"{ndim} axes; choose a block_size that makes them divisible by {ndim}")
            owner = torch.arange(self.blocks) // (self.blocks // ndim)  # (Dh/b,): the axis each block turns with
            self.register_buffer("axis_of_block", (owner[None, :] == torch.arange(ndim)[:, None]).float(),
                                 persistent=False)  # (ndim, Dh/b)

    def generators(self) -> torch.Tensor:
        S = skew(self.weight)[:, :, None]  # (depth, nH, 1, Dh/b, b, b)
        scales = self.axis_scales if self.form == "ld" else self.axis_of_block  # (..., ndim, Dh/b)
        return S * scales[..., None, None]  # (depth, nH, ndim, Dh/b, b, b)
