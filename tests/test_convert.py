"""Pretrained-model conversion: timm models and their vitpe conversions give the same logits (fp32, eval mode), at the
native size and, for ``dynamic_img_size`` models, at other sizes; unsupported models and options are one clear error.
Small random configurations, every parameter moved away from its init (random, not constant, shifts: a LayerNorm
removes a constant one) so that each one matters."""

from __future__ import annotations

import pytest
import timm
import torch

import vitpe
from vitpe.loading.convert import UnsupportedModelError

TOLERANCE = 1e-4  # max |difference| relative to the largest logit


def perturbed(name: str, seed: int = 0, **kwargs) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False, **kwargs).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            scale = 0.5 if "gamma" in pname else 0.05  # LayerScale starts at 1e-5: bring it to order 1
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model


def relative_error(timm_model: torch.nn.Module, vit: torch.nn.Module, size: tuple[int, int]) -> float:
    x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        expected, got = timm_model(x), vit(x)
    assert got.shape == expected.shape
    return float((expected - got).abs().max() / expected.abs().max())


SMALL = dict(depth=2, embed_dim=64, num_heads=2, num_classes=5, dynamic_img_size=True)
VIT_CASES = {
    "class-token position (vit_tiny)": ("vit_tiny_patch16_224", dict(img_size=48)),
    "no_embed_class + LayerScale (deit3)": ("deit3_small_patch16_224", dict(img_size=48)),
    "registers + patch 14 (dinov2)": ("vit_small_patch14_reg4_dinov2", dict(img_size=56)),
    "no class token, GAP + fc_norm + registers": ("vit_base_patch16_reg4_gap_256", dict(img_size=64)),
    "registers with positions (no_embed_class off)": ("vit_tiny_patch16_224", dict(img_size=48, reg_tokens=2)),
    "GAP without fc_norm, no qkv bias": ("vit_tiny_patch16_224", dict(img_size=48, global_pool="avg", fc_norm=False,
                                                                       qkv_bias=False)),
}


@pytest.mark.parametrize("case", VIT_CASES, ids=list(VIT_CASES))
def test_vision_transformer_logits_match_at_every_size(case):
    name, extra = VIT_CASES[case]
    model = perturbed(name, **{**SMALL, **extra})
    vit = vitpe.from_timm(model)
    assert isinstance(vit, vitpe.ViT) and not vit.training
    p = model.patch_embed.patch_size[0]
    for size in (tuple(model.patch_embed.img_size), (3 * p, 5 * p), (6 * p, 6 * p), (2 * p, 2 * p)):
        assert relative_error(model, vit, size) < TOLERANCE, size


def test_the_comparison_can_fail():
    model = perturbed("deit3_small_patch16_224", **SMALL, img_size=48)
    vit = vitpe.from_timm(model)
    with torch.no_grad():
        vit.pe.pos_embed[4] += 0.05 * torch.randn(64)
    assert relative_error(model, vit, (48, 48)) > 10 * TOLERANCE


def test_a_name_is_created_through_timm():
    vit = vitpe.from_timm("vit_tiny_patch16_224", pretrained=False, **SMALL, img_size=32)
    assert vit.pe.name == "learnable" and vit.grid == (2, 2) and vit.head.out_features == 5
    with pytest.raises(ValueError, match="only apply when a model name is given"):
        vitpe.from_timm(timm.create_model("vit_tiny_patch16_224", **SMALL, img_size=32), pretrained=False)


@pytest.mark.parametrize("name, extra, message", [
    ("swin_tiny_patch4_window7_224", dict(embed_dim=32, depths=(1, 1, 1, 1), num_heads=(1, 1, 1, 1)),
     "not a family vitpe converts"),
    ("vit_tiny_patch16_224", dict(**SMALL, img_size=32, qk_norm=True), "normalises q and k"),
    ("vit_tiny_patch16_224", dict(**SMALL, img_size=32, global_pool="map"), "pools with 'map'"),
    ("vit_tiny_patch16_224", dict(**SMALL, img_size=32, pre_norm=True), "pre_norm"),
])
def test_unsupported_models_and_options_are_named(name, extra, message):
    model = timm.create_model(name, pretrained=False, **extra)
    with pytest.raises(UnsupportedModelError, match=message) as err:
        vitpe.from_timm(model)
    assert "supported" in str(err.value)


