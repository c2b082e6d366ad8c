"""Image folders (``<split>/<class>/<image>``) decoded into memory: Imagenette in every layout it ships in, and any
folder of that shape.

Each image is read as RGB, its shortest side resized to the stored size (anti-aliased bicubic), and the centred square
kept: the whole photograph for square images, the centre crop of others. Training draws random-resized crops from
that square; evaluation at any size resamples it (:func:`vitpe.data.loader.resize_batch`), so 64 px and 160 px see
the same photograph with less and more detail. The decoded uint8 set is cached on disk (:mod:`decoded_cache`).

Bad input stops with one :class:`DataError` line that says what to do: a missing folder, an unreadable image (named;
``skip_unreadable=True`` skips it, with a count), an empty class, or classes that differ between the splits.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from vitpe.data.datasets import DataError, ImageSet, read_image
from vitpe.data.decoded_cache import cache_path, default_cache_dir, fingerprint, load_or_decode
from vitpe.data.memory_budget import check_fits

IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".ppm", ".gif")
#: Folder names, under ``data.root``, that Imagenette is found in: vitpe's shared copy, the official downloads
#: (fast.ai's ``imagenette2-160`` and ``imagenette2-320``, the full-size ``imagenette2``) and torchvision's
#: ``Imagenette(root, size=...)``, which unpacks those same archives under ``root``.
IMAGENETTE_FOLDERS = ("imagenette-160", "imagenette2-160", "imagenette2-320", "imagenette2")
#: The class names of Imagenette's WordNet ids (fast.ai's list), for layouts without a ``classes.tsv``.
IMAGENETTE_CLASSES = {"n01440764": "tench", "n02102040": "English springer", "n02979186": "cassette player",
                      "n03000684": "chain saw", "n03028079": "church", "n03394916": "French horn",
                      "n03417042": "garbage truck", "n03425413": "gas pump", "n03445777": "golf ball",
                      "n03888605": "parachute"}
#: Imagewoof (fast.ai: ten dog breeds of ImageNet) as the official downloads unpack it.
IMAGEWOOF_FOLDERS = ("imagewoof2-320", "imagewoof2-160", "imagewoof2")
IMAGEWOOF_CLASSES = {"n02086240": "Shih-Tzu", "n02087394": "Rhodesian ridgeback", "n02088364": "beagle",
                     "n02089973": "English foxhound", "n02093754": "Border terrier", "n02096294": "Australian terrier",
                     "n02099601": "golden retriever", "n02105641": "Old English sheepdog", "n02111889": "Samoyed",
                     "n02115641": "dingo"}
#: vitpe's split names -> the folder names that hold them, in order of preference.
#: The images are kept in one fixed shuffled order (this seed, whatever the run's), not class by class as the folders
#: list them: the first N (``data.train_limit``, ``eval.py --limit``) are then a sample of every class, and
#: ``data.val_split`` holds out a random tenth rather than the last class.
ORDER_SEED = 0
SPLIT_FOLDERS = {"train": ("train",), "test": ("test", "val"), "val": ("val", "test")}


def find_imagenette(root: str | Path) -> Path:
    """The Imagenette folder (the one holding ``train/`` and ``val/``): ``root`` itself or one of
    :data:`IMAGENETTE_FOLDERS` under it."""
    return find_named_folder(root, "imagenette")


def find_named_folder(root: str | Path, dataset: str) -> Path:
    """The folder of ``dataset`` (imagenette or imagewoof) holding ``train/`` and ``val/``: ``root`` itself or one of
    the official downloads' folder names under it."""
    root = Path(root)
    names, title, hint = (IMAGENETTE_FOLDERS, "Imagenette",
                          f"download it with torchvision.datasets.Imagenette('{root}', split='train', size='160px', "
                          f"download=True) (and split='val')") if dataset == "imagenette" else \
        (IMAGEWOOF_FOLDERS, "Imagewoof", "unpack fast.ai's imagewoof2-320.tgz there")
    for folder in (root, *(root / name for name in names)):
        if (folder / "train").is_dir():
            return folder
    raise DataError(f"{title} not found under {root}: expected train/ and val/ (one folder per class) in {root} or in "
                    f"{root}/<{'|'.join(names)}>; {hint}, or set data.root / VITPE_DATA")


