"""Photographs at their native aspect, many resolutions to a batch: views sized by tokens, batches by a token budget.

Training (``data.native_aspect: true``, on the stream loader): every step draws a sequence length L from
``data.seq_lens``; the step's batch holds ``data.token_budget // L`` images, and each image's view -- a random-resized
crop that keeps the photograph's aspect up to a factor in [3/4, 4/3] (``data.crop_scale``; else the whole
photograph), flipped, RandAugment where set -- is resampled to the largest patch grid (gh, gw) of at most L cells whose
shape is closest to the crop's (:func:`grid_within`). So the images of one batch have different grids (the model
takes them as a list: :mod:`vitpe.pe.mixed`), and every batch about the same number of tokens.

An epoch is a seeded shuffle of the same steps: each length in ``seq_lens`` the same number of times, as many rounds
as the rank's share of the images holds (the images left over are dropped, as a partial batch is), so every epoch has
the same number of steps (the schedulers count on it), every length gets the same share of the training tokens, and a
step's images follow from the step's place alone (exact resume, any number of workers and ranks).

Evaluation: the whole photograph resampled to a short side of S pixels and a long side of the nearest multiple of the
patch to S times its aspect (:func:`grid_at_short_side`), in batches of a fixed number of images.
"""

from __future__ import annotations

import functools
import math
import random
from typing import Any, Sequence

import numpy as np
import torch

from vitpe.data.loader import step_seed
from vitpe.data.stream_index import SampleIndex
from vitpe.data.stream_loader import SIZE_SALT, StreamLoader, collate
from vitpe.data.stream_views import RATIO, loaded, resized, seeded_generators, to_tensor

Spec = tuple[str, int]  # ("tokens", L): the largest grid of at most L cells; ("short", S): a short side of S px


def grid_within(height: float, width: float, tokens: int) -> tuple[int, int]:
    """The largest patch grid (gh, gw) of at most ``tokens`` cells that is the photograph's shape scaled and rounded:
    one side counted, the other ``round(side * aspect)`` (so neither is off by more than half a patch); of equal
    counts, the shape closest to ``width / height``. Every side is at least 1: an aspect past ``tokens``:1 gets one
    row or column of ``tokens`` cells."""
    if tokens < 1 or height <= 0 or width <= 0:
        raise ValueError(f"a grid needs a positive size and token count; got {height}x{width}, {tokens} tokens")
    aspect = width / height
    candidates = [(gh, max(1, round(gh * aspect))) for gh in range(1, tokens + 1)]
    candidates += [(max(1, round(gw / aspect)), gw) for gw in range(1, tokens + 1)]
    fitting = [(gh, gw) for gh, gw in candidates if gh * gw <= tokens]
    if not fitting:  # an aspect past tokens:1
        return (1, tokens) if aspect > 1 else (tokens, 1)
    return max(fitting, key=lambda g: (g[0] * g[1], -abs(math.log(g[1] / g[0] / aspect))))


def grid_at_short_side(height: float, width: float, short: int, patch: int) -> tuple[int, int]:
    """The patch grid of a photograph resampled to a short side of ``short`` px (a multiple of ``patch``), its long
    side the nearest multiple of the patch to ``short`` times its aspect."""
    if short % patch:
        raise ValueError(f"the short side {short} px is not a multiple of the patch size {patch}")
    side = short // patch
    if height <= width:
        return side, max(side, round(side * width / height))
    return max(side, round(side * height / width)), side


class NativeAspectView:
    """One image's view at its native aspect, as uint8 (3, gh * patch, gw * patch), for a ``Spec``; see the module's
    notes. ``crop_scale`` (training): the crop's area as a fraction of the photograph; ``()``: the whole photograph."""

    def __init__(self, patch: int, *, train: bool, crop_scale: Sequence[float] = (), hflip: bool = True,
                 randaugment: str = "", draft: bool = False) -> None:
        from vitpe.data.loader import _build_randaugment

        self.patch, self.train, self.crop_scale, self.hflip, self.draft = patch, train, tuple(crop_scale), hflip, draft
        self.randaugment = _build_randaugment(randaugment) if randaugment and train else None

    def __call__(self, image, spec: Spec, seed: int) -> torch.Tensor:
        from PIL import Image

        width, height = image.size
        with seeded_generators(seed, torch_too=self.randaugment is not None):
            box = self.crop_box(width, height) if self.train and self.crop_scale else (0, 0, width, height)
            crop_w, crop_h = box[2] - box[0], box[3] - box[1]
            kind, amount = spec
            grid = grid_within(crop_h, crop_w, amount) if kind == "tokens" else \
                grid_at_short_side(crop_h, crop_w, amount, self.patch)
            size = (grid[0] * self.patch, grid[1] * self.patch)
            image, box = loaded(image, box, size, self.draft)
            view = resized(image, size, box)
            if self.train and self.hflip and random.random() < 0.5:
                view = view.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            x = to_tensor(view)  # (3, gh * p, gw * p)
            if self.randaugment is not None:
                x = self.randaugment(x)
        return x

    def crop_box(self, width: int, height: int) -> tuple[int, int, int, int]:
        """A random crop (left, top, right, bottom): its area a fraction in ``crop_scale`` of the photograph's, its
        aspect the photograph's times a factor in [3/4, 4/3] (log-uniform); ten draws, else the whole photograph."""
        area, aspect = width * height, width / height
        low, high = math.log(RATIO[0]), math.log(RATIO[1])
        for _ in range(10):
            target = area * random.uniform(*self.crop_scale)
            ratio = aspect * math.exp(random.uniform(low, high))
            w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
            if 0 < w <= width and 0 < h <= height:
                left, top = random.randint(0, width - w), random.randint(0, height - h)
                return left, top, left + w, top + h
        return 0, 0, width, height


