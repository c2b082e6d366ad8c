"""``lookhere`` -- LookHere: each head looks in one direction, keys outside its field of view are masked, and the rest
are penalised by distance.

Paper: Fuller et al., "LookHere: Vision Transformers with Directed Attention Generalize and Extrapolate" (NeurIPS 2024);
reference code GreenCUBIC/lookhere. Site: logits. No parameters; the bias, of shape (depth, nH, N, N), is cached per
grid, and costs what ALiBi's costs.

For query cell ``i`` and key cell ``j`` of head ``h`` in block ``l``: ``bias = -g * s_l * s_h * |p_i - p_j|`` (Euclidean
distance in reference units, see ``grid.py``) where the key lies in the head's field of view, masked elsewhere; a
query always sees itself. The field of view is a wedge around a direction: with ``v = p_j - p_i`` (rows growing
downwards, so "up" is -row), the key is seen when the angle between ``v`` and the head's direction is at most half the
wedge's width, boundaries included (a masked key gets the most negative bfloat16, finite as in the reference code).
Layouts (``layout``), each a list of directed heads:

* ``180``: up, down, left, right, each seeing a half-plane (LH-180);
* ``90``: the four quadrants (up-left, up-right, down-left, down-right), then four 90-degree wedges centred on the axes
  (up, down, left, right) -- the reference's "corners" and "triangles" (LH-90);
* ``45``: the eight 45-degree wedges between an axis and a diagonal (LH-45).

The last ``undirected`` heads (default ``heads // 3``, as the reference's 8 directed and 4 undirected heads of ViT-B)
see everything. Slopes: a directed head ``2^-(1 + k)`` on its ``k``-th pass through the layout (0.5 for the first
``len(layout)`` heads), an undirected head ``4^-(1 + k)`` for the ``k``-th of (at most) four groups; per block a slope
linear from ``layer_slopes[0]`` at the first to ``layer_slopes[1]`` at the last block (default 1.5 to 0.5); a global
slope ``g`` (default 1). On 1D sequences the directed heads look left (keys before the query) and right in turn.
There is no absolute embedding, and prefix tokens (the class token) get zero bias, unmasked.

Resize: ``interpolate`` shrinks distances by reference / new (the fields of view do not change); ``extrapolate`` keeps
them, the paper's setting. ``large_grid_slope``, when given, replaces ``g`` at every grid larger than the reference:
the paper lowers the global slope to extrapolate (1.0 to 0.6 in its ImageNet experiments).
"""

from __future__ import annotations

import math

import torch

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.grid import Grid, grid_coords
from vitpe.pe.option_checks import non_negative_number, positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import BiasEncoding

#: Each layout's directed heads as (direction in degrees, counter-clockwise from "right"; field of view in degrees).
LAYOUTS: dict[str, tuple[tuple[float, float], ...]] = {
    "180": ((90, 180), (270, 180), (180, 180), (0, 180)),
    "90": ((135, 90), (45, 90), (225, 90), (315, 90), (90, 90), (270, 90), (180, 90), (0, 90)),
    "45": ((112.5, 45), (247.5, 45), (157.5, 45), (22.5, 45), (67.5, 45), (292.5, 45), (202.5, 45), (337.5, 45)),
}
#: On 1D sequences: look left (earlier tokens), then right.
LAYOUT_1D = ((180, 180), (0, 180))
#: What a masked key gets: the most negative bfloat16 (finite, as in the reference code), so that a bias cast to the
#: attention's dtype stays finite and a sum with other biases stays defined; softmax gives it weight 0.
MASKED = torch.finfo(torch.bfloat16).min
#: Boundaries are inclusive; integer offsets never come this close to a boundary without lying on it.
ANGLE_TOLERANCE = 1e-6


