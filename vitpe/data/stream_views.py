"""One image's view, as the stream loader's workers make it: encoded bytes in, uint8 (3, h, w) out.

Training (:class:`TrainView`): a random-resized crop of the photograph at its native aspect (torchvision's draws: area
a fraction in ``crop_scale``, aspect ratio in [3/4, 4/3]) resampled straight to the batch's size, or -- without
``crop_scale`` -- the centred square at that size with a padded random crop; then a horizontal flip and RandAugment
where configured. Evaluation (:class:`EvalView`): the centred square of the shortest side, resampled to the size, as
the in-memory path stores and resamples it. Resampling is PIL's bicubic with a box (crop and resize in one pass,
anti-aliased when shrinking).

Every random draw of a view comes from torch's generator seeded with the sample's own seed (its epoch and its place
in the epoch's permutation), inside :func:`torch.random.fork_rng`: an image gets the same view whichever worker, rank
or number of workers makes it, and the caller's generator is left as it was.
"""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F

from vitpe.data.datasets import DataError
from vitpe.data.loader import _build_randaugment

RATIO = (3 / 4, 4 / 3)  # the random-resized crop's aspect-ratio range (torchvision's and timm's default)


def decode(data: bytes, name: str):
    """The RGB PIL image encoded in ``data``; a :class:`DataError` naming ``name`` when it is not a readable image
    (truncated, not an image, too large)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        raise DataError(f"{name} is not a readable image ({type(err).__name__}: {err}); remove or replace it, or set "
                        f"data.skip_unreadable=true to skip such images with a count") from None


def centre_square_box(width: int, height: int) -> tuple[int, int, int, int]:
    """The (left, top, right, bottom) box of the centred square of the shortest side."""
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    return left, top, left + side, top + side


def to_tensor(image) -> torch.Tensor:
    """A PIL RGB image as uint8 (3, h, w)."""
    from torchvision.transforms.v2 import functional as TF

    return TF.pil_to_tensor(image)


def resized(image, size: tuple[int, int], box: tuple[int, int, int, int]):
    """The ``box`` of a PIL image resampled to ``size`` (h, w): bicubic, anti-aliased when shrinking."""
    from PIL import Image

    return image.resize((size[1], size[0]), Image.Resampling.BICUBIC, box=box)


class EvalView:
    """The centred square of the image, resampled to ``size`` (h, w)."""

    def __call__(self, image, size: tuple[int, int], seed: int) -> torch.Tensor:
        return to_tensor(resized(image, size, centre_square_box(*image.size)))


class TrainView:
    """A training view (see the module's notes): random-resized crop or padded crop, flip, RandAugment."""

    def __init__(self, crop_scale: tuple | list = (), crop_padding: int = 0, crop_pad_mode: str = "zero",
                 hflip: bool = True, randaugment: str = "") -> None:
        self.crop_scale = tuple(crop_scale)
        self.crop_padding, self.crop_pad_mode, self.hflip = crop_padding, crop_pad_mode, hflip
        self.randaugment = _build_randaugment(randaugment) if randaugment else None

    def __call__(self, image, size: tuple[int, int], seed: int) -> torch.Tensor:
        from torchvision.transforms import v2

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if self.crop_scale:
                top, left, h, w = v2.RandomResizedCrop.get_params(image, list(self.crop_scale), list(RATIO))
                x = to_tensor(resized(image, size, (left, top, left + w, top + h)))  # (3, *size)
            else:
                x = self.padded_crop(to_tensor(resized(image, size, centre_square_box(*image.size))))
            if self.hflip and bool(torch.rand(()) < 0.5):
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
