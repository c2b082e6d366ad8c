"""Evaluate trained runs at other resolutions, in each PE resize mode."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import torch
from tqdm import tqdm

from vitpe.atomic_files import write_text_atomic
from vitpe.config import FOLDER_DATASETS, ConfigError, config_from_dict, eval_size, group_key, parse_override
from vitpe.data import BatchLoader, ImageSet
from vitpe.data.from_config import load_image_split, stream_split
from vitpe.data.native_aspect import native_evaluation
from vitpe.data.stream_loader import Selection, StreamLoader
from vitpe.data.stream_views import EvalView
from vitpe.data.loader import ShardedBatches
from vitpe.engine.loop import evaluate
from vitpe.loading.checkpoint import CheckpointError, build_from_checkpoint, evaluation_fingerprint, load_checkpoint
from vitpe.pe import ResizeError
from vitpe.pe.grid import check_resize_mode

Size = tuple[int, int]

# Images per evaluation batch shrink as images grow: on CPU, batches of ~8k tokens run about twice as fast as batches
# of 500 64-px images (whose attention maps no longer fit in cache).
TOKENS_PER_BATCH = 8192


def examples_per_batch(tokens: int, max_examples: int, tokens_per_batch: int = TOKENS_PER_BATCH) -> int:
    """Examples (images or sequences) of ``tokens`` tokens each per batch: at most ``max_examples``, about
    ``tokens_per_batch`` tokens in all."""
    return max(1, min(max_examples, tokens_per_batch // max(tokens, 1)))


def batch_size_for(size: Size, patch_size: int, max_images: int) -> int:
    """Images per batch at ``size`` (see :func:`examples_per_batch`)."""
    return examples_per_batch((size[0] // patch_size) * (size[1] // patch_size), max_images)


def parse_resolutions(text: str) -> list[Size]:
    """``"16,24,32x48"`` -> ``[(16, 16), (24, 24), (32, 48)]`` (height x width)."""
    sizes = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            h, w = (int(v) for v in part.lower().split("x")) if "x" in part.lower() else (int(part), int(part))
        except ValueError:
            raise ValueError(f"bad resolution {part!r}: use N or HxW, comma-separated (e.g. 16,32,32x48)") from None
        if h < 1 or w < 1:
            raise ValueError(f"bad resolution {part!r}: sizes must be positive")
        sizes.append((h, w))
    if not sizes:
        raise ValueError("no resolutions given")
    return sizes


def parse_modes(text: str) -> list[str]:
    return [check_resize_mode(m.strip()) for m in text.split(",") if m.strip()]


def resolution_label(size: Size) -> int | str:
    """32 for a square, "32x48" otherwise."""
    return size[0] if size[0] == size[1] else f"{size[0]}x{size[1]}"


def file_sha256(path: str | Path, digest: "hashlib._Hash | None" = None) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks (continuing ``digest`` when given)."""
    digest = digest or hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Run:
    """A trained run: its name, checkpoint and the config that rebuilds it."""

    name: str
    checkpoint: Path
    ckpt: dict[str, Any]

    def fingerprint(self) -> str:
        """SHA-256 of what evaluation reads from the checkpoint (:func:`evaluation_fingerprint`): cached results are
        reused for the very same weights and config, also those of a run retrained to them."""
        return evaluation_fingerprint(self.ckpt)

    @property
    def config(self):
        return config_from_dict(self.ckpt["config"], for_training=False)

    @property
    def group(self) -> str:
        """Runs that differ only in seed and out_dir share a group (their results are averaged)."""
        return group_key(self.ckpt["config"])


def find_run(path: str | Path, use_best: bool = False) -> Run:
    """A run folder (its checkpoint.pt, or best.pt with ``use_best``) or a checkpoint file."""
    path = Path(path)
    file = path / ("best.pt" if use_best else "checkpoint.pt") if path.is_dir() else path
    if not file.exists():
        raise CheckpointError(f"{path}: no checkpoint found (expected a run folder with checkpoint.pt, or a .pt file)")
    name = path.name if path.is_dir() else f"{path.parent.name}/{path.stem}"
    return Run(name, file, load_checkpoint(file))


def with_pe_options(run: Run, options: dict[str, Any]) -> Run:
    """``run`` with its PE rebuilt under ``options`` (evaluation-time options such as LookHere's
    ``large_grid_slope``), named ``<run>@key=value,...`` so that its records stay apart from the run's own."""
    if not options:
        return run
    ckpt = {**run.ckpt, "config": copy.deepcopy(run.ckpt["config"])}
    model = ckpt["config"]["model"]
    model["pe_options"] = {**(model.get("pe_options") or {}), **options}
    suffix = ",".join(f"{key}={value}" for key, value in sorted(options.items()))
    return Run(f"{run.name}@{suffix}", run.checkpoint, ckpt)


