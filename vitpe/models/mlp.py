"""The MLP of a Transformer block: Linear-GELU-Linear (the ViT's) or SwiGLU.

SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer") gates one linear map of the token with the SiLU of another,
``fc2(silu(fc1_g(x)) * fc1_x(x))``; EVA-02 and DINOv3's larger models use it, EVA-02's base and large models with a
LayerNorm on the hidden features before ``fc2`` (``norm=True``, "sub-LN"). Both are timm's modules (``Mlp``,
``SwiGLU``), so their state-dict keys are timm's. Shapes: (..., D) -> (..., D), hidden width H.
"""

from __future__ import annotations

from functools import partial

from timm.layers import Mlp, SwiGLU
from torch import nn

MLPS = ("gelu", "swiglu")


def hidden_width(dim: int, mlp_ratio: float) -> int:
    """H = mlp_ratio * D, rounded down as timm does; a ratio that is a whole width up to float error (EVA-02's
    4 * 2 / 3 of 192 is 511.99...) is that width."""
    hidden = dim * mlp_ratio
    return round(hidden) if abs(hidden - round(hidden)) < 1e-6 else int(hidden)


def build_mlp(kind: str, dim: int, mlp_ratio: float, drop: float = 0.0, norm: bool = False,
              norm_eps: float = 1e-5) -> nn.Module:
    """The block MLP of ``kind`` (one of :data:`MLPS`), hidden width ``hidden_width(dim, mlp_ratio)``, with a
    LayerNorm on the hidden features when ``norm``."""
    if kind not in MLPS:
        raise ValueError(f"unknown mlp {kind!r}; choose one of {list(MLPS)}")
    hidden = hidden_width(dim, mlp_ratio)
    if hidden < 1:
        raise ValueError(f"mlp_ratio {mlp_ratio} gives no hidden features at width {dim}")
    norm_layer = partial(nn.LayerNorm, eps=norm_eps) if norm else None
    if kind == "swiglu":
        return SwiGLU(dim, hidden, norm_layer=norm_layer, drop=drop)
    return Mlp(dim, hidden_features=hidden, act_layer=nn.GELU, norm_layer=norm_layer, drop=drop)
