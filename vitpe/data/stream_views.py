"""One image's view, as the stream loader's workers make it: encoded bytes in, uint8 (3, h, w) out.

Training (:class:`TrainView`): a random-resized crop of the photograph at its native aspect (torchvision's draws: area
a fraction in ``crop_scale``, aspect ratio in [3/4, 4/3]) resampled straight to the batch's size, or -- without
``crop_scale`` -- the centred square at that size with a padded random crop; then a horizontal flip and RandAugment
where configured. Evaluation (:class:`EvalView`): the centred square of the shortest side, resampled to the size, as
the in-memory path stores and resamples it. Resampling is PIL's bicubic with a box (crop and resize in one pass,
anti-aliased when shrinking).

Every random draw of a view comes from generators seeded with the sample's own seed (its epoch and its place in the
epoch's permutation) and restored afterwards (:func:`seeded_generators`): an image gets the same view whichever
worker, rank or number of workers makes it, and the caller's generators are left as they were.
"""

from __future__ import annotations

import contextlib
import random
from typing import Iterator

import torch
import torch.nn.functional as F

from vitpe.data.datasets import as_rgb
from vitpe.data.loader import _build_randaugment

RATIO = (3 / 4, 4 / 3)  # the random-resized crop's aspect-ratio range (torchvision's and timm's default)


def loaded(image, box: tuple[int, int, int, int], size: tuple[int, int],
           draft: bool) -> tuple[object, tuple[int, int, int, int]]:
    """``image`` decoded as RGB, and ``box`` in its coordinates. With ``draft`` a JPEG is decoded at the smallest of
    its DCT scales (1/2, 1/4, 1/8) at which ``box`` still holds at least ``size`` pixels -- the decoder's own
    downscaling, several times less work when a view is much smaller than the photograph; resampling to ``size``
    follows as always."""
    if draft and image.format == "JPEG":
        width, height = image.size
        shrink = min((box[2] - box[0]) / size[1], (box[3] - box[1]) / size[0])  # how much larger the box is
        if shrink >= 2:
            image.draft("RGB", (max(1, int(width / shrink)), max(1, int(height / shrink))))
            fx, fy = image.size[0] / width, image.size[1] / height
            box = (box[0] * fx, box[1] * fy, box[2] * fx, box[3] * fy)
    return as_rgb(image), box


def centre_square_box(width: int, height: int) -> tuple[int, int, int, int]:
    """The (left, top, right, bottom) box of the centred square of the shortest side."""
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


def to_tensor(image) -> torch.Tensor:
    """A PIL RGB image as uint8 (3, h, w)."""
    from torchvision.transforms.v2 import functional as TF

    return TF.pil_to_tensor(image)


def resized(image, size: tuple[int, int], box: tuple[float, float, float, float]):
    """The ``box`` of a PIL image resampled to ``size`` (h, w): bicubic, anti-aliased when shrinking."""
    from PIL import Image

    return image.resize((size[1], size[0]), Image.Resampling.BICUBIC, box=box)


@contextlib.contextmanager
def seeded_generators(seed: int, torch_too: bool) -> Iterator[None]:
    """Inside the block Python's ``random`` (which timm's crop draws from) and, with ``torch_too``, torch's CPU
    generator (RandAugment's, the padded crop's) are seeded with ``seed``; after it, both are as they were.
    (``torch.manual_seed`` would seed every device's generator too, at 100x the cost: a tenth of a millisecond per
    image.)"""
    state = random.getstate()
    random.seed(seed)
    generator = torch.default_generator
    torch_state = generator.get_state() if torch_too else None
    if torch_too:
        generator.manual_seed(seed)
    try:
        yield
    finally:
        random.setstate(state)
        if torch_state is not None:
            generator.set_state(torch_state)


class EvalView:
    """The centred square of the image, resampled to ``size`` (h, w). ``draft``: see :func:`loaded`."""

    def __init__(self, draft: bool = False) -> None:
        self.draft = draft

    def __call__(self, image, size: tuple[int, int], seed: int) -> torch.Tensor:
        image, box = loaded(image, centre_square_box(*image.size), size, self.draft)
        return to_tensor(resized(image, size, box))


class TrainView:
    """A training view (see the module's notes): random-resized crop or padded crop, flip, RandAugment. ``draft``:
    see :func:`loaded`."""

    def __init__(self, crop_scale: tuple | list = (), crop_padding: int = 0, crop_pad_mode: str = "zero",
                 hflip: bool = True, randaugment: str = "", draft: bool = False) -> None:
        self.crop_scale = tuple(crop_scale)
        self.crop_padding, self.crop_pad_mode, self.hflip = crop_padding, crop_pad_mode, hflip
        self.randaugment = _build_randaugment(randaugment) if randaugment else None
        self.draft = draft

    def __call__(self, image, size: tuple[int, int], seed: int) -> torch.Tensor:
        from PIL import Image
        from timm.data.transforms import RandomResizedCropAndInterpolation

        with seeded_generators(seed, torch_too=not self.crop_scale or self.randaugment is not None):
            if self.crop_scale:  # timm's draws (torchvision's, from Python's random: a third of the time)
                top, left, h, w = RandomResizedCropAndInterpolation.get_params(image, self.crop_scale, RATIO)
                image, box = loaded(image, (left, top, left + w, top + h), size, self.draft)
                view = resized(image, size, box)
                if self.hflip and random.random() < 0.5:
                    view = view.transpose(Image.Transpose.FLIP_LEFT_RIGHT)  # PIL's flip: faster than a tensor's
                x = to_tensor(view)  # (3, *size)
            else:
                image, box = loaded(image, centre_square_box(*image.size), size, self.draft)
                x = self.padded_crop(to_tensor(resized(image, size, box)))
                if self.hflip and random.random() < 0.5:
                    x = x.flip(-1)
            if self.randaugment is not None:
                x = self.randaugment(x)
        return x

    def padded_crop(self, x: torch.Tensor) -> torch.Tensor:
        """Pad ``x`` (3, h, w) by ``crop_padding`` (zeros or its mirrored border) and crop it back at a random
        offset."""
        p = self.crop_padding
        if p <= 0:
            return x
        h, w = x.shape[-2:]
        if self.crop_pad_mode == "reflect":  # reflection needs floats; uint8 values survive the round trip exactly
            padded = F.pad(x[None].float(), (p,) * 4, mode="reflect")[0].to(x.dtype)  # (3, h + 2p, w + 2p)
        else:
            padded = F.pad(x, (p,) * 4)
        top, left = (int(v) for v in torch.randint(0, 2 * p + 1, (2,)))
        return padded[:, top:top + h, left:left + w]
