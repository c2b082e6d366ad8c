"""Site base classes: what every tokens-, qk- and logits-site PE shares, written once.

* :class:`AdditiveEncoding` -- a table (N, D) added to the grid tokens before the first block.
* :class:`RotaryEncoding` -- rotations of q and k by position-dependent phases (interleaved pairs, float32; the
  rotation itself is :func:`vitpe.pe.rotary.rotate_pairs`).
* :class:`BiasEncoding` -- an additive bias (nH, N, N) on the attention logits, shared or one per layer.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import ClassVar

import torch

from vitpe.pe.base import CommonArgs, PositionEncoding, Unpack, pad_prefix
from vitpe.pe.mixed import GridLayout
from vitpe.pe.grid import Grid
from vitpe.pe.rotary import rotate_pairs, rotate_qk_of_qkv


class AdditiveEncoding(PositionEncoding):
    """Tokens site: ``x + pe`` on the grid tokens before block 0. Subclasses implement :meth:`embedding`."""

    site = "tokens"

    def embedding(self, grid: Grid) -> torch.Tensor:
        """The position embedding of every grid cell, row-major, shape (N, D)."""
        raise NotImplementedError

    def _prepare(self, grid: Grid) -> torch.Tensor:
        return pad_prefix(self.embedding(grid), self.num_prefix_tokens)  # (P + N, D)

    def add_to_tokens(self, x: torch.Tensor, state: torch.Tensor, layer: int) -> torch.Tensor:
        if layer != 0:
            return x
        self.check_tokens(x.shape[-2], state.shape[-2], "x")
        return x + state.to(x.dtype)


def _has_autocast(kind: str) -> bool:
    """Whether devices of ``kind`` have autocast (meta has none). Not asked inside a compiled graph, whose devices
    (CPU, GPU) have it: torch 2.11's Dynamo cannot trace the question, and its graph break inside the ``with`` of
    :meth:`RotaryEncoding._prepare` recompiled on every call until the recompile limit stopped the run (an H200)."""
    return torch.compiler.is_compiling() or torch.amp.is_autocast_available(kind)


def _autocast_off(device: torch.device) -> AbstractContextManager:
    """Autocast turned off on ``device`` inside the block (a device without autocast has none to turn off)."""
    return torch.autocast(device.type, enabled=False) if _has_autocast(device.type) else nullcontext()


def _autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype autocast runs the attention in on ``device``, or None where autocast is off."""
    kind = device.type
    if _has_autocast(kind) and torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return None


#: A rotary PE's per-forward state: (cos, sin), each (P + N, Dh/2), or per layer a tuple of ``depth`` (nH, P + N, Dh/2).
RotaryState = tuple[torch.Tensor, torch.Tensor] | tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]


