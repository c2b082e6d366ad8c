"""Value checks that types alone cannot express, the PE against its registry included; each error names its key."""

from __future__ import annotations

from typing import Any

from vitpe.config.schedule import split_epochs
from vitpe.config.schema import COMPILE_MODES, Config, ConfigError, ModelConfig
from vitpe.config.strict import close_names
from vitpe.engine.precision import PRECISIONS
from vitpe.models.mlp import MLPS
from vitpe.models.stem import STEMS, conv_stem_problem
from vitpe.pe import registry
from vitpe.pe.composed import MEMBER_KEYS, SEPARATOR, member_names
from vitpe.pe.grid import RESIZE_MODES, unscalable

INIT_PREFIXES = ("timm:", "run:")
FOLDER_DATASETS = ("imagenette", "imagewoof", "imagefolder")  # image folders (or shards): decoded or streamed
IMAGE_DATASETS = ("cifar10", "cifar100", *FOLDER_DATASETS, "synthetic")
TEXT_DATASETS = ("sst2", "order", "adjacent")
DATASETS = IMAGE_DATASETS + TEXT_DATASETS
TASKS = ("image", "text")
PAD_MODES = ("zero", "reflect")
LOADERS = ("memory", "stream")
STREAM_DATASETS = FOLDER_DATASETS  # data.loader=stream reads image folders and shards


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
                          f"{close_names(model.pe_resize, RESIZE_MODES)}; choose one of {list(RESIZE_MODES)}")
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
                              f"{close_names(str(member), names)}")
        if not isinstance(opts, dict):
            raise ConfigError(f"model.pe_options.{member} must be a mapping of {member}'s options, got {opts!r}")
        _check_pe_options(member, {k: v for k, v in opts.items() if k not in MEMBER_KEYS}, f"model.pe_options.{member}")


def _check_pe_options(name: str, given: dict[str, Any], key: str) -> None:
    own = registry.options(name)
    for option in given:
        if option not in own:
            valid = ", ".join(own) if own else "none"
            raise ConfigError(f"unknown option {key}.{option} for position encoding {name}"
                              f"{close_names(str(option), own)}; its options are: {valid}")


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
        (config.data.loader in LOADERS, "data.loader", f"one of {list(LOADERS)}"),
        (config.data.loader == "memory" or config.data.dataset in STREAM_DATASETS, "data.loader",
         f"memory for data.dataset={config.data.dataset} (stream reads {' and '.join(STREAM_DATASETS)}: image "
         f"folders and shards)"),
        (config.data.workers >= 0, "data.workers", ">= 0 (0: decode in the training process)"),
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
            (not d.native_aspect or d.loader == "stream", "data.native_aspect",
             "false unless data.loader=stream (photographs at their aspect are decoded image by image)"),
            (not d.native_aspect or not (d.mixup or d.cutmix), "data.mixup/cutmix",
             "0 with data.native_aspect (mixing two images needs one size; a batch there has many)"),
            (not d.native_aspect or not t.compile, "train.compile",
             "false with data.native_aspect (every batch brings other grids: a compiled step would be rebuilt batch "
             "after batch)"),
            (not d.native_aspect or not d.crop_padding, "data.crop_padding",
             "0 with data.native_aspect (the padded crop is a square view's; use data.crop_scale)"),
            (bool(d.seq_lens) and min(d.seq_lens) >= 1, "data.seq_lens", "a non-empty list of token counts >= 1"),
            (d.token_budget == 0 or d.token_budget >= max(d.seq_lens or [1]), "data.token_budget",
             f"0 (train.batch_size x the longest sequence) or at least the longest of data.seq_lens "
             f"({max(d.seq_lens or [1])}), one image a batch"),
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
