"""``rope_dinov3`` -- DINOv3's axial RoPE on coordinates normalised to [-1, 1], with its coordinate augmentation.

Paper: Siméoni et al., "DINOv3" (2025); code: facebookresearch/dinov3 ``RopePositionEmbedding``, ported to timm 1.0.31
as ``timm.layers.pos_embed_sincos.RotaryEmbeddingDinoV3``. Site: q, k. No parameters; cos/sin tables of shape
(P + N, Dh/2) are cached per grid (rebuilt every forward while the augmentation moves the coordinates).

Coordinates: cell ``i`` of an axis of ``n`` cells sits at ``c = 2 (i + 0.5) / m - 1``, where ``m`` is ``n``
(``normalize: separate``), or the smaller or the larger side of the grid for both axes (``min``, ``max``). Periods
``base^(2k / (Dh/2))``, k < Dh/4, ``base`` 100; pair k of an axis rotates by ``2 pi c / period_k``. Pairs
0 .. Dh/4-1 rotate with the **row** (y) coordinate, pairs Dh/4 .. Dh/2-1 with the **column** (x) coordinate (DINOv3's
order, which timm keeps; ``rope_axial`` puts x first), interleaved pairs as every vitpe RoPE (DINOv3's checkpoints
pair channel j with j + Dh/2: :mod:`vitpe.loading.rotary_pairs` reorders their q and k rows). 2D only; Dh % 4 == 0.

Resize: DINOv3 normalises every grid to [-1, 1] whatever its size, which is vitpe's ``interpolate`` (the default);
``extrapolate`` normalises by the reference grid, so a larger grid reaches past [-1, 1] at the reference spacing;
``ntk`` and ``yarn`` do that and scale each axis's frequencies (:mod:`vitpe.pe.frequency_scaling`; the reference
extent is 2 coordinate units). Options ``shift``, ``jitter``, ``rescale``: DINOv3's augmentation in training
(:mod:`vitpe.pe.coord_augment`; its released configs use ``rescale: 2``).
"""

from __future__ import annotations

import math

import torch

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.frequency_scaling import SCALED_MODES, YARN_ALPHA, YARN_BETA, ScaledFrequencies
from vitpe.pe.grid import Grid, grid_coords, to_centred
from vitpe.pe.option_checks import positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import RotaryEncoding

NORMALIZE = ("separate", "min", "max")


def normalising_sides(grid: Grid, normalize: str) -> list[int]:
    """The length each axis of ``grid`` is normalised by: its own (``separate``), or the grid's smaller or larger
    side for both (``min``, ``max``)."""
    return {"separate": list(grid), "min": [min(grid)] * len(grid), "max": [max(grid)] * len(grid)}[normalize]


def centred_coordinates(grid: Grid, normalize: str, device: torch.device | None = None,
                        sides_of: Grid | None = None) -> torch.Tensor:
    """DINOv3's coordinates of every cell of ``grid``, row-major: ``2 (i + 0.5) / m - 1`` per axis, float32 of shape
    (N, 2), columns (row, col), ``m`` from :func:`normalising_sides` of ``sides_of`` (default: ``grid`` itself)."""
    return to_centred(grid_coords(grid, device).float(), normalising_sides(sides_of or grid, normalize))  # (N, 2)


@register("rope_dinov3")
class DinoV3Rope(ScaledFrequencies, RotaryEncoding):
    """DINOv3's RoPE. Options: ``base`` (period base, default 100), ``normalize`` (``separate``, ``min`` or ``max``),
    ``yarn_alpha`` and ``yarn_beta`` (the ``yarn`` mode's ramp), ``shift``, ``jitter``, ``rescale`` (coordinate
    augmentation)."""

    grid_dims = (2,)

    def __init__(self, base: float = 100.0, normalize: str = "separate", yarn_alpha: float = YARN_ALPHA,
                 yarn_beta: float = YARN_BETA, shift: float | None = None, jitter: float | None = None,
                 rescale: float | None = None, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if normalize not in NORMALIZE:
            raise ValueError(f"{self.name}: normalize must be one of {list(NORMALIZE)}, got {normalize!r}")
        self.base = positive_number(base, f"{self.name}: base")
        self.normalize = normalize
        self._init_scaling(yarn_alpha, yarn_beta)
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)

    def coordinates(self, grid: Grid) -> torch.Tensor:
        """Every cell's coordinates in this resize mode, (N, 2) columns (row, col): normalised by this grid
        (``interpolate``) or by the reference grid, whose spacing then continues past [-1, 1] (the other modes)."""
        reference = None if self.resize == "interpolate" else self.grid
        return centred_coordinates(grid, self.normalize, self.device, sides_of=reference)

    def phases(self, grid: Grid) -> torch.Tensor:
        coords = self.coordinates(grid)  # (N, 2), columns (row, col)
        if self.augmenting:
            coords = self.augment.centred(coords)
        count = self.head_dim // 4  # periods per axis
        exponents = 2.0 * torch.arange(count, device=self.device, dtype=torch.float32) / (self.head_dim // 2)
        periods = self.base ** exponents  # (Dh/4,)
        if self.resize not in SCALED_MODES:  # DINOv3's own arithmetic, to the last bit of timm's
            return (2 * math.pi * coords[:, :, None] / periods).flatten(1)  # (N, 2, Dh/4) -> (N, Dh/2), y first
        freqs = 2 * math.pi / periods  # radians per coordinate unit
        angles = [coords[:, axis, None] * self.scaled(freqs, grid, axis, base=self.base, dim=2 * count, extent=2.0,
                                                      highest=2 * math.pi) for axis in range(2)]  # y first, then x
        return torch.cat(angles, dim=-1)  # 2 x (N, Dh/4) -> (N, Dh/2)
