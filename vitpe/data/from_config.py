"""The data a config describes, for either task: the image or text splits (limits applied), and the loaders, class
names and what the checkpoint must keep (image normalisation, or the text vocabulary) so that the model can be rebuilt
and evaluated from it alone. Everything that turns ``config.data`` into data is here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vitpe.config import FOLDER_DATASETS, Config, eval_size
from vitpe.data.datasets import DataError, ImageSet, load_cifar, synthetic_images
from vitpe.data.image_folder import ORDER_SEED, find_named_folder, load_folder_split
from vitpe.data.loader import BatchLoader, ShardedBatches, channel_stats
from vitpe.data.stream_index import SampleIndex, open_index
from vitpe.data.native_aspect import NativeAspectView, TokenBudgetLoader, native_evaluation
from vitpe.data.stream_loader import Selection, StreamLoader, stream_channel_stats
from vitpe.data.stream_views import EvalView, TrainView
from vitpe.data.synthetic_text import synthetic_text, synthetic_vocabulary
from vitpe.data.text import TextSet, Vocabulary, load_sst2, read_sst2
from vitpe.data.text_loader import COMPILED_WIDTH_MULTIPLE, TextBatchLoader

# Synthetic data never depends on train.seed: runs that differ in seed see the same examples.
SYNTHETIC_TRAIN_SEED, SYNTHETIC_TEST_SEED = 1234, 4321


def load_image_split(config: Config, split: str) -> ImageSet:
    """The ``split`` ("train" or "test") image set per ``config.data``, its limit applied."""
    d = config.data
    if d.dataset in ("cifar10", "cifar100"):
        data = load_cifar(d.root, d.dataset, split)
    elif d.dataset in FOLDER_DATASETS:
        data = load_folder_split(folder_root(config), split, d.img_size, cache_dir=d.cache_dir,
                                 skip_unreadable=d.skip_unreadable)
    elif split == "train":
        data = synthetic_images(d.synthetic_size, d.img_size, seed=SYNTHETIC_TRAIN_SEED)
    else:
        data = synthetic_images(max(d.synthetic_size // 4, 1), d.img_size, seed=SYNTHETIC_TEST_SEED)
    return data.limit(d.train_limit if split == "train" else d.test_limit)


def folder_root(config: Config) -> str | Path:
    """The folder holding ``train/`` and ``val/`` (or their shards): ``data.root`` for an image folder; Imagenette's
    or Imagewoof's found under it as the official downloads unpack them."""
    d = config.data
    return d.root if d.dataset == "imagefolder" else find_named_folder(d.root, d.dataset)


def images_on_device(config: Config, device: torch.device | str) -> bool:
    """Whether the training images are kept on ``device`` and augmented there (``data.on_device``; by default on a
    GPU, where a host that augments every batch keeps the device waiting, and not on the CPU, where it is the same
    memory)."""
    return config.data.on_device if config.data.on_device is not None else torch.device(device).type != "cpu"


def load_image_splits(config: Config) -> tuple[ImageSet, ImageSet]:
    """(train, test) image sets per ``config.data``, limits applied."""
    return load_image_split(config, "train"), load_image_split(config, "test")


@dataclass
class RunData:
    train: ShardedBatches
    test: ShardedBatches
    val: ShardedBatches | None
    classes: list[str]
    checkpoint_extras: dict[str, Any]  # {"normalization": ...} for images, {"vocab": [...]} for text
    stats: dict[str, Any] = field(default_factory=dict)  # length statistics per split (text)


def text_vocabulary(config: Config, saved: list[str] | None = None) -> Vocabulary:
    """The run's vocabulary: the saved one when resuming or evaluating, else built from the training examples used
    (``data.train_limit`` applies)."""
    d = config.data
    if saved is not None:
        return Vocabulary(saved)
    if d.dataset == "sst2":
        sentences, _ = read_sst2(d.root, "train")
        return Vocabulary.build(sentences[: d.train_limit or None], d.vocab_min_freq, d.vocab_max_size)
    return synthetic_vocabulary(d.synthetic_vocab)


