"""Evaluate trained text runs on sequences longer (or shorter) than those they were trained on.

For the synthetic tasks (``order``, ``adjacent``) a test set of sequences of exactly ``L`` tokens is generated per
length (seeded, so every run sees the same sequences). SST-2 has no length knob: its sentences are as long as they are.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from tqdm import tqdm

from vitpe.data.from_config import synthetic_split
from vitpe.data.text_loader import TextBatchLoader
from vitpe.loading.checkpoint import build_from_checkpoint
from vitpe.resolution.sweep import Run, cached_records, evaluate_modes, evaluation_precision, examples_per_batch


def parse_lengths(text: str) -> list[int]:
    """``"64,128,256"`` -> ``[64, 128, 256]``."""
    try:
        lengths = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"bad --lengths {text!r}: use positive integers, comma-separated (e.g. 64,128,256)") from None
    if not lengths or min(lengths) < 1:
        raise ValueError(f"bad --lengths {text!r}: use positive integers, comma-separated (e.g. 64,128,256)")
    return lengths


def evaluate_lengths(run: Run, lengths: Iterable[int], modes: Iterable[str], *, limit: int = 0,
                     batch_size: int = 500, use_ema: bool = False, device: str | torch.device = "cpu",
                     progress: tqdm | None = None, precision: str | None = None) -> list[dict[str, Any]]:
    """Accuracy and loss of a synthetic-task text ``run`` at every length in every resize mode, under ``precision``
    (None: the run's own ``train.precision``)."""
    config = run.config
    if config.task != "text":
        raise ValueError(f"{run.name} is an {config.task} run: evaluate it over resolutions (--resolutions)")
    if config.data.dataset == "sst2":
        raise ValueError(f"{run.name} was trained on SST-2, whose sentences have their own lengths; --lengths "
                         f"evaluates the synthetic tasks (data.dataset order or adjacent)")
    model = build_from_checkpoint(run.ckpt, use_ema).to(device)
    precision = evaluation_precision(run, precision)
    records = []
    for length in lengths:
        test_set = synthetic_split(config, "test", length).limit(limit)
        loader = TextBatchLoader(test_set, examples_per_batch(length, batch_size), train=False, device=device)
        base = {"run": run.name, "pe": config.model.pe, "length": length, "train_length": config.data.max_len,
                "group": run.group, "precision": precision}
        records += evaluate_modes(model, loader, modes, base, device, progress=progress, precision=precision)
    return records


def cached_evaluate_lengths(run: Run, cache_dir, lengths: list[int], modes: list[str], **kwargs: Any
                            ) -> list[dict[str, Any]]:
    """:func:`evaluate_lengths` through :func:`vitpe.resolution.sweep.cached_records`."""
    settings = {"lengths": list(lengths), "modes": list(modes), **{k: kwargs.get(k) for k in ("limit", "use_ema")},
                "precision": evaluation_precision(run, kwargs.get("precision"))}
    return cached_records(run, cache_dir, settings, lambda: evaluate_lengths(run, lengths, modes, **kwargs),
                          kwargs.get("progress"))
