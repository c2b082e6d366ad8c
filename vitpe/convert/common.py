"""What every converter shares: its result, its one error, and checks that name what vitpe lacks.

A converter reads a timm module and returns a :class:`Converted`: the keyword arguments of the equivalent
:class:`vitpe.ViT` and a state dict for it. It never copies timm's forward code: the vitpe model computes the same
function with its own modules, which is what the logit-equality tests check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

#: The families :func:`vitpe.from_timm` converts, for error messages.
SUPPORTED = ("timm VisionTransformer (vit_*, deit3_*, *_dinov2, *_reg*_gap_*: learned absolute positions)",
             "rope-vit in timm (vit_*_patch16_rope[_mixed][_ape]_224: Eva with RoPE-Axial or RoPE-Mixed)",
             "BEiT (beit_*: relative position bias per layer)")


class UnsupportedModelError(ValueError):
    """A timm model (or one of its options) that vitpe cannot reproduce; the message names what is missing."""


@dataclass
class Converted:
    """A converted model: ``ViT(**vit_kwargs)`` loads ``state_dict`` strictly."""

    vit_kwargs: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    source: str = ""  # the timm class and, when known, the model name
    notes: list[str] = field(default_factory=list)


def require(condition: bool, source: str, missing: str) -> None:
    """Raise :class:`UnsupportedModelError` naming ``missing`` unless ``condition``."""
    if not condition:
        raise UnsupportedModelError(f"{source}: {missing}, which vitpe does not reproduce; supported families: "
                                    + "; ".join(SUPPORTED))


def is_identity(module: nn.Module | None) -> bool:
    return module is None or isinstance(module, nn.Identity)


def layer_norm_eps(module: nn.Module, source: str) -> float:
    require(type(module) is nn.LayerNorm or type(module).__name__ == "LayerNorm", source,
            f"uses {type(module).__name__} as a norm layer (vitpe has LayerNorm)")
    return float(module.eps)


def detach_all(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().float() for k, v in state.items()}
