"""``rope_axial`` -- rotary position embedding; in 2D the rotation pairs are split between the two axes.

Papers: Su et al., "RoFormer" (2021) for 1D; Heo et al., "Rotary Position Embedding for Vision Transformer"
(ECCV 2024, rope-vit) for the axial 2D form. Site: q, k. No parameters; cos/sin tables of shape (P + N, Dh/2) are
cached per grid.

Per head (head dim Dh, interleaved pairs: pair j = channels 2j and 2j + 1):

* 1D: pair k rotates by ``pos * theta^(-2k/Dh)``, k < Dh/2; ``theta`` defaults to 10000 (the LLM default).
* 2D: pairs 0 .. Dh/4-1 rotate with the **column** (x) position, pairs Dh/4 .. Dh/2-1 with the **row** (y)
  position, both with ``theta^(-4k/Dh)``, k < Dh/4; ``theta`` defaults to 100 (rope-vit's ViT setting).
  Needs Dh % 4 == 0.

Scores ``q_i . k_j`` then depend on positions only through ``pos_i - pos_j``. Prefix tokens are not rotated.
Resize: positions are scaled into the reference range (``interpolate``; option ``anchor``: cell centres aligned,
``centre``, or the first cell kept at 0, ``first``, as EVA-02 and timm's ``ref_feat_shape`` do; :mod:`vitpe.pe.grid`)
or continue (``extrapolate``); ``ntk`` and
``yarn`` keep them and scale each axis's frequencies instead (:mod:`vitpe.pe.frequency_scaling`). Options ``shift``,
``jitter``, ``rescale``: DINOv3's coordinate augmentation in training (:mod:`vitpe.pe.coord_augment`).
"""

from __future__ import annotations


import torch

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.frequencies import geometric_frequencies
from vitpe.pe.frequency_scaling import YARN_ALPHA, YARN_BETA, ScaledFrequencies
from vitpe.pe.grid import ANCHORS, Grid
from vitpe.pe.option_checks import positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import RotaryEncoding

DEFAULT_THETA = {1: 10000.0, 2: 100.0}


@register("rope_axial")
class AxialRope(ScaledFrequencies, RotaryEncoding):
    """Axial RoPE. Options: ``theta`` (frequency base; default 10000 in 1D, 100 in 2D), ``anchor`` (``centre`` or
    ``first``: where ``interpolate`` pins the grid), ``yarn_alpha`` and ``yarn_beta`` (the ``yarn`` mode's ramp),
    ``shift``, ``jitter``, ``rescale`` (coordinate augmentation)."""

    def __init__(self, theta: float | None = None, yarn_alpha: float = YARN_ALPHA, yarn_beta: float = YARN_BETA,
                 shift: float | None = None, jitter: float | None = None, rescale: float | None = None,
                 anchor: str = "centre", **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if anchor not in ANCHORS:
            raise ValueError(f"{self.name}: anchor must be one of {list(ANCHORS)}, got {anchor!r}")
        self.anchor = anchor
        self.theta = positive_number(DEFAULT_THETA[len(self.grid)] if theta is None else theta, f"{self.name}: theta")
        self._init_scaling(yarn_alpha, yarn_beta)
        self.augment = CoordAugment.checked(shift, jitter, rescale, self.name)

    def phases(self, grid: Grid) -> torch.Tensor:
        pos = self.positions_at(grid, self.anchor)  # (N, ndim), columns (row, col)
        count = self.head_dim // (2 * len(grid))  # pairs per axis
        ladder = geometric_frequencies(count, self.theta, self.device)  # (Dh/(2 ndim),)
        freqs = [self.scaled(ladder, grid, axis, base=self.theta, dim=2 * count) for axis in range(len(grid))]
        angles = [pos[:, axis, None] * freqs[axis] for axis in reversed(range(len(grid)))]  # x first, then y
        return torch.cat(angles, dim=-1)  # ndim x (N, Dh/(2 ndim)) -> (N, Dh/2)
