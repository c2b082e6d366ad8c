"""Peak resident memory of one model's training step, each model alone in a fresh process: the benchmark's own process
holds a dozen models at once, so its peak says little about one model's. From the repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/peak_memory.py timm,none,rope_mixed,relbias [--px 64 --batch 128]

Three training steps (the benchmark's: forward, cross-entropy, backward, AdamW; default dims) with glibc's freed heap
kept, as the benchmark and train.py keep it (:mod:`vitpe.engine.cpu_malloc`; ``VITPE_CPU_MALLOC=0`` to compare);
``ru_maxrss`` after them.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys

import torch

from vitpe.bench.config import BenchConfig
from vitpe.bench.runner import train_step_fn
from vitpe.bench.suites import timm_vit
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models import ViT


def peak_mb(pe: str, px: int, batch: int) -> int:
    """Peak resident memory (MB) of this process after three training steps of ``pe`` (or ``timm``)."""
    keep_freed_memory()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(batch, 3, px, px, generator=g), torch.randint(0, 10, (batch,), generator=g)
    cfg = BenchConfig()
    if pe == "timm":
        model = timm_vit(cfg, px)
    else:
        model = ViT(img_size=px, patch_size=cfg.patch_size, num_classes=10, dim=cfg.dim, depth=cfg.depth,
                    heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, pe=pe)
    step = train_step_fn(model, (images,), labels, torch.device("cpu"))
    for _ in range(3):
        step()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pes", help="comma-separated: timm and/or vitpe PE names")
    parser.add_argument("--px", type=int, default=64)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the child process: one model
    args = parser.parse_args(argv)
    if args.one:
        print(peak_mb(args.pes, args.px, args.batch))
        return 0
    for pe in args.pes.split(","):
        done = subprocess.run([sys.executable, __file__, pe, "--one", "--px", str(args.px), "--batch", str(args.batch)],
                              capture_output=True, text=True, check=True)
        print(f"{pe:12s} {int(done.stdout.split()[-1]):6d} MB peak resident memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
