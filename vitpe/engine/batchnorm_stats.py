"""BatchNorm statistics recomputed on clean training images after training: ``train.recalibrate_bn``.

A model with BatchNorm layers (``model.stem=conv``) keeps running averages of its batches' means and variances, and
evaluates with them. Trained under mixup and cutmix, those averages describe blended images, and with PyTorch's
momentum of 0.1 they are an average over the last few dozen steps only, so a model's test accuracy moves from epoch to
epoch even where the learning rate has decayed to almost nothing. Recomputing them once, after the last epoch, as a
plain average over the training images as evaluation sees them (no augmentation, the evaluation size) gives the
statistics of the data the model is tested on -- "precise BN" (Wu & Johnson, "Rethinking 'Batch' in BatchNorm",
2021). Only the BatchNorm buffers change; every weight stays as trained.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from vitpe.engine.precision import autocast


def batchnorm_layers(model: nn.Module) -> list[_BatchNorm]:
    """Every BatchNorm layer of ``model`` that keeps running statistics."""
    return [m for m in model.modules() if isinstance(m, _BatchNorm) and m.track_running_stats]


@torch.no_grad()
def recompute_batchnorm_stats(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
                              device: torch.device, precision: str = "auto") -> int:
    """Reset the running statistics of ``model``'s BatchNorm layers and recompute them as the plain average over
    ``batches`` (images, labels), forwarded as in evaluation (every other layer in eval mode, under ``precision``'s
    autocast). Returns how many images were seen; the model's training mode and each layer's momentum are restored."""
    layers = batchnorm_layers(model)
    if not layers:
        raise ValueError("the model has no BatchNorm layer whose statistics could be recomputed")
    was_training, momenta = model.training, [m.momentum for m in layers]
    model.eval()
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None  # a cumulative average over every batch, not an exponential one
        layer.train()
    seen = 0
    try:
        with autocast(device, precision):
            for images, _ in batches:
                model(images)
                seen += len(images)
    finally:
        for layer, momentum in zip(layers, momenta):
            layer.momentum = momentum
        model.train(was_training)
    if seen == 0:
        raise ValueError("no batch to recompute the BatchNorm statistics on")
    return seen