def split_run_spec(spec: str) -> tuple[str, list[str]]:
    """``"runs/x_s0@large_grid_slope=0.6,global_slope=2"`` -> ``("runs/x_s0", ["large_grid_slope=0.6",
    "global_slope=2"])``: a run evaluated with PE options of its own; a spec without ``@NAME=`` is a path alone."""
    path, at, options = spec.rpartition("@")
    if not at or "=" not in options:
        return spec, []
    return path, options.split(",")


def parse_pe_options(items: Iterable[str]) -> dict[str, Any]:
    """``["large_grid_slope=0.6"]`` -> ``{"large_grid_slope": 0.6}`` (values read as YAML)."""
    options = {}
    for item in items:
        try:
            key, value = parse_override(item)  # the config overrides' key=value, the value read as YAML
        except ConfigError as err:
            raise ValueError(f"--pe-option: {err}; give NAME=VALUE, e.g. --pe-option large_grid_slope=0.6") from None
        if not key:
            raise ValueError(f"--pe-option {item!r}: give NAME=VALUE, e.g. --pe-option large_grid_slope=0.6")
        options[key] = value
    return options


def evaluate_modes(model: torch.nn.Module, loader: ShardedBatches, modes: Iterable[str], base: dict[str, Any],
                   device: str | torch.device, check: Callable[[], Any] = lambda: None,
                   progress: tqdm | None = None, precision: str = "auto") -> list[dict[str, Any]]:
    """One record per resize mode: ``base`` plus accuracy, loss and n of ``model`` on ``loader`` under ``precision``
    (:mod:`vitpe.engine.precision`) -- or, when the PE cannot work there in that mode (``check()`` or the forward
    raises), accuracy None and the reason."""
    records = []
    for mode in modes:
        record = {**base, "pe_resize": mode}
        try:
            model.set_pe_resize(mode)  # a PE without frequencies has no ntk or yarn mode: a reason, not a stop
            check()
            result = evaluate(model, loader, torch.device(device), precision=precision)
            record.update(accuracy=result["acc"], loss=result["loss"], n=result["n"])
        except (ResizeError, ValueError) as err:
            record.update(accuracy=None, loss=None, n=0, reason=str(err))
        records.append(record)
        if progress is not None:
            progress.update(1)
    return records


def evaluation_precision(run: Run, asked: str | None) -> str:
    """The precision ``run`` is evaluated in: ``asked``, else the run's own ``train.precision`` (so that its training
    size reproduces its own final evaluation)."""
    return asked or run.config.train.precision


def data_root_for_evaluation(recorded: str, explicit: str | None) -> str:
    """Where a run's test set is read: ``explicit`` (``--data-root``) when given, else the run's own ``data.root`` when
    that folder is on this machine, else ``$VITPE_DATA`` (a run trained elsewhere, its recorded folder not here)."""
    if explicit is not None:
        return explicit
    if Path(recorded).exists():
        return recorded
    return os.environ.get("VITPE_DATA", recorded)


#: How :func:`evaluate_run` shows the photographs: as the run was tested, as centred squares, at their own aspect.
ASPECTS = ("run", "square", "native")


