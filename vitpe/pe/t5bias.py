"""``t5bias`` -- T5's bucketed relative position bias (1D only).

Paper: Raffel et al., "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer" (JMLR 2020).
Site: logits. Parameter ``bucket_bias`` of shape (num_buckets, nH): one learned scalar per bucket and head, shared by
all layers; output (nH, L, L).

Bidirectional bucketing of the offset ``n = i - j`` (query minus key): half the buckets for keys after the query
(n < 0), half for keys before. Within a direction the first half of its buckets are exact distances 0, 1, ...; the rest
are log-spaced up to ``max_distance``, beyond which everything shares the last bucket. Defaults: 32 buckets, 128.

Resize: ``interpolate`` scales offsets by L_ref / L and rounds them before bucketing; ``extrapolate`` uses the raw
offsets (the log buckets were made for that). A 2D grid raises ``ValueError``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.grid import Grid, relative_index, relative_offsets
from vitpe.pe.registry import register
from vitpe.pe.sites import BiasEncoding, gather_relative


def t5_buckets(offset: torch.Tensor, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """Bucket of each integer offset ``n = query - key`` (bidirectional T5 scheme), same shape, int64."""
    half = num_buckets // 2
    direction = (offset < 0).long() * half  # keys after the query use the upper half
    distance = offset.abs()
    max_exact = half // 2
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    far = (max_exact + (log_ratio * (half - max_exact)).long()).clamp(max=half - 1)
    return direction + torch.where(distance < max_exact, distance, far)


@register("t5bias")
class T5RelativeBias(BiasEncoding):
    """T5 bucketed bias. Options: ``num_buckets`` (default 32, even), ``max_distance`` (default 128)."""

    grid_dims = (1,)

    def __init__(self, num_buckets: int = 32, max_distance: int = 128, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if num_buckets < 4 or num_buckets % 2 or max_distance <= num_buckets // 4:
            raise ValueError(f"t5bias needs an even num_buckets >= 4 and max_distance > num_buckets / 4; "
                             f"got num_buckets={num_buckets}, max_distance={max_distance}")
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bucket_bias = nn.Parameter(torch.zeros(num_buckets, self.heads))  # (num_buckets, nH)
        nn.init.trunc_normal_(self.bucket_bias, std=0.02)

    def _buckets(self, grid: Grid) -> tuple[torch.Tensor, torch.Tensor]:
        offsets = relative_offsets(grid, self.grid, self.resize, self.device)[..., 0]  # (2L - 1,)
        buckets = t5_buckets(offsets.round().long(), self.num_buckets, self.max_distance)  # (2L - 1,)
        return buckets, relative_index(grid, device=self.device)  # (2L - 1,), (L, L)

    def bias(self, grid: Grid) -> torch.Tensor:
        buckets, index = self.cached(("buckets", grid, self.resize), lambda: self._buckets(grid))
        return gather_relative(self.bucket_bias[buckets], index)  # (2L - 1, nH) -> (nH, L, L)
