from pathlib import Path

import pytest
import torch
import yaml

from vitpe.config import (ConfigError, config_from_dict, default_data_root, eval_size, load_config, reference_size,
                          to_dict)
from vitpe.models.from_config import build_model


def test_yaml_and_dotted_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: {pe: sincos, dim: 64}\ntrain: {epochs: 3}\n")
    config = load_config(path, ["model.pe=rope_mixed", "train.img_sizes=[24,32]", "train.lr=1e-3",
                                "model.pe_options={theta: 20}"])
    assert config.model.pe == "rope_mixed" and config.model.dim == 64 and config.train.epochs == 3
    assert config.train.img_sizes == [24, 32] and config.train.lr == 0.001
    assert config.model.pe_options == {"theta": 20}


def test_unknown_key_is_named_with_suggestions():
    with pytest.raises(ConfigError, match="unknown config key 'train.epoch'.*did you mean epochs"):
        config_from_dict({}, ["train.epoch=5"])
    with pytest.raises(ConfigError, match="unknown config key 'modle'.*did you mean model"):
        config_from_dict({"modle": {"pe": "none"}})


def test_wrong_types_are_named():
    with pytest.raises(ConfigError, match="train.epochs: expected int, got 'five'"):
        config_from_dict({}, ["train.epochs=five"])
    with pytest.raises(ConfigError, match="train.batch_size: expected int, got 1.5"):
        config_from_dict({"train": {"batch_size": 1.5}})
    with pytest.raises(ConfigError, match="not of the form key=value"):
        config_from_dict({}, ["train.epochs"])


def test_yaml_word_booleans_are_words_for_text_options_and_booleans_for_yes_no_options(tmp_path):
    # the documented `data.cache_dir=off` from a shell: "off", not YAML 1.1's false
    config = config_from_dict({}, ["data.cache_dir=off", "data.hflip=off"])
    assert config.data.cache_dir == "off" and config.data.hflip is False
    assert config_from_dict({}, ["data.hflip=on"]).data.hflip is True
    # a PE's options have no declared type: YAML's boolean, as before (relbias's class_bias=off is off)
    assert config_from_dict({}, ["model.pe=relbias", "model.pe_options.class_bias=off"]).model.pe_options == {
        "class_bias": False}
    path = tmp_path / "c.yaml"  # a file's unquoted off reaches the loader as false: say to quote it
    path.write_text("data: {cache_dir: off}\n")
    with pytest.raises(ConfigError, match=r"data.cache_dir: expected text, got False .* e.g. cache_dir: 'off'"):
        load_config(path)
    path.write_text("data: {cache_dir: 'off'}\n")
    assert load_config(path).data.cache_dir == "off"


def test_value_checks():
    with pytest.raises(ConfigError, match="data.dataset must be one of"):
        config_from_dict({}, ["data.dataset=mnist"])
    with pytest.raises(ConfigError, match="30 is not a positive multiple of model.patch_size 4"):
        config_from_dict({}, ["train.img_sizes=[32,30]"])
    with pytest.raises(ConfigError, match="model.img_size: 18 is not a positive multiple"):
        config_from_dict({}, ["model.img_size=18"])


