"""A/B behind ab_contiguous_bias.txt and ab_bias_grad_sum.txt (2026-12-01): two changes to attention biases, each
timed old against new in one process, `none` in the same rounds, recipe dims (dim 128, 4 heads, MLP 2, mean pool,
batch 128), paired ratios with 90% bootstrap intervals (vitpe.bench_stats). From the repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-01/ab/ab_bias.py contiguous 64 alibi 9 train
    OMP_NUM_THREADS=1 taskset -c 1 python results/bench/2026-12-01/ab/ab_bias.py grad_sum 64 relbias,cpb 9 train

contiguous: a bias handed to SDPA as the gathered, strided view (old) or contiguous (new, BiasEncoding._prepare).
grad_sum: the chunked attention of an older checkout (old; OLD_TREE, default /work/lanetree at commit a018c2b) against
this tree's (new: a one-sample chunk's bias gradient added as it is, not through sum(0)).
"""
import contextlib
import importlib.util
import os
import sys

import torch

import vitpe.models.attention as attention
import vitpe.pe.sites as sites
from vitpe.bench import BenchConfig, compile_limits, infer_step_fn, interleaved_rounds, train_step_fn
from vitpe.bench_stats import paired_speed_ratio
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models import ViT
from vitpe.pe.base import pad_prefix


def strided_prepare(self, grid):
    return pad_prefix(self.bias(grid), self.num_prefix_tokens, dims=(-2, -1))


def variants(change):
    """(owner, attribute, {variant: value}): what each variant sets before its step."""
    if change == "contiguous":
        return sites.BiasEncoding, "_prepare", {"old": strided_prepare, "new": sites.BiasEncoding._prepare}
    path = os.path.join(os.environ.get("OLD_TREE", "/work/lanetree"), "vitpe/models/biased_attention.py")
    spec = importlib.util.spec_from_file_location("old_biased_attention", path)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    return attention, "biased_attention", {"old": old.biased_attention, "new": attention.biased_attention}


RECIPE_DIMS = dict(dim=128, heads=4, mlp_ratio=2, pool="mean", fc_norm=True)


def compare_old_new(owner, attribute, values, px, pes, rounds, kind, dims=None, compiled=False, batch=128,
                    device="cpu"):
    """Time ``none`` and every PE with ``owner.attribute`` set to each of ``values`` ({"old": .., "new": ..}) in the
    benchmark's interleaved rounds (one thread); print each overhead over ``none`` and new/old, with 90% intervals.
    ``compiled``: every model under torch.compile (each variant's model is traced with its own value). On CUDA the
    steps run as the benchmark's do there (bf16 autocast, synchronised)."""
    keep_freed_memory(device)
    torch.set_num_threads(1)
    device = torch.device(device)
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(batch, 3, px, px, generator=g), torch.randint(0, 10, (batch,), generator=g)
    images, labels = images.to(device), labels.to(device)

    def step(pe):
        torch.manual_seed(0)
        model = ViT(img_size=px, patch_size=4, num_classes=10, depth=6, pe=pe, **(dims or RECIPE_DIMS)).to(device)
        model = torch.compile(model) if compiled else model
        if kind == "train":
            return train_step_fn(model, (images,), labels, device)
        return infer_step_fn(model, (images,), device)

    steps = {"none": step("none")}
    for pe in pes:
        for name, value in values.items():
            def run(f=step(pe), value=value):
                setattr(owner, attribute, value)
                f()
            steps[f"{pe}/{name}"] = run
    per_round = max(1, 32 // batch) if device.type == "cpu" else 10  # a GPU step at batch 128 takes ~10 ms
    cfg = BenchConfig(repeats=rounds, warmup=2, steps=per_round)  # the benchmark's shuffled, interleaved rounds
    with compile_limits(1 + len(values) * len(pes)) if compiled else contextlib.nullcontext():
        times = interleaved_rounds(steps, cfg, device)
    for n in steps:
        s, lo, hi = paired_speed_ratio(times[n], times["none"])
        print(f"{kind} {px}px {n:16s} {sorted(times[n])[rounds // 2] * 1000:7.0f} ms  over none {1 / s - 1:+.1%} "
              f"[{1 / hi - 1:+.1%}, {1 / lo - 1:+.1%}]")
    for pe in pes:
        s, lo, hi = paired_speed_ratio(times[f"{pe}/new"], times[f"{pe}/old"])
        print(f"{kind} {px}px {pe} new/old {1 / s:.3f} [{1 / hi:.3f}, {1 / lo:.3f}]")
    setattr(owner, attribute, values["new"])


def main():
    change, px, pes, rounds, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5]
    compare_old_new(*variants(change), px, pes, rounds, kind)


if __name__ == "__main__":
    main()
