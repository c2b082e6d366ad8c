"""The Transformer trunk every vitpe model shares: a position encoding, pre-norm blocks, a final norm and a head.

A model (the 2D :class:`vitpe.ViT`, the 1D :class:`vitpe.TextClassifier`) turns its input into tokens (B, P + N, D),
then calls :meth:`PETrunk.encode` with the token grid -- ``(gh, gw)`` patches or ``(L,)`` words -- and pools with
:meth:`PETrunk.forward_head`. Shape legend: B batch, P prefix tokens (class token), N grid tokens, T = P + N, D width.
"""

from __future__ import annotations

from typing import Any, Collection

import torch
from timm.layers import trunc_normal_
from torch import nn

import vitpe.pe
from vitpe.models.attention import Block
from vitpe.models.pe_combine import COMBINES, ConcatProjection
from vitpe.pe.grid import check_resize_mode
from vitpe.pe.mixed import GridLayout

POOLS = ("cls", "mean")


def check_pool(pool: str, class_token: bool | None) -> bool:
    """Validate ``pool`` and return whether the model has a class token (default: ``pool == "cls"``)."""
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; choose one of {list(POOLS)}")
    class_token = pool == "cls" if class_token is None else class_token
    if pool == "cls" and not class_token:
        raise ValueError("pool='cls' needs class_token=True")
    return class_token


