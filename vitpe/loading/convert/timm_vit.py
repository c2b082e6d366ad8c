"""timm ``VisionTransformer`` (ViT, DeiT-III, DINOv2, register and GAP models) -> :class:`vitpe.ViT` with the
``learnable`` PE (or ``none`` for a model without position table).

What moves where (timm and vitpe share their module names, so most keys map to themselves):

* ``pos_embed`` (1, P' + N, D) -> ``pe.pos_embed`` (N, D); the rows of the class and register tokens (without
  ``no_embed_class``) fold into those tokens (:func:`~vitpe.loading.convert.common.split_position_table`).
* ``global_pool="avg"`` -> ``pool="mean"`` (with ``fc_norm`` when timm normalises the pooled features),
  ``"token"`` -> ``pool="cls"``; LayerScale ``ls1/ls2.gamma``, the norms' epsilon, the patch size are kept.

timm resamples ``pos_embed`` for other input sizes (``dynamic_img_size=True``) with ``resample_abs_pos_embed``
(bicubic, antialias): vitpe's ``learnable`` does the same in its ``interpolate`` mode, so the converted model gives
timm's logits at every size.
"""

from __future__ import annotations

from torch import nn

from vitpe.loading.convert.common import Converted, check_trunk, detach_all, require, split_position_table


def convert_vision_transformer(model: nn.Module, source: str) -> Converted:
    from timm.layers import LayerScale
    from timm.layers.attention import Attention
    from timm.models.vision_transformer import Block

    kwargs = check_trunk(model, source)
    for block in model.blocks:
        require(type(block) is Block, source, f"uses {type(block).__name__} blocks (vitpe has the pre-norm Block)")
        require(type(block.attn) is Attention, source, f"uses {type(block.attn).__name__} attention")
    scaled = {isinstance(b.ls1, LayerScale) for b in model.blocks}
    require(len(scaled) == 1, source, "has LayerScale in some blocks only")
    kwargs.update(pe="learnable" if model.pos_embed is not None else "none",
                  layer_scale_init=1e-5 if scaled.pop() else None)

    state = detach_all(model.state_dict())
    if "pos_embed" in state:
        state["pe.pos_embed"] = split_position_table(state, tuple(model.patch_embed.grid_size), source)  # (N, D)
    return Converted(kwargs, state, source)
