"""The ViT backbone: any PE, any divisible image size, timm compatibility, clear errors."""

import pytest
import timm
import torch

import vitpe
from vitpe.models.presets import PRESETS

TWO_D = [n for n in vitpe.pe.available() if 2 in vitpe.pe.get(n).grid_dims]


def small_vit(pe="learnable", **kw):
    torch.manual_seed(0)
    return vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=2, heads=2, mlp_ratio=2.0, num_classes=5, pe=pe, **kw)


def permute_patches(images: torch.Tensor, patch: int, perm: torch.Tensor) -> torch.Tensor:
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    patches = images.reshape(B, C, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, C, patch, patch)
    patches = patches[:, perm]  # shuffle patch positions
    return patches.reshape(B, gh, gw, C, patch, patch).permute(0, 3, 1, 4, 2, 5).reshape(B, C, H, W)


@pytest.mark.parametrize("pe", TWO_D)
@pytest.mark.parametrize("size", [(16, 16), (8, 12), (24, 32)])
def test_forward_shapes_at_any_divisible_size(pe, size):
    model = small_vit(pe)
    if pe in ("learnable", "separable"):
        model.set_pe_resize("interpolate")
    out = model(torch.randn(2, 3, *size))
    assert out.shape == (2, 5) and torch.isfinite(out).all()


@pytest.mark.parametrize("pool", ["cls", "mean"])
def test_none_with_mean_pool_is_order_blind_and_every_pe_is_not(pool):
    images = torch.randn(2, 3, 16, 16)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    shuffled = permute_patches(images, 4, perm)

    def pooled(model, x):  # pooled features: at init the PE effects on logits are tiny but well above rounding
        return model.forward_head(model.forward_features(x), pre_logits=True)

    model = small_vit("none", pool="mean").eval()
    assert torch.allclose(model(images), model(shuffled), atol=1e-6)
    assert (pooled(model, images) - pooled(model, shuffled)).abs().max() < 1e-6
    for pe in TWO_D:
        if pe == "none":
            continue
        model = small_vit(pe, pool=pool).eval()
        assert (pooled(model, images) - pooled(model, shuffled)).abs().max() > 1e-5, pe


def test_image_size_not_divisible_by_patch_is_a_clear_error():
    with pytest.raises(ValueError, match="not divisible by the patch size 4"):
        small_vit()(torch.randn(1, 3, 18, 16))
    with pytest.raises(ValueError, match="not divisible by the patch size 4"):
        vitpe.ViT(img_size=30, patch_size=4)
    with pytest.raises(ValueError, match="input channels"):
        small_vit()(torch.randn(1, 1, 16, 16))
    with pytest.raises(ValueError, match="expected floating-point images .*got torch.uint8"):
        small_vit()(torch.zeros(1, 3, 16, 16, dtype=torch.uint8))


def test_unknown_pe_names_and_options_are_errors():
    with pytest.raises(ValueError, match="unknown position encoding 'rope'.*rope_axial"):
        small_vit("rope")
    with pytest.raises(ValueError, match="unknown option.*'thta'"):
        small_vit("rope_axial", pe_options={"thta": 10})
    with pytest.raises(ValueError, match="1D grids only"):
        small_vit("t5bias")
    with pytest.raises(ValueError, match="divisible by 4"):
        vitpe.ViT(dim=30, heads=3, pe="rope_mixed")
    with pytest.raises(ValueError, match="pe_resize"):
        small_vit(pe_resize="nearest")
    with pytest.raises(ValueError, match="pool"):
        small_vit(pool="max")


def test_set_pe_resize_switches_and_validates():
    model = small_vit("learnable")
    model.set_pe_resize("extrapolate")
    assert model.pe.resize == "extrapolate"
    with pytest.raises(vitpe.pe.ResizeError, match="interpolate"):
        model(torch.randn(1, 3, 32, 32))
    assert model(torch.randn(1, 3, 8, 8)).shape == (1, 5)  # a smaller grid fits inside the table
    with pytest.raises(ValueError, match="pe_resize mode"):
        model.set_pe_resize("bilinear")


def test_gradients_reach_every_parameter():
    for pe in TWO_D:
        # mean pooling: with a class token the last block's bias only reaches the class token's row, which is zero
        model = small_vit(pe, pool="mean")
        model(torch.randn(2, 3, 16, 16)).logsumexp(-1).mean().backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
        assert not missing, (pe, missing)


