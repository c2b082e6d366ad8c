"""A Transformer encoder for sequence classification with the same PE modules, on 1D grids.

Shape legend: B batch, L tokens per sequence (padded), P prefix tokens (1 with ``pool="cls"``), T = P + L, D width.

Positions are token indices ``0 .. L-1`` (padding goes at the end). The PE's reference grid is ``(max_len,)``:
- a batch of at most ``max_len`` tokens uses the first ``L`` reference positions, whatever the padding, so padding
  never changes the outputs of the real tokens;
- a longer batch follows the resize mode: ``extrapolate`` continues the positions (``max_len``, ``max_len + 1``, ...;
  a learned table cannot, and raises :class:`vitpe.pe.ResizeError`), ``interpolate`` squeezes the ``L`` positions
  into the reference range (position interpolation), which depends on the padded length ``L``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import vitpe.pe
from vitpe.data.text import CLS_ID, PAD_ID
from vitpe.models.encoder import PETrunk, check_pool
from vitpe.pe.composed import SEPARATOR


def unit_scale_tables(pe: str, pe_options: dict[str, Any]) -> dict[str, Any]:
    """``pe_options`` with ``init_std`` defaulting to 1.0 for every learned table (of each member of a composed PE):
    learned tables start at the tokens' unit scale (see ``embed_scale``)."""
    known = vitpe.pe.options(pe)
    if SEPARATOR in pe:
        return {m: unit_scale_tables(m, dict(pe_options.get(m, {}))) for m in known} | \
            {k: v for k, v in pe_options.items() if k not in known}  # stray keys reach build(), which names them
    out = dict(pe_options)
    if "init_std" in known:
        out.setdefault("init_std", 1.0)
    return out


class TextClassifier(PETrunk):
    """Sequence classifier: token embedding, optional ``<cls>`` prefix, PE-agnostic Transformer blocks, pooling, head.

    Args:
        vocab_size: embedding rows (ids ``PAD_ID`` = 0 padding and ``CLS_ID`` = 2 class token, see
            :mod:`vitpe.data.text`).
        num_classes: classifier outputs. max_len: reference sequence length (the PE's grid ``(max_len,)``).
        dim, depth, heads, mlp_ratio: width D, blocks, heads, MLP hidden = mlp_ratio * D.
        pe, pe_options, pe_resize: a registered PE that works on 1D grids, its options, and its mode beyond max_len.
            Token embeddings have unit scale (Vaswani et al.), so a PE with an ``init_std`` option (a learned table)
            defaults to ``init_std=1.0`` here instead of ViT's 0.02, which would leave positions 50x weaker than words
            (``learnable`` then stays at chance on the adjacent task; at 1.0 it reaches 100%).
        pool: ``"cls"`` (the ``<cls>`` embedding prepended to every sequence) or ``"mean"`` (mean of real tokens).
        drop_rate, attn_drop_rate, drop_path, qkv_bias, mlp, mlp_norm: as in :class:`vitpe.ViT`.
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        max_len: int,
        dim: int = 128,
        depth: int = 4,
        heads: int = 4,
        mlp_ratio: float = 2.0,
        pe: str = "sincos",
        pe_options: dict[str, Any] | None = None,
        pe_resize: str = "interpolate",
        pool: str = "cls",
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path: float = 0.0,
        qkv_bias: bool = True,
        mlp: str = "gelu",
        mlp_norm: bool = False,
        pe_combine: str = "add",
        pos_drop: float = 0.0,
    ) -> None:
        super().__init__()
        class_token = check_pool(pool, None)
        if vocab_size <= CLS_ID:
            raise ValueError(f"vocab_size must be > {CLS_ID} (ids 0-2 are <pad>, <unk>, <cls>), got {vocab_size}")
        if max_len < 1:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.max_len, self.vocab_size = max_len, vocab_size
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID)
        pe_options = unit_scale_tables(pe, pe_options or {})
        self.build_trunk(grid=(max_len,), num_classes=num_classes, dim=dim, depth=depth, heads=heads,
                         mlp_ratio=mlp_ratio, pe=pe, pe_options=pe_options, pe_resize=pe_resize, pool=pool,
                         num_prefix_tokens=int(class_token), drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                         drop_path=drop_path, qkv_bias=qkv_bias, mlp=mlp, mlp_norm=mlp_norm,
                         pe_combine=pe_combine, pos_drop=pos_drop)
        self.init_weights()
        # Vaswani et al.'s scaling: weights N(0, 1/D), multiplied by sqrt(D) in forward, so token embeddings have unit
        # scale like the sincos table they are added to (with ViT-style std-0.02 embeddings a unit-amplitude table
        # drowns the tokens: sincos then never learns the adjacent task)
        self.embed_scale = dim ** 0.5
        nn.init.normal_(self.embed.weight, std=dim ** -0.5)
        with torch.no_grad():
            self.embed.weight[PAD_ID].zero_()

    def _check(self, tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor | None:
        if tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(f"expected tokens of shape (B, L) and dtype int64, got {tuple(tokens.shape)} "
                             f"{tokens.dtype}")
        if tokens.shape[1] == 0:
            raise ValueError("got sequences of length 0")
        if mask is None:
            return None
        if mask.shape != tokens.shape or mask.dtype != torch.bool:
            raise ValueError(f"mask must be bool with the tokens' shape {tuple(tokens.shape)}, got "
                             f"{tuple(mask.shape)} {mask.dtype}")
        if torch.compiler.is_compiling():  # its values would split the graph: a compiled forward trusts the mask
            return mask
        if bool(mask.all()):
            return None
        if not bool(mask[:, 0].all()):
            raise ValueError("every sequence needs at least one real token (mask[:, 0] must be True)")
        if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            raise ValueError("mask must be right-padded: True for the real tokens, then False for the padding")
        return mask

    def _features(self, tokens: torch.Tensor, mask: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Normalised tokens (B, T, D) and the float token mask (B, T, 1) (None without padding)."""
        mask = self._check(tokens, mask)
        B, L = tokens.shape
        x = self.embed(tokens) * self.embed_scale  # (B, L, D)
        if self.num_prefix_tokens:
            cls = (self.embed.weight[CLS_ID] * self.embed_scale).expand(B, 1, -1)  # (B, 1, D)
            x = torch.cat((cls, x), dim=1)  # (B, T, D)
        key_mask = token_mask = None
        if mask is not None:
            keep = torch.cat((mask.new_ones(B, self.num_prefix_tokens), mask), dim=1)  # (B, T)
            token_mask = keep[:, :, None].to(x.dtype)  # (B, T, 1)
            key_mask = torch.zeros(keep.shape, dtype=x.dtype, device=x.device).masked_fill(~keep, float("-inf"))
            key_mask = key_mask[:, None, None, :]  # (B, 1, 1, T)
        # up to max_len tokens: the reference positions, cropped; beyond it, the chosen resize mode (set_pe_resize)
        with self.pe.resize_mode(self.pe.resize if L > self.max_len else "extrapolate"):
            return self.encode(x, (L,), key_mask, token_mask), token_mask

    def forward_features(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """tokens (B, L) int64, mask (B, L) bool (True = real token) -> normalised tokens (B, T, D)."""
        return self._features(tokens, mask)[0]

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """tokens (B, L) int64, mask (B, L) bool (True = real token, right-padded) -> logits (B, num_classes).

        The mask's values are checked in eager mode; a compiled forward trusts them (a check would split its graph)."""
        x, token_mask = self._features(tokens, mask)
        return self.forward_head(x, token_mask=token_mask)
