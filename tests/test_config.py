import pytest

from vitpe.config import ConfigError, config_from_dict, default_data_root, load_config


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
    ("train.threads=-1", "train.threads"),
    ("data.img_size=0", "data.img_size"),
    ("data.val_split=-1", "data.val_split"),
    ("data.crop_padding=-1", "data.crop_padding"),
    ("data.mixup=-1", "data.mixup/cutmix"),
    ("data.synthetic_size=0", "data.synthetic_size"),
    ("data.vocab_min_freq=0", "data.vocab_min_freq/vocab_max_size"),
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


@pytest.mark.parametrize("name", ["smoke", "cifar10", "cifar10_gpu", "cifar100"])
def test_presets_load(name):
    load_config(f"configs/{name}.yaml")


def test_group_key_ignores_seed_and_place_and_fills_keys_added_later():
    from vitpe.config import group_key, to_dict

    full = to_dict(load_config(None, ["task=text", "data.dataset=sst2", "train.seed=1", "out_dir=a"]))
    older = to_dict(load_config(None, ["task=text", "data.dataset=sst2", "train.seed=0", "out_dir=b",
                                       "data.root=/elsewhere", "train.threads=1"]))
    del older["data"]["word_dropout"]  # a run saved before the key existed
    assert group_key(full) == group_key(older)
    assert group_key(full) != group_key(to_dict(load_config(None, ["task=text", "data.dataset=sst2",
                                                                   "train.lr=0.01"])))
