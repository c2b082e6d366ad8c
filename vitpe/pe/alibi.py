"""``alibi`` -- Attention with Linear Biases: a fixed per-head penalty proportional to distance.

Paper: Press et al., "Train Short, Test Long" (ICLR 2022); the 2D Euclidean form follows CROMA (Fuller et al., 2023).
Site: logits. No parameters; the bias, of shape (nH, N, N), is cached per grid.

``bias[h, i, j] = -slope_h * dist(i, j)``, with ``dist = |i - j|`` in 1D and the Euclidean distance between patch
centres in 2D (in reference units, see ``grid.py``). In an encoder the matrix is symmetric (the original causal
shortcut does not apply), so it tells distances, not directions: a model whose only PE is ALiBi cannot tell a sequence
from its reversal (nor, in 2D, an image from its mirror images), e.g. it cannot tell "A ... B" from "B ... A" on
the ``order`` task. Slopes for n heads (n a power of 2): ``2^(-8 i / n)``, i = 1..n; otherwise the slopes
of the largest power of two c < n, then every other slope of 2c until n are filled (see :func:`alibi_slopes`).
Resize: ``interpolate`` shrinks distances by reference / new; ``extrapolate`` keeps them (ALiBi's intended use).
Options ``jitter``, ``rescale`` (and ``shift``, which changes no distance): DINOv3's coordinate augmentation in
training, here scaling the offsets before their distance (:mod:`vitpe.pe.coord_augment`).
"""

from __future__ import annotations

import math

import torch

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.grid import Grid, relative_index
from vitpe.pe.registry import register
from vitpe.pe.sites import BiasEncoding, gather_relative


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi head slopes, float32 of shape (heads,)."""

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]

    if heads & (heads - 1) == 0:
        return torch.tensor(power_of_two(heads))
    c = 2 ** math.floor(math.log2(heads))
    return torch.tensor(power_of_two(c) + power_of_two(2 * c)[0::2][: heads - c])


@register("alibi")
class ALiBi(BiasEncoding):
    """ALiBi with Euclidean distance on 2D grids. Options: ``shift``, ``jitter``, ``rescale`` (coordinate
    augmentation)."""

    def __init__(self, shift: float | None = None, jitter: float | None = None, rescale: float | None = None,
                 **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)
        self.register_buffer("slopes", alibi_slopes(self.heads), persistent=False)  # (nH,)

    def bias(self, grid: Grid) -> torch.Tensor:
        offsets = self.offsets_at(grid)  # (*extent, ndim)
        distance = offsets.reshape(-1, len(grid)).norm(dim=-1)  # (T,)
        table = -distance[:, None] * self.slopes  # (T, nH)
        return gather_relative(table, relative_index(grid, device=self.device))  # (nH, N, N)
