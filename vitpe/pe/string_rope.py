"""``string`` -- STRING (Cayley form): axial RoPE after a learned orthogonal change of basis of q and k.

Paper: Schenck et al., "Learning the RoPEs: Better 2D and 3D Position Encodings with STRING" (ICML 2025). Site: q, k.
Parameters ``weight`` of shape (depth, nH, Dh, Dh); RoPE's cos/sin tables (P + N, Dh/2) as ``rope_axial``'s.

STRING's rotations are ``exp(sum_a p_a A_a)`` with commuting generators; every such family is RoPE in another basis,
``R(p) = P^T RoPE(p) P`` with ``P`` orthogonal, so q and k rotate as ``RoPE(p) P q`` (the ``P^T`` cancels in the score).
``P`` here is the Cayley transform of a learned skew-symmetric ``S = W - W^T``: ``P = (I + S)^-1 (I - S)``, per layer
and head; ``W`` starts at zero, so ``P = I`` and a new model is exactly ``rope_axial``. The score
``(Pq)^T RoPE(r - p) (Pk)`` depends on the offset alone, as RoPE's does. At inference ``P`` could be folded into the q
and k projections (the paper's point: RoPE's price); here it is applied per forward, a ``Dh x Dh`` product per head
for q and for k.

Options, resize modes (``interpolate``, ``extrapolate``, ``ntk``, ``yarn``) and coordinate augmentation: those of
``rope_axial`` (:mod:`vitpe.pe.rope_axial`), which gives the RoPE part.
"""

from __future__ import annotations


import torch
from torch import nn

from vitpe.pe.base import CommonArgs, PositionEncoding, Unpack
from vitpe.pe.frequency_scaling import YARN_ALPHA, YARN_BETA
from vitpe.pe.generator_rope import skew
from vitpe.pe.registry import register
from vitpe.pe.rope_axial import AxialRope
from vitpe.pe.rotary import rotate_pairs
from vitpe.pe.sites import _autocast_off

#: STRING's per-forward state: RoPE's (cos, sin), each (P + N, Dh/2), and each layer's P, (nH, Dh, Dh).
StringState = tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]


def cayley(S: torch.Tensor) -> torch.Tensor:
    """``(I + S)^-1 (I - S)`` over the last two dimensions: orthogonal for skew-symmetric ``S``."""
    eye = torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)
    return torch.linalg.solve(eye + S, eye - S)


@register("string")
class StringRope(AxialRope):
    """STRING, Cayley form. Options: those of ``rope_axial`` (``theta``, ``anchor``, ``yarn_alpha``, ``yarn_beta``,
    ``shift``, ``jitter``, ``rescale``)."""

    layered = True

    def __init__(self, theta: float | None = None, yarn_alpha: float = YARN_ALPHA, yarn_beta: float = YARN_BETA,
                 shift: float | None = None, jitter: float | None = None, rescale: float | None = None,
                 anchor: str = "centre", **common: Unpack[CommonArgs]) -> None:
        super().__init__(theta=theta, yarn_alpha=yarn_alpha, yarn_beta=yarn_beta, shift=shift, jitter=jitter,
                         rescale=rescale, anchor=anchor, **common)
        self.weight = nn.Parameter(torch.zeros(self.depth, self.heads, self.head_dim, self.head_dim))

    def _prepare(self, grid) -> StringState:
        cos, sin = super()._prepare(grid)
        with _autocast_off(self.device):
            bases = cayley(skew(self.weight.float()))  # (depth, nH, Dh, Dh)
        return cos, sin, bases.unbind(0)

    def rotate(self, x: torch.Tensor, state: StringState, layer: int) -> torch.Tensor:
        cos, sin, bases = state
        self.check_layer(layer)
        self.check_tokens(x.shape[-2], cos.shape[-2], "x")
        changed = x @ bases[layer].transpose(-1, -2).to(x.dtype)  # (..., nH, T, Dh): P q for every token
        return rotate_pairs(changed, cos, sin)

    def rotate_qkv(self, qkv: torch.Tensor, state: StringState, layer: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # the base class's unfused form (q, k unbound in qkv's memory order), not RoPE's fused rotation: it has no P
        return PositionEncoding.rotate_qkv(self, qkv, state, layer)
