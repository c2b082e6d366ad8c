"""Composed position encodings: several registered PEs acting together, e.g. ``"learnable+rope_mixed"``.

Used by rope-vit's ``*_ape`` models (a learned absolute table added to the tokens *and* a rotation of q and k) and by
any experiment that stacks encodings. Built by :func:`vitpe.pe.build` from a name with ``+`` between members; the
options are keyed by member, ``{"rope_mixed": {"theta": 10}, "learnable": {"init_std": 0.02}}``.

Every hook runs each member's hook in the order of the name: token additions in turn, rotations in turn (two
rotations of q and k compose), attention biases summed. A member's options may include ``resize`` to pin its resize
mode (rope-vit's ``*_ape`` models resample the table and continue the rotation: ``{"rope_axial": {"resize":
"extrapolate"}}``); the others follow the model's mode, and :attr:`resize` changes only them. A member's ``grid``
gives it a reference grid of its own: EVA-02 at 448 px learned its table on the 32 x 32 grid of its input but scales
its rotation onto 16 x 16 (``{"rope_axial": {"grid": [16, 16]}}``). Parameters live under
``members.<name>.``; each member resamples its own tables when a state dict from another grid is loaded.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from vitpe.pe.layout import unbind_in_memory_order
from vitpe.pe.base import PositionEncoding
from vitpe.pe.grid import RESIZE_MODES, as_grid, check_resize_mode

SEPARATOR = "+"
#: Options every member takes besides its own: its pinned resize mode and its own reference grid.
MEMBER_KEYS = ("resize", "grid")


def member_names(name: str) -> list[str]:
    """``"learnable+rope_mixed"`` -> ``["learnable", "rope_mixed"]``; a member named twice is a ``ValueError``."""
    names = [part.strip() for part in name.split(SEPARATOR)]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise ValueError(f"composed position encoding {name!r}: give distinct names joined by '+', e.g. "
                         f"'learnable+rope_mixed'")
    return names


def member_grid(member: str, grid: Any, dims: int) -> tuple[int, ...]:
    """A member's own reference grid (:func:`vitpe.pe.grid.as_grid`), checked to have ``dims`` axes."""
    try:
        cells = as_grid(grid)
    except (TypeError, ValueError):
        cells = ()
    if len(cells) != dims:
        raise ValueError(f"the grid option of {member!r} must be {dims} positive whole numbers, e.g. "
                         f"{[16] * dims}; got {grid!r}")
    return cells


class ComposedEncoding(PositionEncoding):
    """Several PEs behind the one interface. Built by :func:`vitpe.pe.build`; ``members`` is built by it too."""

    resize_modes = RESIZE_MODES  # each member accepts or refuses a mode itself

    def __init__(self, name: str, build_member: Callable[..., PositionEncoding], member_options: dict[str, dict],
                 **common: Any) -> None:
        super().__init__(**common)
        self.name = name
        self.members = nn.ModuleDict()
        self.pinned: set[str] = set()
        for member in member_names(name):
            options = dict(member_options.get(member, {}))
            if "resize" in options:
                options["resize"] = check_resize_mode(options["resize"])
                self.pinned.add(member)
            if "grid" in options:
                options["grid"] = member_grid(member, options["grid"], len(common["grid"]))
            self.members[member] = build_member(member, **{**common, **options})
        self.site = SEPARATOR.join(dict.fromkeys(m.site for m in self.members.values()))
        self.widens_qk = any(m.widens_qk for m in self.members.values())  # rotations first, then the widening one

    @property
    def sites(self) -> frozenset[str]:
        return frozenset().union(*(m.sites for m in self.members.values()))

    def _set_resize(self, mode: str) -> None:
        self._resize = mode
        for name, member in self.members.items():
            if name not in self.pinned:
                member.resize = mode

    # ------------------------------------------------------------------------------------------------- hooks
    def prepare(self, grid: int | tuple[int, ...]) -> tuple:
        grid = self.check_grid(grid)
        return tuple(member.prepare(grid) for member in self.members.values())

    def add_to_tokens(self, x: torch.Tensor, state: tuple, layer: int) -> torch.Tensor:
        for member, s in zip(self.members.values(), state):
            x = member.add_to_tokens(x, s, layer)
        return x

    def rotate(self, x: torch.Tensor, state: tuple, layer: int) -> torch.Tensor:
        for member, s in zip(self.members.values(), state):
            x = member.rotate(x, s, layer)
        return x

    def rotate_qkv(self, qkv: torch.Tensor, state: tuple, layer: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rotary = [(member, s) for member, s in zip(self.members.values(), state) if "qk" in member.sites]
        if len(rotary) == 1:  # the one rotating member's fused form
            member, s = rotary[0]
            return member.rotate_qkv(qkv, s, layer)
        q, k, v = unbind_in_memory_order(qkv)  # 3 x (..., nH, T, Dh)
        return (*self.rotate_qk(q, k, state, layer), v)

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, state: tuple, layer: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each rotating member in turn; the one that widens q and k (PaPE) last, on the rotated q and k."""
        rotary = [(member, s) for member, s in zip(self.members.values(), state) if "qk" in member.sites]
        for member, s in sorted(rotary, key=lambda pair: pair[0].widens_qk):
            q, k = member.rotate_qk(q, k, s, layer)
        return q, k

    def attention_bias(self, state: tuple, layer: int) -> torch.Tensor | None:
        total = None
        for member, s in zip(self.members.values(), state):
            bias = member.attention_bias(s, layer)  # (nH, T, T) or None
            if bias is not None:
                total = bias if total is None else total + bias
        return total

    def no_weight_decay(self) -> set[str]:
        return {f"members.{name}.{p}" for name, member in self.members.items() for p in member.no_weight_decay()}

    def extra_repr(self) -> str:
        pinned = f", pinned={sorted(self.pinned)}" if self.pinned else ""
        return super().extra_repr() + pinned
