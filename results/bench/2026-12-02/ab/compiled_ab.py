"""Compiled A/Bs behind compiled_bias_*.txt and compiled_rotation_*.txt (2026-12-02): two changes under torch.compile,
each timed old against new in the same rounds as a compiled ``none``; one compiled model per PE switching between
the two (dynamo guards on the swapped function and keeps a graph for each). Recipe dims (dim 128, 4 heads, MLP 2,
mean pool), batch 128, the benchmark's shuffled interleaved rounds, one thread, paired ratios with 90% bootstrap
intervals (vitpe.bench_stats). From the repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/ab/compiled_ab.py bias 64 relbias,cpb 9 train
    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-02/ab/compiled_ab.py rotation 32 rope_axial,rope_mixed 9 infer

bias: a learned attention bias as the plain whole-batch formula inductor fuses (old) or the chunked attention as an
opaque custom op (new). rotation: the compiled rotation of an older checkout (old; OLD_TREE, default /work/lanetree
at commit 3c7140d, pair by pair) against this tree's (new, channel by channel).
"""
import importlib.util
import os
import sys

import torch

import vitpe.models.attention as attention
import vitpe.pe.rotary as rotary
from vitpe.bench import BenchConfig, compile_limits, infer_step_fn, interleaved_rounds, train_step_fn
from vitpe.bench_stats import paired_speed_ratio
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models import ViT
from vitpe.models.biased_attention import plain_biased_attention

RECIPE_DIMS = dict(dim=128, heads=4, mlp_ratio=2, pool="mean", fc_norm=True)


def variants(change):
    """(owner, attribute, {variant: value}): what each variant sets before its step."""
    if change == "bias":
        return attention, "biased_attention", {"old": plain_biased_attention, "new": attention.biased_attention}
    path = os.path.join(os.environ.get("OLD_TREE", "/work/lanetree"), "vitpe/pe/rotary.py")
    spec = importlib.util.spec_from_file_location("old_rotary", path)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    return rotary, "_composed", {"old": old._composed, "new": rotary._composed}


def main():
    change, px, pes, rounds, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5]
    owner, attribute, values = variants(change)
    keep_freed_memory()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(128, 3, px, px, generator=g), torch.randint(0, 10, (128,), generator=g)

    def step(pe):
        torch.manual_seed(0)
        model = torch.compile(ViT(img_size=px, patch_size=4, num_classes=10, depth=6, pe=pe, **RECIPE_DIMS))
        cpu = torch.device("cpu")
        return train_step_fn(model, (images,), labels, cpu) if kind == "train" else infer_step_fn(model, (images,), cpu)

    with compile_limits(1 + 2 * len(pes)):
        steps = {"none": step("none")}
        for pe in pes:
            f = step(pe)
            for name, value in values.items():
                def run(f=f, value=value):
                    setattr(owner, attribute, value)
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


if __name__ == "__main__":
    main()
