"""timm's ``Eva`` with EVA attention -> :class:`vitpe.ViT`: DINOv3 (``vit_*_patch16_dinov3[_qkvb]``) and EVA-02
(``eva02_*_patch14_224`` / ``_336`` / ``_448``). rope-vit, the ``Eva`` with ``AttentionRope``, is
:mod:`vitpe.loading.convert.eva_rope`.

What the two families compute, and how vitpe reproduces each part:

* **DINOv3** (Siméoni et al. 2025): RoPE on coordinates normalised to [-1, 1] (``rope_dinov3``, which is timm's
  ``RotaryEmbeddingDinoV3``), its pairs in the rotate-half layout (channel j with j + Dh/2): the q and k rows of every
  projection are reordered to vitpe's interleaved pairs (the same permutation of q and k leaves every score as it
  was). Four storage tokens after the class token (vitpe's ``reg_tokens``), LayerScale, no position table; the
  ``_qkvb`` variants' q, k and v biases go into the one qkv bias; the larger models' SwiGLU MLP (``mlp="swiglu"``).
* **EVA-02** (Fang et al. 2023): a learned table (with a class-token row, folded into the class token) plus axial
  RoPE with base 10000 whose positions are scaled onto a reference grid (``ref_feat_shape``: ``i * ref / n``);
  vitpe's ``learnable+rope_axial`` with the rotation's own reference grid (the member option ``grid``) and
  ``anchor: first`` in ``interpolate`` mode, which is that arithmetic. Its pairs are interleaved with the
  row (y) first, where ``rope_axial`` turns x first: the two halves of each head's q and k rows are swapped. SwiGLU
  MLPs, with a LayerNorm inside for the base and large models (``mlp_norm``); separate q, k, v projections (the base
  and large models) are concatenated into vitpe's one qkv projection, which computes the same.

What is not reproduced is refused by name: a LayerNorm on the attention output (``scale_attn_inner``), q/k norms,
gated attention, grouped keys and values, post-norm blocks, attention pooling.
"""

from __future__ import annotations

import torch
from torch import nn

from vitpe.loading.convert.common import (GAMMA_KEYS, Converted, check_gammas, check_trunk, detach_all, pe_key,
                                          rename_keys, require, rope_angles, same_angles, split_position_table)
from vitpe.loading.rotary_pairs import half_to_interleaved, reorder_qk
from vitpe.pe import build as build_pe

DINOV3_NORMALIZE = ("separate", "min", "max")


def _qkv_state(state: dict[str, torch.Tensor], prefix: str, dim: int) -> None:
    """Put an EVA attention's projections into vitpe's one ``qkv`` (weight (3D, D), bias (3D,)): separate q, k, v
    projections concatenated; the separate q and v biases (k has none, or a zero buffer) joined with zeros for k."""
    names = [f"{prefix}{p}_proj" for p in "qkv"]
    if f"{names[0]}.weight" in state:
        state[f"{prefix}qkv.weight"] = torch.cat([state.pop(f"{n}.weight") for n in names])
        biases = [state.pop(f"{n}.bias", None) for n in names]
    else:
        biases = [state.pop(f"{prefix}{p}_bias", None) for p in "qkv"]
    if any(b is not None for b in biases):
        state[f"{prefix}qkv.bias"] = torch.cat([b if b is not None else torch.zeros(dim) for b in biases])


