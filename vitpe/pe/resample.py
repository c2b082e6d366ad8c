"""The one resampling function for learned tables laid out on a grid.

Every learned table that lives on a grid -- absolute tables (``learnable``), per-axis tables (``separable``), relative
tables (``relbias``) -- is resized by :func:`resample_table`. The choice follows timm's ``resample_abs_pos_embed``:

* 2D tables: bicubic with ``antialias=True`` (antialiasing changes bicubic output even when upsampling; we keep it so
  that our resampling matches timm bit for bit and timm-trained tables behave the same here);
* 1D tables: linear (``antialias`` is not defined for 1D modes in torch);
* always computed in float32 and cast back, ``align_corners=False`` (cell centres aligned, see ``grid.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitpe.pe.base import ResizeError
from vitpe.pe.grid import Grid


def resample_table(table: torch.Tensor, old_grid: Grid, new_grid: Grid) -> torch.Tensor:
    """Resize ``table`` of shape (*old_grid, C) to (*new_grid, C). Returns ``table`` itself when the grids match."""
    old_grid, new_grid = tuple(old_grid), tuple(new_grid)
    if old_grid == new_grid:
        return table
    if len(old_grid) != len(new_grid) or tuple(table.shape[:-1]) != old_grid:
        raise ValueError(f"cannot resample a table of shape {tuple(table.shape)} from grid {old_grid} to {new_grid}")
    channels = table.shape[-1]
    x = table.float().reshape(1, *old_grid, channels).movedim(-1, 1)  # (1, C, *old_grid)
    if len(new_grid) == 1:
        x = F.interpolate(x, size=new_grid, mode="linear", align_corners=False)
    else:
        x = F.interpolate(x, size=new_grid, mode="bicubic", align_corners=False, antialias=True)
    return x.movedim(1, -1).reshape(*new_grid, channels).to(table.dtype)  # (*new_grid, C)


def check_extrapolation(ref_grid: Grid, grid: Grid, name: str) -> None:
    """Raise :class:`ResizeError` if ``grid`` reaches beyond a learned absolute table of ``ref_grid`` on any axis."""
    if any(g > g_ref for g, g_ref in zip(grid, ref_grid)):
        raise ResizeError(
            f"{name} is a learned absolute table for the grid {tuple(ref_grid)} and cannot extrapolate to the grid "
            f"{tuple(grid)}: there are no learned positions beyond it; use pe_resize='interpolate'"
        )


def resize_learned_table(table: torch.Tensor, ref_grid: Grid, grid: Grid, mode: str, name: str) -> torch.Tensor:
    """A learned *absolute* table (*ref_grid, C) at ``grid`` in resize ``mode``.

    ``interpolate`` resamples it; ``extrapolate`` keeps integer positions, so a grid that fits inside the reference is
    the table's top-left corner and a larger one raises :class:`ResizeError` (there is nothing learned to continue).
    """
    grid = tuple(grid)
    if grid == tuple(ref_grid):
        return table
    if mode == "interpolate":
        return resample_table(table, ref_grid, grid)
    check_extrapolation(ref_grid, grid, name)
    return table[tuple(slice(0, g) for g in grid)]  # (*grid, C)
