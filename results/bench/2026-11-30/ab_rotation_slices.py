"""A/B behind ab_rotation_slices.txt: RoPE's rotation cut into cache-sized batch slices (new, ``SLICE_BYTES`` = 1 MiB)
against one pass over the whole batch (old), with ``none`` in the same rounds for the overhead.
The slicing it measured went on 2026-12-01 with the four half-tensor kernels it served (RoPE now rotates interleaved
pairs as complex numbers in one product); run it at commit 3062918 or earlier.

Run from the repository root, one thread:

    PYTHONPATH=. python results/bench/2026-11-30/ab_rotation_slices.py 32 192 3 4 rope_axial,rope_mixed 15

Arguments: image size, dim, heads, MLP ratio, PEs, rounds[, infer or train: only that kind of step]. The ViT has depth 6, patch 4, batch 128 (the benchmark's
model at those dims). Training steps and inference are :mod:`vitpe.bench`'s, timed by its ``interleaved``.
"""
import sys

import torch

import vitpe.pe.rotary as rotary
from ab_layout import print_old_new, time_variants, with_setting  # the sibling A/B script (its folder is on sys.path)
from vitpe.bench import BenchConfig
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models.vit import ViT

VARIANTS = {"old": 1 << 62, "new": rotary.SLICE_BYTES}


def with_variant(variant: str, step):
    return with_setting(rotary, "SLICE_BYTES", VARIANTS[variant], step)


def main() -> None:
    px, dim, heads, mlp, pes, rounds = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
                                        sys.argv[5].split(","), int(sys.argv[6]))
    keep_freed_memory()  # as vitpe.bench, train.py and eval.py do
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg, device = BenchConfig(repeats=rounds), torch.device("cpu")
    inputs, labels = (torch.randn(cfg.batch, 3, px, px),), torch.randint(0, 10, (cfg.batch,))
    models = {pe: ViT(img_size=px, patch_size=4, dim=dim, depth=6, heads=heads, mlp_ratio=mlp, pe=pe)
              for pe in ["none", *pes]}
    print(f"{px} px, dim {dim}, {heads} heads, MLP ratio {mlp}, {rounds} rounds")
    for kind in sys.argv[7:] or ("infer", "train"):
        times = time_variants(kind, models, VARIANTS, with_variant, inputs, labels, cfg, device, plain=("none",))
        print_old_new(kind, times, pes, "none", lambda t, none: f"{t / none - 1:+.1%}")
    rotary.SLICE_BYTES = VARIANTS["new"]


if __name__ == "__main__":
    main()
