"""model.stem: the ViT's patch convolution or a convolutional stem (Xiao et al. 2021), behind the same token grid."""

import pytest
import torch

from vitpe.cli import train
from vitpe.config import ConfigError, config_from_dict
from vitpe.loading.checkpoint import model_from_checkpoint
from vitpe.models import ViT
from vitpe.models.stem import ConvPatchStem

SMOKE = ["--config", "configs/smoke.yaml", "data.synthetic_size=128", "train.epochs=1", "--no-progress"]


@pytest.mark.parametrize("patch", [2, 4, 8, 16])
def test_the_conv_stem_gives_the_patch_grid_at_any_divisible_size(patch):
    stem = ConvPatchStem(patch, in_chans=3, dim=64)
    assert len(stem.convs) == patch.bit_length() - 1  # one stride-2 layer per halving
    for h, w in [(patch * 4, patch * 4), (patch * 2, patch * 5)]:
        assert stem(torch.randn(2, 3, h, w)).shape == (2, h // patch, w // patch, 64)


def test_the_conv_stem_sees_across_patch_borders_and_the_patch_stem_does_not():
    torch.manual_seed(0)
    image = torch.randn(1, 3, 16, 16)
    nudged = image.clone()
    nudged[..., 3, 3] += 1.0  # the last pixel of patch (0, 0) with patch 4
    for stem, neighbour_moves in (("patch", False), ("conv", True)):
        model = ViT(img_size=16, patch_size=4, dim=32, depth=1, heads=2, pe="none", stem=stem).eval()
        before, after = (model.embed(x)[0][:, 1:, :] for x in (image, nudged))  # tokens after the class token
        moved = (before - after).abs().amax(-1)[0].reshape(4, 4)  # (gh, gw)
        assert moved[0, 0] > 0
        assert (moved[0, 1] > 1e-6) == neighbour_moves and (moved[1, 1] > 1e-6) == neighbour_moves


def test_the_default_stem_keeps_the_patch_embedding_keys():
    keys = set(ViT(img_size=16, dim=32, depth=1, heads=2).state_dict())
    assert {"patch_embed.proj.weight", "patch_embed.proj.bias"} <= keys  # checkpoints written before the option load


def test_a_conv_stem_run_trains_resumes_exactly_rebuilds_from_its_checkpoint_and_fine_tunes(tmp_path, monkeypatch):
    from test_reliability import records
    from vitpe.engine.preemption import PREEMPTED_EXIT, StopRequests

    out = tmp_path / "conv"
    assert train.main([*SMOKE, f"out_dir={out}", "model.stem=conv"]) == 0
    model, ckpt = model_from_checkpoint(out)
    assert ckpt["config"]["model"]["stem"] == "conv" and isinstance(model.patch_embed, ConvPatchStem)
    stem = {k: v for k, v in ckpt["model"].items() if k.startswith("patch_embed.")}
    assert len(stem) > 2 and all(torch.equal(model.state_dict()[k], v) for k, v in stem.items())  # its own weights
    steps = {"n": 0}

    def stop_after_one(self, device, dist_info) -> bool:  # a preemption after the first optimiser step
        steps["n"] += 1
        return steps["n"] == 1

    resumed = tmp_path / "resumed"
    with monkeypatch.context() as patch:
        patch.setattr(StopRequests, "should_stop", stop_after_one)
        assert train.main([*SMOKE, f"out_dir={resumed}", "model.stem=conv"]) == PREEMPTED_EXIT
    assert train.main(["--resume", str(resumed), "--no-progress"]) == 0
    assert records(resumed) == records(out)  # the stem's weights and moments came back with the checkpoint
    x = torch.randn(3, 3, 16, 16)
    torch.testing.assert_close(model.eval()(x), model_from_checkpoint(resumed)[0].eval()(x), rtol=0, atol=0)
    tuned = tmp_path / "tuned"
    assert train.main([*SMOKE, f"out_dir={tuned}", f"model.init=run:{out}", "train.img_sizes=[24]"]) == 0
    assert isinstance(model_from_checkpoint(tuned)[0].patch_embed, ConvPatchStem)  # the stem comes with the run


@pytest.mark.parametrize("overrides, says", [
    ({"model": {"stem": "convolution"}}, "model.stem must be patch or conv"),
    ({"model": {"stem": "conv", "patch_size": 3}, "train": {"img_sizes": [15]}}, "power of 2"),
    ({"model": {"stem": "conv", "patch_size": 8, "dim": 30}, "train": {"img_sizes": [32]}}, "divisible by 4"),
    ({"task": "text", "data": {"dataset": "order"}, "model": {"stem": "conv"}}, "patch for text"),
])
def test_an_impossible_stem_is_one_line(overrides, says):
    with pytest.raises(ConfigError, match=says):
        config_from_dict(overrides)
