"""Batches from in-memory uint8 images, augmented a whole batch at a time.

Every random choice of a batch (its images, crop offsets, flips, resolution) comes from a generator seeded by
``(seed, epoch, step)``, so any step can be reproduced on its own: resuming mid-epoch gives the same batches, and
DistributedDataParallel ranks take disjoint shards of the same permutation.

With ``resident=True`` the uint8 images live on the loader's device (a GPU) and every augmentation runs there on
whole batches; the random draws stay on the CPU's seeded generators (a few numbers per image), so a batch is the
same on either device and a resumed run draws the same batches.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Iterator

import torch
import torch.nn.functional as F

from vitpe.data.datasets import ImageSet


def step_seed(seed: int, epoch: int, step: int, salt: int = 0) -> int:
    """A 63-bit seed for one step, distinct for every (seed, epoch, step, salt)."""
    value = (seed * 1_000_003 + epoch) * 1_000_033 + step
    return (value * 1_000_037 + salt) % (2**63 - 1)


class ChannelMoments:
    """Per-channel mean and (unbiased) std of images added batch by batch, summed in float64."""

    def __init__(self, channels: int = 3) -> None:
        self.total = torch.zeros(channels, dtype=torch.float64)
        self.squares = torch.zeros(channels, dtype=torch.float64)
        self.count = 0

    def add(self, x: torch.Tensor) -> None:
        """A batch (B, C, H, W) in [0, 1] units."""
        x = x.to(torch.float64)
        self.total += x.sum((0, 2, 3))
        self.squares += x.square().sum((0, 2, 3))
        self.count += x.numel() // x.shape[1]

    def result(self) -> tuple[list[float], list[float]]:
        mean = self.total / self.count
        var = (self.squares / self.count - mean.square()).clamp_min(0) * (self.count / max(self.count - 1, 1))
        return mean.tolist(), var.sqrt().tolist()


def channel_stats(images: torch.Tensor, chunk_values: int = 2**18) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of uint8 images (N, 3, H, W), in [0, 1] units, summed in float64 a chunk of about
    ``chunk_values`` values at a time: no float copy of the whole set (a 320 px set of 9,000 images would need 11 GB
    as float32)."""
    moments = ChannelMoments(images.shape[1])
    rows = max(1, chunk_values // max(images[0].numel(), 1))
    for start in range(0, len(images), rows):
        moments.add(images[start:start + rows].to(torch.float64).div_(255))
    return moments.result()


def random_crop(images: torch.Tensor, padding: int, g: torch.Generator, mode: str = "zero",
                share: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """Pad each image by ``padding`` -- zeros, or with ``mode="reflect"`` its mirrored border -- and crop it back at a
    random offset; (B, C, H, W) -> (B, C, H, W). ``share`` = (rank, world): the offsets are drawn for the global batch
    of ``B * world`` images and rank's places ``rank::world`` kept (:meth:`ShardedBatches._indices`)."""
    if padding <= 0:
        return images
    B, C, H, W = images.shape
    if mode == "reflect":  # reflection needs a float tensor; uint8 values survive the round trip exactly
        padded = F.pad(images.float(), (padding,) * 4, mode="reflect").to(images.dtype)  # (B, C, H + 2p, W + 2p)
    else:
        padded = F.pad(images, (padding,) * 4)  # (B, C, H + 2p, W + 2p)
    device = images.device
    rank, world = share
    offsets = torch.randint(0, 2 * padding + 1, (B * world, 2), generator=g)[rank::world]  # (B, 2)
    offsets = offsets.to(device, non_blocking=True)
    rows = offsets[:, 0, None] + torch.arange(H, device=device)  # (B, H)
    cols = offsets[:, 1, None] + torch.arange(W, device=device)  # (B, W)
    batch = torch.arange(B, device=device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)  # (B, C, H, W)


def random_hflip(images: torch.Tensor, g: torch.Generator, share: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """Flip each image (B, C, H, W) left-right with probability 1/2; ``share`` as for :func:`random_crop`."""
    rank, world = share
    flip = (torch.rand(images.shape[0] * world, generator=g)[rank::world] < 0.5).to(images.device,
                                                                                      non_blocking=True)  # (B,)
    return torch.where(flip[:, None, None, None], images.flip(-1), images)


def random_resized_crops(images: torch.Tensor, size: tuple[int, int], scale: tuple[float, float],
                         seed: int, share: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """A random-resized crop of each image (torchvision's RandomResizedCrop draws: area a fraction in ``scale`` of the
    image's, aspect ratio in [3/4, 4/3]) resampled to ``size`` by :func:`resize_batch`; the draws seeded by ``seed``,
    made for the global batch and shared out as ``share`` says (:func:`random_crop`). Windows of one shape are
    resampled together. Float (B, C, H, W) -> (B, C, *size)."""
    from torchvision.transforms import v2

    rank, world = share
    with torch.random.fork_rng(devices=[]):  # torchvision draws from the global generator
        torch.manual_seed(seed)
        boxes = [v2.RandomResizedCrop.get_params(images[0], list(scale), [3 / 4, 4 / 3])
                 for _ in range(len(images) * world)][rank::world]  # every image of a batch has one size
    by_shape: dict[tuple[int, int], list[int]] = {}
    for index, (_, _, h, w) in enumerate(boxes):
        by_shape.setdefault((h, w), []).append(index)
    out = images.new_empty(*images.shape[:2], *size)  # (B, C, *size)
    for (h, w), indices in by_shape.items():
        windows = torch.stack([images[i, :, boxes[i][0]:boxes[i][0] + h, boxes[i][1]:boxes[i][1] + w]
                               for i in indices])  # (n, C, h, w)
        out[indices] = resize_batch(windows, size)
    return out


def resize_batch(images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Float images (B, C, H, W) to ``size`` with anti-aliased bicubic interpolation (identity at the same size)."""
    if tuple(images.shape[-2:]) == tuple(size):
        return images
    return F.interpolate(images, size=size, mode="bicubic", align_corners=False, antialias=True)


class SizeSchedule:
    """Training sizes ``img_sizes`` (an int for a square, or (h, w)) over the epochs: with ``size_epochs`` (one count per size) each size
    for its count of epochs in turn (progressive resizing), the last one after the schedule ends."""

    def __init__(self, img_sizes: tuple | list, size_epochs: tuple | list = ()) -> None:
        self.img_sizes = [(size, size) if isinstance(size, int) else tuple(size) for size in img_sizes]  # (h, w)
        if size_epochs and len(size_epochs) != len(self.img_sizes):
            raise ValueError(f"size_epochs {list(size_epochs)} needs one epoch count per image size {self.img_sizes}")
        self.phase_ends = list(itertools.accumulate(size_epochs))  # the epoch at which each size's phase ends

    def of_epoch(self, epoch: int) -> tuple[int, int]:
        return self.img_sizes[min(bisect.bisect_right(self.phase_ends, epoch), len(self.img_sizes) - 1)]


class ShardedBatches:
    """Seeded, resumable, DDP-sharded batching over a data set of ``len(data)`` examples; subclasses build batches.

    Training shuffles every epoch (permutation seeded by ``(seed, epoch)``) and drops the last partial batch; evaluation
    keeps order and every example. ``rank``/``world`` give each DDP rank a disjoint shard.
    """

    def __init__(self, data, batch_size: int, *, train: bool, seed: int = 0, rank: int = 0, world: int = 1,
                 device: torch.device | str = "cpu") -> None:
        if len(data) == 0:
            raise ValueError("the data set is empty")
        self.data, self.batch_size, self.train, self.seed = data, batch_size, train, seed
        self.rank, self.world = rank, world
        self.device = torch.device(device)
        per_rank = len(data) // world if train else -(-len(data) // world)
        self.steps = per_rank // batch_size if train else -(-per_rank // batch_size)
        if self.steps == 0:
            raise ValueError(f"{len(data)} examples give no full batch of {batch_size} per rank ({world} ranks); "
                             f"lower train.batch_size")

    def __len__(self) -> int:
        return self.steps

    def _indices(self, epoch: int) -> torch.Tensor:
        n = len(self.data)
        if not self.train:
            return torch.arange(n)[self.rank::self.world]
        order = torch.randperm(n, generator=torch.Generator().manual_seed(step_seed(self.seed, epoch, -1)))
        per_rank = n // self.world
        return order[: per_rank * self.world].view(per_rank, self.world)[:, self.rank]  # (per_rank,)

    def epoch(self, epoch: int = 0, start_step: int = 0) -> Iterator[tuple]:
        indices = self._indices(epoch)
        for step in range(start_step, self.steps):
            idx = indices[step * self.batch_size:(step + 1) * self.batch_size]
            yield self.batch(idx, epoch, step)

    def batch(self, idx: torch.Tensor, epoch: int, step: int) -> tuple:
        raise NotImplementedError


class BatchLoader(ShardedBatches):
    """Iterate over ``data`` in batches of float images (B, 3, S, S), normalised, plus labels (B,).

    Training loaders augment (random crop with padding, horizontal flip, optional RandAugment) at the images' native
    size, then resample the batch (anti-aliased bicubic) to its training size; with ``crop_scale`` a random-resized
    crop replaces the padded one and resamples each image straight to the training size. ``img_sizes`` holds sizes
    (an int for a square, or (h, w)); with more than one entry training draws one size per batch (multi-resolution),
    or, with ``size_epochs`` (one count per size), trains ``size_epochs[i]`` epochs at ``img_sizes[i]`` in turn
    (progressive resizing). ``resident``: the images are moved to ``device`` once and augmented there (see the
    module's notes); the batches are the same as without.
    """

    def __init__(self, data: ImageSet, batch_size: int, *, train: bool, mean: list[float], std: list[float],
                 seed: int = 0, img_sizes: tuple | list = (32,), size_epochs: tuple | list = (),
                 crop_padding: int = 4, crop_pad_mode: str = "zero", hflip: bool = True, randaugment: str = "",
                 crop_scale: tuple | list = (), rank: int = 0, world: int = 1,
                 device: torch.device | str = "cpu", resident: bool = False) -> None:
        super().__init__(data, batch_size, train=train, seed=seed, rank=rank, world=world, device=device)
        where = self.device if resident else data.images.device
        self.images, self.labels = data.images.to(where), data.labels.to(where)  # (N, 3, H, W) uint8, (N,)
        self.mean = torch.tensor(mean, device=self.device).view(1, -1, 1, 1)  # (1, C, 1, 1)
        self.std = torch.tensor(std, device=self.device).view(1, -1, 1, 1)
        self.sizes = SizeSchedule(img_sizes, size_epochs)
        self.img_sizes = self.sizes.img_sizes  # (h, w) each
        self.crop_padding, self.crop_pad_mode, self.hflip = crop_padding, crop_pad_mode, hflip
        self.crop_scale = tuple(crop_scale)  # empty: the padded crop; else a random-resized crop of this area range
        self.randaugment = _build_randaugment(randaugment) if train and randaugment else None

    def batch(self, idx: torch.Tensor, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = idx.to(self.images.device, non_blocking=True)
        images, labels = self.images[idx], self.labels[idx]  # (B, 3, H, W) uint8, (B,)
        size = self.img_sizes[0]
        if self.train:
            # crops, flips and the size drawn for the global batch, the same on every rank, and this rank's share
            # kept: a step's views are those of one process with the global batch (RandAugment's draws, made image by
            # image, stay the rank's own: data.loader=stream makes them rank-independent too)
            share = (self.rank, self.world)
            g = torch.Generator().manual_seed(step_seed(self.seed, epoch, step, salt=1))
            images = random_crop(images, self.crop_padding, g, self.crop_pad_mode, share)
            if self.hflip:
                images = random_hflip(images, g, share)
            if self.randaugment is not None:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(step_seed(self.seed, epoch, step, salt=10_000 + self.rank))
                    images = torch.stack([self.randaugment(img) for img in images])
            size = self.size_of_epoch(epoch) if self.sizes.phase_ends else \
                self.img_sizes[int(torch.randint(len(self.img_sizes), (1,), generator=g))]
        x = images.to(self.device, non_blocking=True).to(torch.float32, copy=True)  # (B, 3, H, W), our own copy:
        x.div_(255).sub_(self.mean).div_(self.std)  # normalised in place, the same arithmetic at a third of the time
        if self.train and self.crop_scale:  # the crop and the resampling to the training size in one
            seed = step_seed(self.seed, epoch, step, salt=20_000)
            x = random_resized_crops(x, size, self.crop_scale, seed, (self.rank, self.world))
        return resize_batch(x, size), labels.to(self.device, non_blocking=True)

    def as_evaluated(self, size: tuple[int, int], batch_size: int) -> BatchLoader:
        """Every image of this loader's data set as evaluation sees it -- in order, without augmentation, resampled to
        ``size`` and normalised alike -- on every rank (not sharded), for statistics that every rank must agree on."""
        return BatchLoader(self.data, batch_size, train=False, mean=self.mean.flatten().tolist(),
                           std=self.std.flatten().tolist(), img_sizes=[size], device=self.device)

    def size_of_epoch(self, epoch: int) -> tuple[int, int]:
        """The training size of ``epoch`` under ``size_epochs`` (the last size after the schedule ends)."""
        return self.sizes.of_epoch(epoch)


def _build_randaugment(spec: str):
    """``"rand-m9-n2"`` -> torchvision RandAugment(num_ops=2, magnitude=9)."""
    from torchvision.transforms import v2

    parts = dict((p[0], p[1:]) for p in spec.split("-")[1:] if p)
    if not spec.startswith("rand") or not set(parts) <= {"m", "n"}:
        raise ValueError(f"data.randaugment {spec!r} is not of the form rand-m<magnitude>-n<ops> (e.g. rand-m9-n2)")
    return v2.RandAugment(num_ops=int(parts.get("n", 2)), magnitude=int(parts.get("m", 9)))