def evaluate_run(run: Run, sizes: Iterable[Size], modes: Iterable[str], *, test_set: ImageSet | None = None,
                 data_root: str | None = None, limit: int = 0, batch_size: int = 500, use_ema: bool = False,
                 device: str | torch.device = "cpu", progress: tqdm | None = None, precision: str | None = None,
                 aspect: str = "run") -> list[dict[str, Any]]:
    """Accuracy and loss of ``run`` at every size in every resize mode; impossible combinations carry a reason.
    The first ``limit`` images of the whole test split (0: all of them, whatever ``data.test_limit`` the run trained
    with), under ``precision`` (None: the run's own ``train.precision``, so that its training size reproduces the
    run's own final evaluation). A run trained with ``data.loader=stream`` is evaluated through the stream loader: at
    each size the centred square of each photograph, resampled from the photograph itself; a run trained at native
    aspect (``data.native_aspect``) is evaluated at native aspect, each size the photographs' short side.
    ``aspect``: ``"run"`` (as the run was tested in training), ``"square"`` or ``"native"`` (any run on an image
    folder: every photograph at its own aspect, the short side at each size)."""
    config = run.config
    if config.task != "image":
        raise ValueError(f"{run.name} is a {config.task} run: evaluate it over sequence lengths (--lengths)")
    config.data.root = data_root_for_evaluation(config.data.root, data_root)
    config.data.test_limit = 0  # --limit alone decides how many images
    precision = evaluation_precision(run, precision)
    if aspect not in ASPECTS:
        raise ValueError(f"unknown aspect {aspect!r}; choose one of {list(ASPECTS)}")
    native = aspect == "native" or (aspect == "run" and config.data.loader == "stream" and config.data.native_aspect)
    if native and (test_set is not None or config.data.dataset not in FOLDER_DATASETS):
        raise ValueError(f"{run.name}: native aspect needs photographs in an image folder ({', '.join(FOLDER_DATASETS)}"
                         f"); data.dataset={config.data.dataset} is stored at one size")
    streamed = test_set is None and (config.data.loader == "stream" or native)
    if streamed:  # each size's views made from the photographs themselves, as the run was tested in training
        test_index = stream_split(config, "test")
        test_index = Selection(test_index, range(min(limit, len(test_index)))) if limit > 0 else test_index
    else:
        test_set = (load_image_split(config, "test") if test_set is None else test_set).limit(limit)
    model = build_from_checkpoint(run.ckpt, use_ema).to(device)
    norm = run.ckpt["normalization"]
    records = []
    for size in sizes:
        batch = batch_size_for(size, model.patch_size, batch_size)
        if native:  # the short side at the size, the long side at the aspect
            loader = native_evaluation(test_index, min(size), batch, patch=model.patch_size,
                                       draft=config.data.jpeg_draft, mean=norm["mean"], std=norm["std"],
                                       workers=config.data.workers, device=device)
        elif streamed:
            loader = StreamLoader(test_index, batch, train=False, mean=norm["mean"], std=norm["std"], img_sizes=[size],
                                  workers=config.data.workers, view=EvalView(draft=config.data.jpeg_draft),
                                  device=device)
        else:
            loader = BatchLoader(test_set, batch, train=False, mean=norm["mean"], std=norm["std"], img_sizes=[size],
                                 device=device)
        base = {"run": run.name, "pe": config.model.pe, "resolution": resolution_label(size), "height": size[0],
                "width": size[1], "train_resolution": eval_size(config), "group": run.group,
                "precision": precision, "aspect": "native" if native else "square"}
        records += evaluate_modes(model, loader, modes, base, device, lambda: model.patch_grid(size), progress,
                                  precision)
    return records


def record_file(cache_dir: str | Path, run_name: str) -> Path:
    """Where a sweep keeps one run's records: ``cache_dir/<run name, "/" as "_">.json`` (scripts/keep_records.sh
    keeps the same files)."""
    return Path(cache_dir) / f"{run_name.replace('/', '_')}.json"


def cached_records(run: Run, cache_dir: str | Path, settings: dict[str, Any], compute: Callable[[], list[dict]],
                   progress: tqdm | None = None) -> list[dict[str, Any]]:
    """``compute()``'s records for ``run``, kept in ``cache_dir/<run>.json`` with the checkpoint's fingerprint and the
    sweep's ``settings``; a rerun with the same checkpoint and settings reads them back instead of evaluating again
    (so an interrupted sweep over many runs resumes where it stopped, and runs can be added to a finished one)."""
    settings = {**settings, "fingerprint": run.fingerprint()}
    path = record_file(cache_dir, run.name)
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
            if cached.get("settings") == settings or _keyed_by_file(cached["settings"], settings, run):
                if progress is not None:
                    progress.update(len(cached["records"]))
                return cached["records"]
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            pass  # an unreadable cache entry is simply recomputed
    records = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(json.dumps({"settings": settings, "records": records}), path)
    return records


def _keyed_by_file(cached: dict[str, Any], settings: dict[str, Any], run: Any) -> bool:
    """An entry written before the cache was keyed by :func:`evaluation_fingerprint` holds the SHA-256 of the
    checkpoint file instead: still good for that very file."""
    return (isinstance(run, Run) and {**cached, "fingerprint": None} == {**settings, "fingerprint": None}
            and cached["fingerprint"] == file_sha256(run.checkpoint))


def cached_evaluate_run(run: Run, cache_dir: str | Path, sizes: list[Size], modes: list[str], **kwargs: Any
                        ) -> list[dict[str, Any]]:
    """:func:`evaluate_run` through :func:`cached_records`."""
    settings = {"sizes": [list(s) for s in sizes], "modes": list(modes),
                **{k: kwargs.get(k) for k in ("limit", "use_ema")},
                "precision": evaluation_precision(run, kwargs.get("precision"))}
    if kwargs.get("aspect", "run") != "run":  # (records kept before the option existed are the run's own aspect)
        settings["aspect"] = kwargs["aspect"]
    return cached_records(run, cache_dir, settings, lambda: evaluate_run(run, sizes, modes, **kwargs),
                          kwargs.get("progress"))
