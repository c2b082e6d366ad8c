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
from vitpe.pe.grid import Grid, to_centred


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


def sample_table(table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """A learned table (*grid, C) read at fractional cell positions (N, ndim), 1D or 2D: linear / bilinear between
    the neighbouring cells, the edge cell's value beyond the table (``grid_sample``'s border padding, cell centres
    aligned as everywhere here). Returns (N, C), differentiable in ``table`` and computed in float32."""
    grid = tuple(table.shape[:-1])
    if len(grid) not in (1, 2) or positions.shape[-1] != len(grid):
        raise ValueError(f"cannot read a table of shape {tuple(table.shape)} at positions of shape "
                         f"{tuple(positions.shape)}: a 1D or 2D table and one column per axis")
    if len(grid) == 1:  # a 1D table is a 2D table of one row, read in row 0
        table, positions, grid = table[None], F.pad(positions, (1, 0)), (1, *grid)  # (1, L, C), (N, 2)
    centred = to_centred(positions.float(), grid)  # (N, 2), the cell centres at 2 (p + 0.5) / n - 1
    image = table.float().movedim(-1, 0)[None]  # (H, W, C) -> (1, C, H, W)
    xy = centred.flip(-1)  # (N, 2): grid_sample takes (x, y) = (column, row)
    read = F.grid_sample(image, xy[None, None], mode="bilinear", padding_mode="border", align_corners=False)
    return read[0, :, 0].T.to(table.dtype)  # (1, C, 1, N) -> (N, C)


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
