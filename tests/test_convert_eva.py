"""DINOv3 and EVA-02 (timm's ``Eva`` with EVA attention) converted with the same logits, at the native size and at
other sizes, square and not: every model family at a small width (random weights moved away from their init), with
the parts each has (storage tokens, LayerScale, SwiGLU packed and split, sub-LN, q/k/v biases fused and separate,
RoPE on a reference grid); a perturbed frequency, table or projection breaks the equality."""

from __future__ import annotations

import pytest
import timm
import torch
from test_convert import TOLERANCE, perturbed, relative_error

import vitpe
from vitpe.loading.convert import UnsupportedModelError, build_vit, convert

SMALL = dict(depth=2, embed_dim=64, num_heads=2, num_classes=5, dynamic_img_size=True)
DINOV3 = ["vit_small_patch16_dinov3", "vit_small_patch16_dinov3_qkvb", "vit_small_plus_patch16_dinov3",
          "vit_base_patch16_dinov3", "vit_large_patch16_dinov3_qkvb", "vit_huge_plus_patch16_dinov3",
          "vit_7b_patch16_dinov3"]
EVA02 = {"eva02_tiny_patch14_224": {}, "eva02_small_patch14_336": {}, "eva02_base_patch14_224": {},
         "eva02_large_patch14_224": {},
         "eva02_base_patch14_448 (table 4 x 4, rotation on 2 x 2)": dict(ref_feat_shape=2)}


def sharp(name: str, **kwargs) -> torch.nn.Module:
    """:func:`perturbed`, with q and k weights 12x larger: attention far from uniform, so that positions matter (the
    logits then move by about 0.5% when DINOv3's period base goes from 100 to 110)."""
    model = perturbed(name, **{**SMALL, **kwargs})
    with torch.no_grad():
        for block in model.blocks:
            attn = block.attn
            if attn.qkv is not None:
                attn.qkv.weight[:2 * attn.qkv.weight.shape[0] // 3] *= 12  # the q and k rows
            else:
                attn.q_proj.weight.mul_(12), attn.k_proj.weight.mul_(12)
    return model


def check_every_size(model: torch.nn.Module, vit: torch.nn.Module) -> None:
    p = model.patch_embed.patch_size[0]
    for size in (tuple(model.patch_embed.img_size), (3 * p, 5 * p), (7 * p, 7 * p), (2 * p, 2 * p)):
        assert relative_error(model, vit, size) < TOLERANCE, size


@pytest.mark.parametrize("name", DINOV3)
def test_dinov3_logits_match_at_every_size(name):
    model = sharp(name, img_size=64)
    vit = vitpe.from_timm(model)
    assert vit.pe.name == "rope_dinov3" and vit.reg_token.shape[1] == 4
    check_every_size(model, vit)


@pytest.mark.parametrize("case", EVA02, ids=list(EVA02))
def test_eva02_logits_match_at_every_size(case):
    model = sharp(case.split()[0], img_size=56, **EVA02[case])
    vit = vitpe.from_timm(model)
    assert vit.pe.name == "learnable+rope_axial" and vit.blocks[0].mlp.fc1_g.out_features == int(64 * 8 / 3)
    check_every_size(model, vit)


def test_the_parts_each_family_has_reach_the_backbone():
    dino_s = vitpe.from_timm(sharp("vit_small_patch16_dinov3", img_size=64))
    dino_splus = vitpe.from_timm(sharp("vit_small_plus_patch16_dinov3_qkvb", img_size=64))
    eva_base = vitpe.from_timm(sharp("eva02_base_patch14_448", img_size=56, ref_feat_shape=2))
    assert type(dino_s.blocks[0].mlp).__name__ == "Mlp" and dino_s.blocks[0].attn.qkv.bias is None
    assert type(dino_splus.blocks[0].mlp).__name__ == "SwiGLU" and dino_splus.blocks[0].attn.qkv.bias is not None
    assert isinstance(eva_base.blocks[0].mlp.norm, torch.nn.LayerNorm)  # sub-LN
    assert eva_base.pe.members["rope_axial"].grid == (2, 2) and eva_base.pe.members["learnable"].grid == (4, 4)


def test_a_perturbed_frequency_table_or_projection_breaks_the_equality():
    dino = sharp("vit_small_patch16_dinov3", img_size=64)
    converted = convert(dino)
    converted.vit_kwargs["pe_options"]["base"] = 110.0  # DINOv3's period base is 100
    assert relative_error(dino, build_vit(converted), (64, 64)) > 10 * TOLERANCE
    eva = sharp("eva02_tiny_patch14_224", img_size=56)
    for change in ("table", "projection"):
        vit = vitpe.from_timm(eva)
        with torch.no_grad():
            target = vit.pe.members["learnable"].pos_embed if change == "table" else vit.blocks[1].attn.qkv.weight
            target[3] += 0.05 * torch.randn(target.shape[1:])
        assert relative_error(eva, vit, (56, 56)) > 10 * TOLERANCE, change


def test_a_rotation_vitpe_does_not_compute_is_refused_by_name():
    model = sharp("eva02_tiny_patch14_224", img_size=56)
    dino = sharp("vit_small_patch16_dinov3", img_size=64)
    with torch.no_grad():
        model.rope.bands.mul_(1.01)  # frequencies off EVA-02's ladder
        dino.rope.periods.mul_(1.01)  # periods off DINOv3's
    for changed in (model, dino):
        with pytest.raises(UnsupportedModelError, match="rotates by other angles"):
            vitpe.from_timm(changed)


@pytest.mark.parametrize("name, extra, message", [
    ("eva02_tiny_patch14_224", dict(scale_attn_inner=True), "normalises or gates the attention output"),
    ("eva02_tiny_patch14_224", dict(qk_norm=True), "normalises q and k"),
    ("vit_small_patch16_dinov3", dict(use_abs_pos_emb=True), "adds a learned table to DINOv3's RoPE"),
    ("eva02_tiny_patch14_224", dict(rope_grid_indexing="xy"), "settings vitpe does not reproduce"),
])
def test_unsupported_options_are_named(name, extra, message):
    model = timm.create_model(name, **{**SMALL, "img_size": 56 if "eva" in name else 64, **extra})
    with pytest.raises(UnsupportedModelError, match=message):
        vitpe.from_timm(model)


@pytest.mark.parametrize("name, size", [("vit_small_patch16_dinov3", (80, 48)), ("eva02_tiny_patch14_224", (70, 42))])
def test_intermediate_features_are_timms(name, size):
    model = sharp(name, img_size=64 if "dinov3" in name else 56)
    vit = vitpe.from_timm(model)
    x = torch.randn(2, 3, *size)
    for kwargs in (dict(indices=2), dict(indices=[0], norm=True, return_prefix_tokens=True),
                   dict(indices=1, output_fmt="NLC", stop_early=True)):
        with torch.no_grad():
            theirs, ours = model.forward_intermediates(x, **kwargs), vit.forward_intermediates(x, **kwargs)
        assert torch.allclose(theirs[0], ours[0], atol=1e-4), kwargs  # the final normalised tokens
        flat = lambda out: [t for item in out for t in (item if isinstance(item, tuple) else (item,))]  # noqa: E731
        assert [t.shape for t in flat(theirs[1])] == [t.shape for t in flat(ours[1])], kwargs
        assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(flat(theirs[1]), flat(ours[1]))), kwargs
