"""Batches whose images lie on different grids (native aspect, many resolutions), for every PE through its hooks.

A *mixed batch* holds B sequences of different lengths, padded to the longest: tokens (B, T, D) with
T = P + max_b N_b, sequence b's P prefix tokens first, then its N_b = gh_b * gw_b grid tokens in row-major order,
then padding. :class:`GridLayout` says which grid each sequence has; :meth:`PositionEncoding.prepare_mixed
<vitpe.pe.base.PositionEncoding.prepare_mixed>` turns it into a :class:`MixedState`, which a model uses in place of
the one-grid state: its three hooks have the one-grid hooks' shapes with a batch dimension in front.

Every PE works this way without code of its own, because the state of one grid is what each PE already computes: the
batch is split into its groups of images that share a grid, and each group goes through the PE's one-grid hook on
its own tokens, unpadded --

- tokens site: the table (resampled to the group's grid in the PE's resize mode), PEG's convolution on the group's
  own (gh, gw), added to the group's tokens;
- q,k site: the group's q and k rotated by the rotation of its grid (NTK / YaRN scaled from that grid), written into
  zero-padded q and k (PaPE's widened q and k too);
- logits site: the group's bias (nH, t, t) placed in a per-image bias (B, nH, T, T), whose padding keys get
  :data:`PADDING_BIAS`: a finite minimum, so that no softmax row is all -inf (no NaN), and in float32 exp() of it is
  exactly 0, so that an image's output in a mixed batch is its output alone.

The cost is one gather and one scatter per distinct grid per hook (:meth:`GridLayout.assemble` places the groups'
results); a PE whose hook can take one state for every image at once says so (:meth:`PositionEncoding.batch_states
<vitpe.pe.base.PositionEncoding.batch_states>`: the rotary PEs' per-image angle tables, one rotation a layer). A
batch whose images share one grid takes the one-grid path itself (a model checks :attr:`GridLayout.uniform`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch

from vitpe.pe.grid import Grid, as_grid

if TYPE_CHECKING:  # the base class imports this module
    from vitpe.pe.base import PositionEncoding

#: Added to the scores of padding keys: half float16's minimum, finite in float16, bfloat16 and float32 even when added
#: to a bias of the same size, and far below any score (exp of it is 0 in every one of them).
PADDING_BIAS = torch.finfo(torch.float16).min / 2


@dataclass(frozen=True)
class GridGroup:
    """The sequences of a mixed batch that share ``grid``: their rows ``rows`` (long, on the batch's device; as numbers
    in ``members``) and ``tokens`` = P + gh * gw, the length of each before padding."""

    grid: Grid
    rows: torch.Tensor
    tokens: int
    members: tuple[int, ...]


class GridLayout:
    """Which grid each sequence of a mixed batch lies on, and what that makes of the padded tokens.

    Args:
        grids: one grid per sequence, ``(gh, gw)`` for images (or ``(L,)`` for sequences), in batch order.
        num_prefix_tokens: P, the tokens in front of each sequence's grid tokens (class token, registers).
        device: where the row indices and masks live (the tokens' device).
    """

    def __init__(self, grids: Sequence[int | Sequence[int]], num_prefix_tokens: int,
                 device: torch.device | str = "cpu") -> None:
        if not grids:
            raise ValueError("a mixed batch needs at least one sequence; got no grids")
        self.grids: tuple[Grid, ...] = tuple(as_grid(g) for g in grids)
        if len({len(g) for g in self.grids}) > 1:
            raise ValueError(f"the grids of one batch must have one number of dimensions; got "
                             f"{sorted(set(self.grids))}")
        self.num_prefix_tokens = num_prefix_tokens
        self.device = torch.device(device)
        self.lengths = [num_prefix_tokens + math.prod(g) for g in self.grids]
        self.tokens = max(self.lengths)  # T
        rows: dict[Grid, list[int]] = {}
        for row, grid in enumerate(self.grids):
            rows.setdefault(grid, []).append(row)
        self.groups = tuple(GridGroup(grid, torch.tensor(members, dtype=torch.long, device=self.device),
                                      num_prefix_tokens + math.prod(grid), tuple(members))
                            for grid, members in rows.items())

    @property
    def batch(self) -> int:
        return len(self.grids)

    @property
    def uniform(self) -> bool:
        """Whether every sequence lies on one grid (then no padding: the one-grid path applies)."""
        return len(self.groups) == 1

    def token_mask(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """(B, T, 1): 1 on each sequence's tokens, 0 on its padding."""
        lengths = torch.tensor(self.lengths, device=self.device)
        return (torch.arange(self.tokens, device=self.device) < lengths[:, None]).to(dtype)[..., None]

    def key_mask(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """(B, 1, 1, T): 0 on each sequence's keys, :data:`PADDING_BIAS` on its padding (added to the scores)."""
        return (1 - self.token_mask(dtype)[..., 0]).mul_(PADDING_BIAS)[:, None, None, :]

    def assemble(self, parts: Sequence[torch.Tensor], dim: int, fill: float = 0.0, square: bool = False
                 ) -> torch.Tensor:
        """The groups' ``parts`` (in the order of :attr:`groups`) as one padded batch: part ``i`` has a leading batch
        dimension of its group's size, or 1 to be shared by the group's sequences, and its group's ``tokens`` along
        ``dim`` (and along ``dim + 1`` too with ``square``: a bias (1, nH, t, t)); it goes to its rows, the first
        ``tokens`` places there, and ``fill`` everywhere else. The other dimensions are the first part's."""
        shape = [self.batch, *parts[0].shape[1:]]
        shape[dim] = self.tokens
        if square:
            shape[dim + 1] = self.tokens
        out = parts[0].new_full(shape, fill)
        for group, part in zip(self.groups, parts):
            tokens = (slice(group.tokens),) * (2 if square else 1)
            out[(group.rows, *(slice(None),) * (dim - 1), *tokens)] = part
        return out

    def __repr__(self) -> str:
        return f"GridLayout({self.batch} sequences, {len(self.groups)} grids, T={self.tokens})"


class MixedState:
    """A PE's state for a mixed batch: each distinct grid's one-grid state, and the three hooks over the batch.

    Made by :meth:`PositionEncoding.prepare_mixed <vitpe.pe.base.PositionEncoding.prepare_mixed>`; a model calls
    :meth:`add_to_tokens`, :meth:`rotate_qkv` and :meth:`attention_bias` where it would call the PE's hooks.
    """

    def __init__(self, pe: "PositionEncoding", layout: GridLayout) -> None:
        if layout.num_prefix_tokens != pe.num_prefix_tokens:
            raise ValueError(f"{pe.name}: the batch has {layout.num_prefix_tokens} prefix tokens per image, the PE was "
                             f"built with num_prefix_tokens={pe.num_prefix_tokens}")
        self.pe, self.layout = pe, layout
        self.states = [pe.prepare(group.grid) for group in layout.groups]
        self.batched = pe.batch_states(layout, self.states)  # the PE's own per-image state, where it has one
        self._key_masks: dict[torch.dtype, torch.Tensor] = {}

    def _check(self, tokens: int, what: str) -> None:
        if tokens != self.layout.tokens:
            raise ValueError(f"{self.pe.name}: {what} has {tokens} tokens; the mixed batch's layout pads to "
                             f"{self.layout.tokens}")

    def add_to_tokens(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """Tokens site: ``x`` (B, T, D) -> (B, T, D), each group's tokens through the PE on its own grid; ``x``
        itself where the PE adds nothing at ``layer``."""
        self._check(x.shape[1], "the tokens")
        if "tokens" not in self.pe.sites:
            return x
        parts, moved = [], False
        for group, state in zip(self.layout.groups, self.states):
            part = x[group.rows, :group.tokens]  # (b, t, D), a copy
            parts.append(self.pe.add_to_tokens(part, state, layer))
            moved |= parts[-1] is not part
        return self.layout.assemble(parts, dim=1) if moved else x  # (B, T, D), zeros on padding

    def rotate_qkv(self, qkv: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q,k site: stacked projections (3, B, nH, T, Dh) -> q, k, v, each group's q and k rotated on its own grid
        (zeros on padding; q and k may gain channels, as PaPE's do)."""
        self._check(qkv.shape[-2], "qkv")
        if "qk" not in self.pe.sites:
            return qkv[0], qkv[1], qkv[2]
        if self.batched is not None:  # one fused rotation of the whole batch by per-image angles
            return self.pe.rotate_qkv(qkv, self.batched, layer)
        return (*self.rotate_qk(qkv[0], qkv[1], layer), qkv[2])

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """q,k site on queries and keys given apart, each (B, nH, T, Dh) -> (q, k), as :meth:`rotate_qkv` rotates
        them."""
        self._check(q.shape[-2], "q")
        if "qk" not in self.pe.sites:
            return q, k
        if self.batched is not None:  # the whole batch by per-image angles
            return self.pe.rotate_qk(q, k, self.batched, layer)
        rotated = [self.pe.rotate_qk(q[group.rows, :, :group.tokens], k[group.rows, :, :group.tokens], state, layer)
                   for group, state in zip(self.layout.groups, self.states)]  # (b, nH, t, Dh) -> (b, nH, t, E) each
        q, k = (self.layout.assemble([part[i] for part in rotated], dim=2) for i in (0, 1))  # (B, nH, T, E) each
        return q, k

    def attention_bias(self, layer: int) -> torch.Tensor:
        """Logits site: (B, nH, T, T), each image's bias on its own grid with its padding keys masked; the key mask
        (B, 1, 1, T) alone for a PE without a bias. Padding queries get no bias (their outputs are never read)."""
        biases = [self.pe.attention_bias(state, layer) for state in self.states] if "logits" in self.pe.sites else []
        if not biases or biases[0] is None:
            return self.key_mask(torch.float32)
        full = self.layout.assemble([bias[None] for bias in biases], dim=2, square=True)  # (nH, t, t) each
        return full.add_(self.key_mask(full.dtype))

    def key_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """The layout's key mask (B, 1, 1, T), made once per forward and dtype."""
        if dtype not in self._key_masks:
            self._key_masks[dtype] = self.layout.key_mask(dtype)
        return self._key_masks[dtype]
