"""BatchNorm over the global batch when several processes train one model (``torchrun``).

Each DDP rank sees its share of a step's batch; a plain BatchNorm layer (``model.stem=conv`` has them) would normalise
each share by its own mean and variance, so two ranks of 8 images train another model than one process of 16.
:func:`synchronise_batchnorm` makes every BatchNorm layer normalise by the statistics of the whole global batch:
timm's ``convert_sync_batchnorm`` (torch's SyncBatchNorm, timm's for its BatchNormAct2d) on GPUs, and on CPUs --
where SyncBatchNorm refuses to run -- :class:`GlobalBatchNorm` and :class:`GlobalBatchNormAct`, which sum the
statistics over the ranks with a differentiable all-reduce (its backward sums the gradients of the statistics over the
ranks, as SyncBatchNorm's does). Parameters and buffers stay the same objects under the same
names: optimiser, checkpoints and EMA are unaffected.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from timm.layers import BatchNormAct2d, convert_sync_batchnorm


class SumOverRanks(torch.autograd.Function):
    """A tensor summed over every rank; its gradient is the gradient summed over every rank (the sum's adjoint)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        total = x.clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        total = grad.clone()
        dist.all_reduce(total)
        return total


def all_reduce(x: torch.Tensor) -> torch.Tensor:
    return SumOverRanks.apply(x)


class GlobalStatistics:
    """What :class:`GlobalBatchNorm` and :class:`GlobalBatchNormAct` add to their BatchNorm parent: training-mode
    statistics over every rank's images together (mean first, then the centred second moment: two small all-reduces,
    as exact as one process's two-pass variance)."""

    def synchronised(self) -> bool:
        return self.training and dist.is_available() and dist.is_initialized()

    def global_normalised(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) normalised by the global batch's per-channel statistics, scaled and shifted."""
        dims = (0, 2, 3)
        count = all_reduce(x.new_tensor([x.numel() / x.shape[1]]))  # values per channel, every rank
        mean = all_reduce(x.sum(dims)) / count  # (C,)
        centred = x - mean[None, :, None, None]
        var = all_reduce(centred.square().sum(dims)) / count  # (C,) biased, as BatchNorm normalises with
        if self.track_running_stats:
            self._update_running_stats(mean.detach(), var.detach(), float(count))
        y = centred * torch.rsqrt(var + self.eps)[None, :, None, None]
        if self.affine:
            y = y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        return y

    @torch.no_grad()
    def _update_running_stats(self, mean: torch.Tensor, var: torch.Tensor, count: float) -> None:
        """As BatchNorm does: an exponential average with ``momentum`` (a cumulative one when it is None) of the
        mean and the unbiased variance."""
        self.num_batches_tracked += 1
        factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        self.running_mean.lerp_(mean, factor)
        self.running_var.lerp_(var * count / max(count - 1, 1), factor)


class GlobalBatchNorm(GlobalStatistics, nn.BatchNorm2d):
    """:class:`~torch.nn.BatchNorm2d` over the global batch in training (:class:`GlobalStatistics`); evaluation,
    and a process outside a process group, use the parent's forward. (B, C, H, W) -> (B, C, H, W)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.global_normalised(x) if self.synchronised() else super().forward(x)


class GlobalBatchNormAct(GlobalStatistics, BatchNormAct2d):
    """timm's :class:`~timm.layers.BatchNormAct2d` (BatchNorm, then its dropout and activation; the conv stem's) over
    the global batch in training. (B, C, H, W) -> (B, C, H, W)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.drop(self.global_normalised(x))) if self.synchronised() else super().forward(x)


def synchronise_batchnorm(model: nn.Module, device: torch.device) -> nn.Module:
    """``model`` with every BatchNorm layer normalising over the global batch (see the module's notes); returns the
    model to use (the same object unless ``model`` itself is a BatchNorm layer on a GPU)."""
    if device.type == "cuda":
        return convert_sync_batchnorm(model)  # timm's: torch's SyncBatchNorm, and timm's for BatchNormAct2d
    for module in model.modules():
        if type(module) in GLOBAL_VARIANTS:
            module.__class__ = GLOBAL_VARIANTS[type(module)]  # the same parameters and buffers, a global forward
    return model


GLOBAL_VARIANTS = {nn.BatchNorm2d: GlobalBatchNorm, BatchNormAct2d: GlobalBatchNormAct}
