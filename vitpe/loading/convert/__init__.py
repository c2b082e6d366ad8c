"""Pretrained timm models as vitpe ViTs with the same logits: :func:`from_timm`.

    import vitpe
    model = vitpe.from_timm("vit_small_patch16_rope_mixed_224.naver_in1k", pretrained=True)   # weights from the hub
    model = vitpe.from_timm(timm_module)                                                       # any built timm model

The result is an ordinary :class:`vitpe.ViT` in eval mode: every PE hook, resize mode, evaluation sweep or training
run works on it. Supported families and what each maps to: :mod:`vitpe.loading.convert.timm_vit` (learned absolute
positions), :mod:`vitpe.loading.convert.eva_rope` (rope-vit), :mod:`vitpe.loading.convert.eva` (DINOv3 and EVA-02),
:mod:`vitpe.loading.convert.beit` (relative position bias).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from vitpe.loading.convert.common import SUPPORTED, Converted, UnsupportedModelError, complete_state
from vitpe.models.vit import ViT


def convert(model: nn.Module) -> Converted:
    """The :class:`Converted` (ViT arguments and state dict) of a built timm model."""
    from timm.models.beit import Beit
    from timm.models.eva import Eva
    from timm.models.vision_transformer import VisionTransformer

    from vitpe.loading.convert.beit import convert_beit
    from vitpe.loading.convert.eva import convert_eva
    from vitpe.loading.convert.eva_rope import convert_eva_rope
    from vitpe.loading.convert.timm_vit import convert_vision_transformer

    name = getattr(model, "pretrained_cfg", {}).get("architecture") or ""
    source = f"{type(model).__name__}{f' {name!r}' if name else ''}"
    if type(model) is Eva:  # rope-vit's attention (AttentionRope) or EVA's (DINOv3, EVA-02)
        from timm.layers.attention import AttentionRope

        rope_vit = any(type(block.attn) is AttentionRope for block in getattr(model, "blocks", []))
        return complete_state((convert_eva_rope if rope_vit else convert_eva)(model, source), model)
    families = {VisionTransformer: convert_vision_transformer, Beit: convert_beit}
    if type(model) not in families:
        raise UnsupportedModelError(f"{source} is not a family vitpe converts; supported: " + "; ".join(SUPPORTED))
    return complete_state(families[type(model)](model, source), model)


def build_vit(converted: Converted) -> ViT:
    """The converted model as a :class:`vitpe.ViT` in eval mode, its weights loaded strictly."""
    vit = ViT(**converted.vit_kwargs)
    vit.load_state_dict(converted.state_dict, strict=True)
    return vit.eval()


def from_timm(model_or_name: nn.Module | str, **create_kwargs: Any) -> ViT:
    """A :class:`vitpe.ViT` computing the same function as a timm model (a built module, or a name given with
    ``create_kwargs`` to ``timm.create_model``, e.g. ``pretrained=True`` or
    ``pretrained_cfg_overlay=dict(file="weights.safetensors")``), in eval mode."""
    if isinstance(model_or_name, str):
        import timm

        model_or_name = timm.create_model(model_or_name, **create_kwargs)
    elif create_kwargs:
        raise ValueError(f"create_kwargs {sorted(create_kwargs)} only apply when a model name is given")
    return build_vit(convert(model_or_name))


__all__ = ["Converted", "UnsupportedModelError", "build_vit", "convert", "from_timm"]
