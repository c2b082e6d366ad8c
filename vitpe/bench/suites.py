"""What the benchmark times: vitpe's ViT with every 2D PE against timm's VisionTransformer, the text classifier with
every 1D PE, and the data pipeline against a model step. Each returns its rows; :mod:`vitpe.bench.report` writes them.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

import vitpe.pe
from vitpe.bench.config import BenchConfig
from vitpe.bench.kernels import kernels_per_step
from vitpe.bench.runner import infer_step_fn, interleaved, interleaved_rounds, sync, train_step_fn
from vitpe.bench.stats import paired_speed_ratio
from vitpe.bench.targets import NOISE_REFERENCE
from vitpe.models import TextClassifier, ViT


def timm_vit(cfg: BenchConfig, img_size: int, num_classes: int = 10) -> torch.nn.Module:
    """timm's VisionTransformer with the same dimensions and head (learned PE, pre-norm, GELU MLP; class token, or
    average pooling without one, with its LayerNorm after the pool)."""
    from timm.models.vision_transformer import VisionTransformer

    mean = cfg.pool == "mean"
    return VisionTransformer(img_size=img_size, patch_size=cfg.patch_size, num_classes=num_classes,
                             embed_dim=cfg.dim, depth=cfg.depth, num_heads=cfg.heads, mlp_ratio=cfg.mlp_ratio,
                             class_token=not mean, global_pool="avg" if mean else "token")


def graphs_per_function(cfg: BenchConfig, pes: list[str], text: bool) -> int:
    """The most graphs a compiled run needs of one function: ``ViT.forward`` once per PE (the second ``none``
    included), mode (training, inference) and image size; ``TextClassifier.forward`` once per 1D PE."""
    vit = 2 * (len(pes) + 1) * len(cfg.img_sizes)
    return max(vit, len(text_pes()) if text else 0)


def _prepare(model: torch.nn.Module, cfg: BenchConfig, device: torch.device) -> torch.nn.Module:
    model = model.to(device)
    return torch.compile(model) if cfg.compile else model


def bench_vit(cfg: BenchConfig, pes: list[str], device: torch.device, log: Callable[[str], None]) -> list[dict]:
    """Train and inference throughput of timm and of vitpe with each PE, per image size."""
    rows = []
    for size in cfg.img_sizes:
        g = torch.Generator().manual_seed(0)
        images = torch.randn(cfg.batch, 3, size, size, generator=g).to(device)
        labels = torch.randint(0, 10, (cfg.batch,), generator=g).to(device)
        models = {"timm": timm_vit(cfg, size)}
        for name in (*pes, NOISE_REFERENCE):
            models[name] = ViT(img_size=size, patch_size=cfg.patch_size, num_classes=10, dim=cfg.dim,
                               depth=cfg.depth, heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, pool=cfg.pool,
                               fc_norm=cfg.pool == "mean", pe="none" if name == NOISE_REFERENCE else name)
        models = {name: _prepare(m, cfg, device) for name, m in models.items()}
        log(f"{size} px: training steps ({len(models)} variants interleaved)")
        train_fns = {n: train_step_fn(m, (images,), labels, device, cfg.precision) for n, m in models.items()}
        rounds = {"train": interleaved_rounds(train_fns, cfg, device)}
        log(f"{size} px: inference")
        rounds["infer"] = interleaved_rounds({n: infer_step_fn(m, (images,), device, precision=cfg.precision)
                                                for n, m in models.items()},
                                             cfg, device)
        kernels = {}  # one more untimed step each; a compiled step's kernels are inductor's, not aten operations
        if not cfg.compile:
            kernels = {n: (kernels_per_step(train_fns[n]), kernels_per_step(
                               infer_step_fn(m, (images,), device, torch.no_grad, precision=cfg.precision)))
                       for n, m in models.items()}
        for name in models:
            row: dict[str, Any] = {"pe": name, "img_size": size}
            if kernels:
                row["train_kernels"], row["infer_kernels"] = kernels[name]
            for kind, times in rounds.items():
                row[f"{kind}_img_s"] = cfg.batch / statistics.median(times[name])
                row[f"{kind}_s"] = times[name]  # seconds per step, round by round
                for ref in ("timm", "none"):
                    ratio, low, high = paired_speed_ratio(times[name], times[ref])
                    row[f"{kind}_vs_{ref}"], row[f"{kind}_vs_{ref}_ci"] = ratio, [low, high]
            rows.append(row)
    return rows


def text_pes() -> list[str]:
    """The 1D PEs the text benchmark times."""
    return [n for n in vitpe.pe.available() if 1 in vitpe.pe.get(n).grid_dims]


def bench_text(cfg: BenchConfig, device: torch.device, log: Callable[[str], None]) -> list[dict]:
    """Training throughput (tokens/s) of the text classifier with each 1D PE, interleaved."""
    pes = text_pes()
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, 1000, (cfg.text_batch, cfg.text_len), generator=g).to(device)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    labels = torch.randint(0, 2, (cfg.text_batch,), generator=g).to(device)
    fns = {}
    for pe in pes:
        model = _prepare(TextClassifier(1000, 2, max_len=cfg.text_len, dim=cfg.dim, depth=cfg.depth, heads=cfg.heads,
                                        mlp_ratio=cfg.mlp_ratio, pe=pe), cfg, device)
        fns[pe] = train_step_fn(model, (tokens, mask), labels, device, cfg.precision)
    log(f"text: training steps ({len(fns)} PEs interleaved)")
    seconds = interleaved(fns, cfg, device)
    tokens_per_step = cfg.text_batch * cfg.text_len
    return [{"pe": pe, "seq_len": cfg.text_len, "train_tokens_s": tokens_per_step / s,
             "train_vs_none": seconds["none"] / s} for pe, s in seconds.items()]


def bench_data(cfg: BenchConfig, device: torch.device, data_root: str | None, log: Callable[[str], None]
               ) -> dict[str, Any]:
    """The augmenting loader alone vs the model step alone at 32 px, and a short real epoch with both."""
    from vitpe.data import BatchLoader, DataError, channel_stats, load_cifar, synthetic_images
    from vitpe.engine.distributed import DistInfo
    from vitpe.engine.loop import TrainState, train_one_epoch

    source = "cifar10"
    try:
        if data_root is None:
            raise DataError("no data root")
        data = load_cifar(data_root, "cifar10", "train")
    except DataError:
        source, data = "synthetic", synthetic_images(max(cfg.batch * 20, 2048), 32)
    steps = max(cfg.repeats * cfg.steps, 3)
    data = data.limit(cfg.batch * (steps + cfg.warmup))
    mean, std = channel_stats(data.images)
    loader = BatchLoader(data, cfg.batch, train=True, mean=mean, std=std, seed=0, device=device)
    model = ViT(img_size=32, patch_size=cfg.patch_size, num_classes=len(data.classes), dim=cfg.dim, depth=cfg.depth,
                heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, pe="learnable").to(device)
    batches = iter(loader.epoch(0))
    images, labels = next(batches)
    log("data pipeline vs model step")
    seconds = interleaved({"data": lambda: loader.batch(torch.arange(cfg.batch), 0, 0),
                           "model": train_step_fn(model, (images,), labels, device, cfg.precision)}, cfg, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    class _NoSchedule:
        def step_update(self, step: int) -> None:
            pass

    start = time.perf_counter()
    train_one_epoch(model, loader, optimizer, _NoSchedule(), TrainState(), seed=0, label_smoothing=0.0,
                    grad_clip=1.0, mixup=None, ema=None, dist_info=DistInfo(), device=device, progress=False)
    sync(device)
    epoch_s = time.perf_counter() - start
    return {"source": source, "batch": cfg.batch, "data_s_per_batch": seconds["data"],
            "model_s_per_step": seconds["model"], "data_share": seconds["data"] / (seconds["data"] + seconds["model"]),
            "real_epoch_steps": len(loader), "real_epoch_s": epoch_s,
            "real_epoch_data_share": len(loader) * seconds["data"] / epoch_s}
