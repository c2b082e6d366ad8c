"""``fire`` -- FIRE: an MLP of log-scaled relative offsets, normalised by the range of offsets the input holds.

Paper: Li et al., "Functional Interpolation for Relative Positions Improves Long Context Transformers" (ICLR 2024).
Site: logits. Parameters: per layer an MLP ``ndim -> hidden (32) -> nH`` with ReLU (``first_weight``, ``first_bias``,
``last_weight``, ``last_bias``, stacked over the layers), and two learned
scalars, ``c`` (the log's scale) and ``L`` (the normalisation's threshold); output of shape (depth, nH, N, N).

In 1D and causal, FIRE's bias is ``f(psi(i - j) / psi(max(L, i)))`` with ``psi(x) = log(c x + 1)``: an offset is
divided by the range of offsets the query ``i`` can see, so that a longer input maps into the range seen in training.
In an encoder on a grid every query sees the whole grid, so here the range is the grid's along each axis:

``u_a = sign(d_a) * psi(|d_a|) / psi(max(L, R_a))``,  ``bias = MLP(u)``

for each axis ``a`` of the offset ``d`` (query minus key, in cells), with ``R_a`` the largest ``|d_a|``: ``g_a - 1``
for a grid of ``g_a`` cells. Per axis and signed rather than of the distance: a distance cannot tell an image from its mirror image (ALiBi's
limit, RESULTS.md), and per-axis ranges normalise a non-square grid along each side. ``c`` and ``L`` are kept positive
(softplus); ``L`` starts at one cell, below any grid's range, so the normalisation starts as (about) the range's alone.
One change from the paper: ``max(L, R)`` is the smooth maximum ``log(e^L + e^R)`` (within log 2 of the maximum), since
under a hard maximum ``L`` gets no gradient while ``R`` exceeds it and could never learn to exceed it.

Resize: FIRE's normalisation *is* an interpolation (the "functional interpolation" of its title): in ``interpolate``
``R_a`` is the current grid's, so a larger grid maps back into [-1, 1] -- the behaviour its paper reports to hold at
longer inputs; in ``extrapolate`` ``R_a`` stays the reference grid's and larger offsets continue beyond 1 (the bias at
the reference grid's offsets unchanged). A learned ``L`` above ``R_a`` makes the two agree.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vitpe.pe.base import CommonArgs, Unpack
from vitpe.pe.grid import Grid, relative_index, relative_offsets
from vitpe.pe.option_checks import positive_number
from vitpe.pe.registry import register
from vitpe.pe.sites import BiasEncoding, gather_relative


def inverse_softplus(value: float) -> float:
    """The ``x`` with ``softplus(x) == value`` (> 0)."""
    return value + math.log(-math.expm1(-value))


def uniform(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): nn.Linear's default initialisation."""
    bound = 1 / math.sqrt(fan_in)
    return torch.empty(shape).uniform_(-bound, bound)


def normalised_offsets(offsets: torch.Tensor, extent: torch.Tensor, c: torch.Tensor,
                       threshold: torch.Tensor) -> torch.Tensor:
    """FIRE's ``sign(d) psi(|d|) / psi(max(L, R))`` per axis of ``offsets`` (T, ndim), with ``extent`` (ndim,) the
    range ``R`` of each axis, ``psi(x) = log(c x + 1)`` and the maximum smooth (``log(e^L + e^R)``); (T, ndim)."""
    scale = torch.log1p(c * torch.logaddexp(threshold, extent))  # (ndim,): a smooth max(L, R)
    return torch.sign(offsets) * torch.log1p(c * offsets.abs()) / scale


@register("fire")
class FIRE(BiasEncoding):
    """FIRE on grids. Options: ``hidden`` (MLP width, default 32), ``c`` (initial log scale, default 1),
    ``threshold`` (initial ``L`` in cells, default 1)."""

    per_layer = True
    layered = True

    def __init__(self, hidden: int = 32, c: float = 1.0, threshold: float = 1.0, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if not isinstance(hidden, int) or hidden < 1:
            raise ValueError(f"fire: hidden must be a whole number >= 1, got {hidden!r}")
        c = positive_number(c, "fire: c")
        threshold = positive_number(threshold, "fire: threshold")
        self.c_raw = nn.Parameter(torch.tensor(inverse_softplus(c)))
        self.threshold_raw = nn.Parameter(torch.tensor(inverse_softplus(threshold)))
        ndim = len(self.grid)
        # every layer's MLP as stacked weights (one batched product per forward), initialised as nn.Linear's default;
        # plain parameters, so that a model's std-0.02 init of its Linear layers leaves the bias's scale alone
        self.first_weight = nn.Parameter(uniform((self.depth, ndim, hidden), ndim))
        self.first_bias = nn.Parameter(uniform((self.depth, 1, hidden), ndim))
        self.last_weight = nn.Parameter(uniform((self.depth, hidden, self.heads), hidden))
        self.last_bias = nn.Parameter(uniform((self.depth, 1, self.heads), hidden))

    @property
    def c(self) -> torch.Tensor:
        return F.softplus(self.c_raw)

    @property
    def threshold(self) -> torch.Tensor:
        return F.softplus(self.threshold_raw)

    def bias(self, grid: Grid) -> torch.Tensor:
        index = self.cached(("index", grid), lambda: relative_index(grid, device=self.device))  # (N, N)
        offsets, extent = self.cached(("offsets", grid, self.resize), lambda: self.geometry(grid))
        u = normalised_offsets(offsets, extent, self.c, self.threshold)  # (T, ndim)
        return gather_relative(self.tables(u), index)  # (depth, nH, N, N)

    def geometry(self, grid: Grid) -> tuple[torch.Tensor, torch.Tensor]:
        """The cell offsets of ``grid`` (T, ndim) and the range each axis is normalised by (ndim,): this grid's when
        interpolating, the reference grid's when extrapolating."""
        offsets = relative_offsets(grid, grid, "extrapolate", self.device).reshape(-1, len(grid))  # (T, ndim)
        ranges = grid if self.resize == "interpolate" else self.grid
        return offsets, torch.tensor([max(n - 1, 1) for n in ranges], dtype=torch.float32, device=self.device)

    def tables(self, u: torch.Tensor) -> torch.Tensor:
        """Every layer's MLP on ``u`` (T, ndim) -> (depth, T, nH)."""
        work = self.working_dtype  # a PE cast to bf16: its MLP in float32 (no-ops in float32)
        first_bias, first_weight, last_bias, last_weight = (p.to(work) for p in (
            self.first_bias, self.first_weight, self.last_bias, self.last_weight))
        hidden = torch.baddbmm(first_bias, u.to(work).expand(self.depth, -1, -1), first_weight).relu_()
        return torch.baddbmm(last_bias, hidden, last_weight)  # (depth, T, hidden) -> (depth, T, nH)
