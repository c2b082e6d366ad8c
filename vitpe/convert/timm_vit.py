"""timm ``VisionTransformer`` (ViT, DeiT-III, DINOv2, register and GAP models) -> :class:`vitpe.ViT` with the
``learnable`` PE (or ``none`` for a model without position table).

What moves where (timm and vitpe share their module names, so most keys map to themselves):

* ``pos_embed`` (1, P' + N, D) -> ``pe.pos_embed`` (N, D). Without ``no_embed_class`` its first P' = P rows are the
  positions of the class and register tokens: constants added to those tokens before block 0, so they are folded
  into ``cls_token`` / ``reg_token``.
* ``global_pool="avg"`` -> ``pool="mean"`` (with ``fc_norm`` when timm normalises the pooled features),
  ``"token"`` -> ``pool="cls"``; LayerScale ``ls1/ls2.gamma``, the norms' epsilon, the patch size are kept.

timm resamples ``pos_embed`` for other input sizes (``dynamic_img_size=True``) with ``resample_abs_pos_embed``
(bicubic, antialias): vitpe's ``learnable`` does the same in its ``interpolate`` mode, so the converted model gives
timm's logits at every size.
"""

from __future__ import annotations

import torch
from torch import nn

from vitpe.convert.common import Converted, detach_all, is_identity, layer_norm_eps, require


def check_blocks(model: nn.Module, source: str) -> tuple[bool, bool]:
    """Require timm's plain pre-norm blocks; returns (qkv has a bias, blocks have LayerScale)."""
    from timm.layers import LayerScale, Mlp
    from timm.layers.attention import Attention
    from timm.models.vision_transformer import Block

    scaled = {isinstance(b.ls1, LayerScale) for b in model.blocks}
    require(len(scaled) == 1, source, "has LayerScale in some blocks only")
    for i, block in enumerate(model.blocks):
        require(type(block) is Block, source, f"uses {type(block).__name__} blocks (vitpe has the pre-norm Block)")
        attn = block.attn
        require(type(attn) is Attention, source, f"uses {type(attn).__name__} attention")
        require(is_identity(attn.q_norm) and is_identity(attn.k_norm), source, "normalises q and k (qk_norm)")
        require(is_identity(attn.norm) and getattr(attn, "gate", None) is None, source,
                "normalises or gates the attention output")
        require(type(block.mlp) is Mlp and type(block.mlp.act) is nn.GELU and block.mlp.act.approximate == "none",
                source, f"block {i} has a {type(block.mlp).__name__} MLP other than Linear-GELU-Linear")
        require(is_identity(block.mlp.norm), source, "normalises inside the MLP")
    return model.blocks[0].attn.qkv.bias is not None, scaled.pop()


def convert_vision_transformer(model: nn.Module, source: str) -> Converted:
    from timm.layers import PatchEmbed

    embed = model.patch_embed
    require(type(embed) is PatchEmbed and is_identity(embed.norm), source, "has a patch embedding other than one "
            "convolution")
    require(not getattr(embed, "dynamic_img_pad", False), source, "pads images to the patch size (dynamic_img_pad)")
    require(embed.patch_size[0] == embed.patch_size[1], source, f"has non-square patches {embed.patch_size}")
    require(is_identity(model.norm_pre), source, "normalises the tokens before block 0 (pre_norm, as CLIP)")
    require(getattr(model, "attn_pool", None) is None and model.global_pool in ("token", "avg"), source,
            f"pools with {model.global_pool!r} (vitpe pools the class token or the mean of the patch tokens)")
    qkv_bias, layer_scale = check_blocks(model, source)
    fc_norm = not is_identity(model.fc_norm)
    require(not fc_norm or model.global_pool == "avg", source, "normalises a pooled class token (fc_norm)")
    eps = layer_norm_eps(model.blocks[0].norm1, source)
    class_token, reg_tokens = model.cls_token is not None, 0 if model.reg_token is None else model.reg_token.shape[1]
    grid = tuple(embed.grid_size)
    kwargs = dict(img_size=tuple(embed.img_size), patch_size=embed.patch_size[0], in_chans=embed.proj.in_channels,
                  num_classes=model.num_classes, dim=model.embed_dim, depth=len(model.blocks),
                  heads=model.blocks[0].attn.num_heads, mlp_ratio=model.blocks[0].mlp.fc1.out_features / model.embed_dim,
                  pe="learnable" if model.pos_embed is not None else "none",
                  pool="cls" if model.global_pool == "token" else "mean", class_token=class_token,
                  reg_tokens=reg_tokens, layer_scale_init=1e-5 if layer_scale else None, fc_norm=fc_norm,
                  norm_eps=eps, qkv_bias=qkv_bias)

    state = detach_all(model.state_dict())
    prefix = [name for name in ("cls_token", "reg_token") if name in state]
    if "pos_embed" in state:
        table = state.pop("pos_embed")[0]  # (P' + N, D)
        n_prefix = table.shape[0] - grid[0] * grid[1]
        if n_prefix:  # the positions of the prefix tokens fold into them
            require(n_prefix == int(class_token) + reg_tokens, source, f"has {n_prefix} prefix positions")
            prefix_positions = table[:n_prefix]  # (P, D)
            start = 0
            for name in prefix:
                count = state[name].shape[1]
                state[name] = state[name] + prefix_positions[start:start + count]
                start += count
        state["pe.pos_embed"] = table[n_prefix:]  # (N, D)
    for i, block in enumerate(model.blocks):
        if block.attn.proj.bias is None:  # vitpe's projection always has a bias: a zero one is the same map
            state[f"blocks.{i}.attn.proj.bias"] = torch.zeros(model.embed_dim)
    state["pe.reference_grid"] = torch.tensor(grid)
    return Converted(kwargs, state, source)
