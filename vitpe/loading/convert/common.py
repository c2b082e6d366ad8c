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

from vitpe.pe.composed import SEPARATOR, member_names

#: The families :func:`vitpe.from_timm` converts, for error messages.
SUPPORTED = ("timm VisionTransformer (vit_*, deit3_*, *_dinov2, *_reg*_gap_*: learned absolute positions)",
             "rope-vit in timm (vit_*_patch16_rope[_mixed][_ape]_224: Eva with RoPE-Axial or RoPE-Mixed)",
             "DINOv3 (vit_*_patch16_dinov3[_qkvb]: Eva with DINOv3's RoPE)",
             "EVA-02 (eva02_*_patch14_*: Eva with a learned table and RoPE on a reference grid)",
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


def check_trunk(model: nn.Module, source: str) -> dict[str, Any]:
    """Checks shared by timm's ViT-like models (a conv patch embedding, plain pooling, GELU or SwiGLU MLPs, no q/k
    or output norms); returns the ViT arguments they determine."""
    from timm.layers import PatchEmbed

    embed = model.patch_embed
    require(type(embed) is PatchEmbed and is_identity(embed.norm), source, "has a patch embedding other than one "
            "convolution")
    require(not getattr(embed, "dynamic_img_pad", False), source, "pads images to the patch size (dynamic_img_pad)")
    require(embed.patch_size[0] == embed.patch_size[1], source, f"has non-square patches {embed.patch_size}")
    require(is_identity(getattr(model, "norm_pre", None)), source, "normalises the tokens before block 0 "
            "(pre_norm, as CLIP)")
    require(getattr(model, "attn_pool", None) is None and model.global_pool in ("token", "avg"), source,
            f"pools with {model.global_pool!r} (vitpe pools the class token or the mean of the patch tokens)")
    fc_norm = not is_identity(model.fc_norm)
    require(not fc_norm or model.global_pool == "avg", source, "normalises a pooled class token (fc_norm)")
    norm_eps = layer_norm_eps(model.blocks[0].norm1, source)
    mlps = {block_mlp(block.mlp, norm_eps, source, i) for i, block in enumerate(model.blocks)}
    require(len(mlps) == 1, source, "has blocks with different MLPs")
    for block in model.blocks:
        require(is_identity(getattr(block.attn, "q_norm", None)) and is_identity(getattr(block.attn, "k_norm", None)),
                source, "normalises q and k (qk_norm)")
        require(is_identity(getattr(block.attn, "norm", None)) and getattr(block.attn, "gate", None) is None, source,
                "normalises or gates the attention output")
    (mlp, mlp_norm, hidden), = mlps
    reg = getattr(model, "reg_token", None)
    dim = model.embed_dim
    return dict(img_size=tuple(embed.img_size), patch_size=embed.patch_size[0], in_chans=embed.proj.in_channels,
                num_classes=model.num_classes, dim=dim, depth=len(model.blocks), heads=model.blocks[0].attn.num_heads,
                mlp_ratio=hidden / dim, mlp=mlp, mlp_norm=mlp_norm,
                pool="cls" if model.global_pool == "token" else "mean", class_token=model.cls_token is not None,
                reg_tokens=0 if reg is None else reg.shape[1], fc_norm=fc_norm, norm_eps=norm_eps,
                qkv_bias=getattr(model.blocks[0].attn.qkv, "bias", None) is not None, stem="patch")


def block_mlp(mlp: nn.Module, norm_eps: float, source: str, index: int) -> tuple[str, bool, int]:
    """(vitpe's MLP kind, whether it normalises its hidden features, its hidden width) of a timm block MLP:
    ``Mlp`` with exact GELU, or SwiGLU as ``SwiGLU`` or as a packed ``GluMlp`` (SiLU gate first)."""
    from timm.layers import GluMlp, Mlp, SwiGLU

    kinds = {Mlp: ("gelu", nn.GELU), SwiGLU: ("swiglu", nn.SiLU), GluMlp: ("swiglu", nn.SiLU)}
    kind, act = kinds.get(type(mlp), (None, None))
    require(kind is not None and type(mlp.act) is act and getattr(mlp.act, "approximate", "none") == "none", source,
            f"block {index} has a {type(mlp).__name__} MLP with {type(mlp.act).__name__} (vitpe has Linear-GELU-Linear "
            f"and SwiGLU)")
    require(type(mlp) is not GluMlp or (not mlp.gate_last and mlp.chunk_dim == -1), source,
            f"block {index} gates with the second half of its packed fc1 (gate_last)")
    norm = not is_identity(mlp.norm)
    require(not norm or layer_norm_eps(mlp.norm, source) == norm_eps, source, "normalises inside the MLP with another "
            "epsilon than its other LayerNorms")
    return kind, norm, mlp.fc2.in_features


#: Block-level keys of timm's Eva and BEiT blocks -> vitpe's (their LayerScale gains are raw parameters there).
GAMMA_KEYS = {"gamma_1": "ls1.gamma", "gamma_2": "ls2.gamma"}


def rename_keys(state: dict[str, torch.Tensor], prefix: str, renames: dict[str, str]) -> None:
    """In ``state``, move ``prefix + old`` to ``prefix + new`` for every (old, new) of ``renames`` that is present."""
    for old, new in renames.items():
        if prefix + old in state:
            state[prefix + new] = state.pop(prefix + old)


def check_gammas(model: nn.Module, source: str) -> float | None:
    """Require Eva/BEiT blocks to scale both residual branches or neither; the ViT ``layer_scale_init`` to use."""
    for block in model.blocks:
        require((block.gamma_1 is None) == (block.gamma_2 is None), source, "scales only the attention branch")
    return 1e-5 if model.blocks[0].gamma_1 is not None else None  # overwritten by the loaded gains


def pe_key(pe: str, member: str, name: str) -> str:
    """The state-dict key of parameter ``name`` of the PE ``member``: ``pe.<name>``, or in a composed PE
    (``"learnable+rope_mixed"``) ``pe.members.<member>.<name>``."""
    return f"pe.members.{member}.{name}" if SEPARATOR in pe else f"pe.{name}"


def complete_state(converted: Converted, model: nn.Module) -> Converted:
    """Add what every converted state dict needs besides timm's weights: the grid each PE's tables were learned on
    (``reference_grid``, of the PE and of each member of a composed one) and a zero bias for output projections that
    have none in timm (vitpe's always has one; zero is the same map)."""
    pe, grid = converted.vit_kwargs["pe"], tuple(model.patch_embed.grid_size)
    members = member_names(pe) if SEPARATOR in pe else []
    converted.state_dict["pe.reference_grid"] = torch.tensor(grid)
    for member in members:  # a member may have a reference grid of its own (EVA-02's rotation)
        own = converted.vit_kwargs.get("pe_options", {}).get(member, {}).get("grid", grid)
        converted.state_dict[pe_key(pe, member, "reference_grid")] = torch.tensor(tuple(own))
    for i, block in enumerate(model.blocks):
        if block.attn.proj.bias is None:
            converted.state_dict[f"blocks.{i}.attn.proj.bias"] = torch.zeros(block.attn.proj.out_features)
    return converted


def rope_angles(model: nn.Module, grid: tuple[int, int], half: bool = False) -> torch.Tensor:
    """The angle of every rotation pair of a timm model's ``rope`` at ``grid``, (..., N, Dh/2), in the pair order of
    its layout: interleaved (pair j = channels 2j, 2j + 1) or, with ``half``, rotate-half (channels j, j + Dh/2)."""
    sin, cos = model.rope.get_embed(shape=list(grid)).chunk(2, dim=-1)  # (..., N, Dh) each, every angle twice
    pairs = (..., slice(None, sin.shape[-1] // 2)) if half else (..., slice(None, None, 2))
    return torch.atan2(sin[pairs], cos[pairs]).float()  # (..., N, Dh/2)


def same_angles(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two angle tensors agree to 1e-4 rad, modulo 2 pi."""
    return a.shape == b.shape and bool(((a - b + torch.pi) % (2 * torch.pi) - torch.pi).abs().max() < 1e-4)


def split_position_table(state: dict[str, torch.Tensor], grid: tuple[int, int], source: str) -> torch.Tensor:
    """Pop ``pos_embed`` (1, P' + N, D) from a timm state dict and return its grid rows (N, D); the P' rows of the
    prefix tokens (absent with ``no_embed_class``) are constants added to those tokens, so they are folded into
    ``cls_token`` / ``reg_token`` in ``state``."""
    table = state.pop("pos_embed")[0]  # (P' + N, D)
    n_prefix = table.shape[0] - grid[0] * grid[1]
    prefix = [name for name in ("cls_token", "reg_token") if name in state]
    require(n_prefix in (0, sum(state[name].shape[1] for name in prefix)), source, f"has {n_prefix} prefix positions")
    start = 0
    for name in prefix if n_prefix else ():
        count = state[name].shape[1]
        state[name] = state[name] + table[start:start + count]  # (1, count, D)
        start += count
    return table[n_prefix:]  # (N, D)