class RotaryEncoding(PositionEncoding):
    """q,k site: rotary position embedding on interleaved pairs (pair ``j`` is channels ``2j`` and ``2j + 1``).

    Subclasses implement :meth:`phases`, the angle of every rotation pair at every grid cell: shape (N, Dh/2) when
    shared by all layers and heads, or (depth, nH, N, Dh/2) when ``per_layer`` is set. Prefix tokens get angle 0
    (cos 1, sin 0), so one rotation covers the whole sequence without slicing.
    """

    site = "qk"
    per_layer: ClassVar[bool] = False

    def __init__(self, **common: Unpack[CommonArgs]) -> None:
        super().__init__(**common)
        pairs_per_axis = 2 * len(self.grid)
        if self.head_dim % pairs_per_axis:
            raise ValueError(
                f"{self.name} on a {len(self.grid)}D grid needs the head dim (dim / heads = {self.dim} / {self.heads} "
                f"= {self.head_dim}) to be divisible by {pairs_per_axis}; change dim or heads"
            )

    def phases(self, grid: Grid) -> torch.Tensor:
        raise NotImplementedError

    def temperature(self, grid: Grid) -> float:
        """A factor on q and k at ``grid`` (YaRN's, in the ``yarn`` mode of :mod:`vitpe.pe.frequency_scaling`)."""
        return 1.0

    def _prepare(self, grid: Grid) -> RotaryState:
        # in float32 whatever autocast says: RoPE-Mixed's angles are products (an einsum) that autocast would round to
        # bfloat16, an error of about 0.1 in cos at a 16 x 16 grid (the RoPE-ViT code disables autocast there too)
        with _autocast_off(self.device):
            phase = pad_prefix(self.phases(grid), self.num_prefix_tokens).float()  # (..., P + N, Dh/2)
        if self.per_layer:  # (depth, nH, P + N, Dh/2) laid out token-major, as q and k are: the rotation's inner loop
            phase = phase.transpose(1, 2).contiguous().transpose(1, 2)  # then runs over all heads of a token (0.7x)
        cos, sin = phase.cos(), phase.sin()
        temperature = self.temperature(grid)
        if temperature != 1.0:  # YaRN: q and k each scaled, the prefix tokens' too (their rows: cos 1, sin 0)
            cos, sin = cos * temperature, sin * temperature
        if self.per_layer:  # split once: the layers' angle gradients then gather in one stack, where indexing per
            return cos.unbind(0), sin.unbind(0)  # layer would give each a zero-filled (depth, ...) copy to sum
        return cos, sin

    def batch_states(self, layout: GridLayout, states: list[RotaryState]) -> RotaryState | None:
        """The grids' angle tables as one per image, padded to the batch's T (cos 1, sin 0 on padding): cos and sin
        (B, 1, T, Dh/2), per layer (B, nH, T, Dh/2) each, which the hooks broadcast over the heads as they do a
        grid's (T, Dh/2). None for a subclass whose state is more than these tables (STRING's)."""
        if type(self)._prepare is not RotaryEncoding._prepare:
            return None

        def per_image(tables: list[torch.Tensor], fill: float) -> torch.Tensor:  # (nH or 1, t, Dh/2) per group
            return layout.assemble([table.reshape(1, -1, *table.shape[-2:]) for table in tables], dim=2, fill=fill)

        if self.per_layer:  # per layer, a tuple of (nH, t, Dh/2) per grid
            return tuple(tuple(per_image([s[part][layer] for s in states], fill) for layer in range(self.depth))
                         for part, fill in ((0, 1.0), (1, 0.0)))
        return per_image([s[0] for s in states], 1.0), per_image([s[1] for s in states], 0.0)

    def rotate(self, x: torch.Tensor, state: RotaryState, layer: int) -> torch.Tensor:
        return rotate_pairs(x, *self._angles(state, layer, x.shape[-2], "x"))

    def rotate_qkv(self, qkv: torch.Tensor, state: RotaryState, layer: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        cos, sin = self._angles(state, layer, qkv.shape[-2], "qkv")
        return rotate_qk_of_qkv(qkv, cos, sin, in_place=True)  # q and k rotated in one pass

    def _angles(self, state: RotaryState, layer: int, tokens: int, what: str) -> tuple[torch.Tensor, torch.Tensor]:
        """This layer's cos, sin: (nH, P + N, Dh/2) per layer, else (P + N, Dh/2), checked against the ``tokens`` of
        the hook's input."""
        cos, sin = state
        if self.per_layer:
            self.check_layer(layer)
            cos, sin = cos[layer], sin[layer]
        self.check_tokens(tokens, cos.shape[-2], what)
        return cos, sin


def gather_relative(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Expand a relative table (..., T, nH) with an index (N, N) into a bias (..., nH, N, N)."""
    return table[..., index, :].movedim(-1, -3)  # (..., N, N, nH) -> (..., nH, N, N)


#: A logits-site PE's per-forward state: its bias (nH, P + N, P + N), or per layer a tuple of ``depth`` of them.
BiasState = torch.Tensor | tuple[torch.Tensor, ...]


class BiasEncoding(PositionEncoding):
    """Logits site: an additive attention bias. Subclasses implement :meth:`bias`, shape (nH, N, N) when shared by all
    layers or (depth, nH, N, N) when ``per_layer`` is set. Rows and columns of prefix tokens get zero bias."""

    site = "logits"
    per_layer: ClassVar[bool] = False

    def bias(self, grid: Grid) -> torch.Tensor:
        raise NotImplementedError

    def _prepare(self, grid: Grid) -> torch.Tensor:
        # contiguous: a bias gathered from a (T, nH) table is a view with the heads innermost; handed on as such,
        # SDPA's fused CPU kernel copies its stride-0 batch view into a full (B, nH, T, T) mask, forward and backward
        # (ALiBi's training step at 64 px without a class token, whose zero padding made the copy: 0.90x with it)
        bias = pad_prefix(self.bias(grid), self.num_prefix_tokens, dims=(-2, -1))  # (..., nH, P + N, P + N)
        return bias.contiguous()

    def prepare(self, grid: int | tuple[int, ...]) -> BiasState:
        grid = self.check_grid(grid)
        bias = super().prepare(grid)  # ((depth,) nH, P + N, P + N); cached where nothing in it is learned
        dtype = _autocast_dtype(bias.device)
        if dtype is not None and bias.dtype != dtype:  # one cast for every layer, where each layer's attention would
            key = ("state", grid, self.resize, dtype)  # cast its own slice; a fixed bias's, once
            bias = self.cached_if_fixed(key, lambda: bias.to(dtype))
        # split once: the layers' gradients then gather in one stack, where indexing per layer gives each a zero-filled
        # (depth, ...) copy that autograd then sums (six of each per step on a GPU: launches, for nothing)
        return bias.unbind(0) if self.per_layer else bias

    def attention_bias(self, state: BiasState, layer: int) -> torch.Tensor:
        if not self.per_layer:
            return state
        self.check_layer(layer)
        return state[layer]
