"""``cpb`` -- Swin-V2 log-spaced continuous position bias: a small MLP on relative coordinates, one per layer.

Paper: Liu et al., "Swin Transformer V2" (CVPR 2022). Site: logits. Parameters: per layer an MLP
``ndim -> hidden (512) -> nH`` with ReLU (``mlps``); output of shape (depth, nH, N, N).

For every relative offset ``d`` of the grid (in reference units, see ``grid.py``):
``u = 8 * d / (g_ref - 1)`` per axis, ``v = sign(u) * log2(1 + |u|) / log2(8)``, ``bias = 16 * sigmoid(MLP(v))``.
The MLP is defined everywhere and the log spacing compresses large offsets, which is why it transfers to larger grids
(Swin-V2 Table 1: trained at window 8, tested at 24 without fine-tuning: 79.1% against 68.7% for a learned table).
Resize: ``interpolate`` squeezes offsets into the reference range; ``extrapolate`` feeds the larger offsets as they are.
Options ``jitter``, ``rescale`` (and ``shift``, which moves every position alike and so changes no offset): DINOv3's
coordinate augmentation in training, here scaling the offsets (:mod:`vitpe.pe.coord_augment`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.grid import Grid, relative_index
from vitpe.pe.registry import register
from vitpe.pe.sites import BiasEncoding, gather_relative


@register("cpb")
class ContinuousPositionBias(BiasEncoding):
    """Swin-V2 CPB. Options: ``hidden`` (MLP width, default 512), ``scale`` (log-coordinate range, default 8; not
    relbias's ``scale``, a multiplier of its table), ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    per_layer = True
    layered = True

    def __init__(self, hidden: int = 512, scale: float = 8.0, shift: float | None = None, jitter: float | None = None,
                 rescale: float | None = None, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)
        if hidden < 1 or scale <= 0:
            raise ValueError(f"cpb needs hidden >= 1 and scale > 0, got hidden={hidden}, scale={scale}")
        self.scale = float(scale)
        ndim = len(self.grid)
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(ndim, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, self.heads, bias=False))
            for _ in range(self.depth)
        )

    def log_coordinates(self, grid: Grid) -> torch.Tensor:
        """Log-spaced relative coordinates of every offset of ``grid``, shape (T, ndim), T = prod(2 g - 1) (the
        offsets of this forward's draw while the augmentation moves them)."""
        offsets = self.offsets_at(grid)  # (*extent, ndim)
        span = torch.tensor([max(g - 1, 1) for g in self.grid], dtype=torch.float32, device=self.device)
        u = offsets.reshape(-1, len(grid)) / span * self.scale  # (T, ndim)
        return torch.sign(u) * torch.log2(1.0 + u.abs()) / math.log2(self.scale)

    def bias(self, grid: Grid) -> torch.Tensor:
        index = self.cached(("index", grid), lambda: relative_index(grid, device=self.device))  # (N, N)
        coords = self.cached_geometry(("coords", grid, self.resize), lambda: self.log_coordinates(grid))
        return gather_relative(16.0 * torch.sigmoid(self.tables(coords)), index)  # (depth, nH, N, N)

    def tables(self, coords: torch.Tensor) -> torch.Tensor:
        """Every layer's MLP on ``coords`` (T, ndim) -> (depth, T, nH), as three batched products over the layers.

        The same as ``stack([mlp(coords) for mlp in self.mlps])`` with 73 kernels fewer in a training step of six
        layers (33 at inference; counted as :mod:`vitpe.bench.kernels` counts them): small kernels, which set the
        pace where launches do (a GPU's small steps).
        """
        work = self.working_dtype  # a PE cast to bf16: its MLP in float32 (no-ops in float32)
        first = torch.stack([mlp[0].weight for mlp in self.mlps]).transpose(1, 2).to(work)  # (depth, ndim, hidden)
        shift = torch.stack([mlp[0].bias for mlp in self.mlps]).unsqueeze(1).to(work)  # (depth, 1, hidden)
        last = torch.stack([mlp[2].weight for mlp in self.mlps]).transpose(1, 2).to(work)  # (depth, hidden, nH)
        coords = coords.to(work).expand(len(self.mlps), -1, -1)  # (depth, T, ndim)
        hidden = torch.baddbmm(shift, coords, first).relu_()  # (depth, T, hidden)
        return torch.bmm(hidden, last)  # (depth, T, nH)
