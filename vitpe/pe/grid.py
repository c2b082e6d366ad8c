"""Grid geometry shared by every position encoding.

A *grid* is the shape of the token lattice a PE works on: ``(L,)`` for a sequence, ``(gh, gw)`` for an image
(rows, columns). Tokens are laid out row-major. A PE is built for a *reference grid*; at another grid it works in one
of two resize modes:

* ``interpolate`` -- the new grid is squeezed into the reference range. A cell ``i`` of an axis with ``n`` cells
  sits at the reference position ``(i + 0.5) * n_ref / n - 0.5`` (cell centres aligned, the same geometry as
  ``F.interpolate(..., align_corners=False)`` uses for learned tables), so offsets shrink by ``n_ref / n``. With
  the ``first`` anchor the first cell stays at 0 instead, ``i * n_ref / n`` (timm's ``ref_feat_shape``, EVA-02); the
  offsets between cells are the same, but not the offsets to an unrotated prefix token.
* ``extrapolate`` -- integer positions ``0, 1, ..., n - 1`` continue past the reference range.
* ``ntk`` and ``yarn`` -- for PEs built from frequencies (sinusoidal and rotary): positions as in ``extrapolate``,
  the frequencies scaled instead (:mod:`vitpe.pe.frequency_scaling`); other PEs refuse them.

At the reference grid every mode gives the integer positions, i.e. the untouched PE.
"""

from __future__ import annotations

from typing import Sequence

import torch

Grid = tuple[int, ...]
RESIZE_MODES = ("interpolate", "extrapolate", "ntk", "yarn")
#: The modes every PE has; ``ntk`` and ``yarn`` are for PEs made of frequencies (``frequency_scaling.SCALED_MODES``).
BASIC_RESIZE_MODES = ("interpolate", "extrapolate")
#: Where ``interpolate`` pins the squeezed grid: cell centres aligned, or the first cell at 0.
ANCHORS = ("centre", "first")


def as_grid(grid: int | Sequence[int], dims: int = 2) -> Grid:
    """Normalise ``grid`` to a tuple of 1 or 2 positive ints; raise ``ValueError`` otherwise. A single int is a square
    image grid, ``14`` -> ``(14, 14)``, as ``vitpe.ViT(img_size=...)`` reads a size (``dims=1``: a sequence,
    ``(14,)``); a sequence is always given as ``(L,)`` where a PE could take either."""
    if isinstance(grid, int) and not isinstance(grid, bool):
        grid = (grid,) * dims
    try:
        out = tuple(int(g) for g in grid)
    except TypeError:
        raise ValueError(f"grid must be an int or a tuple of 1 or 2 ints, got {grid!r}") from None
    if len(out) not in (1, 2) or any(g < 1 for g in out) or any(int(g) != g for g in grid):
        raise ValueError(f"grid must be (L,) or (gh, gw) with positive sizes, got {tuple(grid)!r}")
    return out


def check_resize_mode(mode: str) -> str:
    if mode not in RESIZE_MODES:
        raise ValueError(f"unknown pe_resize mode {mode!r}; choose one of {list(RESIZE_MODES)}")
    return mode


def unscalable(name: str, mode: str, supported: tuple[str, ...], scalable: list[str] | None = None) -> str:
    """The one message for asking a PE without frequencies (``supported``: its modes) for ``mode`` (ntk, yarn);
    ``scalable`` names the PEs that have the mode, where the caller knows them."""
    which = f" ({', '.join(scalable)})" if scalable else ""
    return (f"{name} has no frequencies to scale: the {mode} resize mode applies to sinusoidal and rotary PEs{which}; "
            f"use {' or '.join(supported)}")


def axis_scale(n: int, n_ref: int, mode: str) -> float:
    """Reference units per cell along one axis: ``n_ref / n`` when interpolating, 1 when extrapolating."""
    return n_ref / n if mode == "interpolate" else 1.0


def axis_positions(n: int, n_ref: int, mode: str, device: torch.device | None = None,
                   anchor: str = "centre") -> torch.Tensor:
    """Positions of the ``n`` cells of one axis in reference units, float32 of shape (n,)."""
    i = torch.arange(n, device=device, dtype=torch.float32)
    if mode == "interpolate" and n != n_ref:
        return i * (n_ref / n) if anchor == "first" else (i + 0.5) * (n_ref / n) - 0.5
    return i