def split_folder(root: Path, split: str) -> Path:
    """``root/<split>``, where a ``test`` split may be a ``val/`` folder (Imagenette's) and the other way round."""
    names = SPLIT_FOLDERS.get(split, (split,))
    for name in names:
        if (root / name).is_dir():
            return root / name
    raise DataError(f"image folder {root}/{names[0]} not found: expected {root}/{{train,{'|'.join(names)}}}/"
                    f"<class>/<images> (any of {', '.join(IMAGE_EXTENSIONS)})")


def class_folders(folder: Path) -> list[Path]:
    """The class folders of a split folder, sorted (hidden folders left out)."""
    return [d for d in sorted(folder.iterdir()) if d.is_dir() and not d.name.startswith(".")]


def image_files(folder: Path) -> list[Path]:
    """The image files under ``folder`` (any depth, any of :data:`IMAGE_EXTENSIONS` in any case), sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)


def no_class_folders(folder: Path) -> DataError:
    return DataError(f"{folder} has no class folders: expected {folder}/<class>/<images>")


def empty_classes(folders: list[Path]) -> DataError:
    return DataError(f"class folder(s) {', '.join(str(f) for f in folders)} hold no images (any of "
                     f"{', '.join(IMAGE_EXTENSIONS)}): add images or remove the folder")


def class_files(folder: Path) -> dict[str, list[Path]]:
    """``{class: [image files]}`` of ``folder/<class>/``, sorted; an empty class is a :class:`DataError`."""
    classes = {d.name: image_files(d) for d in class_folders(folder)}
    if not classes:
        raise no_class_folders(folder)
    empty = [name for name, files in classes.items() if not files]
    if empty:
        raise empty_classes([folder / n for n in empty])
    return classes


def check_same_classes(train: list[str], other: list[str], train_folder: Path, other_folder: Path) -> None:
    """Both splits must hold the same classes, or labels would mean different things in each."""
    if train != other:
        only_train, only_other = sorted(set(train) - set(other)), sorted(set(other) - set(train))
        raise DataError(f"the splits hold different classes: only in {train_folder}: {only_train or 'none'}; only in "
                        f"{other_folder}: {only_other or 'none'}; every class needs a folder in both")


def decode_square(path: Path, size: int) -> torch.Tensor:
    """The image at ``path`` as uint8 (3, size, size): shortest side resized to ``size`` (anti-aliased bicubic, as
    every resampling in vitpe), then the centred square."""
    from torchvision.transforms.v2 import functional as TF

    image = TF.pil_to_tensor(read_image(path))  # (3, H, W) uint8
    h, w = image.shape[-2:]
    if min(h, w) != size:
        scale = size / min(h, w)
        shape = [max(size, round(h * scale)), max(size, round(w * scale))]
        image = TF.resize(image, shape, interpolation=TF.InterpolationMode.BICUBIC, antialias=True)
    return TF.center_crop(image, [size, size])


def decode_all(files: list[Path], size: int, skip_unreadable: bool) -> tuple[torch.Tensor, list[bool]]:
    """Every file decoded by :func:`decode_square` on a thread per core, straight into one preallocated tensor:
    (N, 3, size, size) uint8 of the readable ones, and which files were read. An unreadable file is a
    :class:`DataError` unless ``skip_unreadable``."""
    out = torch.empty(len(files), 3, size, size, dtype=torch.uint8)

    def one(i: int) -> bool:
        try:
            out[i] = decode_square(files[i], size)
            return True
        except DataError:
            if not skip_unreadable:
                raise
            return False

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        kept = list(pool.map(one, range(len(files))))
    if not any(kept):
        raise DataError(f"none of the {len(files)} images could be read")
    if not all(kept):
        print(f"vitpe: skipped {kept.count(False)} unreadable image(s) of {len(files)} (data.skip_unreadable)",
              file=sys.stderr)
        rows = [i for i, ok in enumerate(kept) if ok]
        for place, i in enumerate(rows):  # the readable ones moved to the front, in place
            out[place] = out[i]
        out = out[:len(rows)]
    return out, kept


def permute_rows_(x: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``x[i] = x[order[i]]`` for every row ``i``, in place, one row of extra memory (cycle by cycle): reordering a
    decoded set without a second copy of it."""
    order = order.tolist()
    done = bytearray(len(order))
    for start in range(len(order)):
        if done[start]:
            continue
        saved, i = x[start].clone(), start
        while True:
            done[i] = 1
            j = order[i]
            if j == start:
                x[i] = saved
                break
            x[i] = x[j]
            i = j
    return x


