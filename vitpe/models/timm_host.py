"""A vitpe PE inside timm's ``VisionTransformer``: what :func:`vitpe.pe.attach` turns the model's modules into.

timm's ViT runs every path (``forward``, ``forward_features``, ``forward_intermediates``, gradient checkpointing)
through ``_pos_embed`` and then its blocks, which take no position argument. So the hosting is done where timm calls:

* ``_pos_embed`` (on the patch grid, (B, gh, gw, D), as ``dynamic_img_size`` gives it) binds the PE to this forward's
  grid and hands each block its hooks (:class:`vitpe.pe.bound.LayerHooks`), then adds the prefix tokens; the learned
  ``pos_embed`` is gone;
* each block first applies the tokens-site hook, each attention the q,k and logits hooks (then SDPA);
* the hooks are dropped when ``forward_features`` / ``forward_intermediates`` return, so a model holds no tensor of a
  past forward (it deep-copies and pickles as before).

The classes are timm's own with one method each replaced (``model.__class__`` is swapped, no module is rebuilt): the
weights, their names and timm's other methods stay as they were.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from timm.layers.attention import Attention
from timm.layers.format import Format
from timm.models.vision_transformer import Block, VisionTransformer

from vitpe.pe.bound import LayerHooks

#: The attribute a hosting model keeps its PE under (in its state dict: ``vitpe_pe.*``).
PE_ATTRIBUTE = "vitpe_pe"


class HostedAttention(Attention):
    """timm's attention with a vitpe PE's q,k and logits hooks; ``pe_hooks`` is set by the model for each forward."""

    pe_hooks: LayerHooks | None = None

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        hooks = self.pe_hooks
        if hooks is None:
            raise RuntimeError("this attention carries a vitpe PE bound by its model for each forward: call the model "
                               "(forward, forward_features or forward_intermediates), not the block alone")
        B, N, _ = x.shape
        gate = self.gate(x).sigmoid() if getattr(self, "gate", None) is not None else None
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, nH, N, Dh)
        q, k, v = qkv.unbind(0)
        q, k = hooks.rotate_qk(self.q_norm(q), self.k_norm(k))  # (B, nH, N, Dh'), Dh' > Dh for PaPE
        mask = joined_mask(hooks.attention_bias(), attn_mask, q.dtype)
        dropout = self.attn_drop.p if self.training else 0.0
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout,
                                           is_causal=is_causal and mask is None)  # (B, nH, N, Dh)
        x = x.transpose(1, 2).reshape(B, N, -1)  # (B, N, nH * Dh)
        x = getattr(self, "norm", torch.nn.Identity())(x)
        if gate is not None:
            x = x * gate
        return self.proj_drop(self.proj(x))


def joined_mask(bias: torch.Tensor | None, attn_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """The PE's bias (nH, N, N) and a caller's mask (boolean, True = attend, or additive) as one additive mask."""
    if bias is not None:
        bias = bias.to(dtype)
    if attn_mask is None:
        return bias
    if attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=dtype, device=attn_mask.device).masked_fill(
            ~attn_mask, torch.finfo(dtype).min)
    return attn_mask.to(dtype) if bias is None else bias + attn_mask.to(dtype)


class HostedBlock(Block):
    """timm's pre-norm block with the PE's tokens-site hook before it."""

    attn: HostedAttention

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        hooks = self.attn.pe_hooks
        if hooks is not None:  # (none: the attention says what went wrong)
            x = hooks.add_to_tokens(x)
        return super().forward(x, attn_mask=attn_mask, is_causal=is_causal)


class HostedVisionTransformer(VisionTransformer):
    """timm's ``VisionTransformer`` whose position encoding is a vitpe PE (``model.vitpe_pe``)."""

    def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        """Patch tokens (B, gh, gw, D) -> (B, P + gh * gw, D) with the prefix tokens; binds the PE to (gh, gw)."""
        B, gh, gw, D = x.shape
        bound = getattr(self, PE_ATTRIBUTE).bind((gh, gw))
        for i, block in enumerate(self.blocks):
            block.attn.pe_hooks = bound.layer(i)
        prefix = [t.expand(B, -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]  # (B, 1, D) each
        return self.pos_drop(torch.cat([*prefix, x.reshape(B, gh * gw, D)], dim=1))  # (B, P + N, D)

    def release_hooks(self) -> None:
        for block in self.blocks:
            block.attn.pe_hooks = None

    def forward_features(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        try:
            return super().forward_features(x, *args, **kwargs)
        finally:
            self.release_hooks()

    def forward_intermediates(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().forward_intermediates(x, *args, **kwargs)
        finally:
            self.release_hooks()

    @torch.jit.ignore
    def no_weight_decay(self) -> set[str]:
        pe = getattr(self, PE_ATTRIBUTE)
        return (super().no_weight_decay() - {"pos_embed"}) | {f"{PE_ATTRIBUTE}.{n}" for n in pe.no_weight_decay()}


def attach_to_vision_transformer(model: torch.nn.Module, name: str, **options: Any) -> VisionTransformer:
    """Replace the position encoding of timm ``VisionTransformer`` ``model`` by the vitpe PE ``name`` (in place);
    see :func:`vitpe.pe.attach`."""
    import vitpe.pe

    if not isinstance(model, VisionTransformer) or type(model) not in (VisionTransformer, HostedVisionTransformer):
        raise TypeError(f"vitpe.pe.attach takes timm's VisionTransformer (vit_*, deit3_*, DINOv2 ...); got "
                        f"{type(model).__name__}. For other models, call the PE's hooks in your attention "
                        f"(README, 'A vitpe PE inside your own attention'), or convert with vitpe.from_timm")
    for block in model.blocks:
        if type(block) not in (Block, HostedBlock) or type(block.attn) not in (Attention, HostedAttention):
            raise TypeError(f"vitpe.pe.attach needs timm's pre-norm Block with its Attention; this model has "
                            f"{type(block).__name__} / {type(block.attn).__name__}")
    reference = next(model.parameters())
    pe = vitpe.pe.build(name, dim=model.embed_dim, heads=model.blocks[0].attn.num_heads, depth=len(model.blocks),
                        grid=tuple(model.patch_embed.grid_size), num_prefix_tokens=model.num_prefix_tokens, **options)
    setattr(model, PE_ATTRIBUTE, pe.to(device=reference.device, dtype=reference.dtype))
    model.pos_embed = None
    model.dynamic_img_size = True  # the patch embedding hands _pos_embed its grid, any image size
    patch_embed = model.patch_embed
    patch_embed.strict_img_size, patch_embed.flatten, patch_embed.output_fmt = False, False, Format.NHWC
    model.__class__ = HostedVisionTransformer
    for block in model.blocks:
        block.__class__, block.attn.__class__ = HostedBlock, HostedAttention
    return model