def synthetic_split(config: Config, split: str, length: int | None = None) -> TextSet:
    """A synthetic text split: the training length range, or sequences of exactly ``length`` tokens."""
    d = config.data
    low, high = (length, length) if length else (d.min_len or d.max_len, d.max_len)
    n = d.synthetic_size if split == "train" else max(d.synthetic_size // 4, 1)
    seed = SYNTHETIC_TRAIN_SEED if split == "train" else SYNTHETIC_TEST_SEED + (length or 0)
    return synthetic_text(d.dataset, n, low, high, vocab_size=d.synthetic_vocab, seed=seed)


def load_text_split(config: Config, split: str, vocab: Vocabulary) -> TextSet:
    """The ``split`` ("train", "test" or "dev") text set per ``config.data``, its limit applied."""
    d = config.data
    data = load_sst2(d.root, split, vocab, d.max_len) if d.dataset == "sst2" else synthetic_split(config, split)
    return data.limit(d.train_limit if split == "train" else d.test_limit)


def build_run_data(config: Config, ckpt: dict[str, Any] | None, device: torch.device, *, rank: int = 0,
                   world: int = 1, normalization: dict[str, list[float]] | None = None,
                   vocab: list[str] | None = None) -> RunData:
    """Loaders for training and evaluation (and validation with ``data.val_split``) per the config's task, for
    process ``rank`` of ``world``. Images are normalised with the checkpoint's statistics when resuming, else
    ``normalization`` (a pretrained model's mean and std) when given, else the training split's. Text uses the
    checkpoint's vocabulary when resuming, else ``vocab`` (the run's it started from) when given, else one built from
    the training split."""
    t, d = config.train, config.data
    shard = dict(rank=rank, world=world, device=device)
    if config.task == "text":
        vocab = text_vocabulary(config, ckpt.get("vocab") if ckpt else vocab)
        train_set, test_set = load_text_split(config, "train", vocab), load_text_split(config, d.eval_split, vocab)
        train_set, val_set = train_set.split(d.val_split) if d.val_split else (train_set, None)

        def make(data, train):
            return TextBatchLoader(data, t.batch_size if train else t.eval_batch_size, train=train, seed=t.seed,
                                   word_dropout=d.word_dropout,
                                   width_multiple=COMPILED_WIDTH_MULTIPLE if train and t.compile else 1, **shard)

        stats = {"train": train_set.length_stats(), d.eval_split: test_set.length_stats(),
                 **({"val": val_set.length_stats()} if val_set is not None else {})}
        extras: dict[str, Any] = {"vocab": vocab.tokens}
    elif d.loader == "stream":
        return stream_run_data(config, ckpt, device, rank=rank, world=world, normalization=normalization)
    else:
        train_set, test_set = load_image_splits(config)
        train_set, val_set = train_set.split(d.val_split) if d.val_split else (train_set, None)
        saved = ckpt["normalization"] if ckpt else normalization
        mean, std = (saved["mean"], saved["std"]) if saved else channel_stats(train_set.images)

        resident = images_on_device(config, device)

        def make(data, train):
            if train:
                return BatchLoader(data, t.batch_size, train=True, seed=t.seed, img_sizes=t.img_sizes,
                                   size_epochs=t.img_size_epochs, crop_padding=d.crop_padding,
                                   crop_pad_mode=d.crop_pad_mode, hflip=d.hflip, randaugment=d.randaugment,
                                   crop_scale=d.crop_scale, mean=mean, std=std, resident=resident, **shard)
            return BatchLoader(data, t.eval_batch_size, train=False, img_sizes=[eval_size(config)], mean=mean, std=std,
                               resident=resident, **shard)  # tested at the last training size

        stats = {}
        extras = {"normalization": {"mean": list(mean), "std": list(std)}}
    return RunData(make(train_set, True), make(test_set, False), make(val_set, False) if val_set is not None else None,
                   list(train_set.classes), extras, stats)


def stream_split(config: Config, split: str) -> SampleIndex:
    """The ``split`` of :func:`folder_root` (an image folder or shards) for the stream loader, in the fixed shuffled
    order of the in-memory path (:data:`ORDER_SEED`), so that ``data.train_limit`` and ``data.val_split`` take the same
    kind of sample; the limit applied."""
    d = config.data
    index = open_index(folder_root(config), split)
    order = torch.randperm(len(index), generator=torch.Generator().manual_seed(ORDER_SEED)).numpy()
    limit = d.train_limit if split == "train" else d.test_limit
    return Selection(index, order[:limit] if limit > 0 else order)


def stream_run_data(config: Config, ckpt: dict[str, Any] | None, device: torch.device, *, rank: int, world: int,
                    normalization: dict[str, list[float]] | None) -> RunData:
    """:func:`build_run_data` for ``data.loader=stream``: images decoded and augmented by ``data.workers`` processes
    (:mod:`vitpe.data.stream_loader`). The normalisation is the checkpoint's or ``normalization`` when given, else
    measured on a seeded sample of training images (:func:`stream_channel_stats`)."""
    t, d = config.train, config.data
    train_set, test_set = stream_split(config, "train"), stream_split(config, "test")
    val_set = None
    if d.val_split:
        if not 0 < d.val_split < len(train_set):
            raise DataError(f"cannot hold out {d.val_split} of {len(train_set)} images (data.val_split)")
        cut = len(train_set) - d.val_split
        train_set, val_set = Selection(train_set, range(cut)), Selection(train_set, range(cut, len(train_set)))
    saved = ckpt["normalization"] if ckpt else normalization
    mean, std = (saved["mean"], saved["std"]) if saved else \
        stream_channel_stats(train_set, eval_size(config), d.workers)
    shard = dict(rank=rank, world=world, device=device, workers=d.workers, skip_unreadable=d.skip_unreadable,
                 mean=mean, std=std)
    if d.native_aspect:
        train = TokenBudgetLoader(train_set, train=True, seed=t.seed, seq_lens=d.seq_lens,
                                  token_budget=d.token_budget or t.batch_size * max(d.seq_lens),
                                  view=NativeAspectView(config.model.patch_size, train=True, crop_scale=d.crop_scale,
                                                        hflip=d.hflip, randaugment=d.randaugment,
                                                        draft=d.jpeg_draft), **shard)
    else:
        view = TrainView(d.crop_scale, d.crop_padding, d.crop_pad_mode, d.hflip, d.randaugment, draft=d.jpeg_draft)
        train = StreamLoader(train_set, t.batch_size, train=True, seed=t.seed, img_sizes=t.img_sizes,
                             size_epochs=t.img_size_epochs, view=view, **shard)

    def evaluated(data: SampleIndex) -> StreamLoader:  # tested at the last training size, as in memory
        if d.native_aspect:  # at each photograph's aspect, the short side at that size
            return native_evaluation(data, eval_size(config), t.eval_batch_size, patch=config.model.patch_size,
                                     draft=d.jpeg_draft, **shard)
        return StreamLoader(data, t.eval_batch_size, train=False, img_sizes=[eval_size(config)],
                            view=EvalView(draft=d.jpeg_draft), **shard)

    return RunData(train, evaluated(test_set), evaluated(val_set) if val_set is not None else None,
                   list(train_set.class_names), {"normalization": {"mean": list(mean), "std": list(std)}})
