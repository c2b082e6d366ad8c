"""``rope_mixed`` -- rotary embedding with learnable 2D frequencies per layer and head (RoPE-Mixed).

Paper: Heo et al., "Rotary Position Embedding for Vision Transformer" (ECCV 2024). Site: q, k.
Parameter ``freqs`` of shape (depth, nH, Dh/2, ndim): pair j of head h in layer l rotates by
``sum_a freqs[l, h, j, a] * pos_a`` with ``pos = (x, y)`` -- a direction in the plane, so the pairs can mix the axes.

Init (2D): magnitudes ``m_k = theta^(-4k/Dh)``, k < Dh/4, ``theta = 10``; per layer and head a random angle ``alpha``;
pairs 0 .. Dh/4-1 point along ``alpha``, pairs Dh/4 .. Dh/2-1 along ``alpha + pi/2``
(x-freq ``[m cos a, m cos(a + pi/2)]``, y-freq ``[m sin a, m sin(a + pi/2)]``). In 1D the frequencies start at the
standard ladder ``theta^(-2k/Dh)`` (theta default 10000) and are learned per layer and head.
The frequencies are excluded from weight decay (``no_weight_decay``). Needs Dh % 4 == 0 in 2D.
Resize: positions are scaled into the reference range (``interpolate``) or continue (``extrapolate``); ``ntk`` and
``yarn`` keep them and scale the learned frequencies instead, each axis's component by that axis's scale
(:mod:`vitpe.pe.frequency_scaling`; ``ntk`` reads a frequency's place on the ladder of the initial ``theta``).
Options ``shift``, ``jitter``, ``rescale``: DINOv3's coordinate augmentation in training
(:mod:`vitpe.pe.coord_augment`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.frequencies import geometric_frequencies
from vitpe.pe.frequency_scaling import SCALED_MODES, YARN_ALPHA, YARN_BETA, ScaledFrequencies
from vitpe.pe.grid import Grid
from vitpe.pe.option_checks import positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import RotaryEncoding

DEFAULT_THETA = {1: 10000.0, 2: 10.0}


@register("rope_mixed")
class MixedRope(ScaledFrequencies, RotaryEncoding):
    """RoPE-Mixed. Options: ``theta`` (init magnitude base; default 10 in 2D, 10000 in 1D), ``yarn_alpha`` and
    ``yarn_beta`` (the ``yarn`` mode's ramp), ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    per_layer = True
    layered = True

    def __init__(self, theta: float | None = None, yarn_alpha: float = YARN_ALPHA, yarn_beta: float = YARN_BETA,
                 shift: float | None = None, jitter: float | None = None, rescale: float | None = None,
                 **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        self.theta = positive_number(DEFAULT_THETA[len(self.grid)] if theta is None else theta, f"{self.name}: theta")
        self._init_scaling(yarn_alpha, yarn_beta)
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)
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
        pos = self.cached_geometry(  # the grid's part, built once: on a GPU each of its small kernels is a launch
            ("positions", grid, self.resize), lambda: self.positions_at(grid).flip(-1))  # (N, ndim), columns (x, y)
        freqs = self.freqs.float()  # (depth, nH, Dh/2, ndim), components (x, y)
        if self.resize in SCALED_MODES:
            dim = self.head_dim // len(grid)  # the rotary dimension of one axis of the initial ladder
            freqs = torch.stack([self.scaled(freqs[..., a], grid, len(grid) - 1 - a, base=self.theta, dim=dim)
                                 for a in range(len(grid))], -1)  # component a (x, y) is grid axis ndim - 1 - a
        return torch.einsum("na,lhja->lhnj", pos, freqs)  # (depth, nH, N, Dh/2)
