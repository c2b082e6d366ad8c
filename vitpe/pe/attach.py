"""``vitpe.pe.attach(model, name, **options)``: any vitpe PE in place of a timm ViT's position encoding, in one line.

The hosting itself needs timm and lives in :mod:`vitpe.models.timm_host`; importing ``vitpe.pe`` stays light.
"""

from __future__ import annotations

from typing import Any

from torch import nn


def attach(model: nn.Module, name: str, **options: Any) -> nn.Module:
    """Give timm ``VisionTransformer`` ``model`` the vitpe PE ``name`` instead of its own (in place; returns it).

    The PE is built for the model (its width, heads, depth, patch grid and prefix tokens) with ``options``
    (``vitpe.pe.options(name)``) and kept as ``model.vitpe_pe``; the learned ``pos_embed`` is removed. Any image size
    whose sides divide by the patch size then works (``model.vitpe_pe.resize = "extrapolate"`` switches the mode),
    ``model.no_weight_decay()`` names the PE's parameters, and ``forward_intermediates`` carries the PE too. A
    ``TypeError`` says so for a model of another family (Eva, a parallel or post-norm block).

    Example::

        model = vitpe.pe.attach(timm.create_model("vit_small_patch16_224", dynamic_img_size=True), "rope_mixed")
    """
    from vitpe.models.timm_host import attach_to_vision_transformer

    return attach_to_vision_transformer(model, name, **options)
