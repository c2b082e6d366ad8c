"""Multi-head self-attention and the pre-norm Transformer block, both PE-agnostic.

Shapes: B batch, T tokens (prefix + grid), D width, nH heads, Dh = D / nH head dim.
The block never knows which PE it hosts: it calls the PE's hooks (see :mod:`vitpe.pe.base`) and
``torch.nn.functional.scaled_dot_product_attention`` does the rest (a logits-site bias goes in as a float mask; a
learned bias in CPU training goes to :mod:`vitpe.models.biased_attention` instead).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import DropPath, LayerScale
from torch import nn

from vitpe.models.biased_attention import biased_attention, takes_fast_path
from vitpe.models.mlp import build_mlp
from vitpe.pe.base import PositionEncoding
from vitpe.pe.mixed import MixedState


class Attention(nn.Module):
    """Self-attention with PE hooks. ``key_mask`` is an optional additive float mask (B, 1, 1, T) for padding."""

    def __init__(self, dim: int, heads: int, qkv_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor, pe: PositionEncoding, state: Any, layer: int,
                key_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, T, D = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, nH, T, Dh)
        if isinstance(state, MixedState):  # images on different grids, padded: the state holds each grid's hooks
            q, k, v = state.rotate_qkv(qkv, layer)  # 3 x (B, nH, T, Dh)
            mask = state.attention_bias(layer)  # (B, nH, T, T) with the padding keys masked, or (B, 1, 1, T)
        else:
            q, k, v = pe.rotate_qkv(qkv, state, layer)  # 3 x (B, nH, T, Dh), q and k rotated at the qk site
            mask = pe.attention_bias(state, layer)  # (nH, T, T) or None
        dropout = self.attn_drop if self.training else 0.0
        if mask is not None and key_mask is None and not dropout and takes_fast_path(q, mask):
            x = biased_attention(q, k, v, mask)  # a learned bias, without SDPA's slow fallback
        else:
            # bf16 on the CPU attends in float32: SDPA's fused CPU kernel takes longer in bf16 than in float32 at these
            # sizes (forward and backward, 4 heads of 32 channels, batch 64, one thread: 6x at 16 tokens, 2.4x at 64)
            upcast, dtype = q.device.type == "cpu" and q.dtype == torch.bfloat16, q.dtype
            if upcast:
                q, k, v = q.float(), k.float(), v.float()
            if mask is not None:
                mask = mask.to(q.dtype)
                if key_mask is None and not mask.requires_grad:
                    # a stride-0 batch view keeps SDPA on its fused CPU kernel (a 3D mask costs ~25% more there); a bias
                    # that needs a gradient stays 3D, whose backward is cheaper than reducing a (B, nH, T, T) gradient
                    mask = mask.expand(B, -1, -1, -1)  # (B, nH, T, T), no copy
            if key_mask is not None:
                mask = key_mask.to(q.dtype) if mask is None else mask + key_mask.to(q.dtype)  # (B, nH, T, T)
            with torch.autocast("cpu", enabled=False) if upcast else nullcontext():  # else autocast casts back
                x = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)  # (B, nH, T, Dh)
            x = x.to(dtype)  # back to the projections' dtype (a model cast to bf16 has no autocast to do it)
        x = x.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        return self.proj_drop(self.proj(x))


class Block(nn.Module):
    """Pre-norm Transformer block: ``x + ls1(attn(norm1(x)))``, then ``x + ls2(mlp(norm2(x)))``, with stochastic
    depth. ``layer_scale_init`` adds LayerScale (a learned per-channel gain on each branch, Touvron et al. 2021,
    "Going deeper with Image Transformers"; timm's ``init_values``) starting at that value; None leaves it out.
    ``mlp`` and ``mlp_norm``: the MLP's kind and its hidden LayerNorm (:mod:`vitpe.models.mlp`)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0, qkv_bias: bool = True, drop: float = 0.0,
                 attn_drop: float = 0.0, drop_path: float = 0.0, layer_scale_init: float | None = None,
                 norm_eps: float = 1e-5, mlp: str = "gelu", mlp_norm: bool = False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = Attention(dim, heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=drop)
        self.ls1 = LayerScale(dim, layer_scale_init) if layer_scale_init is not None else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = build_mlp(mlp, dim, mlp_ratio, drop=drop, norm=mlp_norm, norm_eps=norm_eps)
        self.ls2 = LayerScale(dim, layer_scale_init) if layer_scale_init is not None else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: torch.Tensor, pe: PositionEncoding, state: Any, layer: int,
                key_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), pe, state, layer, key_mask)))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
