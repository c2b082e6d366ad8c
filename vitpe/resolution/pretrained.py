"""Resolution sweeps of pretrained timm models converted to vitpe (``eval.py timm:NAME --data imagefolder:DIR``): the
rope-vit multi-resolution protocol.

At every size the test images are produced as timm produces them for that input size: the model's own data config
(mean, std, interpolation, crop fraction, crop mode) through ``timm.data.create_transform(input_size=(3, H, W))``,
i.e. resize to ``size / crop_pct`` and centre-crop ``size``. The folder is read with torchvision's ``ImageFolder``:
class folders sorted by name give the label indices, which for ImageNet-1k's validation split laid out by synset
(``val/n01440764/...``) is the class order timm's ImageNet models use.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterator

import torch
from tqdm import tqdm

from vitpe.data import DataError
from vitpe.data.datasets import image_folder
from vitpe.loading.convert import build_vit
from vitpe.loading.pretrained import PREFIX, Pretrained, load_pretrained, parse_spec
from vitpe.models import ViT
from vitpe.resolution.sweep import Size, cached_records, evaluate_modes, file_sha256, resolution_label

DATA_PREFIX = "imagefolder:"


def is_pretrained_spec(text: str) -> bool:
    return str(text).startswith(PREFIX)


def parse_data(spec: str | None) -> Path:
    """``"imagefolder:DIR"`` -> DIR, which must hold one folder per class."""
    if not spec or not spec.startswith(DATA_PREFIX):
        raise ValueError(f"--data {spec!r}: pretrained timm models are evaluated on --data imagefolder:DIR "
                         f"(DIR/<class>/<image>, e.g. ImageNet-1k val laid out by synset)")
    folder = Path(spec[len(DATA_PREFIX):])
    if not folder.is_dir():
        raise DataError(f"--data {spec!r}: {folder} is not a folder")
    return folder


class PretrainedRun:
    """A ``timm:NAME[@FILE]`` model as a sweep entry: its name, converted model and a fingerprint for the cache."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.name, self.file = parse_spec(spec, "eval.py")
        self._pretrained: Pretrained | None = None

    @property
    def pretrained(self) -> Pretrained:
        if self._pretrained is None:
            self._pretrained = load_pretrained(self.spec, "eval.py")
        return self._pretrained

    def fingerprint(self) -> str:
        """The spec, plus the weights file's SHA-256 when the weights come from a file."""
        digest = hashlib.sha256(self.spec.encode())
        return file_sha256(self.file, digest) if self.file is not None else digest.hexdigest()

    def model(self) -> ViT:
        return build_vit(self.pretrained.converted)


class FolderBatches:
    """A torch ``DataLoader`` behind the loader interface :func:`vitpe.engine.loop.evaluate` reads."""

    def __init__(self, loader: torch.utils.data.DataLoader) -> None:
        self.loader = loader

    def __len__(self) -> int:
        return len(self.loader)

    def epoch(self, epoch: int = 0, start_step: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        try:
            yield from self.loader
        except DataError as err:  # from a worker process, the message carries its traceback: keep the last line
            raise DataError(str(err).strip().splitlines()[-1].split("DataError: ", 1)[-1]) from None


def folder_images(folder: Path, limit: int) -> torch.utils.data.Dataset:
    """``folder``'s images (scanned once); with ``limit``, N of them spread evenly over the (class-sorted) folder, so
    every class is represented. Their transform is set per size by :func:`loader_at`."""
    data = image_folder(folder)
    if limit and limit < len(data):
        return torch.utils.data.Subset(data, torch.linspace(0, len(data) - 1, limit).round().long().tolist())
    return data


def loader_at(data: torch.utils.data.Dataset, size: Size, data_config: dict[str, Any], batch_size: int,
              workers: int) -> FolderBatches:
    """The images of ``data`` as timm would feed them to the model at ``size``."""
    from timm.data import create_transform

    folder = data.dataset if isinstance(data, torch.utils.data.Subset) else data
    folder.transform = create_transform(input_size=(3, *size), interpolation=data_config["interpolation"],
                                        mean=data_config["mean"], std=data_config["std"],
                                        crop_pct=data_config["crop_pct"],
                                        crop_mode=data_config.get("crop_mode", "center"), is_training=False)
    return FolderBatches(torch.utils.data.DataLoader(data, batch_size=batch_size, num_workers=workers))


def evaluate_pretrained(run: PretrainedRun, sizes: list[Size], modes: list[str], folder: Path, *, limit: int = 0,
                        batch_size: int = 64, workers: int = 2, device: str | torch.device = "cpu",
                        progress: tqdm | None = None) -> list[dict[str, Any]]:
    """Accuracy of the converted model at every size in every resize mode (records as :func:`evaluate_run`)."""
    model, data = run.model().to(device), folder_images(folder, limit)
    records = []
    for size in sizes:
        loader = loader_at(data, size, run.pretrained.data_config, batch_size, workers)
        base = {"run": run.name, "pe": model.pe.name, "resolution": resolution_label(size), "height": size[0],
                "width": size[1], "train_resolution": model.img_size[0], "group": run.spec}
        records += evaluate_modes(model, loader, modes, base, device, lambda: model.patch_grid(size), progress)
    return records


def cached_evaluate_pretrained(run: PretrainedRun, cache_dir: str | Path, sizes: list[Size], modes: list[str],
                               folder: Path, **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`evaluate_pretrained` through the sweep's per-run cache (keyed by the weights, sizes, modes, data)."""
    settings = {"sizes": [list(s) for s in sizes], "modes": list(modes), "data": str(folder.resolve()),
                "limit": kwargs.get("limit", 0)}
    return cached_records(run, cache_dir, settings, lambda: evaluate_pretrained(run, sizes, modes, folder, **kwargs),
                          kwargs.get("progress"))
