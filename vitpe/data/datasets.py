"""Data sets as whole in-memory uint8 tensors: CIFAR-10/100 (original python layout), synthetic (image folders and
Imagenette: :mod:`vitpe.data.image_folder`).

Every loader returns an :class:`ImageSet`: ``images`` uint8 (N, 3, H, W), ``labels`` int64 (N,), class names.
Missing or corrupt data is a :class:`DataError` that says what is wrong and where the files should go.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitpe.data.safe_pickle import load_array_pickle


class DataError(RuntimeError):
    """A data set is missing or unreadable."""


@dataclass
class ImageSet:
    images: torch.Tensor  # (N, 3, H, W) uint8
    labels: torch.Tensor  # (N,) int64
    classes: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    def limit(self, n: int) -> "ImageSet":
        """The first ``n`` images (all when ``n`` is 0)."""
        return self if n <= 0 else ImageSet(self.images[:n], self.labels[:n], self.classes)

    def split(self, n_holdout: int) -> tuple["ImageSet", "ImageSet"]:
        """(rest, last ``n_holdout`` images): a deterministic validation split carved from the end."""
        cut = len(self) - n_holdout
        if n_holdout <= 0 or cut <= 0:
            raise DataError(f"cannot hold out {n_holdout} of {len(self)} images")
        return (ImageSet(self.images[:cut], self.labels[:cut], self.classes),
                ImageSet(self.images[cut:], self.labels[cut:], self.classes))


CIFAR = {
    "cifar10": dict(folder="cifar-10-batches-py", train=[f"data_batch_{i}" for i in range(1, 6)], test=["test_batch"],
                    meta="batches.meta", names="label_names", labels="labels", torchvision="CIFAR10"),
    "cifar100": dict(folder="cifar-100-python", train=["train"], test=["test"], meta="meta",
                     names="fine_label_names", labels="fine_labels", torchvision="CIFAR100"),
}


def _read_pickle(path: Path) -> dict:
    try:
        return load_array_pickle(path.read_bytes())
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as err:
        raise DataError(f"{path} is corrupt or not a CIFAR pickle ({err}); delete the folder and download it again "
                        f"(python version from https://www.cs.toronto.edu/~kriz/cifar.html)") from None


def _ensure_cifar(root: Path, name: str) -> Path:
    spec = CIFAR[name]
    folder = root / spec["folder"]
    if folder.is_dir():
        return folder
    try:  # one attempt through torchvision, which also verifies the download
        import torchvision.datasets as tvd

        getattr(tvd, spec["torchvision"])(str(root), train=True, download=True)
    except Exception as err:  # noqa: BLE001 -- any failure (offline, permissions) becomes one clear message
        raise DataError(
            f"{name} not found: expected the python-version folder {folder} (set data.root or the VITPE_DATA "
            f"environment variable to the directory that contains {spec['folder']}/); downloading it failed too "
            f"({type(err).__name__}: {err})"
        ) from None
    return folder


def load_cifar(root: str | Path, name: str, split: str) -> ImageSet:
    """CIFAR-10 or CIFAR-100 ``split`` ("train" or "test") from ``root/<folder>/`` as uint8 tensors."""
    if name not in CIFAR:
        raise DataError(f"unknown CIFAR variant {name!r}; choose one of {list(CIFAR)}")
    spec = CIFAR[name]
    folder = _ensure_cifar(Path(root), name)
    images, labels = [], []
    for file in spec[split]:
        path = folder / file
        if not path.is_file():
            raise DataError(f"{name}: missing file {path}; the folder {folder} is incomplete")
        batch = _read_pickle(path)
        if "data" not in batch or spec["labels"] not in batch:
            raise DataError(f"{path} has no 'data'/'{spec['labels']}' entries: not a {name} batch")
        data = np.asarray(batch["data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(batch[spec["labels"]]) != len(data):
            raise DataError(f"{path}: expected data of shape (N, 3072) with N labels, got {data.shape}")
        images.append(torch.from_numpy(data.reshape(-1, 3, 32, 32).copy()))  # (N, 3072) -> (N, 3, 32, 32)
        labels.append(torch.as_tensor(batch[spec["labels"]], dtype=torch.long))
    meta_path = folder / spec["meta"]
    classes = [c.decode() if isinstance(c, bytes) else str(c) for c in _read_pickle(meta_path)[spec["names"]]] \
        if meta_path.is_file() else [str(i) for i in range(int(torch.cat(labels).max()) + 1)]
    return ImageSet(torch.cat(images), torch.cat(labels), classes)


UNREADABLE = (OSError, ValueError, SyntaxError)  # what PIL raises for a file that is not a whole image


def unreadable(name: str, err: BaseException) -> DataError:
    """The one line for an image that cannot be read."""
    return DataError(f"{name} is not a readable image ({type(err).__name__}: {err}); remove or replace it, or set "
                     f"data.skip_unreadable=true to skip such images with a count")


def open_image(data: bytes):
    """The PIL image encoded in ``data``, opened (its size known) but not yet decoded; what is not an image raises one
    of :data:`UNREADABLE` (the caller names the file: :func:`unreadable`)."""
    from PIL import Image

    try:
        return Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as err:
        raise ValueError(str(err)) from None


def as_rgb(image):
    """``image`` decoded, in RGB: itself where it already is (no copy), else converted."""
    if image.mode == "RGB":
        image.load()
        return image
    return image.convert("RGB")


def decode(data: bytes, name: str):
    """The RGB PIL image encoded in ``data``, decoded whole; a :class:`DataError` naming ``name`` when it is not a
    readable image (truncated, not an image, too large)."""
    try:
        return as_rgb(open_image(data))
    except UNREADABLE as err:
        raise unreadable(name, err) from None


def read_image(path: str | Path):
    """The RGB PIL image at ``path`` (:func:`decode`); a file that cannot be read or is not a readable image is a
    :class:`DataError` naming it (nothing is skipped silently)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise unreadable(str(path), err) from None
    return decode(data, str(path))


