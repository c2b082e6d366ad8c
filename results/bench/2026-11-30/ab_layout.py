"""A/B behind ab_layout.txt: qkv unbound in the qkv Linear's memory order (new) against ``qkv.unbind(0)`` (old).

Run from the repository root, one thread:

    PYTHONPATH=. python results/bench/2026-11-30/ab_layout.py layer 32 none,rope_mixed,relbias,learnable 31
    PYTHONPATH=. python results/bench/2026-11-30/ab_layout.py model 32 none,learnable 31

``layer``: one attention layer (dim 128, 4 heads) with a mean-pooled head; ``model``: the ViT at the CPU recipe's dims
(dim 128, depth 6, 4 heads, MLP ratio 2). Batch 128. Training steps and inference are :mod:`vitpe.bench`'s, timed by
its ``interleaved`` (old and new of every PE in one process, shuffled rounds, medians).
"""
import sys

import torch

import vitpe.pe
import vitpe.pe.base as base
from vitpe.bench import BenchConfig, infer_step_fn, interleaved, train_step_fn
from vitpe.models.attention import Attention
from vitpe.models.vit import ViT
from vitpe.pe.layout import unbind_in_memory_order

VARIANTS = {"old": lambda x: x.unbind(0), "new": unbind_in_memory_order}


class OneLayer(torch.nn.Module):
    """Patch tokens (B, T, D) -> one attention layer with ``pe`` -> mean over tokens (B, D) as logits."""

    def __init__(self, pe: str, dim: int, heads: int, grid: tuple[int, int]):
        super().__init__()
        self.grid, self.attn = grid, Attention(dim, heads)
        self.pe = vitpe.pe.build(pe, dim=dim, heads=heads, depth=1, grid=grid)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, self.pe, self.pe.prepare(self.grid), 0).mean(1)


def with_setting(owner, name: str, value, step):
    """``step`` run with ``owner.name`` set to ``value`` first (how an A/B switches code paths in one process)."""
    def run() -> None:
        setattr(owner, name, value)
        step()
    return run


def step_of(kind: str, model: torch.nn.Module, inputs: tuple, labels: torch.Tensor, device: torch.device):
    """The benchmark's training step (``kind == "train"``) or inference step of ``model``."""
    return train_step_fn(model, inputs, labels, device) if kind == "train" else infer_step_fn(model, inputs, device)


def time_variants(kind: str, models: dict, variants, switch, inputs: tuple, labels: torch.Tensor, cfg: BenchConfig,
                  device: torch.device, plain: tuple[str, ...] = ()) -> dict[str, float]:
    """Median step times of every model under every variant (``"<pe>/<variant>"``; ``switch(variant, step)`` runs
    ``step`` on that variant's code path), and of the models named in ``plain`` as they are, in the same rounds."""
    steps = {name: step_of(kind, model, inputs, labels, device) for name, model in models.items()}
    fns = {name: steps[name] for name in plain}
    fns.update({f"{name}/{v}": switch(v, steps[name]) for name in models if name not in plain for v in variants})
    return interleaved(fns, cfg, device)


def print_old_new(kind: str, times: dict[str, float], names, reference: str, relative) -> None:
    """One line per model: the ``reference`` step's time, then old and new, each with ``relative(time, reference)``."""
    ref = times[reference]
    for name in names:
        old, new = times[f"{name}/old"], times[f"{name}/new"]
        print(f"{kind} {name}: {reference} {ref * 1000:.1f} ms, old {old * 1000:.1f} ms ({relative(old, ref)}), "
              f"new {new * 1000:.1f} ms ({relative(new, ref)}), new/old {new / old:.3f}")


def with_variant(variant: str, step):
    return with_setting(base, "unbind_in_memory_order", VARIANTS[variant], step)


def setup(scope: str, px: int, pes: list[str], rounds: int, **vit_options):
    """One thread, seed 0; (cfg, device, inputs, labels, models): ``layer`` -- one attention layer per PE on random
    tokens, ``model`` -- the ViT at the CPU recipe's dims (``vit_options`` added) on random images; batch 128."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg, device, grid = BenchConfig(repeats=rounds), torch.device("cpu"), (px // 4, px // 4)
    if scope == "layer":
        inputs = (torch.randn(cfg.batch, grid[0] * grid[1], 128),)
        models = {pe: OneLayer(pe, 128, 4, grid) for pe in pes}
    else:
        inputs = (torch.randn(cfg.batch, 3, px, px),)
        models = {pe: ViT(img_size=px, patch_size=4, dim=128, depth=6, heads=4, mlp_ratio=2, pe=pe, **vit_options)
                  for pe in pes}
    return cfg, device, inputs, torch.randint(0, 10, (cfg.batch,)), models


def main() -> None:
    scope, px, pes, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
    cfg, device, inputs, labels, models = setup(scope, px, pes, rounds)
    for kind in ("train", "infer"):
        times = time_variants(kind, models, VARIANTS, with_variant, inputs, labels, cfg, device)
        for pe in pes:
            old, new = times[f"{pe}/old"], times[f"{pe}/new"]
            print(f"{kind} {pe} {px}px: old {old * 1000:.1f} ms new {new * 1000:.1f} ms  new/old {new / old:.3f}")
    base.unbind_in_memory_order = unbind_in_memory_order


if __name__ == "__main__":
    main()
