"""Timing: one training or inference step as a function, and the interleaved rounds that time several at once.

All variants of one measurement live in one process and are timed interleaved (A B C ... C A B ..., in a fresh seeded
order each round), so machine noise hits them alike. A training step is forward, cross-entropy, backward and an AdamW
step on a fixed batch; inference is a forward under ``torch.inference_mode``. Steps run in the precision asked for
(:mod:`vitpe.engine.precision`: by default bf16 autocast on CUDA, float32 on CPU); on CUDA they are synchronised
before the clock is read. Experiments time their own variants with the same functions (``benchmarks/ab.py``).
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

from vitpe.bench.config import BenchConfig
from vitpe.engine.precision import autocast


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_step_fn(model: torch.nn.Module, inputs: tuple, labels: torch.Tensor, device: torch.device,
                  precision: str = "auto") -> Callable:
    """One forward + backward + AdamW step on a fixed batch."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()

    def step() -> None:
        with autocast(device, precision):
            loss = F.cross_entropy(model(*inputs).float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def infer_step_fn(model: torch.nn.Module, inputs: tuple, device: torch.device,
                  no_grad: Callable[[], contextlib.AbstractContextManager] = torch.inference_mode,
                  precision: str = "auto") -> Callable:
    """One forward without autograd (``no_grad``: ``torch.no_grad`` to count its kernels, :mod:`vitpe.bench.kernels`)."""
    def step() -> None:
        model.eval()
        with no_grad(), autocast(device, precision):
            model(*inputs)

    return step


def interleaved(fns: dict[str, Callable], cfg: BenchConfig, device: torch.device) -> dict[str, float]:
    """Median seconds per step of each function, timed in interleaved rounds after a warmup."""
    return {name: statistics.median(values) for name, values in interleaved_rounds(fns, cfg, device).items()}


def interleaved_rounds(fns: dict[str, Callable], cfg: BenchConfig, device: torch.device) -> dict[str, list[float]]:
    """Seconds per step of each function in every round (``cfg.repeats`` rounds of ``cfg.steps`` steps, a fresh
    seeded order each round, after ``cfg.warmup`` steps each)."""
    for fn in fns.values():
        for _ in range(cfg.warmup):
            fn()
    sync(device)
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    shuffle = random.Random(0).shuffle
    for _ in range(cfg.repeats):
        shuffle(order)  # a fresh order each round: no variant always runs right after the same (heavier) one
        for name in order:
            fn = fns[name]
            sync(device)
            start = time.perf_counter()
            for _ in range(cfg.steps):
                fn()
            sync(device)
            times[name].append((time.perf_counter() - start) / cfg.steps)
    return times