@pytest.mark.parametrize("override, key", [
    # each once ran: a traceback deep in the run (patch 0, drop_path 1.5, label smoothing 2, eval batch 0,
    # threads -1, data.img_size 0), or a run of something else in silence (mlp_ratio 0: no MLP; min_lr above lr: a
    # rising "decay"; negative warmup, weight decay, clipping, padding, mixup, checkpoint interval)
    ("model.patch_size=0", "model.dim/depth/heads/patch_size"),
    ("model.mlp_ratio=0", "model.mlp_ratio"),
    ("model.drop_path=1.5", "model.drop_path/drop_rate"),
    ("model.norm_eps=0", "model.norm_eps"),
    ("train.min_lr=0.01", "train.min_lr"),
    ("train.weight_decay=-1", "train.weight_decay"),
    ("train.warmup_epochs=-1", "train.warmup_epochs"),
    ("train.label_smoothing=2", "train.label_smoothing"),
    ("train.grad_clip=-1", "train.grad_clip"),
    ("train.eval_batch_size=0", "train.eval_batch_size"),
    ("train.checkpoint_every=-1", "train.checkpoint_every"),
    ("train.eval_every=0", "train.eval_every"),
    ("train.threads=-1", "train.threads"),
    ("data.img_size=0", "data.img_size"),
    ("data.val_split=-1", "data.val_split"),
    ("data.crop_padding=-1", "data.crop_padding"),
    ("data.mixup=-1", "data.mixup/cutmix"),
    ("data.synthetic_size=0", "data.synthetic_size"),
    ("data.vocab_min_freq=0", "data.vocab_min_freq/vocab_max_size"),
    ("data.crop_scale=[0.5]", "data.crop_scale"),
    ("data.crop_scale=[0.6,0.5]", "data.crop_scale"),
    ("data.crop_scale=[0,1]", "data.crop_scale"),
    ("data.crop_scale=[0.25,1]", "data.crop_padding"),  # the padded crop is still on (4 px by default)
])
def test_values_out_of_range_are_named_before_the_run(override, key):
    with pytest.raises(ConfigError, match=f"^{key} must be "):
        config_from_dict({}, [override])


def test_image_size_schedule_checks():
    ok = config_from_dict({}, ["train.img_sizes=[16,24,32]", "train.img_size_epochs=[3,3,4]", "train.epochs=10"])
    assert ok.train.img_size_epochs == [3, 3, 4]
    with pytest.raises(ConfigError, match="a number of epochs .* for each of train.img_sizes"):
        config_from_dict({}, ["train.img_sizes=[16,32]", "train.img_size_epochs=[3]", "train.epochs=3"])
    with pytest.raises(ConfigError, match="add up to 5 epochs, but train.epochs is 10"):
        config_from_dict({}, ["train.img_sizes=[16,32]", "train.img_size_epochs=[2,3]", "train.epochs=10"])
    with pytest.raises(ConfigError, match="a number of epochs"):
        config_from_dict({}, ["train.img_sizes=[16,32]", "train.img_size_epochs=[0,10]", "train.epochs=10"])


def test_missing_config_file():
    with pytest.raises(ConfigError, match="not found"):
        load_config("does/not/exist.yaml")


def test_data_root_defaults_to_env(monkeypatch):
    monkeypatch.setenv("VITPE_DATA", "/somewhere")
    assert default_data_root() == "/somewhere" and config_from_dict({}).data.root == "/somewhere"
    monkeypatch.delenv("VITPE_DATA")
    assert config_from_dict({}).data.root == "./data"


def _leaves(tree: dict, prefix: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict) and key != "pe_options":
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


