"""``separable`` -- a learned row table plus a learned column table, summed.

Papers: the factorised 2D embedding of Dosovitskiy et al. (ViT appendix D.4) and NaViT (Dehghani et al., 2023), which
found summing the per-axis embeddings better than stacking or multiplying them.
Site: tokens (2D grids only). Parameters ``row_embed`` (gh, D) and ``col_embed`` (gw, D);
the embedding of cell (r, c) is ``row_embed[r] + col_embed[c]``, shape (gh * gw, D) row-major.

Resize: each axis table is resized on its own (1D linear interpolation, or cropping when extrapolating to a smaller
axis; a longer axis cannot be extrapolated and raises :class:`~vitpe.pe.base.ResizeError`).
"""

from __future__ import annotations


import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.grid import Grid
from vitpe.pe.option_checks import non_negative_number
from vitpe.pe.registry import register
from vitpe.pe.resample import check_extrapolation, resample_table, resize_learned_table
from vitpe.pe.sites import AdditiveEncoding


@register("separable")
class SeparableEncoding(AdditiveEncoding):
    """Row + column learned tables. Options: ``init_std`` (trunc-normal std, default 0.02)."""

    grid_dims = (2,)
    _tables = ("row_embed", "col_embed")

    def __init__(self, init_std: float = 0.02, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        init_std = non_negative_number(init_std, f"{self.name}: init_std")
        self.row_embed = nn.Parameter(torch.empty(self.grid[0], self.dim))  # (gh, D)
        self.col_embed = nn.Parameter(torch.empty(self.grid[1], self.dim))  # (gw, D)
        for table in (self.row_embed, self.col_embed):
            nn.init.trunc_normal_(table, std=init_std)

    def embedding(self, grid: Grid) -> torch.Tensor:
        if self.resize == "extrapolate":
            check_extrapolation(self.grid, grid, self.name)
        rows, cols = (
            resize_learned_table(table, (n_ref,), (n,), self.resize, self.name)
            for table, n, n_ref in zip((self.row_embed, self.col_embed), grid, self.grid)
        )
        return (rows[:, None, :] + cols[None, :, :]).reshape(-1, self.dim)  # (gh, gw, D) -> (N, D)

    def resample_loaded(self, state_dict: dict[str, torch.Tensor], prefix: str, old_grid: Grid) -> None:
        for name, n_old, n_new in zip(self._tables, old_grid, self.grid):
            if prefix + name in state_dict:
                state_dict[prefix + name] = resample_table(state_dict[prefix + name], (n_old,), (n_new,))
