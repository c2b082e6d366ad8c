"""``sincos`` -- fixed sinusoidal position embedding.

Papers: Vaswani et al., "Attention Is All You Need" (2017) for 1D; the 2D variant of MAE (He et al., 2022) and
Chen et al. (MoCo v3, 2021) for images. Site: tokens. No parameters; the table, of shape (N, D), is cached per grid.

Layouts (``pos`` in reference units, see ``grid.py``):

* 1D (Vaswani): ``PE[pos, 2i] = sin(pos * w_i)``, ``PE[pos, 2i+1] = cos(pos * w_i)``, ``w_i = 10000^(-2i/D)``,
  i < D/2. Needs D even.
* 2D (MAE convention): the first D/2 channels encode the **column** (x) position, the last D/2 the **row** (y)
  position; each half is ``[sin(pos * w) | cos(pos * w)]`` with ``w_i = 10000^(-i/(D/4))``, i < D/4. Needs D % 4 == 0.
  (MAE's code names the first half ``emb_h`` although it encodes x; timm's ``build_sincos2d_pos_embed`` orders the
  channels ``[sin_h, sin_w, cos_h, cos_w]`` instead.)
"""

from __future__ import annotations


import torch

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.frequencies import geometric_frequencies
from vitpe.pe.frequency_scaling import YARN_ALPHA, YARN_BETA, ScaledFrequencies
from vitpe.pe.grid import Grid
from vitpe.pe.option_checks import positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import AdditiveEncoding


@register("sincos")
class SinCosEncoding(ScaledFrequencies, AdditiveEncoding):
    """Fixed sin-cos embedding. Options: ``base`` (frequency base, default 10000), ``yarn_alpha`` and ``yarn_beta``
    (the ``yarn`` mode's ramp), ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    def __init__(self, base: float = 10000.0, yarn_alpha: float = YARN_ALPHA, yarn_beta: float = YARN_BETA,
                 shift: float | None = None, jitter: float | None = None, rescale: float | None = None,
                 **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        channels_per_axis = 2 * len(self.grid)
        if self.dim % channels_per_axis:
            raise ValueError(f"sincos on a {len(self.grid)}D grid needs dim divisible by {channels_per_axis}, "
                             f"got dim={self.dim}")
        self.base = positive_number(base, f"{self.name}: base")
        self._init_scaling(yarn_alpha, yarn_beta)
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)

    def embedding(self, grid: Grid) -> torch.Tensor:
        pos = self.positions_at(grid)  # (N, ndim), columns (row, col)
        count = self.dim // (2 * len(grid))
        ladder = geometric_frequencies(count, self.base, self.device)  # (count,)
        freqs = [self.scaled(ladder, grid, axis, base=self.base, dim=2 * count) for axis in range(len(grid))]
        if len(grid) == 1:
            angle = pos[:, 0, None] * freqs[0]  # (N, D/2)
            return torch.stack((angle.sin(), angle.cos()), dim=-1).reshape(-1, self.dim)  # interleave -> (N, D)
        halves = []
        for axis in (1, 0):  # column (x) first, then row (y): the MAE layout
            angle = pos[:, axis, None] * freqs[axis]  # (N, D/4)
            halves += [angle.sin(), angle.cos()]
        return torch.cat(halves, dim=-1)  # (N, D)
