"""Do identical model instances time differently? Several instances of each PE's ViT (the same seed), timed in one
process by :mod:`vitpe.bench`'s interleaved rounds; every round's time is printed, relative to the first ``none``.

Run from the repository root (output of the run on an idle machine: instances64.txt):

    PYTHONPATH=. python results/bench/2026-11-30/instances.py 64 none:3,learnable:2,sincos:1,alibi:1 7 2 train

Arguments: image size, PE:instances list, rounds, threads, train or infer. Recipe dims (dim 128, depth 6, 4 heads, MLP
ratio 2, class token), batch 128, two warm-up steps each; steps are :mod:`vitpe.bench`'s.
"""
import statistics
import sys

import torch

from ab_layout import step_of  # the sibling A/B script (its folder is on sys.path)
from vitpe.bench import BenchConfig, interleaved_rounds
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models.vit import ViT


def main() -> None:
    px, spec, rounds, threads, kind = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    keep_freed_memory()
    torch.set_num_threads(threads)
    cfg, device = BenchConfig(repeats=rounds), torch.device("cpu")
    inputs, labels = (torch.randn(cfg.batch, 3, px, px),), torch.randint(0, 10, (cfg.batch,))
    steps = {}
    for item in spec.split(","):
        pe, count = item.split(":")
        for i in range(int(count)):
            torch.manual_seed(0)
            model = ViT(img_size=px, patch_size=4, dim=128, depth=6, heads=4, mlp_ratio=2.0, pe=pe)
            steps[f"{pe}#{i}"] = step_of(kind, model, inputs, labels, device)
    times = interleaved_rounds(steps, cfg, device)
    base = statistics.median(times[next(iter(times))])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:14s} median {median * 1000:7.1f} ms {median / base - 1:+.1%}  rounds "
              + " ".join(f"{t / base - 1:+.0%}" for t in values))


if __name__ == "__main__":
    main()
