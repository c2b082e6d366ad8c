"""From a config to the objects a run needs: data, model, optimiser, schedule."""

from __future__ import annotations

import math
from typing import Any

import torch
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler

from vitpe.config import Config
from vitpe.data import ImageSet, load_cifar, load_image_folder, synthetic_images
from vitpe.models import ViT


def load_data(config: Config) -> tuple[ImageSet, ImageSet]:
    """(train, test) image sets per ``config.data``, limits applied."""
    d = config.data
    if d.dataset in ("cifar10", "cifar100"):
        train, test = load_cifar(d.root, d.dataset, "train"), load_cifar(d.root, d.dataset, "test")
    elif d.dataset == "imagefolder":
        train, test = load_image_folder(d.root, "train", d.img_size), load_image_folder(d.root, "test", d.img_size)
    else:
        train = synthetic_images(d.synthetic_size, d.img_size, seed=1234)
        test = synthetic_images(max(d.synthetic_size // 4, 1), d.img_size, seed=4321)
    return train.limit(d.train_limit), test.limit(d.test_limit)


def build_model(config: Config, num_classes: int) -> ViT:
    m = config.model
    return ViT(img_size=config.train.img_sizes[0], patch_size=m.patch_size, num_classes=num_classes, dim=m.dim,
               depth=m.depth, heads=m.heads, mlp_ratio=m.mlp_ratio, pe=m.pe, pe_options=dict(m.pe_options),
               pe_resize=m.pe_resize, pool=m.pool, drop_path=m.drop_path, drop_rate=m.drop_rate)


def build_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW; no weight decay on norms, biases (1D tensors) and ``model.no_weight_decay()`` (class token, PE)."""
    return create_optimizer_v2(model, "adamw", lr=config.train.lr, weight_decay=config.train.weight_decay)


def build_scheduler(config: Config, optimizer: torch.optim.Optimizer, steps_per_epoch: int) -> Any:
    """Linear warmup then cosine decay to ``min_lr``, stepped per optimiser update."""
    t = config.train
    total = t.epochs * steps_per_epoch
    warmup = min(int(math.ceil(t.warmup_epochs * steps_per_epoch)), max(total - 1, 0))
    return CosineLRScheduler(optimizer, t_initial=total, lr_min=t.min_lr, warmup_t=warmup,
                             warmup_lr_init=t.lr * 0.01, warmup_prefix=True, t_in_epochs=False)
