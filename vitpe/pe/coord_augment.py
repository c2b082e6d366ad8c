"""Coordinate augmentation in training: DINOv3's shift, jitter and rescale of patch coordinates, for every PE that
reads coordinates.

DINOv3 (Siméoni et al. 2025; its ``RopePositionEmbedding``) normalises patch coordinates to [-1, 1] and, in training
only, moves them before the rotation: a shift (uniform in ``[-shift, shift]`` per axis, added), a jitter (a factor per
axis, ``exp(U(-ln J, ln J))``) and a rescale (one factor for both axes, ``exp(U(-ln R, ln R))``), in that order; its
released configs train with ``rescale: 2``. The model then sees its grid at many apparent sizes and offsets, which
is meant to carry it to other resolutions.

vitpe applies the same draws, in the same order and from the same global random stream (seeded per training step,
so a resumed run draws what an unbroken one would), to every coordinate-reading PE: on the positions of ``sincos``,
``rope_axial`` and ``rope_mixed``, expressed as DINOv3's centred coordinates ``c = 2 (p + 0.5) / n_ref - 1`` and
mapped back; on ``rope_dinov3``'s coordinates as they are; and on the offsets of ``cpb`` and ``alibi`` (where a
shift cancels and the factors scale the offsets). In eval mode nothing moves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from vitpe.pe.grid import from_centred, to_centred


def _check(value: float | None, least: float, what: str, label: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < least:
        raise ValueError(f"{label}: {what} must be a finite number >= {least:g} (or null: off), got {value!r}")
    return float(value)


@dataclass(frozen=True)
class CoordAugment:
    """The three augmentations; ``None`` turns one off. ``shift`` is in centred coordinates (the grid spans [-1, 1]
    on each axis), ``jitter`` and ``rescale`` are factors >= 1."""

    shift: float | None = None
    jitter: float | None = None
    rescale: float | None = None

    @classmethod
    def checked(cls, shift: float | None, jitter: float | None, rescale: float | None, label: str) -> "CoordAugment":
        """The augmentation of a PE's options, each range checked: one line naming the option otherwise."""
        return cls(_check(shift, 0.0, "shift", label), _check(jitter, 1.0, "jitter", label),
                   _check(rescale, 1.0, "rescale", label))

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.shift, self.jitter, self.rescale))

    def draw(self, ndim: int, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One draw from torch's global generator, in DINOv3's order: (shift, factor), each of shape (ndim,); the
        shift is added to centred coordinates, then the factor (jitter times rescale) multiplies them."""
        shift = torch.zeros(ndim, device=device)
        factor = torch.ones(ndim, device=device)
        if self.shift is not None:
            shift = torch.empty(ndim, device=device).uniform_(-self.shift, self.shift)
        if self.jitter is not None:
            bound = math.log(self.jitter)
            factor = factor * torch.empty(ndim, device=device).uniform_(-bound, bound).exp()
        if self.rescale is not None:
            bound = math.log(self.rescale)
            factor = factor * torch.empty(1, device=device).uniform_(-bound, bound).exp()
        return shift, factor

    def centred(self, coords: torch.Tensor) -> torch.Tensor:
        """Centred coordinates (N, ndim) moved by one draw."""
        shift, factor = self.draw(coords.shape[-1], coords.device)
        return (coords + shift) * factor

    def positions(self, positions: torch.Tensor, ref_grid: tuple[int, ...]) -> torch.Tensor:
        """Positions (N, ndim) in reference units, moved by one draw as DINOv3's centred coordinates would be."""
        return from_centred(self.centred(to_centred(positions, ref_grid)), ref_grid)

    def offsets(self, offsets: torch.Tensor) -> torch.Tensor:
        """Relative offsets (..., ndim) scaled by one draw's factors (a shift moves every position alike)."""
        _, factor = self.draw(offsets.shape[-1], offsets.device)
        return offsets * factor
