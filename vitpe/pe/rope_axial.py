"""``rope_axial`` -- rotary position embedding; in 2D the rotation pairs are split between the two axes.

Papers: Su et al., "RoFormer" (2021) for 1D; Heo et al., "Rotary Position Embedding for Vision Transformer"
(ECCV 2024, rope-vit) for the axial 2D form. Site: q, k. No parameters; cos/sin tables of shape (P + N, Dh) are cached per grid.

Per head (head dim Dh, interleaved pairs: pair j = channels 2j and 2j + 1):

* 1D: pair k rotates by ``pos * theta^(-2k/Dh)``, k < Dh/2; ``theta`` defaults to 10000 (the LLM default).
* 2D: pairs 0 .. Dh/4-1 rotate with the **column** (x) position, pairs Dh/4 .. Dh/2-1 with the **row** (y)
  position, both with ``theta^(-4k/Dh)``, k < Dh/4; ``theta`` defaults to 100 (rope-vit's ViT setting).
  Needs Dh % 4 == 0.

Scores ``q_i . k_j`` then depend on positions only through ``pos_i - pos_j``. Prefix tokens are not rotated.
Resize: positions are scaled into the reference range (``interpolate``) or continue (``extrapolate``).
"""

from __future__ import annotations

from typing import Any

import torch

from vitpe.pe.frequencies import geometric_frequencies
from vitpe.pe.grid import Grid, grid_positions
from vitpe.pe.option_checks import positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import RotaryEncoding

DEFAULT_THETA = {1: 10000.0, 2: 100.0}


@register("rope_axial")
class AxialRope(RotaryEncoding):
    """Axial RoPE. Options: ``theta`` (frequency base; default 10000 in 1D, 100 in 2D)."""

    def __init__(self, theta: float | None = None, **common: Any) -> None:
        super().__init__(**common)
        self.theta = positive_number(DEFAULT_THETA[len(self.grid)] if theta is None else theta, f"{self.name}: theta")

    def phases(self, grid: Grid) -> torch.Tensor:
        pos = grid_positions(grid, self.grid, self.resize, self.device).flip(-1)  # (N, ndim), columns (x, y)
        freqs = geometric_frequencies(self.head_dim // (2 * len(grid)), self.theta, self.device)  # (Dh/(2 ndim),)
        return (pos[:, :, None] * freqs).reshape(pos.shape[0], -1)  # (N, ndim, Dh/(2 ndim)) -> (N, Dh/2)