@pytest.mark.parametrize("pe", ["learnable", "separable", "relbias", "rope_mixed", "cpb"])
def test_state_dict_saved_at_one_resolution_loads_at_another(pe):
    source = small_vit(pe)
    target = vitpe.ViT(img_size=(32, 24), patch_size=4, dim=32, depth=2, heads=2, mlp_ratio=2.0, num_classes=5, pe=pe)
    target.load_state_dict(source.state_dict())
    assert target(torch.randn(1, 3, 32, 24)).shape == (1, 5)
    if pe in ("learnable", "separable", "relbias"):  # loaded tables == source interpolating on the fly
        images = torch.randn(2, 3, 32, 24)
        assert torch.allclose(source.eval()(images), target.eval()(images), atol=1e-5)


def test_timm_submodule_names_and_no_weight_decay():
    model = small_vit("rope_mixed")
    names = {n for n, _ in model.named_children()}
    assert {"patch_embed", "blocks", "norm", "head", "pe"} <= names
    assert model.cls_token is not None and model.no_weight_decay() == {"cls_token", "pe.freqs"}
    assert set(model.no_weight_decay()) <= {n for n, _ in model.named_parameters()}
    assert small_vit(pool="mean").cls_token is None


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_registered_in_timm(name):
    assert name in timm.list_models("vitpe_*")
    model = timm.create_model(name, pe="rope_mixed", num_classes=100)
    assert isinstance(model, vitpe.ViT) and model.head.out_features == 100
    assert model.pe.name == "rope_mixed" and model.embed_dim == PRESETS[name]["dim"]


def test_timm_preset_forward_and_no_pretrained_weights():
    model = timm.create_model("vitpe_nano_patch4_32", pe="alibi", pe_resize="extrapolate")
    assert model(torch.randn(2, 3, 48, 40)).shape == (2, 10)
    with pytest.raises(ValueError, match="no pretrained weights"):
        timm.create_model("vitpe_nano_patch4_32", pretrained=True)


@pytest.mark.parametrize("pe", ["rope_mixed", "relbias", "sincos", "alibi"])
def test_bfloat16_autocast(pe):
    model = small_vit(pe)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(2, 3, 16, 16))
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()


def test_same_seed_same_model_same_output():
    a, b = small_vit("rope_mixed"), small_vit("rope_mixed")
    x = torch.randn(2, 3, 16, 16)
    assert torch.equal(a(x), b(x))


def test_register_tokens_layer_scale_and_fc_norm():
    torch.manual_seed(0)
    model = vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=2, heads=2, pe="relbias", pool="mean", reg_tokens=3,
                layer_scale_init=0.1, fc_norm=True, norm_eps=1e-6)
    assert model.num_prefix_tokens == 3 and model.pe.num_prefix_tokens == 3 and model.reg_token.shape == (1, 3, 32)
    bias = model.pe.attention_bias(model.pe.prepare(model.grid), 0)
    assert torch.all(bias[:, :3] == 0) and torch.all(bias[:, :, :3] == 0)  # registers carry no position
    assert torch.equal(model.blocks[1].ls2.gamma, torch.full((32,), 0.1)) and isinstance(model.norm, torch.nn.Identity)
    assert model.fc_norm.eps == 1e-6 and "reg_token" in model.no_weight_decay()
    x = torch.randn(2, 3, 16, 16)
    tokens = model.forward_features(x)  # (B, 3 + 16, D): the registers are not pooled
    expected = model.head(model.fc_norm(tokens[:, 3:].mean(1)))
    assert torch.allclose(model(x), expected, atol=1e-6)
    with pytest.raises(ValueError, match="fc_norm"):
        vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=1, heads=2, pool="cls", fc_norm=True)
    with pytest.raises(ValueError, match="layer_scale_init must be positive"):
        vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=1, heads=2, layer_scale_init=0.0)


@pytest.mark.parametrize("class_token", [False, True])
def test_tokens_enter_the_blocks_row_major(class_token):
    """The patch convolution's output is a transposed view; without a class token to concatenate it would reach every
    LayerNorm non-contiguous (one copy each) and every residual add in mixed memory orders."""
    model = small_vit("learnable", class_token=class_token, pool="cls" if class_token else "mean")
    seen = []
    for block in model.blocks:
        block.norm1.register_forward_pre_hook(lambda module, args: seen.append(args[0].is_contiguous()))
        block.norm2.register_forward_pre_hook(lambda module, args: seen.append(args[0].is_contiguous()))
    model(torch.randn(2, 3, 16, 16))
    assert seen == [True] * 4