def grid_scales(grid: Grid, ref_grid: Grid) -> tuple[float, ...]:
    """How much larger ``grid`` is than ``ref_grid`` on each axis, at least 1 (a smaller axis is not scaled)."""
    return tuple(max(n / n_ref, 1.0) for n, n_ref in zip(grid, ref_grid))


def grid_positions(grid: Grid, ref_grid: Grid, mode: str, device: torch.device | None = None,
                   anchor: str = "centre") -> torch.Tensor:
    """Positions of every cell of ``grid``, row-major, float32 of shape (N, ndim); column ``a`` is axis ``a``."""
    axes = [axis_positions(n, n_ref, mode, device, anchor) for n, n_ref in zip(grid, ref_grid)]
    mesh = torch.meshgrid(*axes, indexing="ij")  # ndim x (*grid)
    return torch.stack(mesh, dim=-1).reshape(-1, len(grid))  # (N, ndim)


def to_centred(positions: torch.Tensor, sides: Sequence[int]) -> torch.Tensor:
    """Cell positions (..., ndim) -> centred coordinates ``2 (p + 0.5) / m - 1`` (DINOv3's): the ``m`` cells of each
    axis of ``sides`` span [-1, 1]."""
    m = torch.tensor(sides, dtype=positions.dtype, device=positions.device)
    return 2 * (positions + 0.5) / m - 1


def from_centred(coords: torch.Tensor, sides: Sequence[int]) -> torch.Tensor:
    """The inverse of :func:`to_centred`: centred coordinates (..., ndim) -> cell positions."""
    m = torch.tensor(sides, dtype=coords.dtype, device=coords.device)
    return (coords + 1) * m / 2 - 0.5


def grid_coords(grid: Grid, device: torch.device | None = None) -> torch.Tensor:
    """Integer cell coordinates, row-major, int64 of shape (N, ndim)."""
    mesh = torch.meshgrid(*[torch.arange(n, device=device) for n in grid], indexing="ij")
    return torch.stack(mesh, dim=-1).reshape(-1, len(grid))  # (N, ndim)


def relative_extent(grid: Grid) -> Grid:
    """Shape of the table of all relative offsets of ``grid``: ``(2 * g - 1)`` per axis."""
    return tuple(2 * g - 1 for g in grid)


def relative_offsets(grid: Grid, ref_grid: Grid, mode: str, device: torch.device | None = None) -> torch.Tensor:
    """Every relative offset of ``grid`` in reference units, float32 of shape (*relative_extent(grid), ndim).

    Entry ``[a + g_0 - 1, b + g_1 - 1]`` holds the offset ``(a, b)`` (query minus key) scaled by the resize mode.
    """
    axes = [
        torch.arange(-(g - 1), g, device=device, dtype=torch.float32) * axis_scale(g, g_ref, mode)
        for g, g_ref in zip(grid, ref_grid)
    ]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)  # (*extent, ndim)


def relative_index(grid: Grid, table_grid: Grid | None = None, device: torch.device | None = None) -> torch.Tensor:
    """Index (N, N) into a flattened relative table for every (query, key) pair of ``grid``.

    The table covers the offsets of ``table_grid`` (default: ``grid``), i.e. it has shape
    ``relative_extent(table_grid)`` flattened row-major. Offsets beyond the table are clamped to its edge. In 2D this is
    Swin's ``(dy + gh - 1) * (2 gw - 1) + (dx + gw - 1)``.
    """
    table_grid = grid if table_grid is None else table_grid
    coords = grid_coords(grid, device)  # (N, ndim)
    rel = coords[:, None, :] - coords[None, :, :]  # (N, N, ndim), query minus key
    index = torch.zeros(rel.shape[:2], dtype=torch.long, device=device)
    for axis, g in enumerate(table_grid):
        shifted = rel[..., axis].clamp(-(g - 1), g - 1) + (g - 1)
        index = index * (2 * g - 1) + shifted
    return index  # (N, N)
