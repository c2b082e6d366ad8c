"""The optimiser and learning-rate schedule of a training run, from its config."""

from __future__ import annotations

import math
from typing import Any

import torch
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler

from vitpe.config import WARMUP_START, Config


def build_optimizer(config: Config, model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW; no weight decay on norms, biases (1D tensors) and ``model.no_weight_decay()`` (class token, PE). On a
    GPU the fused AdamW (one kernel per step for all parameters, instead of a few per tensor); on the CPU torch's
    default, so CPU runs keep their numbers."""
    fused = {"fused": True} if next(model.parameters()).is_cuda else {}
    return create_optimizer_v2(model, "adamw", lr=config.train.lr, weight_decay=config.train.weight_decay, **fused)


def build_scheduler(config: Config, optimizer: torch.optim.Optimizer, steps_per_epoch: int) -> Any:
    """Linear warmup then cosine decay to ``min_lr``, stepped per optimiser update."""
    t = config.train
    total = t.epochs * steps_per_epoch
    warmup = min(int(math.ceil(t.warmup_epochs * steps_per_epoch)), max(total - 1, 0))
    # warmup_prefix: the cosine starts after the warmup, so it spans the remaining steps and ends at min_lr
    return CosineLRScheduler(optimizer, t_initial=max(total - warmup, 1), lr_min=t.min_lr, warmup_t=warmup,
                             warmup_lr_init=t.lr * WARMUP_START, warmup_prefix=True, t_in_epochs=False)
