"""``learnable`` -- a learned absolute table over all grid positions.

Paper: Dosovitskiy et al., "An Image is Worth 16x16 Words" (ICLR 2021), as in ViT/timm (trunc-normal init, std 0.02).
Site: tokens. Parameter ``pos_embed`` of shape (N_ref, D), N_ref = prod(reference grid), row-major.

Options ``fuzzy``, ``shift``, ``jitter``, ``rescale``: positions moved in training only, where the table is then read
at the moved, fractional positions (bilinear, :func:`vitpe.pe.resample.sample_table`). ``fuzzy`` is ViTAR's fuzzy
positional encoding (Fan et al., "ViTAR: Vision Transformer with Any Resolution", 2024): every position gets its own
offset, uniform in ``[-fuzzy, fuzzy]`` cells (ViTAR: 0.5), so the model learns the table between its cells as well,
where an interpolated table reads it at another size; ``shift``, ``jitter``, ``rescale`` are DINOv3's moves of the
whole grid (:mod:`vitpe.pe.coord_augment`), drawn first. In eval mode the table is used as it is.

Resize: ``interpolate`` resamples the table with :func:`vitpe.pe.resample.resample_table` (bicubic + antialias in 2D,
as timm's ``resample_abs_pos_embed``; linear in 1D). ``extrapolate`` crops to a grid that fits inside the reference
and raises :class:`~vitpe.pe.base.ResizeError` for a larger one. Loading a state dict saved at another grid resamples
the table on load.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.grid import Grid
from vitpe.pe.option_checks import non_negative_number
from vitpe.pe.registry import register
from vitpe.pe.resample import check_extrapolation, resample_table, resize_learned_table, sample_table
from vitpe.pe.sites import AdditiveEncoding


@register("learnable")
class LearnableEncoding(AdditiveEncoding):
    """Learned absolute position table. Options: ``init_std`` (trunc-normal std, default 0.02), ``fuzzy`` (ViTAR's
    per-position offset in cells, 0 = off), ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    def __init__(self, init_std: float = 0.02, fuzzy: float = 0.0, shift: float | None = None,
                 jitter: float | None = None, rescale: float | None = None, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        init_std = non_negative_number(init_std, f"{self.name}: init_std")
        self.fuzzy = non_negative_number(fuzzy, f"{self.name}: fuzzy")
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)
        self.pos_embed = nn.Parameter(torch.empty(math.prod(self.grid), self.dim))  # (N_ref, D)
        nn.init.trunc_normal_(self.pos_embed, std=init_std)

    def embedding(self, grid: Grid) -> torch.Tensor:
        if self.augmenting or (self.training and self.fuzzy > 0):
            if self.resize == "extrapolate":
                check_extrapolation(self.grid, grid, self.name)
            positions = self.positions_at(grid)  # (N, ndim) in reference cells, the whole grid moved
            if self.fuzzy:
                positions = positions + torch.empty_like(positions).uniform_(-self.fuzzy, self.fuzzy)
            return sample_table(self.pos_embed.reshape(*self.grid, self.dim), positions)  # (N, D)
        if grid == self.grid:
            return self.pos_embed
        table = self.pos_embed.reshape(*self.grid, self.dim)  # (*ref_grid, D)
        return resize_learned_table(table, self.grid, grid, self.resize, self.name).reshape(-1, self.dim)  # (N, D)

    def resample_loaded(self, state_dict: dict[str, torch.Tensor], prefix: str, old_grid: Grid) -> None:
        key = prefix + "pos_embed"
        if key in state_dict:
            table = state_dict[key].reshape(*old_grid, -1)  # (*old_grid, D)
            state_dict[key] = resample_table(table, old_grid, self.grid).reshape(-1, table.shape[-1])