@pytest.mark.parametrize("path", sorted(Path("configs").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_preset_keeps_every_value_it_sets_and_builds_its_model(path):
    raw = yaml.safe_load(path.read_text())
    config = load_config(path)
    resolved = to_dict(config)
    for keys, value in _leaves(raw):
        got = resolved
        for key in keys:
            got = got[key]
        assert got == value, f"{path}: {'.'.join(keys)} is {got!r} after loading, the file sets {value!r}"
    if config.model.init:  # a timm model sets the architecture: built in test_pretrained.py
        return
    if config.task == "text":
        model = build_model(config, num_classes=2, vocab=["<pad>", "<unk>", "<cls>", "a", "b"])
        logits = model(torch.tensor([[3, 4, 3]]), torch.ones(1, 3, dtype=torch.bool))
        assert logits.shape == (1, 2)
        return
    model = build_model(config, num_classes=10).eval()
    for size in {*config.train.img_sizes, config.data.img_size}:  # every training size and the evaluation size
        assert model(torch.zeros(1, 3, size, size)).shape == (1, 10)


def test_group_key_ignores_seed_and_place_and_fills_keys_added_later():
    from vitpe.config import group_key, to_dict

    full = to_dict(load_config(None, ["task=text", "data.dataset=sst2", "train.seed=1", "out_dir=a"]))
    older = to_dict(load_config(None, ["task=text", "data.dataset=sst2", "train.seed=0", "out_dir=b",
                                       "data.root=/elsewhere", "train.threads=1", "train.eval_every=5"]))
    del older["data"]["word_dropout"]  # a run saved before the key existed
    assert group_key(full) == group_key(older)
    assert group_key(full) != group_key(to_dict(load_config(None, ["task=text", "data.dataset=sst2",
                                                                   "train.lr=0.01"])))


@pytest.mark.parametrize("overrides, says", [
    (["model.pe=rope_mixd"], "model.pe: unknown position encoding 'rope_mixd' (did you mean 'rope_mixed'?)"),
    (["model.pe=learnable+rope_axail"], "did you mean 'rope_axial'?"),
    (["model.pe=t5bias"], "model.pe: t5bias works on 1D grids only, not on images"),
    (["task=text", "data.dataset=order", "model.pe=separable"], "model.pe: separable works on 2D grids only, not on text"),
    (["model.pe=rope_axial", "model.pe_options.thetaa=3"],
     "unknown option model.pe_options.thetaa for position encoding rope_axial (did you mean theta?)"),
    (["model.pe=learnable+rope_axial", "model.pe_options.rope_axal.theta=3"], "keyed by member"),
    (["model.pe=learnable+rope_axial", "model.pe_options.rope_axial.thet=3"], "did you mean theta?"),
    (["model.pe_resize=extrapolat"], "model.pe_resize 'extrapolat' is not a resize mode (did you mean extrapolate"),
])
def test_the_pe_is_checked_against_the_registry_with_the_config(overrides, says):
    with pytest.raises(ConfigError) as err:
        config_from_dict({}, overrides)
    assert says in str(err.value)


def test_a_composed_pe_takes_each_members_options_and_resize():
    config = config_from_dict({}, ["model.pe=learnable+rope_axial", "model.pe_options.rope_axial.theta=3",
                                   "model.pe_options.rope_axial.resize=extrapolate"])
    members = build_model(config, num_classes=10).pe.members
    assert members["rope_axial"].theta == 3 and members["rope_axial"].resize == "extrapolate"


@pytest.mark.parametrize("epochs, sizes, schedule", [
    (24, [16, 20, 24, 28, 32], [7, 6, 4, 4, 3]),   # the config's own
    (48, [16, 20, 24, 28, 32], [14, 12, 8, 8, 6]),  # twice as long: every share kept exactly
    (17, [16, 20, 24, 28, 32], [5, 4, 3, 3, 2]),   # the 17-epoch recipe's schedule (configs/cifar10_17ep.yaml)
    (10, [16, 20, 24, 28, 32], [3, 2, 2, 2, 1]),
    (2, [20, 32], [1, 1]),                          # sizes left without an epoch drop out
    (1, [32], [1]),                                 # the final size keeps its epoch
])
def test_train_epochs_scales_a_progressive_schedule(epochs, sizes, schedule):
    notes = []
    config = load_config("configs/cifar10.yaml", [f"train.epochs={epochs}"], notes=notes)
    assert (config.train.epochs, config.train.img_sizes, config.train.img_size_epochs) == (epochs, sizes, schedule)
    assert bool(notes) == (epochs != 24)
    if notes:
        assert f"scaled to {epochs} epochs" in notes[0] and f"train.img_size_epochs={schedule}" in notes[0]


def test_one_training_size_drops_the_schedule_and_a_given_schedule_is_kept():
    config = load_config("configs/cifar10.yaml", ["train.img_sizes=[32]", "train.epochs=3"])
    assert (config.train.img_sizes, config.train.img_size_epochs, config.train.epochs) == ([32], [], 3)
    config = load_config("configs/cifar10.yaml", ["train.img_sizes=[16,32]", "train.img_size_epochs=[2,1]",
                                                  "train.epochs=3"])
    assert (config.train.img_sizes, config.train.img_size_epochs) == ([16, 32], [2, 1])


def test_split_epochs_keeps_the_total_and_the_last_size():
    from vitpe.config import split_epochs

    for schedule in ([5, 4, 3, 3, 2], [1, 9], [3, 3, 3], [1]):
        for total in range(1, 40):
            scaled = split_epochs(schedule, total)
            assert sum(scaled) == total and scaled[-1] >= 1 and len(scaled) == len(schedule)
            shares = [e * total / sum(schedule) for e in schedule]
            raised = shares[-1] < 1  # the last size was given its epoch by the size with the most
            assert all(abs(s - share) < 1 + raised for s, share in zip(scaled, shares))


def test_train_py_says_how_it_scaled_the_schedule(tmp_path, capsys):
    from vitpe.cli import train

    out = tmp_path / "run"
    assert train.main(["--config", "configs/cifar10.yaml", "train.epochs=2", f"out_dir={out}", "data.dataset=synthetic",
                       "data.synthetic_size=64", "model.dim=32", "model.depth=1", "--no-progress"]) == 0
    assert "train.epochs=2: the progressive schedule" in capsys.readouterr().out
    assert load_config(out / "config.yaml").train.img_size_epochs == [1, 1]


@pytest.mark.parametrize("train, model_size, tested, reference", [
    ({"img_sizes": [24]}, 16, 24, 16),  # fine-tuned at 24 px from a 16 px run: tested where it trains
    ({"img_sizes": [16, 24, 32], "img_size_epochs": [2, 2, 1], "epochs": 5}, 0, 32, 32),  # progressive: the last size
    ({"img_sizes": [32, 16], "img_size_epochs": [2, 1], "epochs": 3}, 32, 16, 32),  # a schedule that ends smaller
    ({"img_sizes": [16, 24]}, 0, 32, 32),  # one size drawn per batch: the reference (data.img_size, native)
    ({"img_sizes": [16, 24]}, 24, 24, 24),
])
def test_the_test_split_runs_at_the_last_training_size(train, model_size, tested, reference):
    config = config_from_dict({"model": {"img_size": model_size}, "train": train}, for_training=False)
    assert (eval_size(config), reference_size(config)) == (tested, reference)


@pytest.mark.parametrize("overrides, noted", [(["train.epochs=1"], True), (["train.epochs=2"], False),
                                               (["train.epochs=1", "train.warmup_epochs=0.1"], False)])
def test_a_run_that_is_all_warm_up_gets_a_note(overrides, noted):
    notes = []
    load_config("configs/cifar10.yaml", overrides, notes=notes)  # one epoch of warm-up
    warm = [n for n in notes if "covers the whole run" in n]
    assert bool(warm) == noted
    if noted:
        assert "train.warmup_epochs=1 covers the whole run (train.epochs=1)" in warm[0]


def test_pe_options_take_dotted_overrides_that_a_shell_passes_unquoted():
    """docs/training.md's form: one option per override, no braces or spaces for the shell to split."""
    config = load_config("configs/cifar10.yaml", ["model.pe=rope_axial", "model.pe_options.theta=20"])
    assert config.model.pe_options == {"theta": 20}
    config = load_config("configs/cifar10.yaml", ["model.pe=learnable+rope_mixed",
                                                  "model.pe_options.rope_mixed.theta=10"])
    assert config.model.pe_options == {"rope_mixed": {"theta": 10}}


@pytest.mark.parametrize("overrides, noted", [
    (["model.patch_size=2", "train.img_sizes=[16]"], True),  # 32 px / patch 2: a 16 x 16 grid never trained at
    (["model.patch_size=2", "train.img_sizes=[16]", "model.img_size=16"], False),
    (["train.img_sizes=[16,32]", "train.img_size_epochs=[1,1]", "train.epochs=2"], False)])  # the progressive recipe ends at 32
def test_a_model_built_for_a_size_it_never_trains_at_gets_a_note(overrides, noted):
    notes = []
    load_config("configs/cifar10.yaml", overrides, notes=notes)
    grid = [n for n in notes if "builds the PE for a" in n]
    assert bool(grid) == noted
    if noted:
        assert "a 16 x 16 grid, but training at [16] px gives 8 x 8" in grid[0] and "model.img_size=16" in grid[0]
