"""Named ViT sizes, registered in timm's model registry.

After ``import timm, vitpe`` (or any use of vitpe's models), ``timm.create_model("vitpe_tiny_patch4_32",
pe="rope_mixed", num_classes=100)`` builds a :class:`~vitpe.models.vit.ViT`; any ViT keyword overrides the preset.
There are no pretrained weights.

=========================  =====  =====  =====  =========  =======================================================
name                       dim    depth  heads  mlp_ratio  intended use
=========================  =====  =====  =====  =========  =======================================================
vitpe_nano_patch4_32       128    6      4      2          CPU budget (about 0.8 M parameters; s-chh's CIFAR setup)
vitpe_tiny_patch4_32       192    9      3      2          CIFAR from scratch (Lee et al. 2021 scale)
vitpe_small_patch4_32      384    12     6      4          GPU runs
=========================  =====  =====  =====  =========  =======================================================

All take 32 px images with 4 px patches (an 8 x 8 grid).
"""

from __future__ import annotations

from typing import Any

from timm.models import register_model

from vitpe.models.vit import ViT

PRESETS: dict[str, dict[str, Any]] = {
    "vitpe_nano_patch4_32": dict(img_size=32, patch_size=4, dim=128, depth=6, heads=4, mlp_ratio=2.0),
    "vitpe_tiny_patch4_32": dict(img_size=32, patch_size=4, dim=192, depth=9, heads=3, mlp_ratio=2.0),
    "vitpe_small_patch4_32": dict(img_size=32, patch_size=4, dim=384, depth=12, heads=6, mlp_ratio=4.0),
}
_TIMM_ONLY_KWARGS = ("pretrained_cfg", "pretrained_cfg_overlay", "cache_dir")


def create_preset(name: str, pretrained: bool = False, **kwargs: Any) -> ViT:
    """Build the preset ``name`` with ``kwargs`` overriding its defaults."""
    if pretrained:
        raise ValueError(f"{name} has no pretrained weights; build it with pretrained=False and train it")
    for key in _TIMM_ONLY_KWARGS:
        kwargs.pop(key, None)
    return ViT(**{**PRESETS[name], **kwargs})


@register_model
def vitpe_nano_patch4_32(pretrained: bool = False, **kwargs: Any) -> ViT:
    """ViT-nano, 4 px patches, 32 px images (dim 128, depth 6, heads 4, MLP ratio 2)."""
    return create_preset("vitpe_nano_patch4_32", pretrained, **kwargs)


@register_model
def vitpe_tiny_patch4_32(pretrained: bool = False, **kwargs: Any) -> ViT:
    """ViT-tiny, 4 px patches, 32 px images (dim 192, depth 9, heads 3, MLP ratio 2)."""
    return create_preset("vitpe_tiny_patch4_32", pretrained, **kwargs)


@register_model
def vitpe_small_patch4_32(pretrained: bool = False, **kwargs: Any) -> ViT:
    """ViT-small, 4 px patches, 32 px images (dim 384, depth 12, heads 6, MLP ratio 4)."""
    return create_preset("vitpe_small_patch4_32", pretrained, **kwargs)
