"""Batches decoded and augmented image by image in DataLoader worker processes (``data.loader: stream``), for data
that does not fit in memory: an image folder or webdataset shards (:mod:`vitpe.data.stream_index`).

What it keeps from the in-memory loader (:class:`vitpe.data.loader.BatchLoader`), through the same
:class:`~vitpe.data.loader.ShardedBatches` base:

- the epoch's order is a permutation seeded by ``(seed, epoch)``; step ``s`` of rank ``r`` of ``world`` takes the
  permutation's places ``s * B * world + j * world + r`` (``B`` the per-rank batch): the global batch of a step is the
  same images on any number of ranks, and training drops the last partial global batch (``N // (B * world)`` steps);
  evaluation keeps every image, in order, each rank a strided share;
- a step is reproducible on its own: an image's view is drawn from a generator seeded by the run's seed, the epoch and
  the image's place in the permutation (:mod:`vitpe.data.stream_views`), and a batch's size from one seeded by the
  step -- never by the rank or the worker -- so a resumed run (``epoch(e, start_step)``) draws the batches it would
  have drawn, on any number of ranks and workers;
- progressive and multi-resolution sizes (``img_sizes``, ``size_epochs``) as there.

Workers return uint8 images (a quarter of the bytes of floats through the workers' queue); the main process
normalises the batch on the training device, through pinned memory and a one-batch prefetch on a side stream on CUDA.
An unreadable image stops the run with one line naming it (``skip_unreadable``: it is left out of its batch and
counted); a worker that dies is named in one line, never a hang.
"""

from __future__ import annotations

import signal
import sys
from typing import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from vitpe.data.datasets import UNREADABLE, DataError, open_image, unreadable
from vitpe.data.loader import ChannelMoments, ShardedBatches, SizeSchedule, step_seed
from vitpe.data.stream_index import SampleIndex
from vitpe.data.stream_views import EvalView, TrainView

#: Salts that keep the draws of a sample's view and of a batch's size apart from each other and from the in-memory
#: loader's.
VIEW_SALT, SIZE_SALT = 30_000, 40_000


class Selection(SampleIndex):
    """The samples ``numbers`` of ``index``, in that order (a limit or a held-out split)."""

    def __init__(self, index: SampleIndex, numbers: np.ndarray) -> None:
        self.index, self.numbers = index, np.asarray(numbers, dtype=np.int64)
        self.labels = index.labels[self.numbers]
        self.classes, self.class_names = index.classes, index.class_names

    def read(self, i: int) -> bytes:
        return self.index.read(int(self.numbers[i]))

    def name(self, i: int) -> str:
        return self.index.name(int(self.numbers[i]))


class Views(Dataset):
    """A sample's view for an item ``(sample, seed, (h, w))`` of the batch sampler: ``(uint8 (3, h, w) or None,
    label, error)`` -- an unreadable image gives ``None`` and its one-line message, so the main process decides."""

    def __init__(self, index: SampleIndex, view) -> None:
        self.index, self.view = index, view

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, item: tuple[int, int, tuple[int, int]]):
        i, seed, size = item
        label = int(self.index.labels[i])
        try:
            return self.view(open_image(self.index.read(i)), size, seed), label, ""
        except DataError as err:  # the file could not be read (named)
            return None, label, str(err)
        except UNREADABLE as err:  # not a whole image: named only now (a name costs a path join)
            return None, label, str(unreadable(self.index.name(i), err))


def collate(samples: list, stack: bool = True) -> tuple[torch.Tensor | list[torch.Tensor], torch.Tensor, list[str]]:
    """(uint8 images (b, 3, h, w) of the readable samples -- with ``stack=False`` a list of (3, h, w), of any sizes
    --, their labels (b,), the unreadable ones' messages)."""
    kept = [(x, y) for x, y, error in samples if x is not None]
    errors = [error for x, _, error in samples if x is None]
    images, labels = [x for x, _ in kept], torch.tensor([y for _, y in kept], dtype=torch.long)
    if not stack:
        return images, labels, errors
    return (torch.stack(images) if images else torch.empty(0, dtype=torch.uint8)), labels, errors


