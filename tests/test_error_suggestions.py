"""Every fix an error message suggests works when it is applied as given: the test reads the suggestion out of the
message (``key=value`` overrides, each alternative after ``or``; a ``did you mean`` name), applies it, and the
command or config that failed then succeeds."""

from __future__ import annotations

import re

import pytest
import torch

from vitpe.cli import train
import vitpe
from vitpe.config import ConfigError, load_config
from vitpe.pe import ResizeError

RECIPE = "configs/cifar10.yaml"
_OVERRIDE = re.compile(r"\b([a-z_]+(?:\.[a-z_]+)+)=(\[[^\]]*\]|[^\s,;)]+)")


def alternatives(message: str) -> list[list[str]]:
    """The overrides each alternative of ``message`` suggests: its ``key=value`` words, grouped by ``, or``."""
    fixes = [[f"{key}={value}" for key, value in _OVERRIDE.findall(part)] for part in message.split(", or ")]
    return [fix for fix in fixes if fix]


def did_you_mean(message: str) -> str:
    match = re.search(r"did you mean '?([\w.]+)'?", message)
    assert match, f"no suggestion in: {message}"
    return match.group(1)


def config_error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(RECIPE, overrides)
    return str(err.value)


@pytest.mark.parametrize("overrides", [
    ["train.img_sizes=[16,32]"],                                 # a schedule of 5 sizes for 2
    ["train.img_size_epochs=[1,1,1,1,1]"],                       # 5 epochs of schedule, 17 of training
    ["train.img_size_epochs=[1,1,1,1,1]", "train.epochs=2"],     # scaled to 2 epochs, some sizes drop out
    ["train.img_sizes=[16,24]", "train.img_size_epochs=[1]", "train.epochs=5"],
])
def test_each_suggested_schedule_fix_loads(overrides):
    message = config_error(overrides)
    fixes = alternatives(message)
    assert len(fixes) >= 2, message
    for fix in fixes:
        config = load_config(RECIPE, [*overrides, *fix])  # the suggestion, given after what failed
        assert sum(config.train.img_size_epochs or [config.train.epochs]) == config.train.epochs


@pytest.mark.parametrize("bad, key", [
    ("train.epoch=5", "train"),
    ("model.pe=rope_mixd", "model.pe"),
    ("model.pe_resize=extrapolat", "model.pe_resize"),
    ("model.pe_options.thetaa=3", "model.pe_options"),
])
def test_each_did_you_mean_names_what_loads(bad, key):
    extra = ["model.pe=rope_axial"] if key == "model.pe_options" else []
    message = config_error([*extra, bad])
    name = did_you_mean(message)
    key_part, value = bad.split("=")
    fixed = f"{key_part.rsplit('.', 1)[0]}.{name}={value}" if key in ("train", "model.pe_options") else f"{key}={name}"
    load_config(RECIPE, [*extra, fixed])


def test_a_pe_for_the_wrong_task_names_the_ones_that_fit():
    message = config_error(["model.pe=t5bias"])
    choices = message.split("choose one of ")[1].split(", ")
    for name in choices:
        assert load_config(RECIPE, [f"model.pe={name}"]).model.pe == name


def test_an_override_without_a_value_shows_the_form():
    message = config_error(["train.epochs"])
    (fix,) = alternatives(message)
    assert load_config(RECIPE, fix).train.epochs == 5


def test_a_table_asked_to_extrapolate_names_the_mode_that_works():
    model = vitpe.ViT(img_size=32, patch_size=4, num_classes=10, dim=32, depth=1, heads=2, pe="learnable").eval()
    model.set_pe_resize("extrapolate")
    with pytest.raises(ResizeError) as err:
        model(torch.zeros(1, 3, 48, 48))
    mode = re.search(r"pe_resize='(\w+)'", str(err.value)).group(1)
    model.set_pe_resize(mode)
    assert model(torch.zeros(1, 3, 48, 48)).shape == (1, 10)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_training_on_cuda_without_one_names_the_device_that_works(tmp_path, capsys):
    args = ["--config", "configs/smoke.yaml", f"out_dir={tmp_path / 'run'}", "data.synthetic_size=64",
            "train.epochs=1", "--no-progress"]
    assert train.main([*args, "train.device=cuda"]) == 2
    (fix,) = alternatives(capsys.readouterr().err)
    assert train.main([*args, *fix]) == 0
