"""A/B: vitpe's rotary rotation before (rotate-half, four half-tensor kernels; OLD_ROTARY, default old_rotary.py here, a
copy of vitpe/pe/rotary.py at 3062918) against now (interleaved pairs as complex numbers; at inference in qkv's own
memory), timed in one process with `none` in the same rounds,
recipe dims (dim 128, 4 heads, MLP 2, mean pool, batch 128), paired ratios with 90% bootstrap intervals.

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-01/ab/ab_rotary.py 32 rope_axial,rope_mixed 9 train

A sixth argument `default` takes the benchmark's default dims (dim 192, 3 heads, MLP 4, class token) instead.
"""
import importlib.util
import os
import sys

import torch

import vitpe.pe.sites as sites
from vitpe.bench import BenchConfig, infer_step_fn, interleaved_rounds, train_step_fn
from vitpe.bench_stats import paired_speed_ratio
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models import ViT

HERE = os.path.dirname(os.path.abspath(__file__))


def old_module():
    spec = importlib.util.spec_from_file_location("old_rotary", os.environ.get("OLD_ROTARY", f"{HERE}/old_rotary.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    px, pes, rounds, kind = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
    dims = dict(dim=128, heads=4, mlp_ratio=2, pool="mean", fc_norm=True)
    if len(sys.argv) > 5 and sys.argv[5] == "default":
        dims = dict(dim=192, heads=3, mlp_ratio=4)
    keep_freed_memory()
    torch.set_num_threads(1)
    old = old_module().rotate_qk_of_qkv
    values = {"old": lambda qkv, cos, sin, in_place=False: old(qkv, cos, sin), "new": sites.rotate_qk_of_qkv}
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(128, 3, px, px, generator=g), torch.randint(0, 10, (128,), generator=g)

    def step(pe):
        torch.manual_seed(0)
        model = ViT(img_size=px, patch_size=4, num_classes=10, depth=6, pe=pe, **dims)
        cpu = torch.device("cpu")
        return train_step_fn(model, (images,), labels, cpu) if kind == "train" else infer_step_fn(model, (images,), cpu)

    steps = {"none": step("none")}
    for pe in pes:
        for name, value in values.items():
            def run(f=step(pe), value=value):
                sites.rotate_qk_of_qkv = value
                f()
            steps[f"{pe}/{name}"] = run
    times = interleaved_rounds(steps, BenchConfig(repeats=rounds, warmup=2), torch.device("cpu"))
    for n in steps:
        s, lo, hi = paired_speed_ratio(times[n], times["none"])
        print(f"{kind} {px}px {n:16s} {sorted(times[n])[rounds // 2] * 1000:7.0f} ms  over none {1 / s - 1:+.1%} "
              f"[{1 / hi - 1:+.1%}, {1 / lo - 1:+.1%}]")
    for pe in pes:
        s, lo, hi = paired_speed_ratio(times[f"{pe}/new"], times[f"{pe}/old"])
        print(f"{kind} {px}px {pe} new/old {1 / s:.3f} [{1 / hi:.3f}, {1 / lo:.3f}]")
    sites.rotate_qk_of_qkv = values["new"]


if __name__ == "__main__":
    main()
