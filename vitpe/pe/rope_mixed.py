"""``rope_mixed`` -- rotary embedding with learnable 2D frequencies per layer and head (RoPE-Mixed).

Paper: Heo et al., "Rotary Position Embedding for Vision Transformer" (ECCV 2024). Site: q, k.
Parameter ``freqs`` of shape (depth, nH, Dh/2, ndim): pair j of head h in layer l rotates by
``sum_a freqs[l, h, j, a] * pos_a`` with ``pos = (x, y)`` -- a direction in the plane, so the pairs can mix the axes.

Init (2D): magnitudes ``m_k = theta^(-4k/Dh)``, k < Dh/4, ``theta = 10``; per layer and head a random angle ``alpha``;
pairs 0 .. Dh/4-1 point along ``alpha``, pairs Dh/4 .. Dh/2-1 along ``alpha + pi/2``
(x-freq ``[m cos a, m cos(a + pi/2)]``, y-freq ``[m sin a, m sin(a + pi/2)]``). In 1D the frequencies start at the
standard ladder ``theta^(-2k/Dh)`` (theta default 10000) and are learned per layer and head.
The frequencies are excluded from weight decay (``no_weight_decay``). Needs Dh % 4 == 0 in 2D.
Resize: positions are scaled into the reference range (``interpolate``) or continue (``extrapolate``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from vitpe.pe.frequencies import geometric_frequencies
from vitpe.pe.grid import Grid, grid_positions
from vitpe.pe.option_checks import positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import RotaryEncoding

DEFAULT_THETA = {1: 10000.0, 2: 10.0}


@register("rope_mixed")
class MixedRope(RotaryEncoding):
    """RoPE-Mixed. Options: ``theta`` (init magnitude base; default 10 in 2D, 10000 in 1D)."""

    per_layer = True

    def __init__(self, theta: float | None = None, **common: Any) -> None:
        super().__init__(**common)
        self.theta = positive_number(DEFAULT_THETA[len(self.grid)] if theta is None else theta, f"{self.name}: theta")
        self.freqs = nn.Parameter(self._initial_freqs())  # (depth, nH, Dh/2, ndim)

    def _initial_freqs(self) -> torch.Tensor:
        ndim, half = len(self.grid), self.head_dim // 2
        if ndim == 1:
            ladder = geometric_frequencies(half, self.theta)  # (Dh/2,)
            return ladder.expand(self.depth, self.heads, half)[..., None].clone()  # (depth, nH, Dh/2, 1)
        mags = geometric_frequencies(half // 2, self.theta)  # (Dh/4,)
        alpha = torch.rand(self.depth, self.heads, 1) * 2 * math.pi  # (depth, nH, 1)
        angles = torch.cat((alpha.expand(-1, -1, half // 2), alpha.expand(-1, -1, half // 2) + math.pi / 2), -1)
        mags = torch.cat((mags, mags))  # (Dh/2,)
        return torch.stack((mags * angles.cos(), mags * angles.sin()), dim=-1)  # (depth, nH, Dh/2, 2): (x, y)

    def phases(self, grid: Grid) -> torch.Tensor:
        pos = self.cached(  # the grid's part, built once: on a GPU each of its small kernels is a launch per step
            ("positions", grid, self.resize),
            lambda: grid_positions(grid, self.grid, self.resize, self.device).flip(-1),  # (N, ndim), columns (x, y)
        )
        return torch.einsum("na,lhja->lhnj", pos, self.freqs.float())  # (depth, nH, N, Dh/2)
