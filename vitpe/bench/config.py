"""What a benchmark run measures: the model's shape, the sizes, the rounds (:class:`BenchConfig`) and its presets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BenchConfig:
    dim: int = 192
    depth: int = 6
    heads: int = 3
    mlp_ratio: float = 4.0
    patch_size: int = 4
    batch: int = 128
    img_sizes: tuple[int, ...] = (32, 64)
    repeats: int = 9
    steps: int = 1
    warmup: int = 2
    text_len: int = 64
    text_batch: int = 64
    device: str = "cpu"
    compile: bool = False
    precision: str = "auto"  # vitpe.engine.precision: auto (bf16 autocast on CUDA, float32 on CPU) | bf16 | fp32
    pool: str = "cls"  # "cls": class token (timm's default); "mean": average pooling without one (the recipe's head)


QUICK = dict(dim=64, depth=2, heads=2, batch=16, img_sizes=(32,), repeats=3, steps=1, warmup=1, text_len=32,
             text_batch=16)
#: (``configs/cifar10.yaml``: head dim 32, mean pooling), where attention is a larger share of a step. The speed
#: targets hold at both.
PRESETS = {"default": {}, "recipe": dict(dim=128, heads=4, mlp_ratio=2.0, pool="mean")}
