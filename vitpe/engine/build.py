"""From a config to the objects a run needs: data, model, optimiser, schedule."""

from __future__ import annotations

import math
from typing import Any

import torch
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler

from vitpe.config import Config
from vitpe.data import ImageSet, load_cifar, load_image_folder, synthetic_images
from vitpe.models import TextClassifier, ViT


def load_split(config: Config, split: str) -> ImageSet:
    """The ``split`` ("train" or "test") image set per ``config.data``, its limit applied."""
    d = config.data
    if d.dataset in ("cifar10", "cifar100"):
        data = load_cifar(d.root, d.dataset, split)
    elif d.dataset == "imagefolder":
        data = load_image_folder(d.root, split, d.img_size)
    elif split == "train":
        data = synthetic_images(d.synthetic_size, d.img_size, seed=1234)
    else:
        data = synthetic_images(max(d.synthetic_size // 4, 1), d.img_size, seed=4321)
    return data.limit(d.train_limit if split == "train" else d.test_limit)


def load_data(config: Config) -> tuple[ImageSet, ImageSet]:
    """(train, test) image sets per ``config.data``, limits applied."""
    return load_split(config, "train"), load_split(config, "test")


def reference_size(config: Config) -> int:
    """The image size the model and its PE are built for: ``model.img_size`` when set, else the training size, or
    the native size (``data.img_size``) when training uses several sizes."""
    sizes = config.train.img_sizes
    return config.model.img_size or (sizes[0] if len(sizes) == 1 else config.data.img_size)


def build_model(config: Config, num_classes: int, vocab: list[str] | None = None) -> ViT | TextClassifier:
    """The config's model: a ViT, or for ``task: text`` a TextClassifier over the tokens of ``vocab``."""
    m = config.model
    common = dict(num_classes=num_classes, dim=m.dim, depth=m.depth, heads=m.heads, mlp_ratio=m.mlp_ratio, pe=m.pe,
                  pe_options=dict(m.pe_options), pe_resize=m.pe_resize, pool=m.pool, drop_path=m.drop_path,
                  drop_rate=m.drop_rate)
    if config.task == "text":
        if vocab is None:
            raise ValueError("a text model needs its vocabulary")
        return TextClassifier(len(vocab), max_len=config.data.max_len, **common)
    return ViT(img_size=reference_size(config), patch_size=m.patch_size, class_token=m.class_token,
               reg_tokens=m.reg_tokens, layer_scale_init=m.layer_scale_init, fc_norm=m.fc_norm, norm_eps=m.norm_eps,
               qkv_bias=m.qkv_bias, **common)


def build_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW; no weight decay on norms, biases (1D tensors) and ``model.no_weight_decay()`` (class token, PE)."""
    return create_optimizer_v2(model, "adamw", lr=config.train.lr, weight_decay=config.train.weight_decay)


def build_scheduler(config: Config, optimizer: torch.optim.Optimizer, steps_per_epoch: int) -> Any:
    """Linear warmup then cosine decay to ``min_lr``, stepped per optimiser update."""
    t = config.train
    total = t.epochs * steps_per_epoch
    warmup = min(int(math.ceil(t.warmup_epochs * steps_per_epoch)), max(total - 1, 0))
    # warmup_prefix: the cosine starts after the warmup, so it spans the remaining steps and ends at min_lr
    return CosineLRScheduler(optimizer, t_initial=max(total - warmup, 1), lr_min=t.min_lr, warmup_t=warmup,
                             warmup_lr_init=t.lr * 0.01, warmup_prefix=True, t_in_epochs=False)
