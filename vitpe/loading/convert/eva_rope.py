"""rope-vit as ported to timm (``vit_*_patch16_rope[_mixed][_ape]_224``, timm's ``Eva`` with ``attn_type='rope'``)
-> :class:`vitpe.ViT` with ``rope_axial`` or ``rope_mixed`` (plus ``learnable`` for the ``*_ape`` models).

What rope-vit computes, and how vitpe reproduces it (Heo et al., ECCV 2024; naver-ai/rope-vit):

* Positions are integer patch indices at every input size, x the column and y the row (``rope_grid_indexing='xy'``):
  vitpe's ``extrapolate`` mode. Axial: the first Dh/4 pairs turn with x, the rest with y, at ``theta^(-4k/Dh)``
  (theta = 100), as ``rope_axial``. Mixed: ``rope.freqs`` (2, depth, nH, Dh/2) holds the x and y frequency of every
  pair, which is ``rope_mixed``'s ``freqs`` (depth, nH, Dh/2, 2) transposed.
* Pairs are interleaved (channels 2j, 2j + 1), as in vitpe: the qkv projections carry over as they are.
* ``*_ape``: a learned table (no class-token entry) added before block 0 and resampled at other sizes, while the
  rotation continues: ``pe="learnable+rope_*"`` with the rotation pinned to ``extrapolate``.
* ``gamma_1`` / ``gamma_2`` are LayerScale gains (``ls1`` / ``ls2``).

Whether a model's rotation is this one is checked numerically: its angles at the model's grid and at a larger one
must equal vitpe's (EVA-02's pixel-frequency RoPE, for one, does not, and is refused). A model built without
``dynamic_img_size`` only runs at its own size in timm; converted, it runs at any size.
"""

from __future__ import annotations

import torch
from torch import nn

from vitpe.loading.convert.common import (GAMMA_KEYS, Converted, check_gammas, check_trunk, detach_all, pe_key,
                                          rename_keys, require, rope_angles, same_angles, split_position_table)
from vitpe.pe import build as build_pe


def convert_eva_rope(model: nn.Module, source: str) -> Converted:
    from timm.layers import RotaryEmbeddingCat, RotaryEmbeddingMixed
    from timm.layers.attention import AttentionRope
    from timm.models.eva import EvaBlock

    require(model.rope is not None, source, "is an Eva without rotary embedding (EVA-01-style)")
    kwargs = check_trunk(model, source)
    for block in model.blocks:
        require(type(block) is EvaBlock, source, f"uses {type(block).__name__} blocks")
        require(type(block.attn) is AttentionRope and hasattr(block.attn, "qkv"), source,
                "uses separate q/k/v projections or another attention than AttentionRope")
    mixed = type(model.rope) is RotaryEmbeddingMixed
    require(mixed or type(model.rope) is RotaryEmbeddingCat, source, f"uses {type(model.rope).__name__}")
    rope = "rope_mixed" if mixed else "rope_axial"
    grid = tuple(model.patch_embed.grid_size)
    heads, depth = kwargs["heads"], kwargs["depth"]
    theta = float(getattr(model.rope, "temperature", 10.0 if mixed else 100.0))
    ape = model.pos_embed is not None
    rope_options = {} if mixed else {"theta": theta}
    kwargs.update(pe=f"learnable+{rope}" if ape else rope,
                  pe_options={rope: {**rope_options, "resize": "extrapolate"}} if ape else rope_options,
                  pe_resize="interpolate" if ape else "extrapolate",
                  layer_scale_init=check_gammas(model, source))

    state = detach_all(model.state_dict())
    freqs_key = pe_key(kwargs["pe"], rope, "freqs")
    if mixed:
        state[freqs_key] = state.pop("rope.freqs").permute(1, 2, 3, 0)  # (2, L, nH, Dh/2) -> (L, nH, Dh/2, 2)
    if ape:
        state[pe_key(kwargs["pe"], "learnable", "pos_embed")] = split_position_table(state, grid, source)  # (N, D)
    dim = kwargs["dim"]
    for i in range(depth):
        rename_keys(state, f"blocks.{i}.", GAMMA_KEYS)

    # the rotation must be rope-vit's: compare angles at the model's grid and, where timm can go, at a larger one
    check = build_pe(rope, dim=dim, heads=heads, depth=depth, grid=grid, resize="extrapolate", **rope_options)
    if mixed:
        check.load_state_dict({"freqs": state[freqs_key], "reference_grid": torch.tensor(grid)})
    for g in (grid, (grid[0] + 1, grid[1] + 2))[:1 + bool(model.dynamic_img_size)]:
        ours = check.phases(g)  # (N, Dh/2) or (L, nH, N, Dh/2)
        require(same_angles(rope_angles(model, g), ours.detach()), source,
                "rotates by other angles than rope-vit's axial or mixed RoPE (e.g. pixel frequencies, shifted or "
                "rescaled coordinates)")
    return Converted(kwargs, state, source)
