"""Run configuration: nested dataclasses filled strictly from YAML and ``key=value`` dotted overrides.

Unknown keys and values of the wrong type are errors that name the key (and suggest close ones); nothing is
silently dropped. The resolved config is saved in every run folder and inside every checkpoint.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vitpe.atomic_files import write_text_atomic
from vitpe.engine.precision import PRECISIONS
from vitpe.models.mlp import MLPS
from vitpe.models.stem import STEMS, conv_stem_problem
from vitpe.pe import registry
from vitpe.pe.composed import MEMBER_KEYS, SEPARATOR, member_names
from vitpe.pe.grid import RESIZE_MODES, unscalable


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the key."""


def default_data_root() -> str:
    """``$VITPE_DATA`` when set, else ``./data``."""
    return os.environ.get("VITPE_DATA", "./data")


@dataclass
class ModelConfig:
    pe: str = "learnable"
    pe_options: dict[str, Any] = field(default_factory=dict)
    pe_resize: str = "interpolate"
    dim: int = 192
    depth: int = 6
    heads: int = 3
    mlp_ratio: float = 2.0
    patch_size: int = 4
    img_size: int = 0  # image size the model is built for (PE reference grid = img_size / patch_size); 0 = the
    # training size when there is one, else data.img_size (the native size)
    max_len: int = 0  # text: the length the model is built for (the PE's reference grid); 0 = data.max_len
    pool: str = "cls"
    drop_path: float = 0.0
    drop_rate: float = 0.0
    class_token: bool | None = None  # None = pool == "cls"
    reg_tokens: int = 0  # register tokens (prefix tokens without position)
    layer_scale_init: float | None = None  # LayerScale on every residual branch, starting at this gain
    fc_norm: bool = False  # with pool=mean: the final LayerNorm after pooling (timm's layout)
    norm_eps: float = 1.0e-5
    qkv_bias: bool = True
    mlp: str = "gelu"  # the block MLP: gelu (Linear-GELU-Linear) | swiglu
    mlp_norm: bool = False  # a LayerNorm on the MLP's hidden features (EVA-02's sub-LN)
    pe_combine: str = "add"  # a tokens-site PE: add (x + pe) | concat ([x, pe] projected back to dim)
    pos_drop: float = 0.0  # dropout after the PE sum, before the first block (timm's pos_drop)
    stem: str = "patch"  # images -> patch tokens: patch (one p x p convolution) | conv (3x3 stride-2 convolutions)
    init: str = ""  # start from other weights: timm:NAME[@WEIGHTS_FILE] (a pretrained timm model) or
    # run:RUN_DIR[@CHECKPOINT] (a vitpe run, e.g. to fine-tune it at another size); docs/training.md


@dataclass
class DataConfig:
    dataset: str = "cifar10"  # image: cifar10 | cifar100 | imagenette | imagefolder | synthetic; text: sst2 | order |
    # adjacent
    root: str = field(default_factory=default_data_root)
    img_size: int = 32  # native size the images are stored at (imagenette / imagefolder: shortest side resized to it,
    # centred square kept)
    cache_dir: str = ""  # imagenette / imagefolder: where the decoded uint8 images are cached ("" = $VITPE_CACHE or
    # ~/.cache/vitpe; "off" = decode every run)
    skip_unreadable: bool = False  # imagenette / imagefolder: skip images that cannot be read instead of stopping
    train_limit: int = 0  # use only the first N training images (0 = all)
    test_limit: int = 0
    val_split: int = 0  # hold out this many training images as a validation split
    crop_padding: int = 4
    crop_pad_mode: str = "zero"  # what the crop's padding holds: zero (black) or reflect (mirrored image content)
    hflip: bool = True
    crop_scale: list[float] = field(default_factory=list)  # a random-resized crop instead of the padded one: the range
    # of the crop's area (fraction of the image, aspect ratio 3/4-4/3) resampled to the training size, e.g. [0.25, 1];
    # needs crop_padding 0. Objects then look larger in training than in a whole image: FixRes's train-test discrepancy
    randaugment: str = ""  # e.g. "rand-m9-n2" (torchvision RandAugment with num_ops=n, magnitude=m); "" = off
    mixup: float = 0.0
    cutmix: float = 0.0
    on_device: bool | None = None  # images: keep the uint8 images on the training device and augment whole batches
    # there (None = on a GPU, not on the CPU); the batches are the same either way
    synthetic_size: int = 2048  # synthetic images / sequences for training (a quarter of that for testing)
    # text (task: text)
    eval_split: str = "test"  # split evaluated during training: test, or dev (SST-2's usual reported split)
    max_len: int = 64  # text: longest sequence (longer SST-2 texts are cut); the PE's reference length
    min_len: int = 0  # synthetic text: shortest training sequence (0 = max_len)
    vocab_min_freq: int = 1  # SST-2: keep words seen at least this often in training
    vocab_max_size: int = 0  # SST-2: at most this many vocabulary entries (0 = no cap)
    word_dropout: float = 0.0  # text: replace each real training token by <unk> with this probability
    synthetic_vocab: int = 64  # synthetic text: vocabulary size (specials, markers A and B, fillers)


