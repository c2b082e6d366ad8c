"""What the stream loader reads: the images of one split as an index of ``N`` samples that any worker process reads by
number -- the encoded bytes of sample ``i``, its label, and a name for messages.

Two sources have the same index: an image folder in torchvision's ``ImageFolder`` layout (``<split>/<class>/<image>``,
any common extension, any aspect) and webdataset tar shards written by :mod:`vitpe.data.shards` (or any shards whose
samples hold an image and a ``.cls`` label). Shards are read by seeking to each member's data, so a sample is one read
whatever the shard's order, and every sampler of vitpe (seeded permutations, exact resume, DDP shards) works on both.

The index keeps no Python object per image: the paths are one byte buffer with offsets, the shard positions and
labels numpy arrays. A DataLoader worker inherits it without copy-on-write touching per-image objects, and it costs
tens of bytes per image (200,000 images: a few MB).
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import Iterable

import numpy as np

from vitpe.data.datasets import DataError
from vitpe.data.image_folder import (IMAGE_EXTENSIONS, check_same_classes, class_folders, class_names, empty_classes,
                                     image_files, no_class_folders, split_folder)

#: The files :mod:`vitpe.data.shards` writes beside a split's shards: the class list and the samples' positions.
CLASSES_FILE, INDEX_FILE = "classes.json", "index.npz"


class PackedStrings:
    """Many strings as one UTF-8 buffer and its offsets (numpy): a list without one Python object per string. Made
    from groups of strings (a class folder's files), so no list of every string exists at once either."""

    def __init__(self, groups: Iterable[list[str]]) -> None:
        parts, lengths = [], [np.zeros(0, dtype=np.int64)]
        for strings in groups:
            encoded = [s.encode() for s in strings]
            parts.append(b"".join(encoded))
            lengths.append(np.array([len(b) for b in encoded], dtype=np.int64))
        self.buffer = np.frombuffer(b"".join(parts), dtype=np.uint8)  # (sum of lengths,)
        self.ends = np.cumsum(np.concatenate(lengths))  # (N,)

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, i: int) -> str:
        start = int(self.ends[i - 1]) if i else 0
        return self.buffer[start:int(self.ends[i])].tobytes().decode()


class SampleIndex:
    """Base of the two sources: ``labels`` (N,) int64, ``classes`` (folder names), ``class_names`` (readable)."""

    labels: np.ndarray
    classes: list[str]
    class_names: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    def read(self, i: int) -> bytes:
        """The encoded image of sample ``i``."""
        raise NotImplementedError

    def name(self, i: int) -> str:
        """Where sample ``i`` is, for a message."""
        raise NotImplementedError


class FolderIndex(SampleIndex):
    """``root/<split>/<class>/*`` (a ``test`` split reads ``val/`` when there is no ``test/``): every image file,
    sorted by class then path; the classes must be those of ``train/``."""

    def __init__(self, root: str | Path, split: str) -> None:
        root = Path(root)
        self.folder = split_folder(root, split)
        self.classes = [d.name for d in class_folders(self.folder)]
        if not self.classes:
            raise no_class_folders(self.folder)
        if split != "train":
            train_folder = split_folder(root, "train")
            check_same_classes([d.name for d in class_folders(train_folder)], self.classes, train_folder,
                               self.folder)
        counts: list[int] = []
        self.paths = PackedStrings(self._class_files(name, counts) for name in self.classes)
        self.labels = np.repeat(np.arange(len(self.classes), dtype=np.int64), counts)  # (N,)
        self.class_names = class_names(root, self.classes)

    def _class_files(self, name: str, counts: list[int]) -> list[str]:
        """The image files of class ``name`` as the in-memory path lists them (:func:`image_files`), relative to the
        split's folder; their count is appended to ``counts``. A class without images is a :class:`DataError`."""
        files = image_files(self.folder / name)
        if not files:
            raise empty_classes([self.folder / name])
        counts.append(len(files))
        return [path.relative_to(self.folder).as_posix() for path in files]

    def read(self, i: int) -> bytes:
        path = os.path.join(self.folder, self.paths[i])
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as err:
            raise DataError(f"{path} cannot be read ({err.strerror or err}); remove or replace it") from None

    def name(self, i: int) -> str:
        return str(self.folder / self.paths[i])