def image_folder(folder: str | Path, transform=None):
    """torchvision's ``ImageFolder`` over every file of ``folder/<class>/`` (not only known extensions), read with
    :func:`read_image`; a missing or empty folder is a :class:`DataError`."""
    from torchvision.datasets import ImageFolder

    try:
        return ImageFolder(str(folder), transform=transform, loader=read_image, is_valid_file=lambda _: True)
    except (FileNotFoundError, OSError) as err:
        raise DataError(f"cannot read image folder {folder}: {err}") from None


def synthetic_images(n: int, img_size: int, num_classes: int = 10, seed: int = 0, task_seed: int = 0) -> ImageSet:
    """A deterministic, learnable toy set: each class is a coloured blob at a class-specific place, plus noise.

    Position matters (a class is *where* the blob is), so position encodings help. ``task_seed`` defines the classes
    (shared by the train and test splits); ``seed`` draws the split's labels and noise.
    """
    task = torch.Generator().manual_seed(task_seed)
    centres = torch.rand(num_classes, 2, generator=task) * 0.6 + 0.2  # (classes, 2) in [0.2, 0.8]
    colours = torch.rand(num_classes, 3, generator=task)  # (classes, 3)
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % num_classes
    labels = labels[torch.randperm(n, generator=g)]
    axis = (torch.arange(img_size) + 0.5) / img_size
    yy, xx = torch.meshgrid(axis, axis, indexing="ij")  # (S, S)
    c = centres[labels]  # (n, 2)
    blob = torch.exp(-((yy - c[:, 0, None, None]) ** 2 + (xx - c[:, 1, None, None]) ** 2) / 0.02)  # (n, S, S)
    images = blob[:, None] * colours[labels][:, :, None, None] + 0.25 * torch.rand(n, 3, img_size, img_size,
                                                                                   generator=g)
    return ImageSet((images.clamp(0, 1) * 255).round().to(torch.uint8), labels, [str(i) for i in range(num_classes)])
