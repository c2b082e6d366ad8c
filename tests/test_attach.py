"""``vitpe.pe.attach``: every 2D PE into a randomly initialised timm VisionTransformer of depth 2, in one line."""

from __future__ import annotations

import copy
import pickle

import pytest
import timm
import torch

import vitpe
from vitpe.loading.convert import convert

TWO_D = vitpe.pe.available(dims=2)


def timm_vit(**kwargs) -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=5,
                             depth=2, no_embed_class=True, **kwargs)


@pytest.mark.parametrize("name", TWO_D)
def test_attached_pe_gives_the_logits_of_vitpe_with_the_same_pe(name: str) -> None:
    """timm's model carrying the PE == ``vitpe.from_timm``'s conversion of it carrying the same PE, at the training
    size and at a non-square other size."""
    model = timm_vit().eval()
    converted = convert(model)  # before attach: timm's weights as a vitpe ViT (with its learnable table)
    assert vitpe.pe.attach(model, name) is model
    with torch.no_grad():  # move the PE off its initial values, so that a PE left out of the comparison shows
        for p in model.vitpe_pe.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    vit = vitpe.ViT(**{**converted.vit_kwargs, "pe": name})
    state = {k: v for k, v in converted.state_dict.items() if not k.startswith("pe.")}
    state.update({f"pe.{k}": v for k, v in model.vitpe_pe.state_dict().items()})
    vit.load_state_dict(state, strict=True)
    vit.eval()
    for size in ((32, 32), (40, 56)):
        images = torch.randn(2, 3, *size)
        with torch.no_grad():
            torch.testing.assert_close(model(images), vit(images), rtol=1e-4, atol=1e-5, msg=f"{name} at {size}")


@pytest.mark.parametrize("name", TWO_D)
def test_attached_pe_trains_and_is_kept_from_weight_decay(name: str) -> None:
    model = vitpe.pe.attach(timm_vit(), name)
    assert "pos_embed" not in dict(model.named_parameters())
    pe_names = {f"vitpe_pe.{n}" for n in model.vitpe_pe.no_weight_decay()}
    assert pe_names <= model.no_weight_decay() and "pos_embed" not in model.no_weight_decay()
    model(torch.randn(2, 3, 40, 32)).logsumexp(-1).sum().backward()
    for n, p in model.vitpe_pe.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
    final, intermediates = model.forward_intermediates(torch.randn(1, 3, 48, 32), indices=2)
    assert final.shape == (1, 1 + 6 * 4, 192) and intermediates[-1].shape == (1, 192, 6, 4)
    for other in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):  # no tensor of a past forward is held
        images = torch.randn(1, 3, 32, 32)
        torch.testing.assert_close(other.eval()(images), model.eval()(images))


def test_attach_keeps_options_and_refuses_what_it_cannot_host() -> None:
    model = vitpe.pe.attach(timm_vit(reg_tokens=2), "rope_axial", theta=1000.0)
    assert model.vitpe_pe.num_prefix_tokens == 3 and model(torch.randn(1, 3, 24, 40)).shape == (1, 5)
    with pytest.raises(ValueError, match="did you mean 'rope_mixed'"):
        vitpe.pe.attach(timm_vit(), "rope_mixd")
    with pytest.raises(ValueError, match="unknown option"):
        vitpe.pe.attach(timm_vit(), "cpb", theta=3)
    eva = timm.create_model("eva02_tiny_patch14_224", pretrained=False, img_size=28, depth=1, num_classes=2)
    with pytest.raises(TypeError, match="VisionTransformer"):
        vitpe.pe.attach(eva, "cpb")
    block_alone = vitpe.pe.attach(timm_vit(), "cpb").blocks[0]
    with pytest.raises(RuntimeError, match="call the model"):
        block_alone(torch.randn(1, 17, 192))
