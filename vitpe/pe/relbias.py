"""``relbias`` -- Swin-style learned relative position bias, one table per layer.

Paper: Liu et al., "Swin Transformer" (ICCV 2021); also Shaw et al. (2018) for the 1D idea. Site: logits.
Parameter ``relative_bias_table`` of shape (depth, T, nH) with T = prod(2 g - 1) relative offsets, trunc-normal
init std 0.02. The bias of query i and key j in 2D is ``table[(dy + gh - 1) * (2 gw - 1) + (dx + gw - 1)]`` with
(dy, dx) the row/column offset of i minus j (see :func:`vitpe.pe.grid.relative_index`); output (depth, nH, N, N).

With ``class_bias=True`` (BEiT, Bao et al. 2022, "BEiT: BERT Pre-Training of Image Transformers") the class token
gets learned biases too instead of none: parameter ``class_bias_table`` (depth, 3, nH) holds, per layer and head, the
bias of the class query to every patch key, of every patch query to the class key, and of the class token to itself
(BEiT's three extra table rows, in that order). They do not depend on the grid.

Resize: ``interpolate`` resamples the (2 gh - 1, 2 gw - 1) table to the new grid's offset range with the shared
:func:`~vitpe.pe.resample.resample_table` (as Swin / timm do when fine-tuning at a new window size);
``extrapolate`` clamps offsets beyond the learned range to the table's edge. A state dict saved at another grid is
resampled on load.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.grid import Grid, relative_extent, relative_index
from vitpe.pe.option_checks import non_negative_number
from vitpe.pe.registry import register
from vitpe.pe.resample import resample_table
from vitpe.pe.sites import BiasEncoding, gather_relative


def resample_relative_tables(tables: torch.Tensor, old_grid: Grid, new_grid: Grid) -> torch.Tensor:
    """Per-layer relative tables (depth, T_old, nH) -> (depth, T_new, nH) for another grid's offset range."""
    depth, _, heads = tables.shape
    old_extent, new_extent = relative_extent(old_grid), relative_extent(new_grid)
    stacked = tables.permute(1, 0, 2).reshape(*old_extent, depth * heads)  # (*old_extent, depth * nH)
    stacked = resample_table(stacked, old_extent, new_extent)  # (*new_extent, depth * nH)
    return stacked.reshape(-1, depth, heads).permute(1, 0, 2)  # (depth, T_new, nH)


@register("relbias")
class RelativePositionBias(BiasEncoding):
    """Swin relative position bias. Options: ``init_std`` (trunc-normal std of the bias at init, default 0.02) and
    ``scale`` (default 1, Swin): the bias is ``scale * relative_bias_table``, the table initialised with std
    ``init_std / scale`` -- the same bias at init, but Adam, whose steps are about ``lr`` per parameter whatever the
    gradient's size, then moves the bias ``scale`` times faster. With scale 1 a table can move by at most the sum of
    the learning rates over training (about 1.2 for 3 epochs of configs/cifar10_compare.yaml); RESULTS.md shows that
    bound binding in short budgets. (Not
    cpb's ``scale``, which is the range of its log-spaced coordinates.) ``class_bias``: BEiT's learned class-token
    entries (needs exactly one prefix token)."""

    per_layer = True
    layered = True

    def __init__(self, init_std: float = 0.02, scale: float = 1.0, class_bias: bool = False,
                 **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if not scale > 0:
            raise ValueError(f"relbias: scale must be positive, got {scale}")
        init_std = non_negative_number(init_std, f"{self.name}: init_std")
        if class_bias and self.num_prefix_tokens != 1:
            raise ValueError(f"relbias: class_bias needs exactly one prefix token (the class token), the model has "
                             f"{self.num_prefix_tokens}")
        self.scale = float(scale)
        size = math.prod(relative_extent(self.grid))
        self.relative_bias_table = nn.Parameter(torch.empty(self.depth, size, self.heads))  # (depth, T, nH)
        nn.init.trunc_normal_(self.relative_bias_table, std=init_std / self.scale)
        self.class_bias_table = nn.Parameter(torch.empty(self.depth, 3, self.heads)) if class_bias else None
        if class_bias:  # (depth, 3, nH): class -> patch, patch -> class, class -> class
            nn.init.trunc_normal_(self.class_bias_table, std=init_std / self.scale)

    def _prepare(self, grid: Grid) -> torch.Tensor:
        if self.class_bias_table is None:
            return super()._prepare(grid)  # (depth, nH, P + N, P + N), zero on prefix rows and columns
        patches = self.bias(grid)  # (depth, nH, N, N)
        n = patches.shape[-1]
        entry = (self.class_bias_table * self.scale).transpose(1, 2)  # (depth, nH, 3)
        class_row = torch.cat((entry[..., 2:3], entry[..., 0:1].expand(-1, -1, n)), dim=-1)  # (depth, nH, 1 + N)
        class_column = entry[..., 1:2, None].expand(-1, -1, n, 1)  # (depth, nH, N, 1)
        rows = torch.cat((class_column, patches), dim=-1)  # (depth, nH, N, 1 + N)
        return torch.cat((class_row[:, :, None], rows), dim=-2)  # (depth, nH, 1 + N, 1 + N)

    def bias(self, grid: Grid) -> torch.Tensor:
        table, table_grid = self.relative_bias_table, self.grid
        if self.scale != 1.0:
            table = table * self.scale  # (depth, T, nH)
        if grid != self.grid and self.resize == "interpolate":
            table, table_grid = resample_relative_tables(table, self.grid, grid), grid
        index = self.cached(("index", grid, table_grid), lambda: relative_index(grid, table_grid, self.device))
        return gather_relative(table, index)  # (depth, nH, N, N)

    def resample_loaded(self, state_dict: dict[str, torch.Tensor], prefix: str, old_grid: Grid) -> None:
        key = prefix + "relative_bias_table"
        if key in state_dict:
            state_dict[key] = resample_relative_tables(state_dict[key], old_grid, self.grid)
