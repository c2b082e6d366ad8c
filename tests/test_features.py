"""timm's feature API on every vitpe ViT (``forward_intermediates``, ``prune_intermediate_layers``) and the backbone
options the converted models brought (``mlp``, ``mlp_norm``), each on its own, from Python and from a config."""

from __future__ import annotations

import pytest
import torch

import vitpe
from vitpe.config import ConfigError, config_from_dict
from vitpe.models.from_config import build_model


def small(pe: str = "rope_mixed", **kwargs) -> vitpe.ViT:
    torch.manual_seed(0)
    return vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=4, heads=2, pe=pe, **kwargs).eval()


@pytest.mark.parametrize("pe", ["learnable", "relbias", "rope_mixed", "peg"])
def test_intermediates_are_the_tokens_after_each_block_at_any_size(pe):
    model = small(pe, reg_tokens=2)
    x = torch.randn(2, 3, 20, 28)  # not the reference size, not square: grid 5 x 7
    final, maps = model.forward_intermediates(x, indices=[1, -1], norm=True)
    assert torch.allclose(final, model.forward_features(x), atol=1e-6)
    assert [m.shape for m in maps] == [(2, 32, 5, 7)] * 2
    # the last block's map is the final tokens' patch part laid out as the grid (row-major)
    assert torch.allclose(maps[1].flatten(2).transpose(1, 2), final[:, 3:], atol=1e-6)
    tokens, grid = model.embed(x)
    after_two, _ = model.run_blocks(tokens, grid, last=1)
    assert torch.allclose(maps[0], model.norm(after_two)[:, 3:].transpose(1, 2).reshape(2, 32, 5, 7), atol=1e-6)


def test_formats_prefix_tokens_and_stopping_early():
    model = small(reg_tokens=1)
    x = torch.randn(1, 3, 16, 16)
    every = model.forward_intermediates(x, output_fmt="NLC", intermediates_only=True)
    assert len(every) == 4 and every[0].shape == (1, 16, 32)
    last_two = model.forward_intermediates(x, indices=2, return_prefix_tokens=True, intermediates_only=True)
    assert [(m.shape, p.shape) for m, p in last_two] == [((1, 32, 4, 4), (1, 2, 32))] * 2
    final, early = model.forward_intermediates(x, indices=[1], stop_early=True, output_fmt="NLC")
    assert torch.equal(early[0], every[1]) and not torch.allclose(final, model.forward_features(x))
    with pytest.raises(ValueError, match="output_fmt must be 'NCHW' or 'NLC'"):
        model.forward_intermediates(x, output_fmt="NHWC")


def test_pruning_keeps_what_the_indices_need():
    model = small("relbias")
    x = torch.randn(2, 3, 16, 16)
    wanted = model.forward_intermediates(x, indices=[0, 1], intermediates_only=True)
    assert model.prune_intermediate_layers([0, 1]) == [0, 1]
    assert len(model.blocks) == 2 and isinstance(model.head, torch.nn.Identity) and model.num_classes == 0
    assert all(torch.equal(a, b) for a, b in zip(wanted, model.forward_intermediates(x, indices=[0, 1],
                                                                                     intermediates_only=True)))


def test_swiglu_and_the_hidden_norm_are_options_of_their_own():
    plain, glu, glu_norm = small(), small(mlp="swiglu"), small(mlp="swiglu", mlp_norm=True)
    assert type(plain.blocks[0].mlp).__name__ == "Mlp" and isinstance(plain.blocks[0].mlp.norm, torch.nn.Identity)
    assert (glu.blocks[0].mlp.fc1_g.out_features, glu.blocks[0].mlp.fc2.in_features) == (128, 128)
    assert isinstance(glu_norm.blocks[0].mlp.norm, torch.nn.LayerNorm)
    assert small(mlp_norm=True).blocks[0].mlp.norm.normalized_shape == (128,)  # GELU MLPs take it too
    x = torch.randn(2, 3, 16, 16)
    loss = glu_norm(x).logsumexp(-1).mean()
    loss.backward()
    assert glu_norm.blocks[0].mlp.fc1_g.weight.grad.abs().sum() > 0 and glu_norm.blocks[0].mlp.norm.weight.grad.abs(
        ).sum() > 0
    with pytest.raises(ValueError, match=r"unknown mlp 'geglu'; choose one of \['gelu', 'swiglu'\]"):
        small(mlp="geglu")


def test_a_config_builds_them_and_checks_the_name():
    config = config_from_dict({"model": {"mlp": "swiglu", "mlp_norm": True, "mlp_ratio": 8 / 3, "dim": 48,
                                         "depth": 1, "heads": 2}})
    model = build_model(config, num_classes=10)
    assert model.blocks[0].mlp.fc1_x.out_features == 128  # 48 * 8 / 3, not 127
    with pytest.raises(ConfigError, match="model.mlp must be gelu or swiglu"):
        config_from_dict({"model": {"mlp": "relu"}})