#: torch.compile's modes (``train.compile_mode``).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

#: Where the learning rate's linear warm-up starts, as a fraction of ``train.lr`` (vitpe.engine.optimizer).
WARMUP_START = 0.01


@dataclass
class TrainConfig:
    epochs: int = 10
    batch_size: int = 128
    lr: float = 1e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    label_smoothing: float = 0.1
    grad_clip: float = 1.0
    ema: float = 0.0  # EMA decay (0 = off)
    recalibrate_bn: bool = False  # after the last epoch, recompute BatchNorm's statistics on the clean training
    # images at the evaluation size (model.stem=conv has BatchNorm): vitpe.engine.batchnorm_stats
    seed: int = 0
    img_sizes: list[int] = field(default_factory=lambda: [32])  # training sizes: one drawn per batch, or with
    # img_size_epochs, one after the other
    img_size_epochs: list[int] = field(default_factory=list)  # epochs at each of img_sizes in turn (progressive
    # resizing, e.g. img_sizes [16, 24, 32] with [6, 6, 4]); empty = draw one of img_sizes per batch
    eval_batch_size: int = 500
    eval_every: int = 1  # evaluate on the test split after every N-th epoch and after the last (1 = every epoch)
    checkpoint_every: int = 0  # also checkpoint every N steps (0 = once per epoch)
    compile: bool = False
    compile_mode: str = "default"  # torch.compile's mode: default | reduce-overhead (each size's step as a CUDA
    # graph: on a GPU the host no longer launches every kernel) | max-autotune | max-autotune-no-cudagraphs
    device: str = "auto"  # auto | cpu | cuda
    threads: int = 0  # torch CPU threads (0 = torch default)
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU) | bf16 | fp32 | fast: vitpe.engine.precision


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    out_dir: str = "runs/default"
    task: str = "image"