class ShardIndex(SampleIndex):
    """The tar shards of ``root/<split>/`` (``*.tar``, sorted by name), read by position: where
    :mod:`vitpe.data.shards` wrote an ``index.npz`` it is used, otherwise the shards' tar headers are scanned once
    (every sample: ``<key>.<image extension>`` and ``<key>.cls``, the label as a decimal number). The class list is
    ``root/classes.json`` when there is one."""

    def __init__(self, root: str | Path, split: str) -> None:
        root = Path(root)
        self._find_shards(split_folder(root, split))
        index = self.folder / INDEX_FILE
        self.shard, self.offset, self.size, self.labels = self._read_index(index) if index.is_file() else self._scan()
        self.classes, self.class_names = self._read_classes(root)
        if len(self.labels) and int(self.labels.max()) >= len(self.classes):
            raise DataError(f"{self.folder}: a sample's label {int(self.labels.max())} is past the {len(self.classes)} "
                            f"classes of {root / CLASSES_FILE}; write the shards again")

    @classmethod
    def scan_folder(cls, folder: Path) -> "ShardIndex":
        """The index of the shards in ``folder`` from their tar headers alone (no class list): what
        :mod:`vitpe.data.shards` saves as ``index.npz``."""
        index = cls.__new__(cls)
        index._find_shards(folder)
        index.shard, index.offset, index.size, index.labels = index._scan()
        return index

    def _find_shards(self, folder: Path) -> None:
        self.folder = folder
        self.shards = sorted(p.name for p in folder.glob("*.tar"))
        if not self.shards:
            raise DataError(f"{folder} holds no .tar shards; write them with python -m vitpe.data.shards SRC "
                            f"{folder.parent}")
        self._open: dict[int, int] = {}  # shard -> open file descriptor (read with pread: no shared position)

    def _read_index(self, path: Path) -> tuple[np.ndarray, ...]:
        try:
            with np.load(path, allow_pickle=False) as saved:
                names = [str(s) for s in saved["shards"]]
                arrays = tuple(saved[k] for k in ("shard", "offset", "size", "label"))
        except (OSError, ValueError, KeyError) as err:
            raise DataError(f"{path} is unreadable ({type(err).__name__}: {err}); delete it (the shards' headers are "
                            f"then scanned) or write the shards again") from None
        if names != self.shards:
            raise DataError(f"{path} lists other shards than {self.folder} holds ({len(names)} listed, "
                            f"{len(self.shards)} found); delete it or write the shards again")
        return arrays

    def _scan(self) -> tuple[np.ndarray, ...]:
        """Every sample's (shard, data offset, size, label) from the tar headers; the ``.cls`` members are read."""
        rows = []
        for number, shard in enumerate(self.shards):
            path = self.folder / shard
            images, labels = {}, {}
            try:
                with tarfile.open(path, "r:") as tar:
                    for member in tar:
                        key, _, ext = member.name.rpartition(".")
                        if not member.isfile() or not key:
                            continue
                        if ext == "cls":
                            labels[key] = int(tar.extractfile(member).read().decode().strip())
                        elif "." + ext.lower() in IMAGE_EXTENSIONS:
                            images[key] = (member.offset_data, member.size)
            except (tarfile.TarError, OSError, ValueError) as err:
                raise DataError(f"{path} is not a readable tar shard ({type(err).__name__}: {err}); write it "
                                f"again") from None
            missing = sorted(images.keys() - labels.keys())
            if missing:
                raise DataError(f"{path}: sample {missing[0]} has an image but no .cls label ({len(missing)} such)")
            rows += [(number, *images[key], labels[key]) for key in images]
        if not rows:
            raise DataError(f"the shards of {self.folder} hold no images with .cls labels")
        table = np.array(rows, dtype=np.int64)  # (N, 4)
        return table[:, 0].astype(np.int32), table[:, 1], table[:, 2], table[:, 3]

    def _read_classes(self, root: Path) -> tuple[list[str], list[str]]:
        path = root / CLASSES_FILE
        if not path.is_file():
            count = int(self.labels.max()) + 1
            return [str(i) for i in range(count)], [str(i) for i in range(count)]
        try:
            saved = json.loads(path.read_text())
            return list(saved["classes"]), list(saved.get("names", saved["classes"]))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise DataError(f"{path} is not a class list ({type(err).__name__}: {err}); write the shards "
                            f"again") from None

    def read(self, i: int) -> bytes:
        shard = int(self.shard[i])
        fd = self._open.get(shard)
        if fd is None:
            try:
                fd = self._open[shard] = os.open(self.folder / self.shards[shard], os.O_RDONLY)
            except OSError as err:
                raise DataError(f"{self.folder / self.shards[shard]} cannot be read ({err.strerror}); write the "
                                f"shards again") from None
        data = os.pread(fd, int(self.size[i]), int(self.offset[i]))  # no shared file position: fork-safe
        if len(data) != int(self.size[i]):
            raise DataError(f"{self.name(i)} is cut short ({len(data)} of {int(self.size[i])} bytes); write the "
                            f"shard again")
        return data

    def name(self, i: int) -> str:
        return f"{self.folder / self.shards[int(self.shard[i])]} (sample at byte {int(self.offset[i])})"

    def __getstate__(self) -> dict:  # open files stay in the process that opened them (spawned workers reopen)
        return {**self.__dict__, "_open": {}}


def is_shard_root(root: str | Path) -> bool:
    """Whether ``root`` holds shards (a ``classes.json``, or ``.tar`` files in ``train/``) rather than an image
    folder."""
    root = Path(root)
    return (root / CLASSES_FILE).is_file() or any((root / "train").glob("*.tar"))


def open_index(root: str | Path, split: str) -> SampleIndex:
    """The split's index: shards where ``root`` holds them, else an image folder."""
    if not Path(root).is_dir():
        raise DataError(f"data.root {root} is not a folder: point it at an image folder (train/<class>/<images>, "
                        f"val/...) or at shards written by python -m vitpe.data.shards")
    return ShardIndex(root, split) if is_shard_root(root) else FolderIndex(root, split)