def _y_first_to_x_first(rows: torch.Tensor, heads: int) -> torch.Tensor:
    """Interleaved pairs turning with y then x -> with x then y: the two halves of each head's rows swapped."""
    head_dim = rows.shape[0] // heads
    by_head = rows.reshape(heads, 2, head_dim // 2, *rows.shape[1:])  # (nH, [y, x], Dh/2, ...)
    return by_head.flip(1).reshape(rows.shape)


def _mlp_state(state: dict[str, torch.Tensor], prefix: str, packed: bool) -> None:
    """timm's packed SwiGLU (``GluMlp``: ``fc1`` gate rows first, then value rows) -> ``fc1_g`` and ``fc1_x``, the
    layout of timm's ``SwiGLU`` that vitpe's MLP uses."""
    if not packed:
        return
    for part in ("weight", "bias"):
        key = f"{prefix}fc1.{part}"
        if key in state:
            state[f"{prefix}fc1_g.{part}"], state[f"{prefix}fc1_x.{part}"] = state.pop(key).chunk(2)


def _qkv_bias(model: nn.Module) -> bool:
    """Whether the attention projections have biases (fused: ``q_bias``; separate: ``q_proj.bias``)."""
    attn = model.blocks[0].attn
    return attn.q_bias is not None if attn.qkv is not None else attn.q_proj.bias is not None


def _rotation(model: nn.Module, source: str, grid: tuple[int, int]) -> tuple[str, dict, dict]:
    """The vitpe PE reproducing the model's rotary embedding (and learned table): (name, options, options of the
    rotation alone)."""
    from timm.layers import RotaryEmbeddingCat, RotaryEmbeddingDinoV3

    rope = model.rope
    if type(rope) is RotaryEmbeddingDinoV3:
        require(rope.min_period is None and rope.max_period is None and rope.grid_offset == 0
                and rope.grid_indexing == "ij" and rope.normalize_coords in DINOV3_NORMALIZE, source,
                "has DINOv3 RoPE settings vitpe does not reproduce (min/max periods, a grid offset or xy indexing)")
        require(model.pos_embed is None, source, "adds a learned table to DINOv3's RoPE")
        rotation = {"base": float(rope.temperature), "normalize": rope.normalize_coords}
        return "rope_dinov3", rotation, rotation
    require(type(rope) is RotaryEmbeddingCat and not rope.in_pixels and rope.grid_offset == 0
            and rope.grid_indexing == "ij", source, f"has a {type(rope).__name__} rotary embedding with settings "
            "vitpe does not reproduce (pixel frequencies, a grid offset or xy indexing)")
    reference = list(rope.ref_feat_shape) if rope.ref_feat_shape is not None else list(grid)
    rotation = {"theta": float(rope.temperature)}
    if model.pos_embed is None:
        require(tuple(reference) == grid, source, "scales its rotation onto a reference grid without a learned table")
        return "rope_axial", rotation, rotation
    rotation["anchor"] = "first"  # timm scales positions as i * ref / n
    return "learnable+rope_axial", {"rope_axial": {**rotation, "grid": reference}}, rotation


def _check_angles(model: nn.Module, rotation: nn.Module, source: str, dinov3: bool) -> None:
    """Require the converted PE to rotate every pair by timm's angle (prefix tokens are not rotated, so not even a
    constant shift would do) at the model's grid and, where timm goes (``dynamic_img_size``), at a non-square one;
    EVA-02's pairs are compared after its y-first order is turned to vitpe's x-first."""
    grid = tuple(model.patch_embed.grid_size)
    for g in (grid, (grid[0] + 1, grid[1] + 3))[:1 + bool(model.dynamic_img_size)]:  # timm's own sizes
        theirs = rope_angles(model, g, half=dinov3)  # (N, Dh/2)
        if not dinov3:
            theirs = theirs.reshape(theirs.shape[0], 2, -1).flip(1).reshape(theirs.shape)  # y first -> x first
        require(same_angles(theirs, rotation.phases(g).detach().float()), source,
                "rotates by other angles than DINOv3's or EVA-02's RoPE")


def convert_eva(model: nn.Module, source: str) -> Converted:
    from timm.models.eva import EvaAttention, EvaBlock

    require(model.rope is not None, source, "is an Eva without rotary embedding (EVA-01-style)")
    kwargs = check_trunk(model, source)
    dinov3 = type(model.rope).__name__ == "RotaryEmbeddingDinoV3"
    for block in model.blocks:
        attn = block.attn
        require(type(block) is EvaBlock, source, f"uses {type(block).__name__} blocks")
        require(type(attn) is EvaAttention, source, f"uses {type(attn).__name__} attention")
        require(attn.head_dim * attn.num_heads == kwargs["dim"], source, "has an attention width other than its "
                "embedding width (attn_head_dim)")
        require(attn.rotate_half == dinov3, source, "pairs its rotary channels in another layout than DINOv3 "
                "(rotate-half) or EVA-02 (interleaved)")
        require(attn.num_prefix_tokens == kwargs["class_token"] + kwargs["reg_tokens"], source,
                "rotates some of its prefix tokens")
    grid = tuple(model.patch_embed.grid_size)
    pe, pe_options, rotation = _rotation(model, source, grid)
    kwargs.update(pe=pe, pe_options=pe_options, pe_resize="interpolate", layer_scale_init=check_gammas(model, source),
                  qkv_bias=_qkv_bias(model))

    state = detach_all(model.state_dict())
    state.pop("rope.periods", None)
    if model.pos_embed is not None:
        state[pe_key(pe, "learnable", "pos_embed")] = split_position_table(state, grid, source)  # (N, D)
    heads = kwargs["heads"]
    pairs = half_to_interleaved if dinov3 else _y_first_to_x_first
    for i in range(kwargs["depth"]):
        prefix = f"blocks.{i}."
        rename_keys(state, prefix, GAMMA_KEYS)
        _qkv_state(state, f"{prefix}attn.", kwargs["dim"])
        for part in ("weight", "bias"):  # the pairs' layout and axis order -> vitpe's: q and k rows reordered
            if f"{prefix}attn.qkv.{part}" in state:
                state[f"{prefix}attn.qkv.{part}"] = reorder_qk(state[f"{prefix}attn.qkv.{part}"], heads, pairs)
        _mlp_state(state, f"{prefix}mlp.", f"{prefix}mlp.fc1.weight" in state and kwargs["mlp"] == "swiglu")
    rope_name = "rope_dinov3" if dinov3 else "rope_axial"
    check = build_pe(rope_name, dim=kwargs["dim"], heads=heads, depth=kwargs["depth"],
                     grid=tuple(pe_options.get("rope_axial", {}).get("grid", grid)), resize="interpolate", **rotation)
    _check_angles(model, check, source, dinov3)
    return Converted(kwargs, state, source)