# ----------------------------------------------------------------------------------------------- strict filling
def _suggest(key: str, choices: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(choices), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Check ``value`` against the type ``hint``; ints are accepted for floats. Raises :class:`ConfigError`."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            try:
                return _coerce(value, arg, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: {value!r} is not a {hint}")
    if origin is list:
        (inner,) = typing.get_args(hint)
        items = value if isinstance(value, list) else [value] if not isinstance(value, (dict, str)) else None
        if items is None:
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return [_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(items)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):  # YAML 1.1 reads "1e-3" (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    if hint is type(None) and value is None:
        return None
    if hint is str and isinstance(value, bool):  # a config file's unquoted off / on / yes / no
        raise ConfigError(f"{key}: expected text, got {value!r} (YAML reads an unquoted off, on, yes or no as "
                          f"false or true): quote it, e.g. {key.rpartition('.')[2]}: 'off'")
    if isinstance(hint, type) and isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{key}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


def _fill(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        key = unknown[0]
        raise ConfigError(f"unknown config key {prefix + str(key)!r}{_suggest(str(key), names)}; "
                          f"valid keys under {prefix.rstrip('.') or 'the top level'}: {', '.join(names)}")
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _fill(hint, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _coerce(value, hint, prefix + name)
    return cls(**kwargs)


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    node, parts = tree, dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {dotted!r}: {part!r} is not a section")
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.epochs=5"`` -> ``("train.epochs", 5)``; the value is parsed as YAML (``[24,32]``, ``true``, ...)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value (e.g. train.epochs=5)")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ConfigError(f"override {text!r}: cannot parse the value ({err})") from None


def _field_hint(dotted: str) -> Any:
    """The type of the :class:`Config` field at ``dotted`` (``"data.cache_dir"`` -> ``str``); None for no field."""
    hint: Any = Config
    for part in dotted.split("."):
        if not dataclasses.is_dataclass(hint):
            return None
        hint = typing.get_type_hints(hint).get(part)
    return hint


def typed_override(text: str) -> tuple[str, Any]:
    """:func:`parse_override`, where the field's type settles what YAML alone cannot: a text option given a word that
    YAML 1.1 reads as a boolean (``data.cache_dir=off``) keeps the word; every other value is YAML's."""
    key, value = parse_override(text)
    if isinstance(value, bool) and _field_hint(key) is str:
        value = text.split("=", 1)[1].strip()
    return key, value


def config_from_dict(data: dict[str, Any], overrides: typing.Sequence[str] = (), *, for_training: bool = True,
                     notes: list[str] | None = None) -> Config:
    """Build a :class:`Config` from a nested mapping plus dotted overrides, strictly. ``for_training=False``: the
    config of a saved run, to rebuild its model or name its group; the ranges of training-only values (learning
    rates, augmentation, ...) are then not checked, so a run saved before a check was added still evaluates.

    An override of the epochs or sizes of a progressive-resizing schedule adapts the schedule the mapping gives
    (:func:`fit_size_schedule`); what it did is appended to ``notes``, for the run's log."""
    tree = _as_tree(data)
    parsed = [typed_override(text) for text in overrides]
    for key, value in parsed:
        _set_dotted(tree, key, value)
    config = _fill(Config, tree)
    fitted = fit_size_schedule(config.train, {key for key, _ in parsed})
    validate(config, for_training=for_training)
    trained = for_training and config.task == "image"
    for note in (fitted, all_warmup_note(config.train) if for_training else None,
                 reference_grid_note(config) if trained else None):
        if note and notes is not None:
            notes.append(note)
    return config


def reference_grid_note(config: Config) -> str | None:
    """A note for a model built for a size it never trains at (``model.img_size`` outside ``train.img_sizes``, no
    ``model.init``): its PE's reference grid is then not the training grid, and every training step resizes it (a
    patch size changed without the image size, e.g. ``model.patch_size=2 train.img_sizes=[16]`` on a 32 px config)."""
    m, sizes = config.model, config.train.img_sizes
    if not m.img_size or m.init or not sizes or m.img_size in sizes:
        return None
    ref, grids = m.img_size // m.patch_size, sorted({size // m.patch_size for size in sizes})
    trained = ", ".join(f"{g} x {g}" for g in grids)
    return (f"note: model.img_size={m.img_size} with patch {m.patch_size} builds the PE for a {ref} x {ref} grid, "
            f"but training at {sizes} px gives {trained}: the PE is resized at every step; for a reference grid that "
            f"is the training grid set model.img_size={sizes[-1]}")


def all_warmup_note(t: TrainConfig) -> str | None:
    """A note for a run whose warm-up is as long as the run: its learning rate would reach ``train.lr`` only at the
    last step (a one-epoch run of a config with one epoch of warm-up)."""
    if t.warmup_epochs < t.epochs:
        return None
    return (f"note: train.warmup_epochs={t.warmup_epochs:g} covers the whole run (train.epochs={t.epochs}): the "
            f"learning rate rises from {t.lr * WARMUP_START:g} and reaches train.lr={t.lr:g} only at the last step; "
            f"give train.warmup_epochs below train.epochs (e.g. train.warmup_epochs={t.epochs / 10:g}) for a decay too")


def split_epochs(epochs: list[int], total: int) -> list[int]:
    """``epochs`` (one count per size) rescaled to ``total`` epochs, each size keeping its share as nearly as whole
    epochs allow (largest remainders), the last size at least one epoch; a size may get 0."""
    shares = [e * total / sum(epochs) for e in epochs]
    scaled = [int(share) for share in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: (scaled[i] - shares[i], i))
    for i in by_remainder[:total - sum(scaled)]:
        scaled[i] += 1
    if scaled[-1] == 0:  # the final size is the one the model is tested at: it keeps at least one epoch
        donor = max(range(len(scaled) - 1), key=lambda i: (scaled[i], -i))
        scaled[donor] -= 1
        scaled[-1] = 1
    return scaled


def fit_size_schedule(train: TrainConfig, overridden: set[str]) -> str | None:
    """Adapt a progressive-resizing schedule (``train.img_sizes`` with ``train.img_size_epochs``) that came with the
    config to what the overrides changed, and say what was done (None: nothing):

    * ``train.epochs=N`` alone: the schedule is scaled to N epochs, each size keeping its share, at least one epoch
      at the final size (sizes left with no epoch are dropped);
    * ``train.img_sizes=[S]`` alone (one size): the schedule is dropped, every epoch is at S.

    A schedule given in the overrides themselves is taken as it is (and checked by :func:`validate`)."""
    if not train.img_size_epochs or "train.img_size_epochs" in overridden:
        return None
    if "train.img_sizes" in overridden:
        if len(train.img_sizes) != 1:
            return None
        train.img_size_epochs = []
        return f"train.img_sizes={train.img_sizes}: one size, so the config's progressive schedule is dropped"
    if "train.epochs" not in overridden or train.epochs < 1 or sum(train.img_size_epochs) == train.epochs:
        return None
    before = f"{train.img_sizes} for {train.img_size_epochs} epochs"
    scaled = split_epochs(train.img_size_epochs, train.epochs)
    train.img_sizes = [size for size, e in zip(train.img_sizes, scaled) if e]
    train.img_size_epochs = [e for e in scaled if e]
    return (f"train.epochs={train.epochs}: the progressive schedule ({before}) is scaled to {train.epochs} epochs, "
            f"each size keeping its share: train.img_sizes={train.img_sizes}, "
            f"train.img_size_epochs={train.img_size_epochs}")


def _as_tree(data: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(yaml.safe_dump(data)) or {}  # a deep copy with plain containers


def _read_yaml(path: str | os.PathLike | None) -> dict[str, Any]:
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} not found")
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {err}") from None


def load_config(path: str | os.PathLike | None, overrides: typing.Sequence[str] = (), *,
                notes: list[str] | None = None) -> Config:
    """Read a YAML file (or start from defaults when ``path`` is None) and apply ``key=value`` overrides (what they
    changed beyond themselves is appended to ``notes``: :func:`config_from_dict`)."""
    return config_from_dict(_read_yaml(path), overrides, notes=notes)


def given_keys(path: str | os.PathLike | None, overrides: typing.Sequence[str] = ()) -> set[str]:
    """The dotted keys that a YAML file and overrides set explicitly (``{"model.dim", "train.lr", ...}``)."""
    tree = _as_tree(_read_yaml(path))
    for text in overrides:
        _set_dotted(tree, *parse_override(text))

    def walk(node: Any, prefix: str) -> set[str]:
        if not isinstance(node, dict) or prefix.count(".") >= 2:
            return {prefix.rstrip(".")}
        return set().union(*(walk(v, f"{prefix}{k}.") for k, v in node.items())) if node else {prefix.rstrip(".")}

    return set().union(*(walk(v, f"{k}.") for k, v in tree.items())) if tree else set()


def to_dict(config: Config) -> dict[str, Any]:
    return dataclasses.asdict(config)


def group_key(config: dict[str, Any] | Config) -> str:
    """A resolved config without ``train.seed``, where the run happened (``out_dir``, ``data.root``,
    ``train.threads``) and how often it was evaluated (``train.eval_every``): runs that share it are the same
    experiment with other seeds.

    The config is filled through the current dataclasses first, so a run saved before a key was added (with its
    default value) groups with a run saved after.
    """
    tree = to_dict(config if isinstance(config, Config) else config_from_dict(config, for_training=False))
    tree.pop("out_dir", None)
    tree["data"].pop("root", None)
    for key in ("seed", "threads", "eval_every"):
        tree["train"].pop(key, None)
    return json.dumps(tree, sort_keys=True)


def reference_size(config: Config) -> int:
    """The image size the model and its PE are built for: ``model.img_size`` when set, else the training size, or
    the native size (``data.img_size``) when training uses several sizes."""
    sizes = config.train.img_sizes
    return config.model.img_size or (sizes[0] if len(sizes) == 1 else config.data.img_size)


def eval_size(config: Config) -> int:
    """The image size the test split is evaluated at during training: the size the model trains at last -- the one
    training size, or the last of a progressive schedule (``train.img_size_epochs``) -- and the reference size when
    each batch draws one of several sizes. A run fine-tuned at 24 px from a 16 px run is tested at 24 px, though its
    reference grid stays 16 px."""
    sizes = config.train.img_sizes
    return sizes[-1] if len(sizes) == 1 or config.train.img_size_epochs else reference_size(config)


def reference_length(config: Config) -> int:
    """The sequence length a text model and its PE are built for: ``model.max_len`` when set, else ``data.max_len``."""
    return config.model.max_len or config.data.max_len


def dump_config(config: Config, path: str | os.PathLike) -> None:
    """Write the resolved config as YAML, atomically (temporary file + rename)."""
    write_text_atomic(yaml.safe_dump(to_dict(config), sort_keys=False), path)


INIT_PREFIXES = ("timm:", "run:")
IMAGE_DATASETS = ("cifar10", "cifar100", "imagenette", "imagefolder", "synthetic")
TEXT_DATASETS = ("sst2", "order", "adjacent")
DATASETS = IMAGE_DATASETS + TEXT_DATASETS
TASKS = ("image", "text")
PAD_MODES = ("zero", "reflect")


def check_pe(model: ModelConfig, grid_dims: int) -> None:
    """``model.pe`` (each member of a composed name), ``model.pe_options`` and ``model.pe_resize`` against the PE
    registry, for a ``grid_dims``-D task: an unknown name or option is an error naming the key, with the close
    names, before any model is built."""
    try:
        names = member_names(model.pe) if SEPARATOR in model.pe else [model.pe]
        classes = [registry.get(name) for name in names]
    except ValueError as err:
        raise ConfigError(f"model.pe: {err}") from None
    for name, cls in zip(names, classes):
        if grid_dims not in cls.grid_dims:
            kinds = " and ".join(f"{d}D" for d in cls.grid_dims)
            task = "text (1D sequences)" if grid_dims == 1 else "images (2D grids)"
            raise ConfigError(f"model.pe: {name} works on {kinds} grids only, not on {task}; choose one of "
                              f"{', '.join(n for n in registry.available() if grid_dims in registry.get(n).grid_dims)}")
    if model.pe_resize not in RESIZE_MODES:
        raise ConfigError(f"model.pe_resize {model.pe_resize!r} is not a resize mode"
                          f"{_suggest(model.pe_resize, RESIZE_MODES)}; choose one of {list(RESIZE_MODES)}")
    pinned = {m for m, opts in model.pe_options.items() if isinstance(opts, dict) and "resize" in opts}
    for name, cls in zip(names, classes):
        if model.pe_resize not in cls.resize_modes and not (len(names) > 1 and name in pinned):
            frequency_pes = [n for n in registry.available() if model.pe_resize in registry.get(n).resize_modes]
            raise ConfigError(f"model.pe_resize={model.pe_resize}: "
                              + unscalable(name, model.pe_resize, cls.resize_modes, frequency_pes))
    if len(names) == 1:
        _check_pe_options(names[0], model.pe_options, "model.pe_options")
        return
    for member, opts in model.pe_options.items():
        if member not in names:
            raise ConfigError(f"model.pe_options: the options of the composed PE {model.pe} are keyed by member "
                              f"({', '.join(names)}), e.g. model.pe_options.{names[-1]}.OPTION=VALUE; got {member!r}"
                              f"{_suggest(str(member), names)}")
        if not isinstance(opts, dict):
            raise ConfigError(f"model.pe_options.{member} must be a mapping of {member}'s options, got {opts!r}")
        _check_pe_options(member, {k: v for k, v in opts.items() if k not in MEMBER_KEYS}, f"model.pe_options.{member}")


def _check_pe_options(name: str, given: dict[str, Any], key: str) -> None:
    own = registry.options(name)
    for option in given:
        if option not in own:
            valid = ", ".join(own) if own else "none"
            raise ConfigError(f"unknown option {key}.{option} for position encoding {name}"
                              f"{_suggest(str(option), own)}; its options are: {valid}")


def validate(config: Config, for_training: bool = True) -> None:
    """Value checks that types alone cannot express; each error names its key. ``for_training=False`` leaves out
    the ranges of values that only training reads (see :func:`config_from_dict`)."""
    checks = [
        (config.task in TASKS, "task", f"one of {list(TASKS)}"),
        (config.data.dataset in DATASETS, "data.dataset", f"one of {list(DATASETS)}"),
        (config.data.dataset in (TEXT_DATASETS if config.task == "text" else IMAGE_DATASETS), "data.dataset",
         f"a {config.task} data set with task={config.task}: one of "
         f"{list(TEXT_DATASETS if config.task == 'text' else IMAGE_DATASETS)}"),
        (config.data.eval_split in (("test", "dev") if config.data.dataset == "sst2" else ("test",)),
         "data.eval_split", "test (or dev for sst2)"),
        (config.train.epochs >= 1, "train.epochs", ">= 1"),
        (config.train.batch_size >= 1, "train.batch_size", ">= 1"),
        (config.train.lr > 0, "train.lr", "> 0"),
        (len(config.train.img_sizes) >= 1, "train.img_sizes", "a non-empty list"),
        (0 <= config.train.ema < 1, "train.ema", "in [0, 1)"),
        (config.train.device in ("auto", "cpu", "cuda"), "train.device", "auto, cpu or cuda"),
        (config.train.precision in PRECISIONS, "train.precision", f"one of {', '.join(PRECISIONS)}"),
        (config.data.train_limit >= 0 and config.data.test_limit >= 0, "data.train_limit/test_limit", ">= 0"),
        (config.data.crop_pad_mode in PAD_MODES, "data.crop_pad_mode", f"one of {list(PAD_MODES)}"),
    ]
    d = config.data
    m = config.model
    t = config.train
    checks += [  # ranges: a value outside them fails deep in a run, or worse, trains something else in silence
        (min(m.dim, m.depth, m.heads, m.patch_size) >= 1, "model.dim/depth/heads/patch_size", ">= 1"),
        (m.mlp_ratio > 0 and int(m.dim * m.mlp_ratio) >= 1, "model.mlp_ratio",
         f"> 0, with a hidden width int(model.dim * model.mlp_ratio) of at least 1 (dim {m.dim})"),
        (0 <= m.drop_path < 1 and 0 <= m.drop_rate < 1, "model.drop_path/drop_rate", "in [0, 1)"),
        (0 <= m.pos_drop < 1, "model.pos_drop", "in [0, 1)"),
        (m.pe_combine in ("add", "concat"), "model.pe_combine", "add or concat"),
        (m.norm_eps > 0, "model.norm_eps", "> 0"),
        (d.img_size >= 1, "data.img_size", ">= 1"),
    ]
    if for_training:  # values only training reads; a saved run's config is checked without them
        checks += [
            (0 <= t.min_lr <= t.lr, "train.min_lr", f"in [0, train.lr] (train.lr is {t.lr:g})"),
            (t.weight_decay >= 0, "train.weight_decay", ">= 0"),
            (t.warmup_epochs >= 0, "train.warmup_epochs", ">= 0"),
            (0 <= t.label_smoothing < 1, "train.label_smoothing", "in [0, 1)"),
            (t.grad_clip >= 0, "train.grad_clip", ">= 0 (0: no clipping)"),
            (t.eval_batch_size >= 1, "train.eval_batch_size", ">= 1"),
            (t.eval_every >= 1, "train.eval_every", ">= 1 (1: every epoch; the last epoch is always evaluated)"),
            (t.checkpoint_every >= 0, "train.checkpoint_every", ">= 0 (0: once per epoch)"),
            (t.threads >= 0, "train.threads", ">= 0 (0: torch's default)"),
            (t.compile_mode in COMPILE_MODES, "train.compile_mode", f"one of {', '.join(COMPILE_MODES)}"),
            (t.compile or t.compile_mode == "default", "train.compile_mode",
             "default unless train.compile=true (the mode is torch.compile's)"),
            (d.val_split >= 0, "data.val_split", ">= 0"),
            (not t.recalibrate_bn or (config.task == "image" and (m.stem == "conv" or bool(m.init))),
             "train.recalibrate_bn", "false unless the model has BatchNorm layers (model.stem=conv has them)"),
            (d.crop_padding >= 0, "data.crop_padding", ">= 0"),
            (d.mixup >= 0 and d.cutmix >= 0, "data.mixup/cutmix", ">= 0 (0: off)"),
            (d.synthetic_size >= 1, "data.synthetic_size", ">= 1"),
            (d.vocab_min_freq >= 1 and d.vocab_max_size >= 0, "data.vocab_min_freq/vocab_max_size",
             ">= 1 and >= 0 (0: no cap)"),
        ]
    checks += [
        (m.reg_tokens >= 0, "model.reg_tokens", ">= 0"),
        (m.layer_scale_init is None or m.layer_scale_init > 0, "model.layer_scale_init", "positive, or null (off)"),
        (not m.fc_norm or m.pool == "mean", "model.fc_norm", "false unless model.pool is mean"),
        (not m.init or m.init.startswith(INIT_PREFIXES), "model.init",
         "timm:NAME[@WEIGHTS_FILE] (a pretrained timm model) or run:RUN_DIR[@CHECKPOINT] (a vitpe run)"),
        (m.max_len >= 0, "model.max_len", ">= 0 (0: data.max_len)"),
        (m.mlp in MLPS, "model.mlp", " or ".join(MLPS)),
        (m.stem in STEMS, "model.stem", " or ".join(STEMS)),
    ]
    if config.task == "text":
        checks += [
            (not (m.init.startswith("timm:") or m.reg_tokens or m.class_token is not None),
             "model.init/reg_tokens/class_token", "unset for text (image options; model.init=run:RUN_DIR works)"),
            (m.stem == "patch", "model.stem", "patch for text (the default; stems are for images)"),
            (d.max_len >= 1, "data.max_len", ">= 1"),
            (0 <= d.min_len <= d.max_len, "data.min_len", f"between 0 and data.max_len ({d.max_len})"),
            (not (d.mixup or d.cutmix or d.randaugment or d.crop_scale), "data.mixup/cutmix/randaugment/crop_scale",
             "off for text"),
            (d.synthetic_vocab >= 8, "data.synthetic_vocab", ">= 8"),
            (0 <= d.word_dropout < 1, "data.word_dropout", "in [0, 1)"),
        ]
    else:
        checks += [
            (d.word_dropout == 0, "data.word_dropout", "0 for images (it is a text option)"),
            (not d.crop_scale or (len(d.crop_scale) == 2 and 0 < d.crop_scale[0] <= d.crop_scale[1] <= 1),
             "data.crop_scale", "empty (off) or [min, max] with 0 < min <= max <= 1 (fractions of the image's area)"),
            (not (d.crop_scale and d.crop_padding), "data.crop_padding",
             "0 with data.crop_scale (the random-resized crop replaces the padded one)"),
        ]
    for ok, key, what in checks:
        if not ok:
            raise ConfigError(f"{key} must be {what}")
    check_pe(m, grid_dims=1 if config.task == "text" else 2)
    if config.task == "text":
        return
    patch = config.model.patch_size
    if m.stem == "conv" and (problem := conv_stem_problem(patch, m.dim)):
        raise ConfigError(f"model.stem=conv {problem} (model.patch_size, model.dim)")
    sizes = [("train.img_sizes", s) for s in t.img_sizes] + [("model.img_size", config.model.img_size)] * bool(
        config.model.img_size)  # model.img_size 0 means "derived"
    for key, size in sizes:
        if size < 1 or size % patch:
            raise ConfigError(f"{key}: {size} is not a positive multiple of model.patch_size {patch}")
    if t.img_size_epochs:
        if len(t.img_size_epochs) != len(t.img_sizes) or min(t.img_size_epochs) < 1:
            even = split_epochs([1] * len(t.img_sizes), t.epochs)
            fix = f"train.img_size_epochs={even}, or " if min(even) >= 1 else ""
            raise ConfigError(f"train.img_size_epochs must give a number of epochs (>= 1) for each of train.img_sizes "
                              f"{t.img_sizes}; got {t.img_size_epochs}: give {fix}train.img_size_epochs=[] to draw "
                              f"one of the sizes for every batch")
        if sum(t.img_size_epochs) != t.epochs:
            scaled = split_epochs(t.img_size_epochs, t.epochs)
            fix = f"train.img_size_epochs={[e for e in scaled if e]}"
            if 0 in scaled:
                fix = f"train.img_sizes={[size for size, e in zip(t.img_sizes, scaled) if e]} {fix}"
            raise ConfigError(f"train.img_size_epochs {t.img_size_epochs} add up to {sum(t.img_size_epochs)} epochs, "
                              f"but train.epochs is {t.epochs}: give train.epochs={sum(t.img_size_epochs)}, or {fix} "
                              f"for {t.epochs} epochs")