def head_slopes(directed: int, undirected: int, layout_size: int) -> torch.Tensor:
    """Per-head slopes, directed heads first: ``2^-(1 + pass)`` through the layout, then ``4^-(1 + group)`` over at
    most four groups of undirected heads. Shape (directed + undirected,)."""
    first = [2.0 ** -(1 + h // layout_size) for h in range(directed)]
    per_group = max(undirected // 4, 1)
    second = [4.0 ** -(1 + min(k // per_group, 3)) for k in range(undirected)]
    return torch.tensor(first + second)


def field_of_view(vectors: torch.Tensor, direction: float, width: float) -> torch.Tensor:
    """Whether each offset ``vectors`` (..., 2) = (rows, cols) of key minus query lies in the wedge of ``width``
    degrees around ``direction`` (degrees counter-clockwise from "right"; rows grow downwards); the zero offset
    always does. Boolean (...,)."""
    angle = torch.atan2(-vectors[..., 0], vectors[..., 1])  # up is -row
    gap = torch.remainder(angle - math.radians(direction) + math.pi, 2 * math.pi) - math.pi  # in [-pi, pi)
    inside = gap.abs() <= math.radians(width) / 2 + ANGLE_TOLERANCE
    return inside | (vectors == 0).all(dim=-1)


@register("lookhere")
class LookHere(BiasEncoding):
    """LookHere. Options: ``layout`` (``180``, ``90`` or ``45``: the directed heads' fields of view), ``undirected``
    (heads that see everything; default heads // 3), ``global_slope`` (default 1), ``layer_slopes`` (first and last
    block's, default (1.5, 0.5)), ``large_grid_slope`` (the global slope at grids larger than the reference)."""

    per_layer = True
    layered = True

    def __init__(self, layout: str = "90", undirected: int | None = None, global_slope: float = 1.0,
                 layer_slopes: tuple[float, float] | list[float] = (1.5, 0.5), large_grid_slope: float | None = None,
                 **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if str(layout) not in LAYOUTS:
            raise ValueError(f"lookhere: layout must be one of {list(LAYOUTS)}, got {layout!r}")
        self.layout = str(layout)
        undirected = self.heads // 3 if undirected is None else undirected
        if not isinstance(undirected, int) or not 0 <= undirected <= self.heads:
            raise ValueError(f"lookhere: undirected must be a whole number of heads from 0 to {self.heads}, "
                             f"got {undirected!r}")
        if len(layer_slopes) != 2:
            raise ValueError(f"lookhere: layer_slopes must be two numbers (first and last block), got {layer_slopes!r}")
        self.undirected = undirected
        self.global_slope = positive_number(global_slope, "lookhere: global_slope")
        self.large_grid_slope = None if large_grid_slope is None else \
            positive_number(large_grid_slope, "lookhere: large_grid_slope")
        first, last = (non_negative_number(s, "lookhere: layer_slopes") for s in layer_slopes)
        self.layer_slopes = (first, last)
        views = LAYOUTS[self.layout] if len(self.grid) == 2 else LAYOUT_1D
        directed = self.heads - undirected
        self.views = [views[h % len(views)] for h in range(directed)]  # (direction, width) per directed head
        slopes = head_slopes(directed, undirected, len(views))[None, :] * torch.linspace(first, last, self.depth)[:, None]
        self.register_buffer("slopes", slopes, persistent=False)  # (depth, nH): s_l * s_h

    def visible(self, grid: Grid) -> torch.Tensor:
        """Which key each head's query sees: boolean (nH, N, N), undirected heads all True."""
        coords = grid_coords(grid, self.device).float()  # (N, ndim)
        vectors = coords[None, :, :] - coords[:, None, :]  # (N, N, ndim): key minus query
        if len(grid) == 1:
            vectors = torch.cat([torch.zeros_like(vectors), vectors], dim=-1)  # a sequence is one row
        masks = [field_of_view(vectors, direction, width) for direction, width in self.views]
        masks += [torch.ones(vectors.shape[:2], dtype=torch.bool, device=self.device)] * self.undirected
        return torch.stack(masks)  # (nH, N, N)

    def bias(self, grid: Grid) -> torch.Tensor:
        scale = self.large_grid_slope if self.large_grid_slope is not None and \
            any(n > r for n, r in zip(grid, self.grid)) else self.global_slope
        positions = self.positions_at(grid)  # (N, ndim) in reference units
        distance = (positions[:, None, :] - positions[None, :, :]).norm(dim=-1)  # (N, N), exactly 0 on the diagonal
        bias = -scale * self.slopes[:, :, None, None] * distance  # (depth, nH, N, N)
        return bias.masked_fill(~self.visible(grid), MASKED)