class PETrunk(nn.Module):
    """Base of vitpe models. A subclass creates its input layers, then calls :meth:`build_trunk` (keeping the order in
    which modules draw from the RNG fixed), then :meth:`init_weights`."""

    pool: str
    num_prefix_tokens: int

    def build_trunk(self, *, grid: tuple[int, ...], num_classes: int, dim: int, depth: int, heads: int,
                    mlp_ratio: float, pe: str, pe_options: dict[str, Any] | None, pe_resize: str, pool: str,
                    num_prefix_tokens: int, drop_rate: float, attn_drop_rate: float, drop_path: float,
                    qkv_bias: bool, layer_scale_init: float | None = None, norm_eps: float = 1e-5,
                    fc_norm: bool = False, mlp: str = "gelu", mlp_norm: bool = False, pe_combine: str = "add",
                    pos_drop: float = 0.0) -> None:
        self.pool, self.num_prefix_tokens = pool, num_prefix_tokens
        self.num_classes = num_classes
        self.num_features = self.embed_dim = dim
        self.pe = vitpe.pe.build(pe, dim=dim, heads=heads, depth=depth, grid=grid, num_prefix_tokens=num_prefix_tokens,
                                 resize=check_resize_mode(pe_resize), **(pe_options or {}))
        if pe_combine not in COMBINES:
            raise ValueError(f"unknown pe_combine {pe_combine!r}; choose one of {list(COMBINES)}")
        if pe_combine == "concat" and "tokens" not in self.pe.sites:
            raise ValueError(f"pe_combine='concat' joins a tokens-site PE's term to the tokens, but {pe} acts at "
                             f"{', '.join(sorted(self.pe.sites)) or 'no site'}; use pe_combine='add' with it")
        if not 0 <= pos_drop < 1:
            raise ValueError(f"pos_drop must be in [0, 1), got {pos_drop}")
        self.pe_concat = ConcatProjection(dim) if pe_combine == "concat" else None
        self.pos_drop = nn.Dropout(pos_drop)  # after the PE sum, before the first block (timm's pos_drop)
        rates = torch.linspace(0, drop_path, depth, device="cpu").tolist()  # (numbers, also for a model built on meta)
        if layer_scale_init is not None and not layer_scale_init > 0:
            raise ValueError(f"layer_scale_init must be positive (or None for no LayerScale), got {layer_scale_init}")
        if fc_norm and pool != "mean":
            raise ValueError("fc_norm (normalise after pooling) needs pool='mean'")
        self.blocks = nn.ModuleList(
            Block(dim, heads, mlp_ratio, qkv_bias=qkv_bias, drop=drop_rate, attn_drop=attn_drop_rate, drop_path=r,
                  layer_scale_init=layer_scale_init, norm_eps=norm_eps, mlp=mlp, mlp_norm=mlp_norm)
            for r in rates
        )
        # the final LayerNorm acts on every token, or with fc_norm on the pooled features (timm's global-pool layout)
        self.norm = nn.Identity() if fc_norm else nn.LayerNorm(dim, eps=norm_eps)
        self.fc_norm = nn.LayerNorm(dim, eps=norm_eps) if fc_norm else nn.Identity()
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(dim, num_classes) if num_classes > 0 else nn.Identity()

    def init_weights(self) -> None:
        """Truncated-normal (std 0.02) linear weights, zero biases, unit LayerNorms (the ViT recipe)."""
        self.apply(self._init_module)

    @staticmethod
    def _init_module(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def set_pe_resize(self, mode: str) -> None:
        """Switch how the PE acts at grids other than the reference: ``"interpolate"`` or ``"extrapolate"``."""
        self.pe.resize = mode

    def no_weight_decay(self) -> set[str]:
        """Parameter names excluded from weight decay (timm convention): PE tables/frequencies and any class token."""
        names = {f"pe.{n}" for n in self.pe.no_weight_decay()}
        return names | {name for name in ("cls_token", "reg_token") if getattr(self, name, None) is not None}

    def encode(self, x: torch.Tensor, grid: tuple[int, ...] | GridLayout, key_mask: torch.Tensor | None = None,
               token_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Tokens (B, T, D) on ``grid`` -> tokens (B, T, D), normalised unless the model normalises after pooling.

        ``key_mask``: additive float (B, 1, 1, T), -inf on padding keys. ``token_mask``: float (B, T, 1), 0 on padding;
        padding tokens are zeroed before every token-site PE hook so that a PE mixing neighbours (PEG's convolution)
        sees the same zeros past the end of a sequence as it would without padding.
        """
        return self.norm(self.run_blocks(x, grid, key_mask, token_mask)[0])

    def run_blocks(self, x: torch.Tensor, grid: tuple[int, ...] | GridLayout, key_mask: torch.Tensor | None = None,
                   token_mask: torch.Tensor | None = None, keep: Collection[int] = (),
                   last: int | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Tokens (B, T, D) through blocks 0..``last`` (default: all) -> (the tokens after block ``last``, not
        normalised; the tokens after each block whose index is in ``keep``, in order). Masks as in :meth:`encode`.

        ``grid`` is the batch's one grid, or a :class:`~vitpe.pe.mixed.GridLayout` for a batch whose sequences lie on
        different grids, padded to the longest (the layout masks the padding; no masks are passed with it)."""
        mixed = isinstance(grid, GridLayout)
        if mixed and (key_mask is not None or token_mask is not None):
            raise ValueError("a mixed batch's layout masks its own padding: pass no key_mask or token_mask with it")
        state = self.pe.prepare_mixed(grid) if mixed else self.pe.prepare(grid)
        zero_padding = token_mask is not None and "tokens" in self.pe.sites
        kept = []
        for layer, block in enumerate(self.blocks):
            if last is not None and layer > last:
                break
            if zero_padding:
                x = x * token_mask
            added = state.add_to_tokens(x, layer) if mixed else self.pe.add_to_tokens(x, state, layer)
            if self.pe_concat is not None and added is not x:  # this layer's PE acted: join its term instead
                added = self.pe_concat(x, added - x)
            x = self.pos_drop(added) if layer == 0 else added
            x = block(x, self.pe, state, layer, key_mask)
            if layer in keep:
                kept.append(x)
        return x, kept

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False,
                     token_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Pool tokens (B, T, D) -> (B, D) (class token, or mean of the grid tokens that ``token_mask`` keeps) and
        classify -> (B, num_classes)."""
        if self.pool == "cls":
            x = x[:, 0]
        elif token_mask is None:
            x = x[:, self.num_prefix_tokens:].mean(dim=1)
        else:
            keep = token_mask[:, self.num_prefix_tokens:]  # (B, N, 1)
            x = (x[:, self.num_prefix_tokens:] * keep).sum(dim=1) / keep.sum(dim=1)  # (B, D)
        x = self.head_drop(self.fc_norm(x))
        return x if pre_logits else self.head(x)
