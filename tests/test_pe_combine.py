"""Tokens-site PEs concatenated instead of added (model.pe_combine), and dropout after the PE sum (model.pos_drop)."""

import pytest
import torch

import vitpe
from vitpe.config import ConfigError, load_config, validate


def pair(**options):
    torch.manual_seed(0)
    added = vitpe.ViT(img_size=16, patch_size=4, num_classes=3, dim=32, depth=2, heads=2, pe="learnable", **options)
    torch.manual_seed(0)
    joined = vitpe.ViT(img_size=16, patch_size=4, num_classes=3, dim=32, depth=2, heads=2, pe="learnable",
                       pe_combine="concat", **options)
    joined.load_state_dict(added.state_dict(), strict=False)  # the same weights, and the projection at [I, I]
    return added, joined


def test_concat_starts_as_the_sum_and_learns_a_projection_of_both_parts():
    added, joined = pair()
    x = torch.randn(4, 3, 16, 16)
    torch.testing.assert_close(joined(x), added(x))
    assert joined.pe_concat.weight.shape == (32, 64)
    with torch.no_grad():
        joined.pe_concat.weight[:, 32:] *= 0  # drop the PE's half: the model is then order-blind
    tokens, grid = joined.embed(x)  # (B, 1 + N, D): class token, patches
    shuffled = torch.cat([tokens[:, :1], tokens[:, 1:][:, torch.randperm(16)]], dim=1)
    pooled = [joined.forward_head(joined.encode(t, grid)) for t in (tokens, shuffled)]
    torch.testing.assert_close(pooled[0], pooled[1], rtol=1e-4, atol=1e-5)
    added_pooled = [added.forward_head(added.encode(t, grid)) for t in (tokens, shuffled)]
    assert not torch.allclose(added_pooled[0], added_pooled[1], atol=1e-3)  # ... where the sum sees positions
    joined(x).sum().backward()
    assert joined.pe_concat.weight.grad[:, :32].abs().sum() > 0 and joined.pe_concat.weight.grad[:, 32:].abs().sum() > 0


def test_concat_runs_at_other_sizes_and_with_peg_and_is_refused_without_a_tokens_site_pe():
    model = vitpe.ViT(img_size=16, patch_size=4, num_classes=3, dim=32, depth=2, heads=2, pe="peg", pe_combine="concat")
    assert model(torch.randn(2, 3, 24, 20)).shape == (2, 3)
    with pytest.raises(ValueError, match="pe_combine='concat' joins a tokens-site PE's term .* rope_axial acts at qk"):
        vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=1, heads=2, pe="rope_axial", pe_combine="concat")
    with pytest.raises(ValueError, match="unknown pe_combine 'sum'"):
        vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=1, heads=2, pe_combine="sum")


def test_pos_drop_drops_tokens_after_the_pe_in_training_only():
    model = vitpe.ViT(img_size=16, patch_size=4, num_classes=3, dim=32, depth=1, heads=2, pe="learnable", pos_drop=0.5)
    seen = []
    model.blocks[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    x = torch.randn(2, 3, 16, 16)
    model.train()
    model(x)
    model.eval()
    model(x)
    dropped, kept = seen
    zeros = (dropped == 0).float().mean().item()
    assert 0.4 < zeros < 0.6 and (kept == 0).float().mean() < 0.01
    nonzero = dropped != 0
    torch.testing.assert_close(dropped[nonzero], 2 * kept[nonzero])  # inverted dropout: survivors scaled by 1/(1-p)
    with pytest.raises(ValueError, match="pos_drop must be in"):
        vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=1, heads=2, pos_drop=1.0)


def test_config_keys_build_and_check_them():
    config = load_config(None, ["model.pe_combine=concat", "model.pos_drop=0.1"])
    validate(config)
    from vitpe.models.from_config import build_model

    model = build_model(config, num_classes=10)
    assert model.pe_concat is not None and model.pos_drop.p == 0.1
    for override, message in [("model.pe_combine=stack", "model.pe_combine"), ("model.pos_drop=2", "model.pos_drop")]:
        with pytest.raises(ConfigError, match=message):
            validate(load_config(None, [override]))