class EpochSteps(Sampler):
    """The batch sampler: the items of steps ``start``.. of ``epoch`` (both set before each pass), from ``plan``."""

    def __init__(self, plan: "StreamLoader") -> None:
        self.plan, self.epoch, self.start = plan, 0, 0

    def __iter__(self) -> Iterator[list]:
        indices = self.plan._indices(self.epoch)
        for step in range(self.start, self.plan.steps):
            yield self.plan.items(indices, self.epoch, step)

    def __len__(self) -> int:
        return self.plan.steps - self.start


class StreamLoader(ShardedBatches):
    """Float images (B, 3, h, w), normalised, and labels (B,) from ``index``, decoded by ``workers`` processes (0:
    in this process). ``view``: a :class:`TrainView` for training; by default the centred square (:class:`EvalView`).
    ``img_sizes`` / ``size_epochs`` as for :class:`~vitpe.data.loader.BatchLoader`."""

    collate = staticmethod(collate)  # the workers' samples -> a batch

    def __init__(self, index: SampleIndex, batch_size: int, *, train: bool, mean: list[float], std: list[float],
                 seed: int = 0, img_sizes: tuple | list = (32,), size_epochs: tuple | list = (),
                 view: TrainView | None = None, workers: int = 0, skip_unreadable: bool = False, rank: int = 0,
                 world: int = 1, device: torch.device | str = "cpu") -> None:
        super().__init__(index, batch_size, train=train, seed=seed, rank=rank, world=world, device=device)
        self.index, self.workers, self.skip_unreadable = index, workers, skip_unreadable
        self.sizes = SizeSchedule(img_sizes, size_epochs)
        self.img_sizes = self.sizes.img_sizes  # (h, w) each
        self.mean = torch.tensor(mean, device=self.device).view(1, -1, 1, 1)  # (1, C, 1, 1)
        self.std = torch.tensor(std, device=self.device).view(1, -1, 1, 1)
        self._shift, self._scale = self.mean * 255, self.std * 255  # (1, C, 1, 1): uint8 units
        self.view = view if view is not None else EvalView()
        self.sampler = EpochSteps(self)
        self.loader = DataLoader(Views(index, self.view), batch_sampler=self.sampler, num_workers=workers,
                                 collate_fn=type(self).collate, pin_memory=self.device.type == "cuda",
                                 worker_init_fn=ignore_stop_signals if workers else None,
                                 persistent_workers=False)  # workers forked per pass: none inherits another's

    def size_of_step(self, epoch: int, step: int) -> tuple[int, int]:
        """The training size of a step: the epoch's under ``size_epochs``, else one of ``img_sizes`` drawn by the
        step (the same on every rank)."""
        if not self.train:
            return self.img_sizes[0]
        if self.sizes.phase_ends or len(self.img_sizes) == 1:
            return self.size_of_epoch(epoch)
        g = torch.Generator().manual_seed(step_seed(self.seed, epoch, step, salt=SIZE_SALT))
        return self.img_sizes[int(torch.randint(len(self.img_sizes), (1,), generator=g))]

    def size_of_epoch(self, epoch: int) -> tuple[int, int]:
        return self.sizes.of_epoch(epoch)

    def step_span(self, epoch: int, step: int) -> tuple[int, int]:
        """Where the rank's images of a step start in its share of the epoch's permutation, and how many there are."""
        return step * self.batch_size, self.batch_size

    def items(self, indices: torch.Tensor, epoch: int, step: int) -> list[tuple[int, int, tuple[int, int]]]:
        """The sampler's items of one step: (sample, the seed of its view, the step's size) per image."""
        size = self.size_of_step(epoch, step)
        first, count = self.step_span(epoch, step)
        chosen = indices[first:first + count].tolist()
        places = ((first + j) * self.world + self.rank for j in range(len(chosen)))  # in the epoch's permutation
        return [(i, step_seed(self.seed, epoch, place, salt=VIEW_SALT), size) for i, place in zip(chosen, places)]

    def epoch(self, epoch: int = 0, start_step: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self.sampler.epoch, self.sampler.start = epoch, start_step
        batches = self._normalised(self._checked(iter(self.loader)))
        yield from _prefetched(batches, self.device) if self.device.type == "cuda" else batches

    def _checked(self, batches: Iterator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches with unreadable images stopped on (or, with ``skip_unreadable``, left out and counted); a worker
        that dies becomes one line."""
        skipped = 0
        while True:
            try:
                images, labels, errors = next(batches)
            except StopIteration:
                break
            except (RuntimeError, ConnectionError, EOFError) as err:  # a worker died, or died sending a batch
                if (line := worker_death(err)) is None:
                    raise
                raise DataError(line) from None
            if errors and not self.skip_unreadable:
                raise DataError(errors[0])
            skipped += len(errors)
            if not len(labels):
                raise DataError(f"every image of a batch is unreadable, e.g. {errors[0]}")
            yield images, labels
        if skipped:
            print(f"vitpe: skipped {skipped} unreadable image(s) in this pass over {len(self.index)} "
                  f"(data.skip_unreadable)", file=sys.stderr, flush=True)

    def _normalised(self, batches: Iterator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels in batches:
            yield self.normalised(images), labels.to(self.device, non_blocking=True)

    def normalised(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, 3, h, w) -> float32 on the device, normalised (two passes over them)."""
        x = images.to(self.device, non_blocking=True).to(torch.float32)
        return x.sub_(self._shift).div_(self._scale)

    def as_evaluated(self, size: tuple[int, int], batch_size: int) -> "StreamLoader":
        """Every image of this loader's index as evaluation sees it, on every rank (not sharded): see
        :meth:`vitpe.data.loader.BatchLoader.as_evaluated`."""
        return StreamLoader(self.index, batch_size, train=False, mean=self.mean.flatten().tolist(),
                            std=self.std.flatten().tolist(), img_sizes=[size], workers=self.workers,
                            view=EvalView(draft=getattr(self.view, "draft", False)),
                            skip_unreadable=self.skip_unreadable, device=self.device)


def ignore_stop_signals(worker_id: int) -> None:
    """A worker ignores SIGTERM and SIGINT: a scheduler or Ctrl-C signals the whole process group, and the training
    process, not its workers, decides when to stop (after its step, with a checkpoint); the workers end with it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_death(err: BaseException) -> str | None:
    """The one line for torch's error about a DataLoader worker that died or was killed (raised where the main
    process is when it learns of it), else None."""
    text = str(err)
    if isinstance(err, (ConnectionError, EOFError)):  # the batch it was sending broke off
        text = f"the connection to a DataLoader worker broke off ({type(err).__name__}: {err})"
    elif not isinstance(err, RuntimeError) or not text.startswith("DataLoader worker"):
        return None
    hint = " (the out-of-memory killer's signal: lower data.workers or the batch size)" if "Killed" in text else ""
    return (f"a data-loading worker stopped: {text.splitlines()[0].strip()}{hint}; the last checkpoint is intact, "
            f"--resume continues from it")


def _prefetched(batches: Iterator, device: torch.device) -> Iterator:
    """``batches`` with the next one's copy and normalisation queued on a side CUDA stream while this one trains."""
    stream = torch.cuda.Stream(device)
    nxt = None
    iterator = iter(batches)

    def queue():
        with torch.cuda.stream(stream):
            return next(iterator, None)

    nxt = queue()
    while nxt is not None:
        torch.cuda.current_stream(device).wait_stream(stream)
        for part in nxt:  # images (a tensor, or a list of them at native aspect), labels
            for tensor in part if isinstance(part, list) else [part]:
                tensor.record_stream(torch.cuda.current_stream(device))
        current, nxt = nxt, queue()
        yield current


def stream_channel_stats(index: SampleIndex, size: int, workers: int, sample: int = 2000,
                         seed: int = 0) -> tuple[list[float], list[float]]:
    """Per-channel mean and std (in [0, 1] units) of the centred-square views at ``size`` px of a seeded sample of
    ``sample`` images (all when fewer): the normalisation of a stream run."""
    n = len(index)
    chosen = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:sample].sort().values
    picked = Selection(index, chosen.numpy())
    loader = StreamLoader(picked, 100, train=False, mean=[0.0] * 3, std=[1.0] * 3, img_sizes=[size],
                          workers=workers)
    moments = ChannelMoments()
    for x, _ in loader.epoch():  # (B, 3, h, w) in [0, 1]
        moments.add(x)
    return moments.result()
