"""A PE prepared for one forward and bound to a block: the typed form of the hooks for attention of one's own.

:meth:`PositionEncoding.prepare <vitpe.pe.base.PositionEncoding.prepare>` returns each PE's own state (a tensor, a
tuple of tables, None), which vitpe's model threads with the block index through its blocks: the form that
``torch.compile`` and the fused attention want. For a host model, the same calls come typed and with nothing to thread::

    bound = pe.bind((14, 14))         # once per forward (or pe.bind(layout) for a batch of many grids)
    hooks = bound.layer(i)            # block i: hand it to the block
    x = hooks.add_to_tokens(x)        # tokens-site PEs, before the block
    q, k = hooks.rotate_qk(q, k)      # q,k-site PEs (PaPE widens both)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=hooks.attention_bias())  # logits-site PEs

Each hook is the identity (or None) for a PE of another site, so this code hosts every PE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from vitpe.pe.grid import Grid
from vitpe.pe.mixed import GridLayout, MixedState

if TYPE_CHECKING:
    from vitpe.pe.base import PositionEncoding


@dataclass(frozen=True)
class BoundEncoding:
    """A PE and its state for one forward at ``grid`` (a :class:`~vitpe.pe.mixed.GridLayout` for a mixed batch)."""

    pe: "PositionEncoding"
    grid: Grid | GridLayout
    state: Any  # the PE's own state, or a MixedState for a mixed batch

    @classmethod
    def of(cls, pe: "PositionEncoding", grid: int | tuple[int, ...] | GridLayout) -> "BoundEncoding":
        if isinstance(grid, GridLayout):
            return cls(pe, grid, pe.prepare_mixed(grid))
        grid = pe.check_grid(grid)
        return cls(pe, grid, pe.prepare(grid))

    @property
    def mixed(self) -> bool:
        return isinstance(self.state, MixedState)

    def layer(self, index: int) -> "LayerHooks":
        """The hooks of block ``index`` (0-based); a layered PE checks it against its ``depth``."""
        self.pe.check_layer(index)
        return LayerHooks(self, index)


@dataclass(frozen=True)
class LayerHooks:
    """The three hooks of one block. Shapes: tokens (B, P + N, D); q, k, v (B, nH, P + N, Dh); in a mixed batch
    P + N is the layout's padded length, and the bias also masks the padding keys."""

    bound: BoundEncoding
    index: int

    def add_to_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens site: ``x`` (B, P + N, D) with the PE's contribution before this block."""
        b = self.bound
        return b.state.add_to_tokens(x, self.index) if b.mixed else b.pe.add_to_tokens(x, b.state, self.index)

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q,k site: queries and keys (B, nH, P + N, Dh) -> (q, k); PaPE returns them with more channels than v."""
        b = self.bound
        return b.state.rotate_qk(q, k, self.index) if b.mixed else b.pe.rotate_qk(q, k, b.state, self.index)

    def rotate_qkv(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q,k site on stacked projections (3, B, nH, P + N, Dh) -> (q, k, v): a rotary PE's fused form."""
        b = self.bound
        return b.state.rotate_qkv(qkv, self.index) if b.mixed else b.pe.rotate_qkv(qkv, b.state, self.index)

    def attention_bias(self) -> torch.Tensor | None:
        """Logits site: the float bias (nH, P + N, P + N) to add to the scores, (B, nH, T, T) in a mixed batch (where
        it also masks padding keys); None where the PE adds none."""
        b = self.bound
        return b.state.attention_bias(self.index) if b.mixed else b.pe.attention_bias(b.state, self.index)
