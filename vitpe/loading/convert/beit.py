"""BEiT (timm ``Beit``, ``beit_*``) -> :class:`vitpe.ViT` with ``relbias`` and its ``class_bias`` entries.

BEiT (Bao et al., ICLR 2022) keeps one relative-position table per block of ``(2 gh - 1)(2 gw - 1) + 3`` rows: Swin's
offsets (the index vitpe's ``relbias`` uses, query minus key) and three rows for the class token -- class query to
patch keys, patch queries to the class key, class to class -- which become ``class_bias_table``. Its qkv projection
has q and v biases and no k bias (a zero k bias is the same map); ``gamma_1`` / ``gamma_2`` are LayerScale gains.
timm runs BEiT at its own size only; converted, other sizes work in either resize mode (the offset table is resampled
or clamped, the class entries stay).
"""

from __future__ import annotations

import torch
from torch import nn

from vitpe.loading.convert.common import (GAMMA_KEYS, Converted, check_gammas, check_trunk, detach_all, pe_key,
                                          rename_keys, require, split_position_table)


def convert_beit(model: nn.Module, source: str) -> Converted:
    from timm.models.beit import Block

    kwargs = check_trunk(model, source)
    require(model.rel_pos_bias is None, source, "shares one relative position bias between all blocks")
    for block in model.blocks:
        require(type(block) is Block, source, f"uses {type(block).__name__} blocks")
        require(block.attn.relative_position_bias_table is not None, source, "has blocks without a relative bias")
        require(block.attn.qkv.out_features == 3 * kwargs["dim"], source, "has a custom head dim")
    require(kwargs["class_token"] and kwargs["reg_tokens"] == 0, source, "has no class token")
    ape = model.pos_embed is not None
    kwargs.update(pe="learnable+relbias" if ape else "relbias",
                  pe_options={"relbias": {"class_bias": True}} if ape else {"class_bias": True},
                  qkv_bias=model.blocks[0].attn.q_bias is not None,
                  layer_scale_init=check_gammas(model, source))

    state = detach_all(model.state_dict())
    grid, dim, depth = tuple(model.patch_embed.grid_size), kwargs["dim"], kwargs["depth"]
    if ape:
        state[pe_key(kwargs["pe"], "learnable", "pos_embed")] = split_position_table(state, grid, source)  # (N, D)
    tables = []
    for i in range(depth):
        b = f"blocks.{i}."
        rename_keys(state, b, GAMMA_KEYS)
        tables.append(state.pop(b + "attn.relative_position_bias_table"))  # (T + 3, nH)
        state.pop(b + "attn.relative_position_index", None)
        if b + "attn.q_bias" in state:
            q_bias, v_bias = state.pop(b + "attn.q_bias"), state.pop(b + "attn.v_bias")
            state.pop(b + "attn.k_bias", None)
            state[b + "attn.qkv.bias"] = torch.cat((q_bias, torch.zeros(dim), v_bias))
    tables = torch.stack(tables)  # (depth, T + 3, nH)
    state[pe_key(kwargs["pe"], "relbias", "relative_bias_table")] = tables[:, :-3]
    state[pe_key(kwargs["pe"], "relbias", "class_bias_table")] = tables[:, -3:]
    return Converted(kwargs, state, source)
