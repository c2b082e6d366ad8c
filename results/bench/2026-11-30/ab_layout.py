"""A/B behind ab_layout.txt: qkv unbound in the qkv Linear's memory order (new) against ``qkv.unbind(0)`` (old).

Run from the repository root, one thread:

    PYTHONPATH=. python results/bench/2026-11-30/ab_layout.py layer 32 none,rope_mixed,relbias,learnable 31
    PYTHONPATH=. python results/bench/2026-11-30/ab_layout.py model 32 none,learnable 31

``layer``: one attention layer, forward + backward (train) and forward (infer), batch 128, dim 128, 4 heads.
``model``: the whole ViT at those dims (depth 6, MLP ratio 2), AdamW step (train) and forward (infer).
Old and new run interleaved in one process, in a fresh shuffled order each round; medians.
"""
import random
import statistics
import sys
import time

import torch

import vitpe.pe
import vitpe.pe.base as base
from vitpe.models.attention import Attention
from vitpe.models.vit import ViT
from vitpe.pe.layout import unbind_in_memory_order

scope, px, pes, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
torch.set_num_threads(1)
VARIANTS = {"old": lambda x: x.unbind(0), "new": unbind_in_memory_order}
grid = (px // 4, px // 4)
torch.manual_seed(0)
if scope == "layer":
    attn = Attention(128, 4)
    x = torch.randn(128, grid[0] * grid[1], 128, requires_grad=True)
    pe_modules = {p: vitpe.pe.build(p, dim=128, heads=4, depth=1, grid=grid) for p in pes}

    def forward(p):
        return attn(x, pe_modules[p], pe_modules[p].prepare(grid), 0).sum()

    def train(p):
        forward(p).backward()
else:
    images, labels = torch.randn(128, 3, px, px), torch.randint(0, 10, (128,))
    models = {p: ViT(img_size=px, patch_size=4, dim=128, depth=6, heads=4, mlp_ratio=2, pe=p) for p in pes}
    optims = {p: torch.optim.AdamW(m.parameters()) for p, m in models.items()}

    def forward(p):
        return torch.nn.functional.cross_entropy(models[p](images), labels)

    def train(p):
        optims[p].zero_grad(set_to_none=True)
        forward(p).backward()
        optims[p].step()


def infer(p):
    with torch.inference_mode():
        forward(p)


for kind, step in (("train", train), ("infer", infer)):
    times = {(p, v): [] for p in pes for v in VARIANTS}
    for r in range(-1, rounds):  # round -1 warms up
        order = list(times)
        random.Random(r).shuffle(order)
        for p, v in order:
            base.unbind_in_memory_order = VARIANTS[v]
            start = time.perf_counter()
            step(p)
            if r >= 0:
                times[(p, v)].append(time.perf_counter() - start)
    for p in pes:
        old, new = (statistics.median(times[(p, v)]) for v in VARIANTS)
        print(f"{kind} {p} {px}px: old {old * 1000:.1f} ms new {new * 1000:.1f} ms  new/old {new / old:.3f}")
base.unbind_in_memory_order = unbind_in_memory_order