def class_names(root: Path, wnids: list[str]) -> list[str]:
    """Readable class names: a ``classes.tsv`` (``id<TAB>name``) beside the splits, else Imagenette's, else the
    folder names."""
    names = {**IMAGENETTE_CLASSES, **IMAGEWOOF_CLASSES}
    table = root / "classes.tsv"
    if table.is_file():
        names.update(line.split("\t", 1) for line in table.read_text().splitlines() if "\t" in line)
    return [names.get(wnid, wnid).strip() for wnid in wnids]


def load_folder_split(root: str | Path, split: str, img_size: int, *, cache_dir: str = "",
                      skip_unreadable: bool = False) -> ImageSet:
    """``root/<split>/<class>/*`` decoded at ``img_size`` px (see the module's docstring), cached on disk under
    ``cache_dir`` (``""``: :func:`decoded_cache.default_cache_dir`; ``"off"``: no cache). ``split`` "test" reads a
    ``val/`` folder when there is no ``test/``. Classes are the sorted folder names, checked against the training
    split's. The images come in a fixed shuffled order (:data:`ORDER_SEED`)."""
    root = Path(root)
    if img_size < 1:
        raise DataError(f"data.img_size must be >= 1 to store images, got {img_size}")
    folder = split_folder(root, split)
    by_class = class_files(folder)
    if split != "train":
        train_folder = split_folder(root, "train")
        check_same_classes([d.name for d in class_folders(train_folder)], list(by_class), train_folder, folder)
    files = [path for paths in by_class.values() for path in paths]
    labels = torch.cat([torch.full((len(paths),), i, dtype=torch.long) for i, paths in enumerate(by_class.values())])
    check_fits(len(files) * 3 * img_size**2, f"{folder} at data.img_size={img_size} ({len(files)} images)")

    def decode() -> dict:
        images, kept = decode_all(files, img_size, skip_unreadable)
        return dict(images=images, labels=labels[torch.tensor(kept)], classes=list(by_class))

    if cache_dir == "off":
        entry = decode()
    else:
        path = cache_path(Path(cache_dir) if cache_dir else default_cache_dir(), folder, img_size,
                          extra=f"skip={skip_unreadable}")
        entry = load_or_decode(path, folder, fingerprint(folder, files), decode)
    order = torch.randperm(len(entry["labels"]), generator=torch.Generator().manual_seed(ORDER_SEED))
    images = permute_rows_(entry["images"], order)  # in place: the set is never held twice
    return ImageSet(images, entry["labels"][order], class_names(root, entry["classes"]))


def load_imagenette(root: str | Path, split: str, img_size: int = 160, **options) -> ImageSet:
    """Imagenette's ``split`` ("train", or "test"/"val" for its validation set) from wherever
    :func:`find_imagenette` finds it under ``root``; ``options`` as for :func:`load_folder_split`."""
    return load_folder_split(find_imagenette(root), split, img_size, **options)
