"""Peak resident memory of one model's training step at 64 px (default dims, batch 128), each PE alone in a fresh
process (peak_memory.txt). The benchmark's own process holds a dozen models at once, so its peak says little about
one model's. From the repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/host/peak_memory.py timm,none,rope_mixed,relbias

Three training steps (the benchmark's: forward, cross-entropy, backward, AdamW) with glibc's freed heap kept, as the
benchmark and train.py keep it (vitpe.engine.cpu_malloc); ``ru_maxrss`` after them.
"""
import resource
import subprocess
import sys

import torch


def peak_mb(pe: str) -> int:
    from vitpe.bench import BenchConfig, timm_vit, train_step_fn
    from vitpe.engine.cpu_malloc import keep_freed_memory
    from vitpe.models import ViT

    keep_freed_memory()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(128, 3, 64, 64, generator=g), torch.randint(0, 10, (128,), generator=g)
    if pe == "timm":
        model = timm_vit(BenchConfig(), 64)
    else:
        model = ViT(img_size=64, patch_size=4, num_classes=10, dim=192, depth=6, heads=3, pe=pe)
    step = train_step_fn(model, (images,), labels, torch.device("cpu"))
    for _ in range(3):
        step()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> None:
    if sys.argv[1] == "--one":
        print(peak_mb(sys.argv[2]))
        return
    for pe in sys.argv[1].split(","):
        done = subprocess.run([sys.executable, __file__, "--one", pe], capture_output=True, text=True, check=True)
        print(f"{pe:12s} {int(done.stdout.split()[-1]):6d} MB peak resident memory")


if __name__ == "__main__":
    main()