ROPE_CASES = {
    "axial, theta 100": "vit_small_patch16_rope_224",
    "mixed, theta 10": "vit_small_patch16_rope_mixed_224",
    "axial + learned table": "vit_small_patch16_rope_ape_224",
    "mixed + learned table": "vit_small_patch16_rope_mixed_ape_224",
}


@pytest.mark.parametrize("case", ROPE_CASES, ids=list(ROPE_CASES))
def test_rope_vit_logits_match_at_every_size(case):
    model = perturbed(ROPE_CASES[case], **SMALL, img_size=64)
    vit = vitpe.from_timm(model)
    rope = "rope_mixed" if "mixed" in case else "rope_axial"
    assert rope in vit.pe.name and ("learnable" in vit.pe.name) == ("table" in case)
    for size in ((64, 64), (48, 80), (96, 96), (32, 32)):  # positions continue beyond 4 x 4 (rope-vit's protocol)
        assert relative_error(model, vit, size) < TOLERANCE, size


def test_rope_vit_rotation_layout_matters():
    """rope-vit and vitpe both pair channels (2j, 2j + 1); paired otherwise (q and k rows of one block reordered to
    the rotate-half layout) the logits differ: the logit test sees the pairing."""
    from vitpe.loading.convert import convert
    from vitpe.loading.rotary_pairs import half_to_interleaved
    model = perturbed("vit_small_patch16_rope_224", **SMALL, img_size=64)
    converted = convert(model)
    q, k, v = converted.state_dict["blocks.0.attn.qkv.weight"].chunk(3)
    heads = converted.vit_kwargs["heads"]
    converted.state_dict["blocks.0.attn.qkv.weight"] = torch.cat(
        (half_to_interleaved(q, heads), half_to_interleaved(k, heads), v))
    vit = vitpe.ViT(**converted.vit_kwargs)
    vit.load_state_dict(converted.state_dict)
    assert relative_error(model, vit.eval(), (64, 64)) > 10 * TOLERANCE


def test_other_rotations_are_refused_by_name():
    model = timm.create_model("vit_small_patch16_rope_224", pretrained=False, depth=1, embed_dim=64, num_heads=2,
                              img_size=64, rope_grid_indexing="ij")  # x and y swapped
    with pytest.raises(UnsupportedModelError, match="other angles"):
        vitpe.from_timm(model)


@pytest.mark.parametrize("extra", [dict(), dict(use_abs_pos_emb=True), dict(init_values=None, global_pool="token")],
                         ids=["beit", "beit + learned table", "no LayerScale, class token"])
def test_beit_logits_match(extra):
    kwargs = {**SMALL, "img_size": 64, **extra}
    kwargs.pop("dynamic_img_size")  # timm's BEiT runs at its own size only
    model = perturbed("beit_base_patch16_224", **kwargs)
    vit = vitpe.from_timm(model)
    relbias = vit.pe.members["relbias"] if "+" in vit.pe.name else vit.pe
    assert relbias.class_bias_table.shape == (2, 3, 2)
    assert relative_error(model, vit, (64, 64)) < TOLERANCE
    x = torch.randn(1, 3, 48, 80)
    for mode in ("interpolate", "extrapolate"):  # beyond timm: any size, in either mode (a learned absolute table
        vit.set_pe_resize(mode)                  # cannot extrapolate: that is its one clear error)
        if mode == "extrapolate" and "learnable" in vit.pe.name:
            with pytest.raises(vitpe.pe.ResizeError):
                vit(x)
        else:
            assert torch.isfinite(vit(x)).all()


def test_beit_class_entries_matter():
    model = perturbed("beit_base_patch16_224", **{k: v for k, v in SMALL.items() if k != "dynamic_img_size"},
                      img_size=64)
    vit = vitpe.from_timm(model)
    with torch.no_grad():
        vit.pe.class_bias_table[:, 1] += torch.randn(2, 2)  # patch -> class entries
    assert relative_error(model, vit, (64, 64)) > 10 * TOLERANCE
