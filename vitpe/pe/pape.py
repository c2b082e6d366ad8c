"""``pape`` -- PaPE: a content-dependent sum of parabolas in the coordinate offset, as extra q and k features.

Paper: "Parabolic Position Encoding" (arXiv 2602.01418, 2026); reference code DTU-PAS/parabolic-position-encoding.
Site: q, k. Parameters per layer: ``directions`` (nH, M, ndim), the parabolas' axes; ``curvature`` and ``slope``
(nH, Dh, M), maps from a query to its parabolas' weights. q and k leave the hook with ``1 + ndim + ndim^2`` more
channels (the value keeps Dh).

For a query at ``p_q`` with content ``x_q`` and a key at ``p_k``, head ``h`` adds to the attention logit

``bias = sum_m [ -a_m (w_m . d)^2 + b_m (w_m . d) ]``,  ``d = p_q - p_k``,  ``a = softplus(.)``, ``b`` linear,

M parabolas (``parabolas``, default 16) along learned directions ``w_m``. Expanded, with ``A = sum_m a_m w_m w_m^T``
and ``beta = sum_m b_m w_m``, it is ``c_q + (2 A p_q - beta) . p_k - <A, p_k p_k^T>`` with
``c_q = -p_q^T A p_q + beta . p_q``: a dot product of the query's ``[c_q, 2 A p_q - beta, -vec A]`` with the key's
``[1, p_k, vec p_k p_k^T]``, so the bias rides in q and k and fused attention runs unchanged (the paper's efficient
form). q's own channels are scaled by ``sqrt(E / Dh)`` and the new ones by ``sqrt(E)``, ``E`` the widened head dim,
so that attention's ``1 / sqrt(E)`` leaves ``q . k / sqrt(Dh) + bias``. Prefix tokens get zeros in the new channels:
no bias to or from them.

One difference from the paper: ``a`` and ``b`` are linear maps of the head's *query vector* ``q_h`` rather than of the
token ``x_q``, so that the PE works inside any attention through the q,k hook (``q_h = W_q x_q`` is itself a linear
map of the token: the maps are the paper's, restricted to rank Dh per head). Positions are in units of the
reference grid's side, as ``liere``'s. ``directions`` start as N(0, 0.5^2), the maps at N(0, 0.02^2) (``a`` about
softplus(0)). Resize: positions squeezed into the reference range (``interpolate``) or continued (``extrapolate``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from vitpe.pe.base import CommonArgs, PositionEncoding, Unpack
from vitpe.pe.grid import Grid
from vitpe.pe.registry import register
from vitpe.pe.sites import _autocast_off


def key_features(positions: torch.Tensor, num_prefix: int) -> torch.Tensor:
    """A key's extra channels ``[1, p, vec p p^T]`` at ``positions`` (N, ndim), zeros for the prefix tokens:
    (P + N, 1 + ndim + ndim^2)."""
    outer = (positions[:, :, None] * positions[:, None, :]).flatten(1)  # (N, ndim^2)
    grid_rows = torch.cat([torch.ones_like(positions[:, :1]), positions, outer], dim=1)
    return F.pad(grid_rows, (0, 0, num_prefix, 0))  # (P + N, 1 + ndim + ndim^2)


@register("pape")
class PaPE(PositionEncoding):
    """PaPE. Options: ``parabolas`` (M per head and layer, default 16)."""

    site = "qk"
    widens_qk = True
    layered = True

    def __init__(self, parabolas: int = 16, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        if not isinstance(parabolas, int) or parabolas < 1:
            raise ValueError(f"pape: parabolas must be a whole number >= 1, got {parabolas!r}")
        ndim = len(self.grid)
        self.parabolas = parabolas
        self.directions = nn.Parameter(torch.randn(self.depth, self.heads, parabolas, ndim) * 0.5)
        self.curvature = nn.Parameter(torch.randn(self.depth, self.heads, self.head_dim, parabolas) * 0.02)
        self.slope = nn.Parameter(torch.randn(self.depth, self.heads, self.head_dim, parabolas) * 0.02)

    def _prepare(self, grid: Grid) -> tuple[torch.Tensor, torch.Tensor]:
        def geometry() -> tuple[torch.Tensor, torch.Tensor]:
            positions = self.positions_in_sides(grid)  # (N, ndim)
            return F.pad(positions, (0, 0, self.num_prefix_tokens, 0)), key_features(positions, self.num_prefix_tokens)

        return self.cached_geometry(("geometry", grid, self.resize), geometry)  # no parameter in it: once per grid

    def query_features(self, q: torch.Tensor, positions: torch.Tensor, layer: int) -> torch.Tensor:
        """A query's extra channels ``[c_q, 2 A p_q - beta, -vec A]`` for ``q`` (..., nH, T, Dh) at ``positions``
        (T, ndim): (..., nH, T, 1 + ndim + ndim^2), zeros for the prefix tokens."""
        work = q.dtype  # the caller's working dtype (float32, or float64 for a PE cast to it)
        w = self.directions[layer].to(work)  # (nH, M, ndim)
        a = F.softplus(torch.einsum("...htd,hdm->...htm", q, self.curvature[layer].to(work)))  # (..., nH, T, M)
        b = torch.einsum("...htd,hdm->...htm", q, self.slope[layer].to(work))  # (..., nH, T, M)
        positions = positions.to(work)
        outer = (w[:, :, :, None] * w[:, :, None, :]).flatten(-2)  # (nH, M, ndim^2): w_m w_m^T, flattened
        A = torch.einsum("...htm,hmk->...htk", a, outer)  # (..., nH, T, ndim^2): vec A
        beta = torch.einsum("...htm,hmi->...hti", b, w)  # (..., nH, T, ndim)
        ndim = positions.shape[-1]
        Ap = (A.unflatten(-1, (ndim, ndim)) * positions[:, None, :]).sum(-1)  # (..., nH, T, ndim): A p_q
        constant = -(Ap * positions).sum(-1, keepdim=True) + (beta * positions).sum(-1, keepdim=True)
        features = torch.cat([constant, 2 * Ap - beta, -A], dim=-1)  # (..., nH, T, 1 + ndim + ndim^2)
        grid_rows = torch.arange(features.shape[-2], device=features.device) >= self.num_prefix_tokens  # (T,)
        return features * grid_rows[:, None]  # the prefix tokens' rows zero

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], layer: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """q and k (..., nH, T, Dh) -> (..., nH, T, E), E = Dh + 1 + ndim + ndim^2: the parabolas' features added."""
        self.check_layer(layer)
        positions, keys = state
        self.check_tokens(q.shape[-2], positions.shape[0], "q")
        with _autocast_off(self.device):
            extra_q = self.query_features(q.to(self.working_dtype), positions, layer)  # (..., nH, T, F)
        width = self.head_dim + extra_q.shape[-1]  # E: the head dim attention will scale by
        grow, unit = math.sqrt(width / self.head_dim), math.sqrt(width)
        q = torch.cat([q * grow, (extra_q * unit).to(q.dtype)], dim=-1)  # (..., nH, T, E)
        k = torch.cat([k, keys.to(k.dtype).expand(*k.shape[:-1], -1)], dim=-1)  # (..., nH, T, E)
        return q, k

    def rotate_qkv(self, qkv: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], layer: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = qkv.unbind(0)  # 3 x (..., nH, T, Dh)
        return (*self.rotate_qk(q, k, state, layer), v)

    def rotate(self, x: torch.Tensor, state: Any, layer: int) -> torch.Tensor:
        raise NotImplementedError("pape widens q and k together: call rotate_qk(q, k, state, layer), or rotate_qkv on "
                                  "the stacked projections (3, ..., nH, T, Dh), as vitpe's attention does")
