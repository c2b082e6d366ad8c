"""train.recalibrate_bn: BatchNorm's running statistics recomputed after the last epoch on the clean training images
(vitpe.engine.batchnorm_stats), so that the model is evaluated with the statistics of the data it is tested on."""

import json

import pytest
import torch
from torch import nn

from vitpe.cli import train
from vitpe.config import ConfigError, config_from_dict
from vitpe.data.datasets import ImageSet
from vitpe.data.loader import BatchLoader
from vitpe.engine.batchnorm_stats import recompute_batchnorm_stats
from vitpe.loading.checkpoint import model_from_checkpoint

SMOKE = ["--config", "configs/smoke.yaml", "data.synthetic_size=128", "train.epochs=2", "--no-progress",
         "model.stem=conv", "data.mixup=0.8"]


def test_the_statistics_are_the_plain_mean_and_variance_over_every_batch_in_eval_mode():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.9), nn.BatchNorm1d(4))
    with torch.no_grad():
        model[2].running_mean.fill_(5.0)  # stale statistics, to be replaced, not averaged with
    batches = [(torch.randn(8, 3) + 2.0, torch.zeros(8)) for _ in range(3)]
    model.train()
    assert recompute_batchnorm_stats(model, batches, torch.device("cpu"), "fp32") == 24
    with torch.no_grad():
        features = [model[0](x) for x, _ in batches]  # dropout off while recomputing: the eval-mode inputs of the BN
    expected_mean = torch.stack([f.mean(0) for f in features]).mean(0)
    expected_var = torch.stack([f.var(0, unbiased=True) for f in features]).mean(0)
    torch.testing.assert_close(model[2].running_mean, expected_mean)
    torch.testing.assert_close(model[2].running_var, expected_var)
    assert model.training and model[2].momentum == 0.1  # the mode and the momentum as they were
    weights = [p.clone() for p in model.parameters()]
    recompute_batchnorm_stats(model, batches, torch.device("cpu"), "fp32")
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters()))  # only the buffers change


def test_a_model_without_batchnorm_or_no_batch_is_refused():
    with pytest.raises(ValueError, match="no BatchNorm layer"):
        recompute_batchnorm_stats(nn.Linear(3, 3), [(torch.randn(2, 3), None)], torch.device("cpu"))
    with pytest.raises(ValueError, match="no batch"):
        recompute_batchnorm_stats(nn.BatchNorm1d(3), [], torch.device("cpu"))
    with pytest.raises(ConfigError, match="train.recalibrate_bn must be false unless the model has BatchNorm"):
        config_from_dict({"train": {"recalibrate_bn": True}})  # the patch stem has none


def test_the_evaluated_view_of_a_training_loader_is_every_image_unaugmented_on_every_rank():
    images = torch.randint(0, 256, (10, 3, 8, 8), dtype=torch.uint8)
    data = ImageSet(images, torch.arange(10), ["c"] * 10)
    shard = BatchLoader(data, 4, train=True, mean=[0.5] * 3, std=[0.25] * 3, img_sizes=[8], rank=1, world=2)
    view = shard.as_evaluated((8, 8), 3)
    seen = torch.cat([x for x, _ in view.epoch()])
    torch.testing.assert_close(seen, (images.float() / 255 - 0.5) / 0.25)  # all ten, in order, only normalised


def test_a_run_recalibrates_after_its_last_epoch_and_its_checkpoint_reproduces_the_accuracy(tmp_path, capsys):
    plain, recalibrated = tmp_path / "plain", tmp_path / "recalibrated"
    assert train.main([*SMOKE, f"out_dir={plain}"]) == 0
    assert train.main([*SMOKE, f"out_dir={recalibrated}", "train.recalibrate_bn=true"]) == 0
    assert "BatchNorm statistics recomputed on 128 training images at 16x16 px" in capsys.readouterr().out
    first, second = ([json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
                     for run in (plain, recalibrated))
    same = ("train_loss", "train_acc", "test_loss", "test_acc")
    assert [first[0][k] for k in same] == [second[0][k] for k in same]  # the first epoch is not recalibrated
    model, _ = model_from_checkpoint(recalibrated / "checkpoint.pt", use_ema=False)
    trained, _ = model_from_checkpoint(plain / "checkpoint.pt", use_ema=False)
    bn = [k for k in model.state_dict() if k.endswith("running_mean")]
    assert bn and all(not torch.equal(model.state_dict()[k], trained.state_dict()[k]) for k in bn)
    weights = [k for k in model.state_dict() if "running" not in k and "num_batches" not in k]
    assert all(torch.equal(model.state_dict()[k], trained.state_dict()[k]) for k in weights)  # same training
    from vitpe.resolution import find_run
    from vitpe.resolution.sweep import evaluate_run
    (record,) = evaluate_run(find_run(str(recalibrated)), [(16, 16)], ["interpolate"])
    assert record["accuracy"] == pytest.approx(second[-1]["test_acc"])  # the checkpoint holds what was evaluated
