"""Checkpoints from before the interleaved rotary pairs: read as they were trained, resumed where they stopped."""

import pytest
import torch

import vitpe.pe.sites as sites
from vitpe.config import config_from_dict, to_dict
from vitpe.engine.optimizer import build_optimizer
from vitpe.loading.checkpoint import CheckpointError, build_from_checkpoint, upgrade_checkpoint
from vitpe.loading.rotary_pairs import CHECKPOINT_KEY, LAYOUT, rotated_projections
from vitpe.models.from_config import build_model

MODEL = dict(dim=32, depth=2, heads=2, mlp_ratio=2.0, patch_size=4)


def config(pe: str):
    return config_from_dict({"model": {**MODEL, "pe": pe}, "data": {"img_size": 16}})


def interleaved_to_half(rows: torch.Tensor, heads: int) -> torch.Tensor:
    """The old layout's rows from the new one's: pair j moves from channels (2j, 2j + 1) to (j, j + Dh/2)."""
    head_dim = rows.shape[0] // heads
    order = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    return rows.reshape(heads, head_dim, *rows.shape[1:])[:, order].reshape(rows.shape)


def to_old_rows(tensor: torch.Tensor, heads: int) -> torch.Tensor:
    q, k, v = tensor.chunk(3)
    return torch.cat((interleaved_to_half(q, heads), interleaved_to_half(k, heads), v))


def rotate_half(x, cos, sin):
    """The rotation as vitpe computed it before: pair j = channels (j, j + Dh/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def old_logits(model, images, monkeypatch) -> torch.Tensor:
    with monkeypatch.context() as patch:
        patch.setattr(sites, "rotate_pairs", rotate_half)
        patch.setattr(sites, "rotate_qk_of_qkv", lambda qkv, cos, sin, **_: (
            rotate_half(qkv[0], cos, sin), rotate_half(qkv[1], cos, sin), qkv[2]))
        return model.eval()(images)


@pytest.mark.parametrize("pe", ["rope_mixed", "learnable+rope_axial"])
def test_an_old_checkpoint_gives_the_logits_it_was_trained_with(pe, monkeypatch):
    torch.manual_seed(0)
    cfg = config(pe)
    trained = build_model(cfg, num_classes=10)  # weights of a model trained in the old layout
    images = torch.randn(3, 3, 16, 16)
    expected = old_logits(trained, images, monkeypatch)
    ckpt = {"config": to_dict(cfg), "model": trained.state_dict(), "ema": trained.state_dict(),
            "classes": list(range(10))}  # written before the layout key
    for use_ema in (False, True):
        model = build_from_checkpoint(ckpt, use_ema=use_ema).eval()
        torch.testing.assert_close(model(images), expected)
    assert not torch.allclose(trained(images), expected)  # read without the reordering, the logits would differ


def test_a_resumed_old_run_continues_with_its_reordered_optimizer_moments():
    torch.manual_seed(0)
    cfg = config("rope_mixed")
    model = build_model(cfg, num_classes=10)
    optimizer = build_optimizer(cfg, model)
    model(torch.randn(4, 3, 16, 16)).logsumexp(-1).sum().backward()
    optimizer.step()
    current = {"config": to_dict(cfg), "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    projections = rotated_projections(model)
    assert sorted(projections) == [f"blocks.{i}.attn.qkv.{p}" for i in range(2) for p in ("bias", "weight")]

    index = {name: i for i, name in enumerate(n for group in optimizer.param_groups for p in group["params"]
                                               for n, q in model.named_parameters() if q is p)}
    old = {"config": current["config"], "model": dict(current["model"]),
           "optimizer": {**current["optimizer"], "state": dict(current["optimizer"]["state"])}}
    for name, heads in projections.items():
        old["model"][name] = to_old_rows(current["model"][name], heads)
        entry = current["optimizer"]["state"][index[name]]
        old["optimizer"]["state"][index[name]] = {k: to_old_rows(v, heads) if k.startswith("exp_avg") else v
                                                  for k, v in entry.items()}

    upgraded = upgrade_checkpoint(old, model, optimizer)
    assert upgraded[CHECKPOINT_KEY] == LAYOUT
    for name, value in current["model"].items():
        assert torch.equal(upgraded["model"][name], value), name
    for i, entry in current["optimizer"]["state"].items():
        for key, value in entry.items():
            assert torch.equal(upgraded["optimizer"]["state"][i][key], value), (i, key)
    assert not torch.equal(old["model"]["blocks.0.attn.qkv.weight"], current["model"]["blocks.0.attn.qkv.weight"])


def test_current_and_rotation_free_checkpoints_are_left_as_they_are():
    model = build_model(config("learnable"), num_classes=10)
    old = {"model": model.state_dict()}
    assert rotated_projections(model) == {}
    assert upgrade_checkpoint(old, model)["model"] is old["model"]
    current = {"model": {}, CHECKPOINT_KEY: LAYOUT}
    assert upgrade_checkpoint(current, build_model(config("rope_axial"), num_classes=10)) is current
    with pytest.raises(CheckpointError, match="rotary pairs are 'spiral'"):
        upgrade_checkpoint({"model": {}, CHECKPOINT_KEY: "spiral"}, model)
