"""The run configuration's fields: nested dataclasses with their defaults, one per section (model, data, train)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any


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


@dataclass
class DataConfig:
    dataset: str = "cifar10"  # image: cifar10 | cifar100 | imagenette | imagewoof | imagefolder | synthetic;
    # text: sst2 | order | adjacent
    root: str = field(default_factory=default_data_root)
    img_size: int = 32  # native size the images are stored at (imagenette / imagefolder: shortest side resized to it,
    # centred square kept)
    cache_dir: str = ""  # imagenette / imagefolder: where the decoded uint8 images are cached ("" = $VITPE_CACHE or
    # ~/.cache/vitpe; "off" = decode every run)
    skip_unreadable: bool = False  # imagenette / imagefolder: skip images that cannot be read instead of stopping
    loader: str = "memory"  # imagenette / imagefolder: memory (decoded once into RAM, batches augmented whole) or
    # stream (decoded and augmented image by image in data.workers processes, from an image folder or shards)
    workers: int = 0  # data.loader=stream: DataLoader worker processes (0: decode in the training process)
    jpeg_draft: bool = False  # data.loader=stream: decode a JPEG at the smallest DCT scale (1/2, 1/4, 1/8) that still
    # holds its view's pixels (several times less work for views much smaller than the photograph)
    native_aspect: bool = False  # data.loader=stream: every photograph at its own aspect, batches of many grids filled
    # to data.token_budget, a sequence length drawn per step from data.seq_lens; evaluated at its aspect, short side
    # at the eval size (vitpe.data.native_aspect)
    seq_lens: list[int] = field(default_factory=lambda: [16, 36, 64, 100, 144])  # data.native_aspect: patches/image
    token_budget: int = 0  # data.native_aspect: patch tokens per batch and process (0: train.batch_size x the
    # longest of data.seq_lens)
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