class TokenBudgetLoader(StreamLoader):
    """Batches of float images at their native aspect, as lists of (3, h, w) tensors of different sizes (normalised),
    and labels (B,). Training: a step of sequence length L holds ``token_budget // L`` images per rank (see the
    module's notes). Evaluation: ``batch_size`` images a step, each at the short side ``short_side``
    (:func:`native_evaluation` builds one)."""

    collate = staticmethod(functools.partial(collate, stack=False))  # a list: the images' sizes differ

    def __init__(self, index: SampleIndex, *, train: bool, view: NativeAspectView, mean: list[float],
                 std: list[float], seq_lens: Sequence[int] = (), token_budget: int = 0, batch_size: int = 0,
                 short_side: int = 0, seed: int = 0, workers: int = 0, skip_unreadable: bool = False, rank: int = 0,
                 world: int = 1, device: torch.device | str = "cpu") -> None:
        self.seq_lens, self.token_budget, self.short_side = tuple(seq_lens), token_budget, short_side
        if train:
            if not self.seq_lens or min(self.seq_lens) < 1 or token_budget < max(self.seq_lens, default=1):
                raise ValueError(f"native-aspect training needs sequence lengths >= 1 and a token budget of at least "
                                 f"the longest (one image a batch); got seq_lens={list(self.seq_lens)}, "
                                 f"token_budget={token_budget}")
            self.batch_sizes = [token_budget // length for length in self.seq_lens]
            batch_size = min(self.batch_sizes)
        elif short_side < 1 or batch_size < 1:
            raise ValueError(f"native-aspect evaluation needs a short side and a batch size >= 1; got "
                             f"short_side={short_side}, batch_size={batch_size}")
        super().__init__(index, batch_size, train=train, mean=mean, std=std, seed=seed, view=view, workers=workers,
                         skip_unreadable=skip_unreadable, rank=rank, world=world, device=device,
                         img_sizes=[short_side or 32])  # evaluation: the (S, S) it says it tests at
        if train:
            per_rank = len(index) // world
            self.rounds = per_rank // sum(self.batch_sizes)
            if self.rounds == 0:
                raise ValueError(f"{per_rank} images per rank hold no round of the sequence lengths {list(seq_lens)} "
                                 f"(one batch of each: {sum(self.batch_sizes)} images); lower data.token_budget")
            self.steps = self.rounds * len(self.seq_lens)
        self._plan: tuple[int, np.ndarray, np.ndarray] | None = None  # (epoch, lengths, first images) of the last

    def lengths_of(self, epoch: int) -> np.ndarray:
        """The sequence length of each step of ``epoch``, a seeded shuffle of ``rounds`` copies of ``seq_lens``."""
        return self._epoch_plan(epoch)[0]

    def _epoch_plan(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """Each step's sequence length and where its images start in the rank's share of the permutation: drawn once
        an epoch (the sampler asks step by step)."""
        if self._plan is None or self._plan[0] != epoch:
            order = torch.randperm(self.steps, generator=torch.Generator().manual_seed(
                step_seed(self.seed, epoch, -1, salt=SIZE_SALT)))
            lengths = np.array(self.seq_lens * self.rounds)[order.numpy()]
            firsts = np.concatenate([[0], np.cumsum(self.token_budget // lengths)])  # (steps + 1,)
            self._plan = (epoch, lengths, firsts)
        return self._plan[1:]

    def step_span(self, epoch: int, step: int) -> tuple[int, int]:
        if not self.train:
            return super().step_span(epoch, step)
        firsts = self._epoch_plan(epoch)[1]
        return int(firsts[step]), int(firsts[step + 1] - firsts[step])

    def size_of_step(self, epoch: int, step: int) -> Spec:
        """The view of a step's images: ("tokens", L) in training, ("short", S) in evaluation."""
        return ("tokens", int(self.lengths_of(epoch)[step])) if self.train else ("short", self.short_side)

    def normalised(self, images: list[torch.Tensor]) -> list[torch.Tensor]:
        normalise = super().normalised  # of a batch (B, 3, h, w)
        return [normalise(image[None])[0] for image in images]  # (3, h, w) each

    def as_evaluated(self, size: tuple[int, int] | int, batch_size: int) -> "TokenBudgetLoader":
        """Every image at its native aspect with the short side ``size`` (an int, or a square's (s, s)), on every
        rank (not sharded)."""
        return native_evaluation(self.index, size if isinstance(size, int) else size[0], batch_size,
                                 patch=self.view.patch, draft=self.view.draft, mean=self.mean.flatten().tolist(),
                                 std=self.std.flatten().tolist(), workers=self.workers,
                                 skip_unreadable=self.skip_unreadable, device=self.device)


def native_evaluation(index: SampleIndex, short_side: int, batch_size: int, *, patch: int, draft: bool = False,
                      **loader: Any) -> TokenBudgetLoader:
    """A loader of ``index``'s photographs at their own aspect, the short side at ``short_side`` px, ``batch_size``
    a step; ``loader``: the rest of :class:`TokenBudgetLoader`'s options (mean, std, workers, device, ...)."""
    return TokenBudgetLoader(index, train=False, batch_size=batch_size, short_side=short_side,
                             view=NativeAspectView(patch, train=False, draft=draft), **loader)
